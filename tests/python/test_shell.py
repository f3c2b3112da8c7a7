"""End-to-end tests of seed 003's `run_shell_command` through the real binary, with the
official MCP Python SDK as the client: off unless enabled (and not listed then), the seed's
documented call verbatim (`git log` in a project), the sandbox refusing a write outside the
roots, progress notifications carrying output lines, and a timeout that leaves no process
behind — not even one that daemonised.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import uuid
from pathlib import Path

import anyio
import pytest

from test_sdk_client import (  # noqa: F401 (fixtures)
    TEST_TIMEOUT_S, dirs, is_error, ringfence_bin, serve, structured, text_of,
)

pytestmark = pytest.mark.anyio

ON = {"RINGFENCE_SHELL_ENABLED": "true"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def running_with(marker: str) -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if marker in cmdline and state != "Z":
            found.append(cmdline)
    return found


async def test_off_by_default_and_not_listed(ringfence_bin, dirs):
    ws, data = dirs
    async with serve(ringfence_bin, ws, data, preset="full") as srv:
        names = {t.name for t in (await srv.session.list_tools()).tools}
        assert "read_file" in names and "run_shell_command" not in names
    async with serve(ringfence_bin, ws, data, preset="full", env=ON) as srv:
        tools = {t.name: t for t in (await srv.session.list_tools()).tools}
        schema = tools["run_shell_command"].input_schema
        assert set(schema["properties"]) == {"command", "workingDirectory", "timeout"}
        assert schema["required"] == ["command"]


async def test_the_seed_example_runs_git_log_in_the_project(ringfence_bin, dirs):
    ws, data = dirs
    project = ws / "code" / "myapp"
    project.mkdir(parents=True)
    git = ["git", "-c", "user.name=T", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "init", "-q"], cwd=project, check=True)
    (project / "README").write_text("hello\n")
    subprocess.run([*git, "add", "README"], cwd=project, check=True)
    subprocess.run([*git, "commit", "-qm", "First commit of myapp"], cwd=project, check=True)
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with serve(ringfence_bin, ws, data, preset=None,
                         options=("--tools", "shell"), env=ON) as srv:
            result = await srv.call("run_shell_command", {
                "command": "git log --oneline -10",
                "workingDirectory": str(project),
            })
            assert not is_error(result), text_of(result)
            s = structured(result)
            assert s["exitCode"] == 0, s
            assert "First commit of myapp" in s["stdout"], s
            assert "Exit code: 0" in text_of(result)
            assert s["sandbox"]["enabled"] and s["sandbox"]["landlockAbi"] >= 1


async def test_a_write_outside_the_roots_fails_at_the_kernel(ringfence_bin, dirs, tmp_path):
    ws, data = dirs
    outside = tmp_path / "outside.txt"
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET-BESIDE-THE-ROOT\n")
    async with serve(ringfence_bin, ws, data, preset=None,
                     options=("--tools", "shell"), env=ON) as srv:
        result = await srv.call("run_shell_command", {
            "command": f"echo x > {outside}; echo inside > in.txt; cat {secret}",
        })
        assert not is_error(result), text_of(result)
        s = structured(result)
        out = s["stderr"] + s["stdout"]
        # Outside the writable roots the file system is read-only; reading is refused.
        assert f"cannot create {outside}: Read-only file system" in out, s
        assert f"cat: {secret}: Permission denied" in out, s
        assert "SECRET-BESIDE-THE-ROOT" not in out
    assert not outside.exists()
    assert (ws / "in.txt").read_text() == "inside\n"


async def test_progress_carries_output_lines(ringfence_bin, dirs):
    ws, data = dirs
    messages: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        messages.append(message or "")

    async with serve(ringfence_bin, ws, data, preset=None,
                     options=("--tools", "shell"), env=ON) as srv:
        result = await srv.call(
            "run_shell_command",
            {"command": "for i in 1 2 3 4 5; do echo step$i; sleep 0.3; done"},
            progress_callback=on_progress,
        )
        assert not is_error(result), text_of(result)
    joined = "\n".join(messages)
    assert "step2" in joined or "step3" in joined, messages


async def test_a_timeout_leaves_no_process_behind(ringfence_bin, dirs):
    ws, data = dirs
    marker = f"rf-py-{uuid.uuid4().hex[:8]}"
    async with serve(ringfence_bin, ws, data, preset=None,
                     options=("--tools", "shell"), env=ON) as srv:
        result = await srv.call("run_shell_command", {
            "command": f"setsid sh -c 'sleep 300 # {marker}' & (sleep 301 &) ; sleep 100 # {marker}",
            "timeout": 1,
        })
        assert not is_error(result), text_of(result)
        assert structured(result)["timedOut"] is True
        assert "Timed out after 1" in text_of(result)
        for _ in range(100):
            if not running_with(marker):
                break
            await anyio.sleep(0.02)
        assert running_with(marker) == []
        # The server is still there and answers.
        again = await srv.call("run_shell_command", {"command": "echo alive"})
        assert structured(again)["stdout"] == "alive\n"


async def test_a_command_has_its_own_processes_ipc_and_tmp(ringfence_bin, dirs, tmp_path):
    """Through the real binary (issue 29): the command sees its own processes only, the
    machine's System V segments not at all, and its $TMPDIR is a tmpfs of its own that
    leaves nothing on the machine's disk; memory past the limit ends it, and the result
    says which layer held what."""
    ws, data = dirs
    config = tmp_path / "shell.toml"
    config.write_text("[shell]\nmax_memory_mb = 256\nmax_tmp_mb = 32\n")
    marker = f"rf-py-{uuid.uuid4().hex[:8]}"
    # A process of the machine with a secret on its command line.
    victim = subprocess.Popen(["bash", "-c", f"exec -a 'sleep --password={marker}' sleep 60"])
    try:
        async with serve(ringfence_bin, ws, data, preset=None,
                         options=("--tools", "shell", "--config", str(config)), env=ON) as srv:
            result = await srv.call("run_shell_command", {
                "command": "cat /proc/[0-9]*/cmdline | tr '\\0' ' '; echo; "
                           "ls /proc | grep -c '^[0-9]'; grep -c . /proc/sysvipc/shm; "
                           "head -c 100000000 /dev/zero > $TMPDIR/big; echo tmp=$?",
            })
            assert not is_error(result), text_of(result)
            s = structured(result)
            assert marker not in s["stdout"], s
            lines = s["stdout"].splitlines()
            assert int(lines[1]) <= 6, s          # the init, sh and its few children
            assert lines[2] == "1", s             # only the header: no segment in sight
            assert lines[3] != "tmp=0", s          # 100 MB does not fit in 32 MiB
            assert "No space left on device" in s["stderr"], s
            sandbox = s["sandbox"]
            assert sandbox["processesHidden"] and sandbox["signalsIsolated"], sandbox
            assert sandbox["namespaces"]["pid"] and sandbox["namespaces"]["ipc"], sandbox
            assert sandbox["tmpBytes"] == 32 << 20, sandbox
            text = text_of(result)
            assert "namespaces: pid (own /proc), ipc" in text, text
            assert "$TMPDIR: tmpfs 32 MiB" in text, text

            result = await srv.call("run_shell_command", {
                "command": "python3 -c 'import os\nfd = os.memfd_create(\"x\")\n"
                           "for _ in range(512): os.write(fd, bytes(1 << 20))\nprint(\"HELD-ALL\")'",
            })
            assert not is_error(result), text_of(result)
            s = structured(result)
            assert "HELD-ALL" not in s["stdout"], s
            if s["sandbox"]["memoryLimit"] == "cgroup":
                assert s["memoryLimitExceeded"] is True, s
                assert text_of(result).startswith("Killed: the command ran out of memory (256 MiB")
            else:
                assert "Operation not permitted" in s["stderr"], s
    finally:
        victim.kill()
        victim.wait()
    # Nothing of $TMPDIR stayed on the machine's disk.
    assert not list(Path(tempfile.gettempdir()).glob("ringfence-cmd-*/big"))
