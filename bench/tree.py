"""The 1,000,000-entry tree section: search_entries and list_directory (recursive) against fd
and the official MCP filesystem server's search_files and directory_tree, same run, same
tree, results checked against each other; wall time and peak RSS (VmHWM) of every process.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from mcp import McpClient, result_text

SAVED_RE = re.compile(r"Full output saved to (\S+?)\. Use read_file")
FD = os.environ.get("FD_BIN", "fdfind")
# Slow peers get this long per call before they are stopped and recorded as timed out.
PEER_TIMEOUT_S = float(os.environ.get("TREE_PEER_TIMEOUT", "600"))


def run_fd_rss(args: list[str], cwd: str, scratch: Path) -> tuple[float, int, bytes]:
    """fd writing straight to a file (no reader competing for the CPU), under GNU time for
    its own peak RSS (a forked child's rusage would count the Python parent's pages):
    (wall s, peak RSS KiB, stdout)."""
    out_path, rss_path = scratch / "fd.out", scratch / "fd.rss"
    with open(out_path, "wb") as out:
        t0 = time.perf_counter()
        p = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", str(rss_path), FD, *args],
                           cwd=cwd, stdin=subprocess.DEVNULL, stdout=out,
                           stderr=subprocess.PIPE)
        t1 = time.perf_counter()
    if p.returncode not in (0, 1):
        raise RuntimeError(f"fd {args} failed: {p.stderr.decode()[:300]}")
    rss = int(rss_path.read_text().split()[-1])
    return t1 - t0, rss, out_path.read_bytes()


def best_fd(a, args: list[str], root: str, scratch: Path) -> dict[str, Any]:
    """fd's best configuration on this machine: its default thread count and -j1 (on two
    cores one thread is often faster), each the median of the timed runs."""
    out: dict[str, Any] = {}
    for label, extra in (("default", []), ("j1", ["-j1"])):
        ts, rss, data = [], 0, b""
        for i in range(a.warmup + a.runs):
            t, r, data = run_fd_rss([*extra, *args], root, scratch)
            if i >= a.warmup:
                ts.append(t)
                rss = max(rss, r)
        out[label] = {"ms": 1000 * sorted(ts)[len(ts) // 2], "rss_kib": rss}
        out["output"] = data
    best = min(("default", "j1"), key=lambda k: out[k]["ms"])
    out["best"] = best
    out["ms"] = out[best]["ms"]
    out["rss_mib"] = round(out[best]["rss_kib"] / 1024, 1)
    return out


def call_with_timeout(c: McpClient, tool: str, args: dict[str, Any],
                      timeout: float) -> tuple[float | None, dict[str, Any] | None, str]:
    """A tools/call that is abandoned (server killed) after `timeout` seconds."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["t"], box["res"] = c.call(tool, args)
        except Exception as e:  # noqa: BLE001
            box["err"] = str(e)

    th = threading.Thread(target=run, daemon=True)
    th.start()
    th.join(timeout)
    if th.is_alive():
        c.proc.kill()
        th.join(10)
        return None, None, f"timed out after {timeout:.0f} s"
    if "err" in box:
        return None, None, box["err"][:300]
    return box["t"], box["res"], ""


def saved_or_text(res: dict[str, Any]) -> str:
    text = result_text(res)
    m = SAVED_RE.search(text)
    if m:
        return Path(m.group(1)).read_text()
    return text


