"""Per-command overhead of the shell sandbox: `true` and `echo hi` spawned plain
(`/bin/sh -c`), under ringfence's sandbox (its helper, started the way run_shell_command
starts it: the small `ringfence-sandbox` helper beside the binary, spec on stdin, framed
output back, `pids` and `memory` cgroups, then the second stage entering new user/mount/PID/
IPC/UTS/cgroup/network namespaces and forking the namespace's init, which mounts its own
/proc, makes the mounts read-only, mounts $TMPDIR as a tmpfs, applies Landlock + seccomp +
limits and runs `sh -c`), and under bwrap (bubblewrap with `--unshare-all`, which makes the
same namespaces: read-only bind of /, its own /proc and /dev, a writable workspace, a tmpfs
/tmp) — interleaved in one run, p50/p95 of each, and each sandbox's added time.

    python3 bench/sandbox.py <ringfence binary, or a helper program> <results.json> [rounds]
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The helper's greeting: this, its build and protocol, a line break; the spec follows it.
MAGIC = b"\0ringfence-sandbox-"


def plain(cmd: str, ws: Path) -> None:
    subprocess.run(["/bin/sh", "-c", cmd], cwd=ws, stdin=subprocess.DEVNULL,
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=True)


def bwrap(cmd: str, ws: Path) -> None:
    subprocess.run(["bwrap", "--unshare-all", "--ro-bind", "/", "/", "--dev", "/dev",
                    "--proc", "/proc", "--tmpfs", "/tmp", "--bind", str(ws), str(ws),
                    "--chdir", str(ws), "--die-with-parent", "/bin/sh", "-c", cmd],
                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                   check=True)


def spec(cmd: str, ws: Path, tmp: Path, cgroups: bool = True) -> bytes:
    read = ["/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc", "/proc"]
    write = [str(ws), str(tmp), "/dev/null", "/dev/zero", "/dev/urandom"]
    return (json.dumps({
        "shell": "/bin/sh", "command": cmd, "cwd": str(ws),
        "env": [["PATH", "/usr/bin:/bin"], ["HOME", str(ws)], ["TMPDIR", str(tmp)],
                ["TERM", "dumb"], ["LANG", "C.UTF-8"]],
        "policy": {"read": read, "write": write,
                   "limits": {"processes": 256, "open_files": 1024, "file_size": 1 << 30,
                              "cpu_secs": 300, "address_space": 4 << 30,
                              "memory": (4 << 30) if cgroups else None},
                   "network": "none", "require": "full",
                   "namespaces": True, "tmp": {"path": str(tmp), "size": 512 << 20}},
        "max_processes": 256 if cgroups else None,
    }) + "\n").encode()


def sandboxed(binary: str, cmd: str, ws: Path, tmp: Path, cgroups: bool = True) -> list[Path]:
    """As the server runs a command: the spec on stdin, which stays open until the report
    (its closing means "stop now"), frames read as they come."""
    if Path(binary).name == "ringfence":
        small = Path(binary).with_name("ringfence-sandbox")
        argv = [str(small)] if small.exists() else [binary, "__sandbox-helper"]
    else:
        argv = [binary]  # a helper program itself
    p = subprocess.Popen(argv, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env={})
    assert p.stdin and p.stdout
    assert p.stdout.read(len(MAGIC)) == MAGIC
    p.stdout.readline()  # the helper's build, which is the binary's own here
    p.stdin.write(spec(cmd, ws, tmp, cgroups))
    p.stdin.flush()
    cgroups = []
    while True:
        kind, size = struct.unpack("<BI", p.stdout.read(5))
        payload = p.stdout.read(size)
        if kind in (5, 8):
            raise RuntimeError(payload.decode())
        if kind == 7:
            cgroups.append(Path(payload.decode()))
        if kind == 4:
            break
    p.stdin.close()
    p.wait()
    return cgroups


def remove_cgroups(cgroups: list[Path]) -> None:
    """The helper leaves its cgroups for the server to remove, which it does in the
    background once it has the result: do the same, after the round trip's clock stops."""
    for cgroup in cgroups:
        for _ in range(50):
            try:
                cgroup.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.002)


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def favordynmods() -> bool:
    """Whether a cgroup hierarchy is mounted with `favordynmods` (Linux 6.0+), which spares
    every move into a cgroup the wait for an RCU grace period (see BENCHMARKS.md)."""
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return False
    return any(line.split()[2].startswith("cgroup") and "favordynmods" in line.split()[3]
               for line in mounts if len(line.split()) > 3)


def main() -> None:
    binary, out_path = sys.argv[1], Path(sys.argv[2])
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 300
    ws = Path(tempfile.mkdtemp(prefix="rf-bench-ws-"))
    tmp = Path(tempfile.mkdtemp(prefix="rf-bench-tmp-"))
    have_bwrap = shutil.which("bwrap") is not None
    # "ringfence, no cgroups": the same without the pids and memory cgroups (what an
    # unprivileged server without a delegated cgroup gets), to show what moving into them
    # costs.
    runners = {"plain": lambda c: plain(c, ws),
               "ringfence": lambda c: sandboxed(binary, c, ws, tmp),
               "ringfence_no_cgroups": lambda c: sandboxed(binary, c, ws, tmp, False)}
    if have_bwrap:
        runners["bwrap"] = lambda c: bwrap(c, ws)
    results: dict[str, dict[str, dict[str, float]]] = {}
    for cmd in ["true", "echo hi"]:
        times: dict[str, list[float]] = {k: [] for k in runners}
        for name, run in runners.items():  # warm-up
            for _ in range(5):
                remove_cgroups(run(cmd) or [])
        if os.environ.get("BLOCKS"):
            # Each runner's rounds one after another: each in its own steady state (a
            # runner's leftovers, such as network namespaces torn down in the background,
            # then weigh on itself only).
            for name, run in runners.items():
                for _ in range(rounds):
                    t = time.perf_counter()
                    left = run(cmd)
                    times[name].append((time.perf_counter() - t) * 1000)
                    remove_cgroups(left or [])
        else:
            for _ in range(rounds):
                for name, run in runners.items():  # interleaved: the same machine state
                    t = time.perf_counter()
                    left = run(cmd)
                    times[name].append((time.perf_counter() - t) * 1000)
                    remove_cgroups(left or [])
        results[cmd] = {
            k: {"p50_ms": statistics.median(v), "p95_ms": pct(v, 0.95)} for k, v in times.items()
        }
        r = results[cmd]
        r["added_by_ringfence_p50_ms"] = {"value": r["ringfence"]["p50_ms"] - r["plain"]["p50_ms"]}
        r["added_by_ringfence_p95_ms"] = {"value": r["ringfence"]["p95_ms"] - r["plain"]["p95_ms"]}
        if have_bwrap:
            r["added_by_bwrap_p50_ms"] = {"value": r["bwrap"]["p50_ms"] - r["plain"]["p50_ms"]}
            r["added_by_bwrap_p95_ms"] = {"value": r["bwrap"]["p95_ms"] - r["plain"]["p95_ms"]}
    report = {"rounds": rounds, "machine": os.uname().release,
              "order": "blocks" if os.environ.get("BLOCKS") else "interleaved",
              "cgroup_favordynmods": favordynmods(),
              "results": results}
    out_path.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
