#!/usr/bin/env python3
"""ringfence's memory tools beside the official MCP memory server, through MCP over stdio,
on the same data and queries, in the same run.

Both servers get the project's eval set (168 memories about one user) and the 128 queries
paraphrased so that their words differ from the stored text; then 10,000 synthetic memories
more and the same queries again. Measured: store latency per call, search latency per call,
recall@5 (the expected memory among the first five results).

The official server (npm @modelcontextprotocol/server-memory) keeps a knowledge graph of
entities with observations in a JSON-lines file and answers search_nodes by case-insensitive
substring match of the query against names, types and observations. Each memory becomes one
entity (name = its key, entityType = its memoryType, observations = [its text]); its results
come in file order, so its "top five" are the first five entities it returns.

    python3 bench/memory_peer.py RINGFENCE_BIN OFFICIAL_JS MODEL_DIR CORPUS_JSONL OUT_JSON
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from mcp import McpClient, result_text  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
EXTRA = 10_000


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, round((len(xs) - 1) * p))] * 1000, 3)


def summary(xs: list[float]) -> dict:
    return {"n": len(xs), "p50_ms": pct(xs, 0.5), "p95_ms": pct(xs, 0.95),
            "mean_ms": round(statistics.fmean(xs) * 1000, 3)}


def recall(results: list[list[str]], queries: list[dict]) -> float:
    total = 0.0
    for got, q in zip(results, queries):
        total += sum(1 for e in q["expected"] if e in got[:5]) / len(q["expected"])
    return round(total / len(queries), 3)


def run_ringfence(binary: str, model_dir: str, corpus: list[dict], evalset: dict, tmp: Path) -> dict:
    data = tmp / "rf-data"
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp), "XDG_CONFIG_HOME": str(tmp / "xdg"),
           "RINGFENCE_MODEL_DIR": model_dir, "RINGFENCE_LOG": "warn"}
    argv = [binary, "--data-dir", str(data), "serve"]
    out: dict = {}
    with McpClient(argv, env=env, stderr_path=str(tmp / "rf.log")) as c:
        c.initialize()
        key_of: dict[int, str] = {}
        stores = []
        for m in evalset["memories"]:
            dt, res = c.call("store_memory", {"memoryContent": m["content"], "memoryType": m["memoryType"],
                                              "category": m["category"], "tags": m["tags"]})
            stores.append(dt)
            sc = res.get("structuredContent", {})
            assert sc.get("stored"), result_text(res)
            key_of[sc["id"]] = m["key"]
        out["store_eval"] = summary(stores)

        def search_all() -> tuple[list[float], list[list[str]]]:
            times, got = [], []
            for q in evalset["queries"]:
                dt, res = c.call("search_memory", {"searchQuery": q["query"], "limit": 5})
                times.append(dt)
                got.append([key_of.get(r["id"], "?") for r in res["structuredContent"]["results"]])
            return times, got

        times, got = search_all()
        out["search_eval"] = summary(times)
        out["recall_at_5_eval"] = recall(got, evalset["queries"])
    # 10,000 more through the bulk import, then a fresh server (as after a restart).
    lines = tmp / "extra.jsonl"
    lines.write_text("".join(json.dumps(r) + "\n" for r in corpus[:EXTRA]))
    t0 = time.perf_counter()
    subprocess.run([binary, "--data-dir", str(data), "memory", "import", str(lines), "--user", "local"],
                   env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out["import_10k_s"] = round(time.perf_counter() - t0, 2)
    with McpClient(argv, env=env, stderr_path=str(tmp / "rf.log")) as c:
        c.initialize()
        # Ids of the eval memories are unchanged (1..168).
        key_of = {i + 1: m["key"] for i, m in enumerate(evalset["memories"])}
        c.call("search_memory", {"searchQuery": "warm-up", "limit": 1})
        times, got = [], []
        for q in evalset["queries"]:
            dt, res = c.call("search_memory", {"searchQuery": q["query"], "limit": 5})
            times.append(dt)
            got.append([key_of.get(r["id"], "?") for r in res["structuredContent"]["results"]])
        out["search_10k"] = summary(times)
        out["recall_at_5_10k"] = recall(got, evalset["queries"])
        out["rss_mib"] = round(c.status().get("VmHWM", 0) / 1024, 1)
    return out


def run_official(official_js: str, corpus: list[dict], evalset: dict, tmp: Path) -> dict:
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp),
           "MEMORY_FILE_PATH": str(tmp / "official-memory.jsonl")}
    out: dict = {}
    with McpClient(["node", official_js], env=env, stderr_path=str(tmp / "official.log")) as c:
        c.initialize()
        stores = []
        for m in evalset["memories"]:
            dt, res = c.call("create_entities", {"entities": [
                {"name": m["key"], "entityType": m["memoryType"], "observations": [m["content"]]}]})
            stores.append(dt)
            assert not res.get("isError"), result_text(res)
        out["store_eval"] = summary(stores)

        def search_all() -> tuple[list[float], list[list[str]]]:
            times, got = [], []
            for q in evalset["queries"]:
                dt, res = c.call("search_nodes", {"query": q["query"]})
                times.append(dt)
                graph = res.get("structuredContent") or json.loads(result_text(res) or "{}")
                got.append([e["name"] for e in graph.get("entities", [])])
            return times, got

        times, got = search_all()
        out["search_eval"] = summary(times)
        out["recall_at_5_eval"] = recall(got, evalset["queries"])
        # Single words of each query, the way a client might retry: the best any one word
        # of the query finds (an upper bound for its substring search).
        word_hits = []
        for q in evalset["queries"]:
            found: list[str] = []
            for w in [w.strip("?,.'\"").lower() for w in q["query"].split()]:
                if len(w) < 4:
                    continue
                _, res = c.call("search_nodes", {"query": w})
                graph = res.get("structuredContent") or json.loads(result_text(res) or "{}")
                found += [e["name"] for e in graph.get("entities", []) if e["name"] not in found]
            word_hits.append(found)
        out["recall_any_word_unranked"] = round(sum(
            sum(1 for e in q["expected"] if e in got) / len(q["expected"])
            for got, q in zip(word_hits, evalset["queries"])) / len(evalset["queries"]), 3)
        t0 = time.perf_counter()
        for start in range(0, EXTRA, 500):
            chunk = corpus[start:start + 500]
            c.call("create_entities", {"entities": [
                {"name": f"s{start + i}", "entityType": r["memoryType"], "observations": [r["content"]]}
                for i, r in enumerate(chunk)]})
        out["import_10k_s"] = round(time.perf_counter() - t0, 2)
        times, got = search_all()
        out["search_10k"] = summary(times)
        out["recall_at_5_10k"] = recall(got, evalset["queries"])
        out["rss_mib"] = round(c.status().get("VmHWM", 0) / 1024, 1)
    return out


def main() -> None:
    binary, official_js, model_dir, corpus_path, out_path = sys.argv[1:6]
    evalset = json.loads((ROOT / "tests/data/memory_eval.json").read_text())
    corpus = [json.loads(line) for line in Path(corpus_path).read_text().splitlines()[:EXTRA]]
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        result = {
            "queries": len(evalset["queries"]),
            "eval_memories": len(evalset["memories"]),
            "extra_memories": EXTRA,
            "ringfence": run_ringfence(binary, model_dir, corpus, evalset, tmp),
            "official": run_official(official_js, corpus, evalset, tmp),
        }
    text = json.dumps(result, indent=2)
    print(text)
    Path(out_path).write_text(text + "\n")


if __name__ == "__main__":
    main()
