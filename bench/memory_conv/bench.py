#!/usr/bin/env python3
"""Memory retrieval on long conversations nobody here wrote (LoCoMo, see data.py), through MCP
over stdio exactly as an assistant uses it, beside BM25 on the same facts, in one run.

For each conversation, each system gets a fresh data directory. Every observation is stored
with `store_memory` (memoryType "fact"), in the order of the sessions; then every question is
asked with `search_memory(limit: 10)`. A question counts as found at k when one of the facts
drawn from its evidence turns is among the first k results ("any"), or when every evidence
turn that has a fact is ("all"). A fact refused as a duplicate of an earlier one is credited
to the row it duplicates.

    python3 bench/memory_conv/bench.py OUT_JSON NAME=RINGFENCE_BIN [NAME=RINGFENCE_BIN ...]

Each NAME=BIN is a ringfence binary (the model comes from RINGFENCE_MODEL_DIR). BM25
(k1 1.2, b 0.75, lower-cased words without the engine's stopwords, no stemming) is always run.
PARTS=dev limits the run to the development conversations.

Each binary runs twice. "told": each fact stored by `store_memory` as above, so every fact
carries the time of the run. "dated": each fact carries the date of the session it was said
in, as it would had the assistant stored it then; the facts go in through
`ringfence memory import` (the same rows, with their times), the questions through MCP.
LoCoMo's questions name dates ("What did Maria do on 3 June, 2023?"), and only the dated
run lets a system use them.
"""
from __future__ import annotations

import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
from data import locomo  # noqa: E402
from mcp import McpClient, result_text  # noqa: E402

STOP = set("""a about all also an and any are as at be been but by can could did do does for from
had has have he her him his how i if in into is it its know me my of on or our she so than that the
their them they this to user user's users was we were what when where which who whom why will with
would you your""".split())
K = 10


def words(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z0-9']+", text.lower()) if w.strip("'") and w not in STOP]


class Bm25:
    def __init__(self, docs: list[str], k1: float = 1.2, b: float = 0.75):
        self.docs = [Counter(words(d)) for d in docs]
        self.lens = [sum(d.values()) for d in self.docs]
        self.avg = statistics.fmean(self.lens) if self.lens else 0.0
        df: Counter = Counter()
        for d in self.docs:
            df.update(d.keys())
        n = len(docs)
        self.idf = {w: math.log(1 + (n - f + 0.5) / (f + 0.5)) for w, f in df.items()}
        self.k1, self.b = k1, b

    def top(self, query: str, k: int) -> list[int]:
        q = set(words(query))
        scores = []
        for i, (d, n) in enumerate(zip(self.docs, self.lens)):
            s = 0.0
            for w in q:
                tf = d.get(w, 0)
                if tf:
                    s += self.idf[w] * tf * (self.k1 + 1) / (tf + self.k1 * (1 - self.b + self.b * n / self.avg))
            if s > 0:
                scores.append((s, -i))
        scores.sort(reverse=True)
        return [-i for _, i in scores[:k]]


def pct(xs: list[float], p: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, round((len(xs) - 1) * p))] * 1000, 2)


def run_bm25(conv: dict) -> tuple[list[list[set[str]]], list[float], list[float]]:
    index = Bm25([o["text"] for o in conv["observations"]])
    got = []
    for q in conv["questions"]:
        got.append([set(conv["observations"][i]["turns"]) for i in index.top(q["question"], K)])
    return got, [], []


