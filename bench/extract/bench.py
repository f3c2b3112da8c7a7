"""Extraction quality and speed: ringfence's extractor, Rust candidates and Python peers.

Run by bench/extract/run.sh, which builds the binaries, makes the venv and fetches the held-out
pages. Usage:

    bench.py --ours BIN --candidates BIN --dev DIR --heldout-pages DIR --out FILE.md [--json FILE]

Every extractor gets the same pages, decoded the same way (UTF-8, invalid bytes replaced), and
is timed around the extraction call only (file reading and scoring excluded). The Rust
extractors run as child processes that time themselves (see examples/extract_pages.rs and
candidates/src/main.rs); the Python peers are called in this process.
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
import time
from collections import Counter
from pathlib import Path

import score

HERE = Path(__file__).resolve().parent
DEV_URL = "http://fakehost/test/page.html"  # the base URL of Readability.js's test pages

RUST = [
    # (name in the report, binary key, candidate argument)
    ("ringfence", "ours", None),
    ("dom_smoothie", "cand", "dom_smoothie"),
    ("rs-trafilatura", "cand", "rs_trafilatura"),
    ("readability 0.3", "cand", "readability"),
]
PY = ["mcp-server-fetch", "trafilatura"]


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
    if name == "mcp-server-fetch":
        from mcp_server_fetch.server import extract_content_from_html

        def f(html: str, url: str) -> dict:
            md = extract_content_from_html(html)
            if md.startswith("<error>"):
                return {"text": "", "markdown": md, "error": md}
            return {"text": score.markdown_text(md), "markdown": md}

        return f
    if name == "trafilatura":
        import trafilatura

        def f(html: str, url: str) -> dict:
            txt = trafilatura.extract(html, url=url) or ""
            return {"text": txt}

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


def readabilipy_mode() -> str:
    from readabilipy.simple_json import have_node

    return "Readability.js under Node (readabilipy's JS mode)" if have_node() else "readabilipy's pure-Python mode (no Node)"


def dev_pages(root: Path) -> tuple[list[tuple[str, Path, str]], dict[str, Counter]]:
    pages, refs = [], {}
    for d in sorted(p for p in root.iterdir() if (p / "source.html").is_file()):
        pages.append((d.name, d / "source.html", DEV_URL))
        refs[d.name] = score.shingles(score.html_text(read_html(d / "expected.html")))
    return pages, refs


def heldout_pages(root: Path) -> tuple[list[tuple[str, Path, str]], dict[str, Counter], list[str]]:
    labels = json.loads((HERE / "heldout" / "labels.json").read_text())
    pages, refs, problems = [], {}, []
    for lab in labels["pages"]:
        path = root / lab["file"]
        if not path.is_file():
            problems.append(f"{lab['id']}: {path} missing")
            continue
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest != lab["sha256"]:
            problems.append(f"{lab['id']}: sha256 {digest} differs from the label's")
            continue
        pages.append((lab["id"], path, lab["url"]))
        refs[lab["id"]] = Counter(lab["shingles"])
    return pages, refs, problems


def without_title(text: str, title: str | None) -> str:
    """The text less a first line that is the extractor's own title (dev set only: Readability's
    expected.html holds the article body without the page title)."""
    first, _, rest = text.lstrip().partition("\n")
    if title and first.strip() == title.strip():
        return rest
    return text


def evaluate(results: dict[str, dict], refs: dict[str, Counter], hashed: bool) -> dict[str, dict]:
    per = {}
    for pid, ref in refs.items():
        r = results.get(pid, {"text": "", "ms": 0.0})
        text = r.get("text") or ""
        ext = score.shingles(text if hashed else without_title(text, r.get("title")))
        if hashed:
            ext = score.hashed(ext)
        p, rc, f = score.prf(ext, ref)
        per[pid] = {"p": p, "r": rc, "f1": f, "ms": r.get("ms", 0.0), "error": r.get("error")}
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


def run_set(name, pages, refs, hashed, bins, only) -> dict:
    out = {}
    for label, key, arg in RUST:
        if only and label not in only:
            continue
        print(f"[{name}] {label} ...", file=sys.stderr, flush=True)
        out[label] = evaluate(run_rust(bins[key], arg, pages), refs, hashed)
    for label in PY:
        if only and label not in only:
            continue
        print(f"[{name}] {label} ...", file=sys.stderr, flush=True)
        out[label] = evaluate(run_py(label, pages), refs, hashed)
    return out


def table(sets: dict[str, dict]) -> list[str]:
    base = sets.get("ringfence")
    base_ms = summary(base)["ms_mean"] if base else None
    lines = [
        "| extractor | F1 mean | F1 median | precision | recall | pages F1 < 0.8 | failures | ms/page mean | median | vs ringfence |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, per in sets.items():
        s = summary(per)
        ratio = f"{s['ms_mean'] / base_ms:.1f}×" if base_ms else ""
        lines.append(
            f"| {label} | {s['f1_mean']:.3f} | {s['f1_median']:.3f} | {s['p_mean']:.3f} | {s['r_mean']:.3f} "
            f"| {s['f1_below_0_8']} | {s['failures']} | {s['ms_mean']:.1f} | {s['ms_median']:.1f} | {ratio} |"
        )
    return lines


def per_page(sets: dict[str, dict]) -> list[str]:
    names = list(sets)
    lines = ["| page | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    for pid in sorted(next(iter(sets.values()))):
        lines.append(f"| {pid} | " + " | ".join(f"{sets[n][pid]['f1']:.3f}" for n in names) + " |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", required=True)
    ap.add_argument("--candidates", required=True)
    ap.add_argument("--dev", type=Path, required=True)
    ap.add_argument("--heldout-pages", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--only", default="", help="comma-separated extractor names")
    ap.add_argument("--sets", default="dev,heldout")
    args = ap.parse_args()
    only = {s for s in args.only.split(",") if s}
    bins = {"ours": args.ours, "cand": args.candidates}
    sets = set(args.sets.split(","))

    report = {}
    if "dev" in sets:
        pages, refs = dev_pages(args.dev)
        report["dev"] = run_set("dev", pages, refs, False, bins, only)
    problems: list[str] = []
    if "heldout" in sets and args.heldout_pages:
        pages, refs, problems = heldout_pages(args.heldout_pages)
        report["heldout"] = run_set("heldout", pages, refs, True, bins, only)

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=HERE).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--", str(HERE.parent.parent / "crates/ringfence-web")], capture_output=True, text=True, cwd=HERE).stdout.strip()
    md = [
        "# Web page extraction quality (`bash bench/extract/run.sh`)",
        "",
        f"- date: {datetime.date.today().isoformat()}, commit `{commit}`{' (extractor sources modified)' if dirty else ''}",
        f"- machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; Rust extractors in release builds",
        f"- mcp-server-fetch ran in {readabilipy_mode()}",
        "- metric: 4-gram shingle F1 of the extracted text against the reference text (bench/extract/score.py)",
        "",
    ]
    if "dev" in report:
        md += ["## Development set: Readability.js test pages (reference: text of expected.html)", ""]
        md += table(report["dev"]) + [""]
    if "heldout" in report:
        n = len(next(iter(report["heldout"].values()))) if report["heldout"] else 0
        md += [f"## Held-out set: {n} pages labelled by hand (bench/extract/README.md)", ""]
        if problems:
            md += ["Pages not scored: " + "; ".join(problems), ""]
        md += table(report["heldout"]) + [""]
    for name, s in report.items():
        md += [f"### Per page, {name}", ""] + per_page(s) + [""]
    args.out.write_text("\n".join(md))
    if args.json:
        args.json.write_text(json.dumps({k: {n: {"summary": summary(v), "pages": v} for n, v in s.items()} for k, s in report.items()}, indent=1))
    print("\n".join(md[: md.index("### Per page, dev") if "### Per page, dev" in md else len(md)]))


if __name__ == "__main__":
    main()
