"""Extraction quality and speed: ringfence's web_fetch and extractor beside trafilatura and
mcp-server-fetch, on Readability.js's pages and on the development and evaluation parts of the
labelled set (sets.py).

Run by bench/extract/run.sh, which builds the binaries, makes the venv, fetches the pages and
builds the set. Usage:

    bench.py --ours EXTRACT_PAGES --server RINGFENCE --readability DIR --sets-json FILE --out FILE.md
             [--json FILE] [--sets readability,dev,eval] [--only NAME,...] [--candidates BIN]

Every extractor gets the same page: the file decoded as UTF-8, invalid bytes replaced. The
library rows (ringfence's `extract`, trafilatura, the Rust candidates) are timed around the
extraction call alone; the MCP rows (ringfence's web_fetch in both formats, mcp-server-fetch)
start the real server over stdio, serve each page on loopback, call the fetch tool, and time the
whole call, as a client sees it.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import http.server
import asyncio
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

import score

HERE = Path(__file__).resolve().parent
DEV_URL = "http://fakehost/test/page.html"  # the base URL of Readability.js's test pages

RUST = [
    # (name in the report, binary key, candidate argument)
    ("ringfence (library)", "ours", None),
    ("dom_smoothie", "cand", "dom_smoothie"),
    ("rs-trafilatura", "cand", "rs_trafilatura"),
    ("readability 0.3", "cand", "readability"),
]
PY = ["trafilatura", "mcp-server-fetch (library)"]
# Through the MCP server, fetched from loopback: what a client receives.
MCP = ["ringfence web_fetch markdown", "ringfence web_fetch text", "mcp-server-fetch"]
# What runs unless --only says otherwise: the Rust candidates were compared when the extractor
# was chosen (BENCHMARKS.md) and are there on request.
DEFAULT = {"ringfence (library)", "trafilatura", *MCP}
# Readability.js's pages hold the body without the title, so they are scored on the libraries'
# output with each one's own title line dropped (a tool's header would count against it).
READABILITY_DEFAULT = {"ringfence (library)", "trafilatura", "mcp-server-fetch (library)"}


def read_html(path: Path) -> str:
    return path.read_bytes().decode("utf-8", errors="replace")


def run_rust(binary: str, arg: str | None, pages: list[tuple[str, Path, str]]) -> dict[str, dict]:
    cmd = [binary] + ([arg] if arg else [])
    stdin = "".join(f"{pid}\t{path}\t{url}\n" for pid, path, url in pages)
    proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, check=False)
    out = {}
    for line in proc.stdout.splitlines():
        v = json.loads(line)
        out[v["id"]] = v
    for pid, _, _ in pages:  # a crash mid-run counts as failure on the pages left
        out.setdefault(pid, {"id": pid, "ms": 0.0, "text": "", "error": f"exit {proc.returncode}: {proc.stderr[-300:]}"})
    return out


def py_peer(name: str):
    if name == "trafilatura":
        import trafilatura

        def f(html: str, url: str) -> dict:
            txt = trafilatura.extract(html, url=url) or ""
            return {"text": txt}

        return f
    if name == "mcp-server-fetch (library)":
        from mcp_server_fetch.server import extract_content_from_html

        def f(html: str, url: str) -> dict:
            md = extract_content_from_html(html)
            if md.startswith("<error>"):
                return {"text": "", "error": md}
            return {"text": score.markdown_text(md)}

        return f
    raise ValueError(name)


def run_py(name: str, pages: list[tuple[str, Path, str]]) -> dict[str, dict]:
    f = py_peer(name)
    out = {}
    for pid, path, url in pages:
        html = read_html(path)
        t = time.perf_counter()
        try:
            r = f(html, url)
        except Exception as e:  # noqa: BLE001 - a peer's failure on a page is a result
            r = {"text": "", "error": repr(e)[:300]}
        r["ms"] = (time.perf_counter() - t) * 1e3
        out[pid] = r
    return out


@contextmanager
def page_server(pages: list[tuple[str, Path, str]]):
    """Serves every page on loopback at /p/N as `text/html; charset=utf-8` (the bytes every
    extractor gets: the file decoded as UTF-8 with invalid bytes replaced); yields pid -> URL."""
    bodies = {f"/p/{i}": read_html(path).encode("utf-8") for i, (_, path, _) in enumerate(pages)}

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # noqa: N802
            body = bodies.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *args) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{httpd.server_address[1]}"
        yield {pid: f"{base}/p/{i}" for i, (pid, _, _) in enumerate(pages)}
    finally:
        httpd.shutdown()


def without_header(text: str) -> str:
    """web_fetch's answer less its header lines and the blank line after them."""
    head, sep, rest = text.partition("\n\n")
    fields = ("Title: ", "URL: ", "Content-Type: ", "Note: ")
    if sep and all(line.startswith(fields) for line in head.splitlines()):
        return rest
    return text