def session_time(text: str) -> str:
    """LoCoMo's "1:56 pm on 8 May, 2023" as ISO 8601 (UTC)."""
    t = datetime.strptime(text.replace(",", ""), "%I:%M %p on %d %B %Y")
    return t.replace(tzinfo=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def run_ringfence(binary: str, conv: dict, tmp: Path, dated: bool) -> tuple[list[list[set[str]]], list[float], list[float]]:
    data = tmp / "data"
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp), "XDG_CONFIG_HOME": str(tmp / "xdg"),
           "RINGFENCE_MODEL_DIR": os.environ["RINGFENCE_MODEL_DIR"], "RINGFENCE_LOG": "warn"}
    if os.environ.get("RINGFENCE_CONFIG"):  # to try other ranking settings on the development part
        env["RINGFENCE_CONFIG"] = os.environ["RINGFENCE_CONFIG"]
    turns_of: dict[int, set[str]] = {}
    stores, searches, got = [], [], []
    if dated:
        # Numbered in order as store_memory would; a text stored already is skipped.
        lines = tmp / "facts.jsonl"
        lines.write_text("".join(json.dumps({"kind": "memory", "content": o["text"], "memoryType": "fact",
                                             "created": session_time(o["date"])}) + "\n"
                                 for o in conv["observations"]))
        subprocess.run([binary, "--data-dir", str(data), "memory", "import", str(lines), "--user", "local"],
                       env=env, check=True, stdout=subprocess.DEVNULL, stderr=open(tmp / "log", "ab"))
        exported = subprocess.run([binary, "--data-dir", str(data), "memory", "export", "--user", "local",
                                   "--no-embeddings"], env=env, check=True, capture_output=True, text=True).stdout
        row_of = {json.loads(line)["content"]: json.loads(line)["id"] for line in exported.splitlines() if line}
        first_of: dict[str, str] = {}
        for o in conv["observations"]:
            # A text given twice is stored once, under the first's row.
            text = first_of.setdefault(o["text"].strip().lower(), o["text"])
            turns_of.setdefault(row_of[text], set()).update(o["turns"])
    with McpClient([binary, "--data-dir", str(data), "serve"], env=env, stderr_path=str(tmp / "log")) as c:
        c.initialize()
        for o in ([] if dated else conv["observations"]):
            dt, res = c.call("store_memory", {"memoryContent": o["text"], "memoryType": "fact"})
            sc = res.get("structuredContent") or {}
            row = sc.get("id") if sc.get("stored") else sc.get("duplicateOf")
            if row is None:
                raise SystemExit(f"store_memory gave no id: {result_text(res)[:300]}")
            if sc.get("stored"):
                stores.append(dt)
            turns_of.setdefault(row, set()).update(o["turns"])
        for q in conv["questions"]:
            dt, res = c.call("search_memory", {"searchQuery": q["question"], "limit": K})
            searches.append(dt)
            got.append([turns_of.get(r["id"], set()) for r in res["structuredContent"]["results"]])
    return got, stores, searches


def score(questions: list[dict], got: list[list[set[str]]]) -> dict:
    rows: dict[str, list] = {}
    for q, hits in zip(questions, got):
        ev = set(q["evidence"])
        reach = [ev & h for h in hits]
        line = {
            "any5": any(reach[:5]),
            "any10": any(reach),
            "all5": bool(ev) and set().union(*reach[:5], set()) >= ev,
        }
        for key in ("all", q["kind"]) + (("answerable",) if q["answerable"] else ()):
            rows.setdefault(key, []).append(line)
    return {k: {"n": len(v), **{m: round(sum(x[m] for x in v) / len(v), 3) for m in ("any5", "any10", "all5")}}
            for k, v in rows.items()}


def main() -> None:
    out_path = Path(sys.argv[1])
    systems = [("BM25", None, False)]
    for a in sys.argv[2:]:
        name, binary = a.split("=", 1)
        systems += [(f"{name}, told", binary, False), (f"{name}, dated", binary, True)]
    parts = set(os.environ.get("PARTS", "dev,eval").split(","))
    convs = [c for c in locomo() if c["part"] in parts]
    results: dict = {"conversations": {c["id"]: c["part"] for c in convs}, "systems": {}}
    for name, binary, dated in systems:
        per_part: dict[str, dict] = {}
        t0 = time.perf_counter()
        for conv in convs:
            with tempfile.TemporaryDirectory(prefix="rf-memconv-") as tmp:
                got, stores, searches = run_bm25(conv) if binary is None else run_ringfence(binary, conv, Path(tmp), dated)
            p = per_part.setdefault(conv["part"], {"questions": [], "got": [], "stores": [], "searches": []})
            p["questions"] += conv["questions"]
            p["got"] += got
            p["stores"] += stores
            p["searches"] += searches
        results["systems"][name] = {
            part: {"scores": score(p["questions"], p["got"]),
                   "store_p50_ms": pct(p["stores"], 0.5), "search_p50_ms": pct(p["searches"], 0.5),
                   "search_p95_ms": pct(p["searches"], 0.95)}
            for part, p in per_part.items()}
        print(f"{name}: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    out_path.write_text(json.dumps(results, indent=1) + "\n")
    print(table(results))


def table(results: dict) -> str:
    lines = []
    kinds = ["single-hop", "multi-hop", "temporal", "open-domain"]
    for part in ("dev", "eval"):
        rows = [(n, s[part]) for n, s in results["systems"].items() if part in s]
        if not rows:
            continue
        n = rows[0][1]["scores"]["all"]["n"]
        lines += [f"\n{part} ({n} questions)\n",
                  "| | any@5 | all@5 | any@10 | " + " | ".join(kinds) + " | answerable any@5 | search p50 | store p50 |",
                  "|---" + "|---:" * (6 + len(kinds)) + "|"]
        for name, r in rows:
            s = r["scores"]
            cells = [f"{s['all']['any5']:.3f}", f"{s['all']['all5']:.3f}", f"{s['all']['any10']:.3f}"]
            cells += [f"{s[k]['any5']:.2f}" if k in s else "–" for k in kinds]
            cells += [f"{s['answerable']['any5']:.3f}"]
            cells += [f"{r['search_p50_ms']} ms" if r["search_p50_ms"] is not None else "–",
                      f"{r['store_p50_ms']} ms" if r["store_p50_ms"] is not None else "–"]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
