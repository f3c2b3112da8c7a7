"""Data at rest is private (issue 13, item 5): after real sessions — over HTTP as a token
user and over stdio, with the official MCP SDK — every file ringfence keeps under its data
directory (audit trail, saved outputs, edit journal, memories) is 0600 and every directory
0700, and the audit trail holds none of the memory text. A data directory left with wider
modes by an earlier version is tightened when the server starts.

Workspaces are the user's files, not ringfence's records: a default workspace under the data
directory is itself 0700 (so nothing in it is reachable by other accounts), but the files the
user writes there keep ordinary modes.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from test_http import client, token_hash, wait_for_url, HttpServer
from test_sdk_client import CALL_TIMEOUT_S, TEST_TIMEOUT_S, _binary, is_error, text_of

pytestmark = pytest.mark.anyio

SECRET_MEMORY = "Kestrel keeps the spare key under the blue flowerpot"
SECRET_TRUTH = "Kestrel Vandermeer lives at Rosenstraat nineteen"
LONG = "".join(f"line {i} of a long file\n" for i in range(3000))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def modes_under(data: Path) -> tuple[dict[str, int], list[str]]:
    """Every entry under `data` (not following links) with its permission bits, and the
    workspace directories whose contents were not judged."""
    found: dict[str, int] = {}
    workspaces: list[str] = []
    for dirpath, dirnames, filenames in os.walk(data):
        rel_dir = os.path.relpath(dirpath, data)
        found[rel_dir] = stat.S_IMODE(os.lstat(dirpath).st_mode)
        if os.path.basename(dirpath) == "workspace":
            workspaces.append(rel_dir)
            dirnames[:] = []
            continue
        for name in filenames:
            p = os.path.join(dirpath, name)
            found[os.path.relpath(p, data)] = stat.S_IMODE(os.lstat(p).st_mode)
    return found, workspaces


def assert_private(data: Path) -> dict[str, int]:
    found, _ = modes_under(data)
    wrong = []
    for rel, mode in sorted(found.items()):
        p = data / rel
        if p.is_symlink():
            wrong.append(f"{rel}: a symbolic link")
        elif p.is_dir() and mode != 0o700:
            wrong.append(f"{rel}/: {mode:o}, want 700")
        elif not p.is_dir() and mode != 0o600:
            wrong.append(f"{rel}: {mode:o}, want 600")
    assert not wrong, "data directory entries not private:\n" + "\n".join(wrong)
    return found


async def ok(s: ClientSession, name: str, args: dict[str, Any]) -> str:
    with anyio.fail_after(CALL_TIMEOUT_S):
        r = await s.call_tool(name, args)
    assert not is_error(r), f"{name}: {text_of(r)}"
    return text_of(r)


async def session_work(s: ClientSession) -> None:
    """Everything that leaves something in the data directory: writes, an edit and undo
    (journal), a delete and its undo, a spilled long output, memories, the audit trail."""
    await ok(s, "write_file", {"path": "notes.txt", "content": "first\n"})
    await ok(s, "edit_file", {"path": "notes.txt", "old_string": "first", "new_string": "second"})
    await ok(s, "undo_edit", {"path": "notes.txt"})
    await ok(s, "write_file", {"path": "long.txt", "content": LONG})
    await ok(s, "delete_file", {"path": "long.txt"})
    await ok(s, "undo_edit", {"path": "long.txt"})
    out = await ok(s, "read_file", {"path": "long.txt"})
    assert "Full output saved to" in out, out[-300:]
    await ok(s, "store_memory", {"memoryContent": SECRET_MEMORY, "tags": ["flowerpot"]})
    await ok(s, "store_truth", {"truthContent": SECRET_TRUTH})
    await ok(s, "search_memory", {"searchQuery": "where is the spare key"})


def assert_expected_records(found: dict[str, int]) -> None:
    names = set(found)
    assert "audit/audit.jsonl" in names, sorted(names)
    assert "ringfence.db" in names and "memory.db" in names, sorted(names)
    assert any(n.startswith("tool-output/") and found[n] == 0o600 for n in names), sorted(names)


def assert_no_memory_text_in_audit(data: Path) -> None:
    raw = b"".join(p.read_bytes() for p in (data / "audit").iterdir())
    assert raw.count(b"\n") >= 10
    for text in (SECRET_MEMORY, SECRET_TRUTH):
        for word in [text, *text.split()]:
            if len(word) >= 6:
                assert word.encode() not in raw, f"{word!r} is in the audit file"


def base_env(tmp: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp),
        "XDG_CONFIG_HOME": str(tmp / "xdg-config"),
        "RINGFENCE_LOG": "info",
    }


def start_http(tmp: Path, cfg: Path) -> HttpServer:
    log = tmp / "http.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(_binary()), "--data-dir", str(tmp / "data"), "--config", str(cfg),
             "serve", "--http", "127.0.0.1:0"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=out, env=base_env(tmp),
        )
    return HttpServer(proc, wait_for_url(proc, log), log)


async def test_data_at_rest_is_private_over_http(tmp_path):
    """A token user over HTTP, roots outside the data directory: nothing under the data
    directory but 0600 files in 0700 directories; and no memory text in the audit."""
    token = "alice-" + "a" * 30
    ws = tmp_path / "roots"
    ws.mkdir()
    cfg = tmp_path / "ringfence.toml"
    cfg.write_text(
        f'roots = [{{ path = "{ws}/{{user}}", access = "write" }}]\n'
        "[http]\n"
        f'tokens = [{{ user = "alice", hash = "{token_hash(token)}" }}]\n'
        '[memory.embeddings]\nprovider = "none"\n'
    )
    srv = start_http(tmp_path, cfg)
    try:
        with anyio.fail_after(TEST_TIMEOUT_S):
            async with client(srv.url, token) as s:
                await session_work(s)
    finally:
        srv.proc.send_signal(signal.SIGTERM)
        srv.proc.wait(timeout=15)
    data = tmp_path / "data"
    found = assert_private(data)
    assert_expected_records(found)
    assert_no_memory_text_in_audit(data)
    assert (ws / "alice" / "notes.txt").read_text() == "first\n"


async def test_data_at_rest_is_private_over_stdio(tmp_path):
    """The local user over stdio with the default workspace, which lives in the data
    directory: it is 0700 itself; everything else there is 0600/0700."""
    data = tmp_path / "data"
    cfg = tmp_path / "ringfence.toml"
    cfg.write_text('[memory.embeddings]\nprovider = "none"\n')
    params = StdioServerParameters(
        command=str(_binary()),
        args=["--data-dir", str(data), "--config", str(cfg), "serve"],
        env=base_env(tmp_path),
        cwd=str(tmp_path),
    )
    with open(tmp_path / "stdio.log", "w", encoding="utf-8") as errlog:
        with anyio.fail_after(TEST_TIMEOUT_S):
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as s:
                    with anyio.fail_after(CALL_TIMEOUT_S):
                        await s.initialize()
                    await session_work(s)
    found, workspaces = modes_under(data)
    assert workspaces == ["workspace"], workspaces
    assert found["workspace"] == 0o700
    assert (data / "workspace" / "notes.txt").read_text() == "first\n"
    assert_expected_records(assert_private(data))
    assert_no_memory_text_in_audit(data)


def test_wider_modes_left_by_older_versions_are_tightened_at_start(tmp_path):
    """An earlier ringfence made the data directory 0755 and its files 0644: the next start
    tightens what ringfence keeps there (the database files each family registers among
    it), and leaves the files in workspaces as they are."""
    data = tmp_path / "data"
    spill = data / "tool-output" / "0123456789abcdef" / "local"
    for d in (data, data / "audit", spill, data / "users" / "bob" / "workspace" / "docs",
              data / "workspace"):
        d.mkdir(parents=True, exist_ok=True)
    files = {
        data / "audit" / "audit.jsonl": b"{}\n",
        data / "audit" / "audit.jsonl.1": b"{}\n",
        spill / "5f0c-saved": b"grep output\n",
        data / "ringfence.db": b"",
        data / "ringfence.db-wal": b"",
        data / "memory.db": b"",
        # Every family's registered database, with SQLite's files beside it.
        data / "followups.db": b"",
        data / "calendar.db-wal": b"",
        data / "users" / "bob" / "workspace" / "docs" / "report.txt": b"bob's\n",
        data / "workspace" / "plan.txt": b"mine\n",
    }
    for p, content in files.items():
        p.write_bytes(content)
        p.chmod(0o644)
    for d in [data, *[p for p in data.rglob("*") if p.is_dir()]]:
        d.chmod(0o755)
    out = subprocess.run(
        [str(_binary()), "--data-dir", str(data), "call", "file_access_info", "{}"],
        capture_output=True, text=True, timeout=60, env=base_env(tmp_path),
    )
    assert out.returncode == 0, out.stderr
    found, workspaces = modes_under(data)
    assert sorted(workspaces) == ["users/bob/workspace", "workspace"]
    assert_private(data)
    # The user's files in workspaces keep their modes (their directories are 0700).
    for p in (data / "users" / "bob" / "workspace" / "docs", ):
        assert stat.S_IMODE(p.stat().st_mode) == 0o755
    for p in (data / "users" / "bob" / "workspace" / "docs" / "report.txt",
              data / "workspace" / "plan.txt"):
        assert stat.S_IMODE(p.stat().st_mode) == 0o644
    assert "tightened" in out.stderr, out.stderr