def mcp_server(name: str, ringfence_bin: str | None, tmp: Path):
    """How to start each MCP server, its tool, the tool's arguments for a URL, and how to take
    the header off its answer (to measure what the header costs)."""
    if name.startswith("ringfence"):
        fmt = "text" if name.endswith("text") else "markdown"
        (tmp / "ws").mkdir(exist_ok=True)
        params = StdioServerParameters(
            command=ringfence_bin,
            args=["--data-dir", str(tmp / "data"), "--tools", "web", "serve", str(tmp / "ws")],
            env={"PATH": os.environ.get("PATH", ""), "XDG_CONFIG_HOME": str(tmp / "cfg"),
                 "XDG_DATA_HOME": str(tmp / "xdg"), "RINGFENCE_WEB_ALLOW_PRIVATE": "127.0.0.1"},
            cwd=str(tmp),
        )
        # web_fetch's answer: header lines (`Title:`, `URL:`, `Content-Type:`, `Note:`), when
        # there are any, then a blank line and the page.
        return params, "web_fetch", (lambda url: {"url": url, "format": fmt, "max_length": 1_000_000}), without_header
    if name == "mcp-server-fetch":
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "mcp_server_fetch", "--ignore-robots-txt", "--allow-private-ips"],
            env={"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "")},
        )
        # Its answer: `Contents of URL:` and the page.
        return params, "fetch", (lambda url: {"url": url, "max_length": 999_999}), (
            lambda text: text.split(":\n", 1)[1] if text.startswith("Contents of ") else text)
    raise ValueError(name)


async def _mcp_calls(params, tool, args_of, unheader, urls: dict[str, str], errlog) -> dict[str, dict]:
    out = {}
    async with stdio_client(params, errlog=errlog) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            for pid, url in urls.items():
                t = time.perf_counter()
                try:
                    res = await asyncio.wait_for(session.call_tool(tool, args_of(url)), 300)
                    text = "".join(c.text for c in res.content if c.type == "text")
                    err = text[:300] if res.is_error else None
                except Exception as e:  # noqa: BLE001 - a failure on a page is a result
                    text, err = "", repr(e)[:300]
                ms = (time.perf_counter() - t) * 1e3
                if err:
                    out[pid] = {"text": "", "body": "", "ms": ms, "error": err}
                    continue
                out[pid] = {"text": score.markdown_text(text), "body": score.markdown_text(unheader(text)), "ms": ms}
    return out


def run_mcp(name: str, pages: list[tuple[str, Path, str]], ringfence_bin: str | None) -> dict[str, dict]:
    """Each page through the MCP server's fetch tool, over stdio, from the loopback server: the
    answer exactly as a client receives it (Markdown link targets dropped before scoring)."""
    with tempfile.TemporaryDirectory(prefix="rf-extract-") as tmp, page_server(pages) as urls:
        params, tool, args_of, unheader = mcp_server(name, ringfence_bin, Path(tmp))
        with open(Path(tmp) / "server.log", "w") as errlog:
            return asyncio.run(_mcp_calls(params, tool, args_of, unheader, urls, errlog))


def readabilipy_mode() -> str:
    from readabilipy.simple_json import have_node

    return "Readability.js under Node (readabilipy's JS mode)" if have_node() else "readabilipy's pure-Python mode (no Node)"


