#!/usr/bin/env python3
"""ringfence benchmark driver. Usually run through bench/run.sh, which builds, installs
peers and prepares corpora first.

Everything is measured in one run, side by side, and written to a JSON file; a markdown
summary is printed to stdout.

Sections:
  grep    ringfence grep (count/content) over MCP vs `rg -c` / `rg -n`
  glob    ringfence glob vs `rg --files`
  bigread read_file of 100 lines near the end of a 1 GB file; peak RSS of the server
  edit    edit_file on a 10 MB file (plus peers' edit tools, for context)
  latency read_file round trip on a small file: ringfence vs peers
  startup spawn -> initialize response: ringfence vs peers
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mcp import McpClient, result_text  # noqa: E402
from tree import bench_tree, tree_markdown, tree_targets  # noqa: E402

# rg flags that give ripgrep ringfence's file-selection semantics:
#   --hidden            ringfence searches hidden files
#   --no-require-git    ringfence honours .gitignore outside git repositories too
#   --no-ignore-parent  ringfence reads ignore files only at and below its root
#   --no-ignore-global  ringfence does not read git's core.excludesFile
RG_SEMANTICS = ["--hidden", "--no-require-git", "--no-ignore-parent", "--no-ignore-global"]

GREP_PATTERNS = [
    ("literal", "unsafe"),
    ("regex", r"fn\s+\w+_test"),
    ("rare", "SipHasher13"),
]

GLOB_CASES = [
    ("**/*", []),
    ("**/*.rs", ["-g", "*.rs"]),
]


# -- helpers ---------------------------------------------------------------------------------

def ms(s: float) -> float:
    return round(s * 1000.0, 3)


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    k = max(0, math.ceil(p / 100.0 * len(s)) - 1)
    return s[k]


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _busy_jiffies() -> tuple[int, int]:
    f = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = f[3] + f[4]
    return sum(f[:8]) - idle, sum(f[:8])


class Meter:
    """Measures how much CPU *other* work on the machine used during a case: system-wide busy
    CPU minus what this driver, its reaped children (rg) and the live servers used."""

    def __init__(self, *clients: McpClient):
        self.clients = clients

    def __enter__(self) -> "Meter":
        self.t0 = time.perf_counter()
        self.b0, _ = _busy_jiffies()
        self.o0 = self._ours()
        return self

    def _ours(self) -> float:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return (r.ru_utime + r.ru_stime + children_cpu()
                + sum(c.cpu_seconds() for c in self.clients))

    def __exit__(self, *exc: object) -> None:
        wall = time.perf_counter() - self.t0
        b1, _ = _busy_jiffies()
        busy = (b1 - self.b0) / os.sysconf("SC_CLK_TCK")
        foreign = max(0.0, busy - (self._ours() - self.o0))
        self.foreign_pct = round(100.0 * foreign / (wall * (os.cpu_count() or 1)), 1)


def settle(a) -> None:
    """Before each case: wait (bounded) for other work on the machine to finish."""
    if a.wait_idle > 0:
        wait_for_idle(min(a.wait_idle, 120))


def run_rg(args: list[str], cwd: str) -> tuple[float, float, bytes]:
    """Runs rg with its output into a pipe we drain (not /dev/null, which rg detects and
    short-cuts). Returns (wall s, cpu s, stdout)."""
    c0 = children_cpu()
    t0 = time.perf_counter()
    p = subprocess.run(["rg", *args], cwd=cwd, stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    t1 = time.perf_counter()
    if p.returncode not in (0, 1):
        raise RuntimeError(f"rg {args} failed: {p.stderr.decode()[:500]}")
    return t1 - t0, children_cpu() - c0, p.stdout


def strip_dot(path: str) -> str:
    return path[2:] if path.startswith("./") else path


def machine_info() -> dict[str, Any]:
    info: dict[str, Any] = {
        "nproc": os.cpu_count(),
        "kernel": platform.release(),
        "python": platform.python_version(),
    }
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in lscpu.splitlines():
            k, _, v = line.partition(":")
            if k.strip() in ("Model name", "CPU(s)", "Thread(s) per core", "Hypervisor vendor",
                             "L2 cache", "L3 cache"):
                info[k.strip()] = v.strip()
    except OSError:
        pass
    try:
        with open("/proc/meminfo") as f:
            info["MemTotal"] = f.readline().split(":", 1)[1].strip()
    except OSError:
        pass
    return info


def tool_version(argv: list[str]) -> str:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        return (p.stdout or p.stderr).strip().splitlines()[0]
    except Exception as e:  # noqa: BLE001
        return f"unknown ({e})"


# -- servers ---------------------------------------------------------------------------------

class Servers:
    """How to spawn each server over a given root directory."""

    def __init__(self, a: argparse.Namespace):
        self.a = a
        self.env = dict(os.environ)
        # No user configuration file or stray RINGFENCE_* variables.
        self.env["XDG_CONFIG_HOME"] = str(Path(a.work) / "xdg-config")
        for k in list(self.env):
            if k.startswith("RINGFENCE_"):
                del self.env[k]
        Path(self.env["XDG_CONFIG_HOME"]).mkdir(parents=True, exist_ok=True)
        self.logs = Path(a.work) / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)

    def names(self) -> list[str]:
        out = ["ringfence"]
        if self.a.official_js:
            out.append("official")
        if self.a.rustfs:
            out.append("rust-mcp-filesystem")
        return out

    def argv(self, name: str, root: str) -> list[str]:
        if name == "ringfence":
            return [self.a.ringfence, "--data-dir", self.a.rf_data, "serve", root]
        if name == "official":
            return ["node", self.a.official_js, root]
        if name == "rust-mcp-filesystem":
            return [self.a.rustfs, *self.a.rustfs_args.split(), root]
        raise KeyError(name)

    def spawn(self, name: str, root: str) -> McpClient:
        return McpClient(self.argv(name, root), cwd=root, env=self.env,
                         stderr_path=str(self.logs / f"{name}.stderr.log"))


def pick_tool(tools: list[dict[str, Any]], *names: str) -> str | None:
    have = {t["name"] for t in tools}
    for n in names:
        if n in have:
            return n
    return None


def check_ok(res: dict[str, Any], what: str) -> None:
    if res.get("isError"):
        raise RuntimeError(f"{what}: tool error: {result_text(res)[:500]}")


# -- sections --------------------------------------------------------------------------------

def bench_grep(a, srv: Servers, notes: list[str]) -> list[dict[str, Any]]:
    corpus = a.corpus
    rows = []
    with srv.spawn("ringfence", corpus) as rf:
        rf.initialize()
        for kind, pattern in GREP_PATTERNS:
            for mode, rg_flag in (("count", "-c"), ("content", "-n")):
                rg_args = [*RG_SEMANTICS, rg_flag, pattern, "."]
                rf_args = {"pattern": pattern, "output_mode": mode}
                rg_t, rf_t, rg_cpu, rf_cpu = [], [], [], []
                rg_out = b""
                res: dict[str, Any] = {}
                settle(a)
                with Meter(rf) as meter:
                    for i in range(a.warmup + a.runs):
                        w, c, rg_out = run_rg(rg_args, corpus)
                        c0 = rf.cpu_seconds()
                        t, res = rf.call("grep", rf_args)
                        c1 = rf.cpu_seconds()
                        check_ok(res, f"grep {pattern!r} {mode}")
                        if i >= a.warmup:
                            rg_t.append(w)
                            rg_cpu.append(c)
                            rf_t.append(t)
                            rf_cpu.append(c1 - c0)
                row = {
                    "kind": kind, "pattern": pattern, "mode": mode,
                    "rg_cmd": "rg " + " ".join(rg_args),
                    "rf_args": rf_args,
                    "rg_ms": ms(median(rg_t)), "rf_ms": ms(median(rf_t)),
                    "rg_ms_all": [ms(x) for x in rg_t], "rf_ms_all": [ms(x) for x in rf_t],
                    "rg_cpu_ms": ms(median(rg_cpu)), "rf_cpu_ms": ms(median(rf_cpu)),
                    "foreign_cpu_pct": meter.foreign_pct,
                }
                row["ratio"] = round(row["rf_ms"] / row["rg_ms"], 3)
                row.update(verify_grep(mode, rg_out, res))
                if not row["agree"]:
                    notes.append(f"grep {pattern!r} {mode}: ringfence and rg disagree: {row['check']}")
                log(f"grep {kind:7} {mode:7}: rg {row['rg_ms']:8.1f} ms  ringfence "
                    f"{row['rf_ms']:8.1f} ms  x{row['ratio']}  {row['check']}")
                rows.append(row)
    return rows


SAVED_RE = re.compile(r"Full output saved to (\S+?)\. ")


def spill_or_text(res: dict[str, Any]) -> str:
    """The full output of a call: the spill file when the output was cut, else the text."""
    sc = res.get("structuredContent") or {}
    path = sc.get("spill_path")
    text = result_text(res)
    if not path:
        m = SAVED_RE.search(text)
        path = m.group(1) if m else None
    if path:
        return Path(path).read_text(errors="replace")
    return text


CONTENT_RE = re.compile(r"^(.+?):(\d+): ")
COUNT_RE = re.compile(r"^(.+):(\d+)$")


def verify_grep(mode: str, rg_out: bytes, res: dict[str, Any]) -> dict[str, Any]:
    """Compares ringfence's full output (spill file or text) with rg's."""
    rg_lines = rg_out.decode(errors="replace").splitlines()
    full = spill_or_text(res).splitlines()
    truncated = bool(SAVED_RE.search(result_text(res)))
    if mode == "count":
        rg_files = len(rg_lines)
        rg_sum = sum(int(l.rsplit(":", 1)[1]) for l in rg_lines)
        rf_entries = [m for m in map(COUNT_RE.match, full) if m]
        rf_files = len(rf_entries)
        rf_sum = sum(int(m.group(2)) for m in rf_entries)
        agree = rg_files == rf_files and rg_sum == rf_sum
        check = f"files {rf_files}/{rg_files} (rf/rg), matching lines {rf_sum}/{rg_sum}"
        return {"agree": agree, "check": check, "rg_files": rg_files, "rf_files": rf_files,
                "rg_lines": rg_sum, "rf_lines": rf_sum, "rf_truncated": truncated}
    rg_n = len(rg_lines)
    rg_files = len({strip_dot(l.split(":", 1)[0]) for l in rg_lines})
    rf_matches = [m for m in map(CONTENT_RE.match, full) if m]
    rf_n = len(rf_matches)
    rf_files = len({m.group(1) for m in rf_matches})
    agree = rf_n == rg_n and rf_files == rg_files
    return {"agree": agree, "check": f"lines {rf_n}/{rg_n}, files {rf_files}/{rg_files} (rf/rg)",
            "rg_lines": rg_n, "rf_lines": rf_n, "rg_files": rg_files, "rf_files": rf_files,
            "rf_truncated": truncated}


def bench_glob(a, srv: Servers, notes: list[str]) -> list[dict[str, Any]]:
    corpus = a.corpus
    rows = []
    with srv.spawn("ringfence", corpus) as rf:
        rf.initialize()
        for pattern, rg_extra in GLOB_CASES:
            rg_args = ["--files", *RG_SEMANTICS, *rg_extra, "."]
            rg_t, rf_t, rg_cpu, rf_cpu = [], [], [], []
            rg_out, res = b"", {}
            settle(a)
            with Meter(rf) as meter:
                for i in range(a.warmup + a.runs):
                    w, c, rg_out = run_rg(rg_args, corpus)
                    c0 = rf.cpu_seconds()
                    t, res = rf.call("glob", {"pattern": pattern})
                    c1 = rf.cpu_seconds()
                    check_ok(res, f"glob {pattern}")
                    if i >= a.warmup:
                        rg_t.append(w)
                        rg_cpu.append(c)
                        rf_t.append(t)
                        rf_cpu.append(c1 - c0)
            rg_set = {strip_dot(l) for l in rg_out.decode(errors="replace").splitlines()}
            rf_full = spill_or_text(res)
            rf_set = {l for l in rf_full.splitlines() if l}
            if not SAVED_RE.search(result_text(res)):
                rf_set = {l for l in rf_set if not l.startswith("(")}
            only_rg = sorted(rg_set - rf_set)
            only_rf = sorted(rf_set - rg_set)
            row = {
                "pattern": pattern, "rg_cmd": "rg " + " ".join(rg_args),
                "rg_ms": ms(median(rg_t)), "rf_ms": ms(median(rf_t)),
                "rg_ms_all": [ms(x) for x in rg_t], "rf_ms_all": [ms(x) for x in rf_t],
                "rg_cpu_ms": ms(median(rg_cpu)), "rf_cpu_ms": ms(median(rf_cpu)),
                "rg_files": len(rg_set), "rf_files": len(rf_set),
                "foreign_cpu_pct": meter.foreign_pct,
                "only_rg": only_rg[:10], "only_rf": only_rf[:10],
                "agree": not only_rg and not only_rf,
            }
            row["ratio"] = round(row["rf_ms"] / row["rg_ms"], 3)
            if not row["agree"]:
                notes.append(f"glob {pattern}: file sets differ: {len(only_rg)} only in rg "
                             f"(e.g. {only_rg[:3]}), {len(only_rf)} only in ringfence (e.g. {only_rf[:3]})")
            log(f"glob {pattern:8}: rg {row['rg_ms']:8.1f} ms  ringfence {row['rf_ms']:8.1f} ms  "
                f"x{row['ratio']}  files {len(rf_set)}/{len(rg_set)}")
            rows.append(row)
    return rows


def bench_bigread(a, srv: Servers, notes: list[str]) -> dict[str, Any]:
    big = Path(a.big_file)
    root = str(big.parent)
    total_lines = int(Path(str(big) + ".lines").read_text())
    out: dict[str, Any] = {"file_bytes": big.stat().st_size, "file_lines": total_lines}
    # Floor for one sequential pass over the file: wc -l (memchr-speed newline count).
    wc = []
    for _ in range(a.warmup + 3):
        t0 = time.perf_counter()
        subprocess.run(["wc", "-l", str(big)], capture_output=True, check=True)
        wc.append(time.perf_counter() - t0)
    out["wc_l_ms"] = ms(median(wc[a.warmup:]))
    with srv.spawn("ringfence", root) as rf:
        rf.initialize()
        out["rss_after_init_kib"] = rf.status()
        cases = {
            "end": {"path": big.name, "offset": total_lines - 150, "limit": 100},
            "start": {"path": big.name, "offset": 1000, "limit": 100},
        }
        for label, args in cases.items():
            ts, cpu = [], []
            res: dict[str, Any] = {}
            settle(a)
            with Meter(rf) as meter:
                for i in range(a.warmup + a.runs):
                    c0 = rf.cpu_seconds()
                    t, res = rf.call("read_file", args)
                    c1 = rf.cpu_seconds()
                    check_ok(res, f"read_file big {label}")
                    if i >= a.warmup:
                        ts.append(t)
                        cpu.append(c1 - c0)
            text = result_text(res)
            first = text.splitlines()[0] if text else ""
            want = args["offset"]
            ok = bool(re.match(rf"\s*{want}\t{want:010d} ", first)) and \
                len([l for l in text.splitlines() if re.match(r"\s*\d+\t", l)]) == 100
            if not ok:
                notes.append(f"read_file big {label}: unexpected output start {first[:80]!r}")
            out[label] = {"args": args, "ms": ms(median(ts)), "ms_all": [ms(x) for x in ts],
                          "cpu_ms": ms(median(cpu)), "output_ok": ok,
                          "foreign_cpu_pct": meter.foreign_pct,
                          "tail_notice": text.splitlines()[-1][:200] if text else ""}
            log(f"bigread {label}: {out[label]['ms']:.1f} ms (cpu {out[label]['cpu_ms']:.1f} ms) ok={ok}")
        out["rss_after_reads_kib"] = rf.status()
    out["peak_rss_mib"] = round(out["rss_after_reads_kib"]["VmHWM"] / 1024, 1)
    log(f"bigread peak RSS {out['peak_rss_mib']} MiB")
    return out


def edit_args(tool: dict[str, Any], path: str, old: str, new: str) -> dict[str, Any]:
    props = tool.get("inputSchema", {}).get("properties", {})
    if "edits" in props:  # official server / rust-mcp-filesystem style
        return {"path": path, "edits": [{"oldText": old, "newText": new}], "dryRun": False}
    return {"path": path, "old_string": old, "new_string": new}


def bench_edit(a, srv: Servers, notes: list[str]) -> dict[str, Any]:
    src = Path(a.edit_file)
    out: dict[str, Any] = {"file_bytes": src.stat().st_size}
    markers = ("EDIT_MARKER_ALPHA_0001", "EDIT_MARKER_BRAVO_0002")
    for name in srv.names():
        work = Path(a.work) / "edit" / name
        if work.exists():
            shutil.rmtree(work)
        work.mkdir(parents=True)
        target = work / src.name
        shutil.copyfile(src, target)
        try:
            with srv.spawn(name, str(work)) as c:
                c.initialize()
                tools = c.tools()
                read_tool = pick_tool(tools, "read_file", "read_text_file")
                edit_tool = next((t for t in tools if t["name"] == "edit_file"), None)
                if edit_tool is None:
                    out[name] = {"error": "no edit_file tool"}
                    continue
                path = str(target)
                # Satisfy ringfence's read-first gate (peers do not need it; harmless there).
                if name == "ringfence":
                    _, r = c.call(read_tool, {"path": path, "offset": 1, "limit": 10})
                    check_ok(r, "read_file before edit")
                ts, cpu = [], []
                cur = 0
                res: dict[str, Any] = {}
                settle(a)
                with Meter(c) as meter:
                    for i in range(a.warmup + a.runs):
                        old, new = markers[cur], markers[1 - cur]
                        c0 = c.cpu_seconds()
                        t, res = c.call("edit_file", edit_args(edit_tool, path, old, new))
                        c1 = c.cpu_seconds()
                        check_ok(res, f"{name} edit_file")
                        cur = 1 - cur
                        if i >= a.warmup:
                            ts.append(t)
                            cpu.append(c1 - c0)
                body = target.read_bytes()
                ok = body.count(markers[cur].encode()) == 1 and len(body) == out["file_bytes"]
                if not ok:
                    notes.append(f"edit_file ({name}): file content after edits is not as expected")
                out[name] = {"ms": ms(median(ts)), "ms_all": [ms(x) for x in ts],
                             "cpu_ms": ms(median(cpu)), "output_ok": ok,
                             "foreign_cpu_pct": meter.foreign_pct,
                             "response_chars": len(result_text(res))}
                log(f"edit {name}: {out[name]['ms']:.1f} ms ok={ok}")
        except Exception as e:  # noqa: BLE001
            out[name] = {"error": str(e)[:300]}
            notes.append(f"edit_file ({name}) failed: {e}")
            log(f"edit {name}: FAILED {e}")
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return out


def bench_latency(a, srv: Servers, notes: list[str]) -> dict[str, Any]:
    """All servers run at once and are called in alternating blocks of 20 calls, so background
    noise on the machine hits each of them alike while each block runs warm."""
    small = Path(a.small_file)
    root = str(small.parent)
    expected = small.read_text().splitlines()
    out: dict[str, Any] = {"file_bytes": small.stat().st_size, "file_lines": len(expected),
                           "method": "servers alive together, called in alternating blocks of 20 calls"}
    clients: dict[str, McpClient] = {}
    tools: dict[str, str] = {}
    args = {"path": str(small)}
    try:
        for name in srv.names():
            try:
                c = srv.spawn(name, root)
                c.initialize()
                tool = pick_tool(c.tools(), "read_text_file", "read_file")
                if tool is None:
                    raise RuntimeError("no read tool")
                clients[name], tools[name] = c, tool
            except Exception as e:  # noqa: BLE001
                out[name] = {"error": str(e)[:300]}
                notes.append(f"read latency ({name}) failed to start: {e}")
        ts: dict[str, list[float]] = {n: [] for n in clients}
        last: dict[str, dict[str, Any]] = {}
        settle(a)
        for name, c in clients.items():  # warm-up
            for _ in range(a.lat_warmup):
                check_ok(c.call(tools[name], args)[1], f"{name} {tools[name]}")
        block = 20
        with Meter(*clients.values()) as meter:
            for _ in range(math.ceil(a.lat_calls / block)):
                for name, c in clients.items():
                    for _ in range(block):
                        t, res = c.call(tools[name], args)
                        check_ok(res, f"{name} {tools[name]}")
                        last[name] = res
                        ts[name].append(t)
        for name, c in clients.items():
            text = result_text(last[name])
            ok = all(line in text for line in (expected[0], expected[-1]))
            if not ok:
                notes.append(f"read ({name}): output does not contain the file's first/last line")
            x = ts[name]
            out[name] = {"tool": tools[name], "median_ms": ms(median(x)), "p95_ms": ms(pct(x, 95)),
                         "min_ms": ms(min(x)), "calls": len(x), "output_ok": ok,
                         "foreign_cpu_pct": meter.foreign_pct,
                         "response_chars": len(text), "rss_kib": c.status()}
            log(f"latency {name} ({tools[name]}): median {out[name]['median_ms']:.3f} ms "
                f"p95 {out[name]['p95_ms']:.3f} ms")
    finally:
        for c in clients.values():
            c.close()
    return out


def bench_startup(a, srv: Servers, notes: list[str]) -> dict[str, Any]:
    """Servers started in turn (ringfence, official, rust-mcp-filesystem, ringfence, ...)."""
    root = str(Path(a.small_file).parent)
    out: dict[str, Any] = {}
    names = srv.names()
    ts: dict[str, list[float]] = {n: [] for n in names}
    failed: set[str] = set()
    settle(a)
    for i in range(a.start_warmup + a.starts):
        for name in names:
            if name in failed:
                continue
            try:
                c = srv.spawn(name, root)
                try:
                    t = c.initialize()
                finally:
                    c.close()
            except Exception as e:  # noqa: BLE001
                failed.add(name)
                out[name] = {"error": str(e)[:300]}
                notes.append(f"startup ({name}) failed: {e}")
                continue
            if i >= a.start_warmup:
                ts[name].append(t)
    for name in names:
        if name in failed:
            continue
        x = ts[name]
        out[name] = {"median_ms": ms(median(x)), "p95_ms": ms(pct(x, 95)),
                     "min_ms": ms(min(x)), "starts": len(x)}
        log(f"startup {name}: median {out[name]['median_ms']:.2f} ms")
    return out


# -- report ----------------------------------------------------------------------------------

def fmt(x: float | None, nd: int = 1) -> str:
    if x is None:
        return "n/a"
    return f"{x:,.{nd}f}"


def cpu_idle_fraction(seconds: float = 2.0) -> float:
    def snap() -> tuple[int, int]:
        f = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
        return f[3] + f[4], sum(f)  # idle + iowait, total
    i0, t0 = snap()
    time.sleep(seconds)
    i1, t1 = snap()
    return (i1 - i0) / max(1, t1 - t0)


def wait_for_idle(max_wait: float) -> float:
    """Waits (up to max_wait s) until the machine is >95% idle; returns the last idle share."""
    deadline = time.time() + max_wait
    idle = cpu_idle_fraction()
    while idle < 0.95 and time.time() < deadline:
        log(f"machine busy ({(1 - idle) * 100:.0f}% CPU in use by other work); waiting")
        time.sleep(10)
        idle = cpu_idle_fraction()
    return idle


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def markdown(r: dict[str, Any]) -> str:
    L: list[str] = []
    m, v, c = r["machine"], r["versions"], r["corpus"]
    L.append(f"Run {r['date']} on {m.get('Model name', '?')}, {m.get('nproc')} CPUs, "
             f"{m.get('MemTotal', '?')} RAM, Linux {m.get('kernel')}; load average "
             f"{r.get('loadavg_start')} at start, {r.get('loadavg_end')} at end.\n")
    L.append(f"{v['ringfence']} · {v['rg']} · official server-filesystem {v.get('official')} "
             f"(node {v.get('node')}) · rust-mcp-filesystem {v.get('rust-mcp-filesystem')}. "
             f"Timed runs per case: {r['params']['runs']} after {r['params']['warmup']} warm-up; "
             f"medians.\n")
    L.append(f"Corpus: `{c['path']}`: {c['files']:,} files, {c['bytes'] / 1e6:,.0f} MB.\n")
    L.append("\"other load\" is the share of the machine's CPU used by processes outside the "
             "benchmark during that case (0% = quiet machine).\n")
    if "grep" in r:
        L.append("### grep (MCP tools/call round trip) vs ripgrep\n")
        L.append("| pattern | mode | rg ms | ringfence ms | ratio | rg CPU ms | ringfence CPU ms | other load | results agree |")
        L.append("|---|---|---:|---:|---:|---:|---:|---:|---|")
        for g in r["grep"]:
            L.append(f"| `{g['pattern']}` ({g['kind']}) | {g['mode']} | {fmt(g['rg_ms'])} | "
                     f"{fmt(g['rf_ms'])} | **{g['ratio']:.2f}×** | {fmt(g['rg_cpu_ms'])} | "
                     f"{fmt(g['rf_cpu_ms'])} | {g.get('foreign_cpu_pct', 0):.0f}% | "
                     f"{'yes' if g['agree'] else 'NO'} ({g['check']}) |")
        L.append("")
    if "glob" in r:
        L.append("### glob vs `rg --files`\n")
        L.append("| pattern | rg ms | ringfence ms | ratio | rg CPU ms | ringfence CPU ms | other load | files (rf/rg) |")
        L.append("|---|---:|---:|---:|---:|---:|---:|---|")
        for g in r["glob"]:
            L.append(f"| `{g['pattern']}` | {fmt(g['rg_ms'])} | {fmt(g['rf_ms'])} | "
                     f"**{g['ratio']:.2f}×** | {fmt(g['rg_cpu_ms'])} | {fmt(g['rf_cpu_ms'])} | "
                     f"{g.get('foreign_cpu_pct', 0):.0f}% | {g['rf_files']:,}/{g['rg_files']:,}{'' if g['agree'] else ' (DIFFER)'} |")
        L.append("")
    if "bigread" in r:
        b = r["bigread"]
        L.append("### read_file on a 1 GB file\n")
        L.append(f"File: {b['file_bytes']:,} bytes, {b['file_lines']:,} lines. "
                 f"`wc -l` on it (one sequential pass, page cache warm): {fmt(b['wc_l_ms'])} ms.\n")
        L.append("| call | ms (median) | CPU ms | output correct |")
        L.append("|---|---:|---:|---|")
        for label in ("end", "start"):
            x = b[label]
            L.append(f"| read_file offset={x['args']['offset']:,} limit=100 | {fmt(x['ms'])} | "
                     f"{fmt(x['cpu_ms'])} | {'yes' if x['output_ok'] else 'NO'} |")
        L.append(f"\nServer peak RSS (VmHWM): {b['rss_after_init_kib']['VmHWM'] / 1024:.1f} MiB after "
                 f"initialize, **{b['peak_rss_mib']} MiB** after the reads.\n")
    if "edit" in r:
        e = r["edit"]
        L.append("### edit_file on a 10 MB file\n")
        L.append(f"File: {e['file_bytes']:,} bytes; one unique line replaced per call.\n")
        L.append("| server | ms (median) | CPU ms | ratio vs ringfence |")
        L.append("|---|---:|---:|---:|")
        base = e.get("ringfence", {}).get("ms")
        for name, x in e.items():
            if not isinstance(x, dict):
                continue
            if "error" in x:
                L.append(f"| {name} | error: {x['error'][:80]} | | |")
                continue
            ratio = f"{x['ms'] / base:.2f}×" if base else "n/a"
            L.append(f"| {name} | {fmt(x['ms'])} | {fmt(x['cpu_ms'])} | {ratio} |")
        L.append("")
    if "latency" in r or "startup" in r:
        lat, st = r.get("latency", {}), r.get("startup", {})
        L.append("### Small-file read round trip and start-up\n")
        L.append(f"read: {lat.get('file_bytes', 0):,}-byte file, {lat.get('file_lines', 0)} lines; "
                 "start-up: spawn → initialize response.\n")
        L.append("| server | read tool | read median ms | read p95 ms | read ratio vs ringfence | "
                 "start-up median ms | start-up p95 ms | start-up ratio vs ringfence |")
        L.append("|---|---|---:|---:|---:|---:|---:|---:|")
        rl = lat.get("ringfence", {}).get("median_ms")
        rs = st.get("ringfence", {}).get("median_ms")
        for name in r["servers"]:
            x, s = lat.get(name, {}), st.get(name, {})
            lr = f"{x['median_ms'] / rl:.2f}×" if rl and "median_ms" in x else "n/a"
            sr = f"{s['median_ms'] / rs:.2f}×" if rs and "median_ms" in s else "n/a"
            L.append(f"| {name} | {x.get('tool', 'n/a')} | {fmt(x.get('median_ms'), 3)} | "
                     f"{fmt(x.get('p95_ms'), 3)} | {lr} | {fmt(s.get('median_ms'), 2)} | "
                     f"{fmt(s.get('p95_ms'), 2)} | {sr} |")
        L.append("")
    if "tree" in r:
        L.extend(tree_markdown(r["tree"]))
    if r.get("targets"):
        L.append("### Targets\n")
        L.append("| target | measured | met |")
        L.append("|---|---|---|")
        for t in r["targets"]:
            L.append(f"| {t['target']} | {t['measured']} | {'yes' if t['met'] else '**NO**'} |")
        L.append("")
    if r.get("notes"):
        L.append("### Notes from this run\n")
        for n in r["notes"]:
            L.append(f"- {n}")
        L.append("")
    return "\n".join(L)


def targets(r: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for g in r.get("grep", []):
        out.append({"target": f"grep `{g['pattern']}` {g['mode']} ≤ 1.3× rg",
                    "measured": f"{g['ratio']:.2f}×", "met": g["ratio"] <= 1.3})
    for g in r.get("glob", []):
        out.append({"target": f"glob `{g['pattern']}` ≤ 1.3× rg --files",
                    "measured": f"{g['ratio']:.2f}×", "met": g["ratio"] <= 1.3})
    if "tree" in r:
        out.extend(tree_targets(r["tree"]))
    s = r.get("startup", {}).get("ringfence", {})
    if "median_ms" in s:
        out.append({"target": "start-up < 20 ms", "measured": f"{s['median_ms']:.2f} ms",
                    "met": s["median_ms"] < 20})
    lat = r.get("latency", {})
    if "median_ms" in lat.get("ringfence", {}) and "median_ms" in lat.get("official", {}):
        ratio = lat["official"]["median_ms"] / lat["ringfence"]["median_ms"]
        out.append({"target": "read_file round trip ≥ 2× faster than the official server",
                    "measured": f"{ratio:.2f}× faster (median)", "met": ratio >= 2})
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ringfence", required=True)
    p.add_argument("--official-js", default="")
    p.add_argument("--rustfs", default="")
    p.add_argument("--rustfs-args", default="")
    p.add_argument("--corpus", required=True)
    p.add_argument("--big-file", required=True)
    p.add_argument("--edit-file", required=True)
    p.add_argument("--small-file", required=True)
    p.add_argument("--work", required=True, help="scratch directory")
    p.add_argument("--rf-data", required=True, help="ringfence --data-dir")
    p.add_argument("--out", required=True)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--lat-calls", type=int, default=200)
    p.add_argument("--lat-warmup", type=int, default=20)
    p.add_argument("--starts", type=int, default=20)
    p.add_argument("--start-warmup", type=int, default=2)
    p.add_argument("--official-version", default="")
    p.add_argument("--rustfs-version", default="")
    p.add_argument("--git-rev", default="")
    p.add_argument("--wait-idle", type=float, default=300,
                   help="wait up to this many seconds for an idle machine first")
    p.add_argument("--only", default="grep,glob,bigread,edit,latency,startup,tree")
    p.add_argument("--tree", default="", help="the 1,000,000-entry tree (section tree)")
    a = p.parse_args()
    for k in ("ringfence", "official_js", "rustfs", "corpus", "big_file", "edit_file",
              "small_file", "work", "rf_data", "out", "tree"):
        if getattr(a, k):
            setattr(a, k, os.path.abspath(getattr(a, k)))

    srv = Servers(a)
    notes: list[str] = []
    idle = wait_for_idle(a.wait_idle)
    if idle < 0.95:
        notes.append(f"the machine was busy with other work when the run started "
                     f"({(1 - idle) * 100:.0f}% CPU in use); timings are skewed")
    corpus_files = int(subprocess.run(["find", a.corpus, "-type", "f"], capture_output=True,
                                      text=True).stdout.count("\n"))
    corpus_bytes = int(subprocess.run(["du", "-sb", a.corpus], capture_output=True,
                                      text=True).stdout.split()[0])
    r: dict[str, Any] = {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "versions": {
            "ringfence": tool_version([a.ringfence, "--version"]) + (f" ({a.git_rev})" if a.git_rev else ""),
            "rg": tool_version(["rg", "--version"]),
            "node": tool_version(["node", "--version"]),
            "official": a.official_version,
            "rust-mcp-filesystem": a.rustfs_version,
        },
        "params": {"runs": a.runs, "warmup": a.warmup, "lat_calls": a.lat_calls,
                   "starts": a.starts, "rg_semantics_flags": RG_SEMANTICS},
        # Relative to the repository: results never carry this machine's paths.
        "corpus": {"path": os.path.relpath(a.corpus, Path(__file__).resolve().parent.parent),
                   "files": corpus_files, "bytes": corpus_bytes},
        "servers": srv.names(),
        "loadavg_start": loadavg(),
        "idle_at_start": round(idle, 3),
    }
    only = set(a.only.split(","))
    sections: list[tuple[str, Callable[..., Any]]] = [
        ("grep", bench_grep), ("glob", bench_glob), ("bigread", bench_bigread),
        ("edit", bench_edit), ("latency", bench_latency), ("startup", bench_startup),
        ("tree", bench_tree),
    ]
    for name, fn in sections:
        if name in only:
            log(f"== {name}")
            t0 = time.perf_counter()
            r[name] = fn(a, srv, notes)
            log(f"== {name} done in {time.perf_counter() - t0:.1f} s")
    r["loadavg_end"] = loadavg()
    for sec in ("grep", "glob"):
        for row in r.get(sec, []):
            if row.get("foreign_cpu_pct", 0) > 10:
                notes.append(f"{sec} {row['pattern']!r} {row.get('mode', '')}: other work used "
                             f"{row['foreign_cpu_pct']}% of the machine's CPU during this case")
    r["targets"] = targets(r)
    r["notes"] = notes
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(r, indent=2) + "\n")
    md = markdown(r)
    Path(a.out).with_suffix(".md").write_text(md + "\n")
    print(md)


if __name__ == "__main__":
    main()