def bench_tree(a, srv, notes: list[str]) -> dict[str, Any]:
    tree = Path(a.tree)
    root = str(tree)
    out: dict[str, Any] = {"entries": None}
    # fd, for the floor and the reference answers.
    scratch = Path(a.work) / "tree-fd"
    scratch.mkdir(parents=True, exist_ok=True)
    fd_list = best_fd(a, ["--no-ignore", "--hidden", "."], root, scratch)
    fd_search = best_fd(a, ["--no-ignore", "--hidden", "-t", "f", r"\.rare$"], root, scratch)
    all_set = {l.rstrip("/") for l in fd_list.pop("output").decode().splitlines()}
    rare_set = {l for l in fd_search.pop("output").decode().splitlines()}
    out["entries"] = len(all_set)
    out["fd"] = {
        "list_ms": fd_list["ms"],
        "search_ms": fd_search["ms"],
        "list_rss_mib": fd_list["rss_mib"],
        "search_rss_mib": fd_search["rss_mib"],
        "list_detail": fd_list,
        "search_detail": fd_search,
        "list_cmd": f"{FD} --no-ignore --hidden . (best of default threads and -j1: {fd_list['best']})",
        "search_cmd": f"{FD} --no-ignore --hidden -t f '\\.rare$' (best of default threads and -j1: {fd_search['best']})",
    }
    # ringfence.
    with srv.spawn("ringfence", root) as rf:
        rf.initialize()
        s_t, l_t = [], []
        s_res: dict[str, Any] = {}
        l_res: dict[str, Any] = {}
        for i in range(a.warmup + a.runs):
            t, s_res = rf.call("search_entries", {"name_pattern": r"\.rare$", "type": "file",
                                                  "max_results": 5000})
            if i >= a.warmup:
                s_t.append(t)
            t, l_res = rf.call("list_directory", {"path": ".", "recursive": True})
            if i >= a.warmup:
                l_t.append(t)
        rss = rf.status()["VmHWM"]
    s_lines = {l.split("  (")[0] for l in saved_or_text(s_res).splitlines() if l and not l.startswith("(")}
    l_lines = {l.rstrip("/") for l in saved_or_text(l_res).splitlines() if l}
    out["ringfence"] = {
        "search_ms": 1000 * sorted(s_t)[len(s_t) // 2],
        "list_ms": 1000 * sorted(l_t)[len(l_t) // 2],
        "search_all_ms": [round(1000 * x, 1) for x in s_t],
        "list_all_ms": [round(1000 * x, 1) for x in l_t],
        "peak_rss_mib": round(rss / 1024, 1),
        "search_agrees": s_lines == rare_set,
        "list_agrees": l_lines == all_set,
        "search_found": len(s_lines),
        "list_found": len(l_lines),
    }
    if not out["ringfence"]["search_agrees"]:
        notes.append(f"tree search: ringfence found {len(s_lines)}, fd {len(rare_set)}; "
                     f"e.g. only ringfence {sorted(s_lines - rare_set)[:3]}, only fd {sorted(rare_set - s_lines)[:3]}")
    if not out["ringfence"]["list_agrees"]:
        notes.append(f"tree list: ringfence listed {len(l_lines)}, fd {len(all_set)}; "
                     f"e.g. only ringfence {sorted(l_lines - all_set)[:3]}, only fd {sorted(all_set - l_lines)[:3]}")
    log = getattr(a, "_log", print)
    log(f"tree: fd list {out['fd']['list_ms']:.0f} ms, search {out['fd']['search_ms']:.0f} ms; "
        f"ringfence list {out['ringfence']['list_ms']:.0f} ms, search {out['ringfence']['search_ms']:.0f} ms, "
        f"RSS {out['ringfence']['peak_rss_mib']} MiB")
    # The official server: one timed call each (they are slow), with a timeout.
    if a.official_js:
        off: dict[str, Any] = {}
        for label, tool, args in (
            ("search", "search_files", {"path": root, "pattern": "**/*.rare"}),
            ("list", "directory_tree", {"path": root}),
        ):
            with srv.spawn("official", root) as c:
                c.initialize()
                t, res, err = call_with_timeout(c, tool, args, PEER_TIMEOUT_S)
                try:
                    rss = c.status()["VmHWM"]
                except OSError:
                    rss = 0
            entry: dict[str, Any] = {"tool": tool, "args": {k: v for k, v in args.items() if k != "path"}}
            if err:
                entry["error"] = err
                notes.append(f"official {tool} on the 1,000,000-entry tree: {err}")
            else:
                entry["ms"] = 1000 * t
                text = result_text(res)
                entry["is_error"] = bool(res.get("isError"))
                entry["result_bytes"] = len(text.encode())
                if label == "search":
                    found = {str(Path(l).relative_to(root)) if l.startswith(root) else l
                             for l in text.splitlines() if l.strip()}
                    entry["found"] = len(found)
                    entry["agrees"] = found == rare_set
            entry["peak_rss_mib"] = round(rss / 1024, 1)
            off[label] = entry
            log(f"tree official {tool}: {entry.get('ms', 'n/a')} ms, RSS {entry['peak_rss_mib']} MiB {entry.get('error', '')}")
        out["official"] = off
    return out


def tree_markdown(t: dict[str, Any]) -> list[str]:
    L = ["### A tree of 1,000,000 entries: search_entries and list_directory\n"]
    L.append(f"Tree: {t['entries']:,} entries (1,010 directories, 999,000 empty files, 999 named "
             "`*.rare`). Search: files whose name matches `\\.rare$` (all 999 returned); list: "
             "every entry, recursively. Median of the timed runs; fd writes to a file and is "
             "timed at its best of its default thread count and `-j1`; peak RSS is VmHWM "
             "(GNU time's maximum RSS for fd). ringfence shows 1,000 listing lines and saves the "
             "full listing to a file (read back to check it against fd). The official server "
             "is called once per case (minutes per call).\n")
    L.append("| case | fd ms | ringfence ms | ratio vs fd | ringfence peak RSS | fd peak RSS | official server | results agree |")
    L.append("|---|---:|---:|---:|---:|---:|---|---|")
    fd, rf, off = t["fd"], t["ringfence"], t.get("official", {})

    def offcell(x: dict[str, Any] | None) -> str:
        if not x:
            return "not run"
        if "error" in x:
            return f"{x['tool']}: {x['error']} (RSS {x['peak_rss_mib']} MiB)"
        return f"{x['tool']}: {x['ms']:,.0f} ms, RSS {x['peak_rss_mib']} MiB"

    L.append(f"| search `\\.rare$` | {fd['search_ms']:.0f} | {rf['search_ms']:.0f} | "
             f"**{rf['search_ms'] / fd['search_ms']:.2f}×** | {rf['peak_rss_mib']} MiB | "
             f"{fd['search_rss_mib']} MiB | {offcell(off.get('search'))} | "
             f"{'yes' if rf['search_agrees'] else 'NO'} ({rf['search_found']:,}) |")
    L.append(f"| list recursively | {fd['list_ms']:.0f} | {rf['list_ms']:.0f} | "
             f"**{rf['list_ms'] / fd['list_ms']:.2f}×** | {rf['peak_rss_mib']} MiB | "
             f"{fd['list_rss_mib']} MiB | {offcell(off.get('list'))} | "
             f"{'yes' if rf['list_agrees'] else 'NO'} ({rf['list_found']:,}) |")
    L.append("")
    return L


def tree_targets(t: dict[str, Any]) -> list[dict[str, Any]]:
    fd, rf = t["fd"], t["ringfence"]
    return [
        {"target": "search_entries on 1,000,000 entries ≤ 1.5× fd",
         "measured": f"{rf['search_ms'] / fd['search_ms']:.2f}×",
         "met": rf["search_ms"] <= 1.5 * fd["search_ms"]},
        {"target": "list_directory recursive on 1,000,000 entries ≤ 1.5× fd",
         "measured": f"{rf['list_ms'] / fd['list_ms']:.2f}×",
         "met": rf["list_ms"] <= 1.5 * fd["list_ms"]},
        {"target": "bounded memory on the 1,000,000-entry tree (peak RSS < 64 MiB)",
         "measured": f"{rf['peak_rss_mib']} MiB", "met": rf["peak_rss_mib"] < 64},
    ]