def readability_pages(root: Path) -> tuple[list[tuple[str, Path, str]], dict[str, Counter]]:
    """Readability.js's test pages; the reference is the text of expected.html, as hashes."""
    pages, refs = [], {}
    for d in sorted(p for p in root.iterdir() if (p / "source.html").is_file()):
        pages.append((d.name, d / "source.html", DEV_URL))
        refs[d.name] = score.hashed(score.shingles(score.html_text(read_html(d / "expected.html"))))
    return pages, refs


def labelled_pages(sets: dict, part: str) -> tuple[list, dict, dict, list[str]]:
    """The full-label pages of one part (sets.py): pages, reference hashes, and page -> (source,
    site); a page whose bytes changed since its label was made is left out and named."""
    pages, refs, meta, problems = [], {}, {}, []
    for p in sets["pages"]:
        if p["part"] != part or p["kind"] != "full":
            continue
        path = Path(p["html"])
        if not path.is_file() or ("sha256" in p and hashlib.sha256(path.read_bytes()).hexdigest() != p["sha256"]):
            problems.append(f"{p['id']}: missing or changed")
            continue
        pages.append((p["id"], path, p["url"]))
        refs[p["id"]] = Counter(p["ref"])
        meta[p["id"]] = (p["source"], p["site"])
    return pages, refs, meta, problems


def snippet_pages(sets: dict, part: str) -> tuple[list, dict]:
    pages, snips = [], {}
    for p in sets["pages"]:
        if p["part"] == part and p["kind"] == "snippets":
            pages.append((p["id"], Path(p["html"]), p["url"]))
            snips[p["id"]] = (p["with"], p["without"])
    return pages, snips


def without_title(text: str, title: str | None) -> str:
    """The text less a first line that is the extractor's own title (Readability's pages only:
    their expected.html holds the article body without the page title)."""
    first, _, rest = text.lstrip().partition("\n")
    if title and first.strip() == title.strip():
        return rest
    return text


def evaluate(results: dict[str, dict], refs: dict[str, Counter], key: str = "text", drop_title: bool = False) -> dict[str, dict]:
    per = {}
    for pid, ref in refs.items():
        r = results.get(pid, {"text": "", "ms": 0.0})
        text = r.get(key) or ""
        if drop_title:
            text = without_title(text, r.get("title"))
        p, rc, f = score.prf(score.hashed(score.shingles(text)), ref)
        per[pid] = {"p": p, "r": rc, "f1": f, "ms": r.get("ms", 0.0), "error": r.get("error")}
    return per


def norm(text: str) -> str:
    return " " + " ".join(score.tokens(text)) + " "


def evaluate_snippets(results: dict[str, dict], snips: dict[str, tuple[list, list]]) -> dict[str, dict]:
    """Per page: the share of the "with" snippets found in the output (all their tokens, in
    order) and the share of the "without" snippets not found."""
    per = {}
    for pid, (with_, without) in snips.items():
        r = results.get(pid, {"text": "", "ms": 0.0})
        out = norm(r.get("text") or "")
        found = [norm(s) in out for s in with_ if score.tokens(s)]
        absent = [norm(s) not in out for s in without if score.tokens(s)]
        per[pid] = {"with": sum(found) / len(found) if found else 1.0,
                    "without": sum(absent) / len(absent) if absent else 1.0,
                    "ms": r.get("ms", 0.0), "error": r.get("error")}
    return per


def summary(per: dict[str, dict]) -> dict:
    f1 = [v["f1"] for v in per.values()]
    ms = [v["ms"] for v in per.values()]
    return {
        "n": len(f1),
        "f1_mean": statistics.fmean(f1) if f1 else 0.0,
        "f1_median": statistics.median(f1) if f1 else 0.0,
        "p_mean": statistics.fmean(v["p"] for v in per.values()) if f1 else 0.0,
        "r_mean": statistics.fmean(v["r"] for v in per.values()) if f1 else 0.0,
        "f1_below_0_8": sum(1 for x in f1 if x < 0.8),
        "failures": sum(1 for v in per.values() if v["error"]),
        "ms_mean": statistics.fmean(ms) if ms else 0.0,
        "ms_median": statistics.median(ms) if ms else 0.0,
        "ms_total": sum(ms),
    }


def run_extractor(label: str, pages, bins) -> dict[str, dict]:
    print(f"  {label} ...", file=sys.stderr, flush=True)
    for name, key, arg in RUST:
        if name == label:
            return run_rust(bins[key], arg, pages)
    if label in PY:
        return run_py(label, pages)
    return run_mcp(label, pages, bins["server"])


def extractors(only: set[str], default: set[str] = DEFAULT) -> list[str]:
    names = [n for n, _, _ in RUST] + PY + MCP
    return [n for n in names if n in (only or default)]


def full_set(pages, refs, bins, only, drop_title=False) -> dict[str, dict]:
    out = {}
    for label in extractors(only, READABILITY_DEFAULT if drop_title else DEFAULT):
        res = run_extractor(label, pages, bins)
        out[label] = evaluate(res, refs, drop_title=drop_title)
        if label in MCP:
            out[f"{label}, header removed"] = evaluate(res, refs, key="body")
    return out


def snippet_set(pages, snips, bins, only) -> dict[str, dict]:
    return {label: evaluate_snippets(run_extractor(label, pages, bins), snips) for label in extractors(only)}


def table(sets: dict[str, dict]) -> list[str]:
    base = next((v for k, v in sets.items() if k == "ringfence web_fetch markdown"), None)
    base_ms = summary(base)["ms_mean"] if base else None
    lines = [
        "| extractor | F1 mean | F1 median | precision | recall | pages F1 < 0.8 | failures | ms/page mean | median | time vs ringfence web_fetch |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, per in sets.items():
        s = summary(per)
        header_row = label.endswith("header removed")
        ratio = f"{s['ms_mean'] / base_ms:.2f}×" if base_ms and not header_row else ""
        ms = ("", "") if header_row else (f"{s['ms_mean']:.1f}", f"{s['ms_median']:.1f}")
        lines.append(
            f"| {label} | {s['f1_mean']:.3f} | {s['f1_median']:.3f} | {s['p_mean']:.3f} | {s['r_mean']:.3f} "
            f"| {s['f1_below_0_8']} | {s['failures']} | {ms[0]} | {ms[1]} | {ratio} |"
        )
    return lines


def snippet_table(sets: dict[str, dict]) -> list[str]:
    lines = ["| extractor | \"with\" snippets found | \"without\" snippets absent | pages with every snippet right | ms/page mean |",
             "|---|---:|---:|---:|---:|"]
    for label, per in sets.items():
        v = list(per.values())
        ok = sum(1 for x in v if x["with"] == 1.0 and x["without"] == 1.0)
        lines.append(f"| {label} | {statistics.fmean(x['with'] for x in v):.3f} | {statistics.fmean(x['without'] for x in v):.3f} "
                     f"| {ok} of {len(v)} | {statistics.fmean(x['ms'] for x in v):.1f} |")
    return lines


def by_source(sets: dict[str, dict], meta: dict) -> list[str]:
    names = [n for n in sets if not n.endswith("header removed")]
    sources = sorted({m[0] for m in meta.values()})
    lines = ["| source | pages | sites | " + " | ".join(names) + " |", "|---|---:|---:|" + "---:|" * len(names)]
    for src in sources:
        ids = [pid for pid, m in meta.items() if m[0] == src]
        sites = len({meta[pid][1] for pid in ids})
        lines.append(f"| {src} | {len(ids)} | {sites} | " + " | ".join(
            f"{statistics.fmean(sets[n][pid]['f1'] for pid in ids):.3f}" for n in names) + " |")
    return lines


def per_page(sets: dict[str, dict], meta: dict | None = None) -> list[str]:
    names = [n for n in sets if not n.endswith("header removed")]
    main = "ringfence web_fetch markdown" if "ringfence web_fetch markdown" in sets else names[0]
    lines = ["| page | site | " + " | ".join(names) + f" | {main}: P / R |", "|---|---|" + "---:|" * (len(names) + 1)]
    for pid in sorted(sets[main], key=lambda k: sets[main][k]["f1"]):
        site = meta[pid][1] if meta else ""
        v = sets[main][pid]
        lines.append(f"| {pid} | {site} | " + " | ".join(f"{sets[n][pid]['f1']:.3f}" for n in names)
                     + f" | {v['p']:.2f} / {v['r']:.2f} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", required=True, help="the extract_pages example")
    ap.add_argument("--server", required=True, help="the ringfence binary")
    ap.add_argument("--candidates", default="")
    ap.add_argument("--readability", type=Path, required=True, help="Readability.js's test pages")
    ap.add_argument("--sets-json", type=Path, required=True, help="sets.py's output")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--only", default="", help="comma-separated extractor names")
    ap.add_argument("--sets", default="readability,dev,eval")
    args = ap.parse_args()
    only = {s for s in args.only.split(",") if s}
    bins = {"ours": args.ours, "cand": args.candidates, "server": str(Path(args.server).resolve())}
    chosen = args.sets.split(",")
    labelled = json.loads(args.sets_json.read_text())

    report, snippets, metas, problems = {}, {}, {}, []
    for part in chosen:
        print(f"[{part}]", file=sys.stderr, flush=True)
        if part == "readability":
            pages, refs = readability_pages(args.readability)
            report[part] = full_set(pages, refs, bins, only, drop_title=True)
            continue
        pages, refs, meta, bad = labelled_pages(labelled, part)
        problems += bad
        metas[part] = meta
        report[part] = full_set(pages, refs, bins, only)
        spages, snips = snippet_pages(labelled, part)
        if spages:
            print(f"[{part} snippets]", file=sys.stderr, flush=True)
            snippets[part] = snippet_set(spages, snips, bins, only)

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=HERE).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--", str(HERE.parent.parent / "crates/ringfence-web")], capture_output=True, text=True, cwd=HERE).stdout.strip()
    md = [
        "# Web page extraction quality (`bash bench/extract/run.sh`)",
        "",
        f"- date: {datetime.date.today().isoformat()}, commit `{commit}`{' (extractor sources modified)' if dirty else ''}",
        f"- machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; Rust in release builds",
        f"- mcp-server-fetch ran in {readabilipy_mode()}",
        "- metric: 4-gram shingle F1 of the output against the reference (bench/extract/score.py); "
        "rows named web_fetch or mcp-server-fetch are the tool's answer over MCP as a client receives it, "
        "header included, Markdown link targets dropped; their time is the whole call, loopback fetch included",
        "",
    ]
    titles = {"readability": "Readability.js's test pages (reference: text of expected.html; each output's own title line dropped)",
              "dev": "Development part", "eval": "Evaluation part (never tuned on)"}
    for part in chosen:
        n = len(next(iter(report[part].values()))) if report.get(part) else 0
        md += [f"## {titles[part]}: {n} pages", ""] + table(report[part]) + [""]
        if part in metas:
            md += ["By source:", ""] + by_source(report[part], metas[part]) + [""]
        if part in snippets:
            n = len(next(iter(snippets[part].values())))
            md += [f"Snippets ({n} trafilatura test pages, with/without strings from trafilatura's evaluation):", ""]
            md += snippet_table(snippets[part]) + [""]
    if problems:
        md += ["Pages not scored: " + "; ".join(problems), ""]
    for part in chosen:
        md += [f"### Per page, {part} (worst first)", ""] + per_page(report[part], metas.get(part)) + [""]
    args.out.write_text("\n".join(md))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({
            "full": {k: {n: {"summary": summary(v), "pages": v} for n, v in s.items()} for k, s in report.items()},
            "snippets": snippets}, indent=1))
    cut = next((i for i, line in enumerate(md) if line.startswith("### Per page")), len(md))
    print("\n".join(md[:cut]))


if __name__ == "__main__":
    main()
