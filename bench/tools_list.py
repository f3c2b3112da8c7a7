"""What the tool list costs every conversation: the bytes of the `tools/list` result and its
tokens, for each ringfence preset and for the official filesystem MCP server, measured in one
run over the same MCP handshake (stdio).

    python3 bench/tools_list.py [--bin target/bench/ringfence] [--out bench/results/tools-list.json]

Tokens are counted with the o200k_base encoding (npm `gpt-tokenizer`, installed into
bench/.peers/npm); Anthropic publishes no offline tokenizer for current models, so the count
is a like-for-like proxy, not the exact Claude figure. The bytes are exact: the compact JSON
of the `result` object of `tools/list` as the server sent it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PEERS = ROOT / "bench" / ".peers" / "npm"
OFFICIAL = PEERS / "node_modules" / "@modelcontextprotocol" / "server-filesystem" / "dist" / "index.js"
TOKENIZER = PEERS / "node_modules" / "gpt-tokenizer"


def install_peers() -> None:
    """The official server and the tokenizer, into bench/.peers/npm, once."""
    PEERS.mkdir(parents=True, exist_ok=True)
    wanted = []
    if not OFFICIAL.exists():
        wanted.append("@modelcontextprotocol/server-filesystem@^2026.8.31")
    if not TOKENIZER.exists():
        wanted.append("gpt-tokenizer@^3")
    if wanted:
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--silent", *wanted],
                       cwd=PEERS, check=True)


def tools_list(command: list[str], env: dict[str, str]) -> str:
    """The compact JSON of the server's tools/list result, after a real handshake."""
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=env)
    assert proc.stdin and proc.stdout
    for m in messages:
        proc.stdin.write(json.dumps(m) + "\n")
        proc.stdin.flush()
    result = None
    for line in proc.stdout:
        msg = json.loads(line)
        if msg.get("id") == 2:
            result = msg["result"]
            break
    proc.stdin.close()
    proc.wait(timeout=60)
    assert result is not None, command
    return json.dumps(result, separators=(",", ":"), ensure_ascii=False)


def tokens(texts: list[str]) -> list[int]:
    script = (
        "const {encode} = require('gpt-tokenizer/encoding/o200k_base');"
        "let s='';process.stdin.on('data',d=>s+=d).on('end',()=>{"
        "console.log(JSON.stringify(JSON.parse(s).map(t=>encode(t).length)))})"
    )
    out = subprocess.run(["node", "-e", script], input=json.dumps(texts), text=True,
                         capture_output=True, cwd=PEERS, check=True)
    return json.loads(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=str(ROOT / "target" / "debug" / "ringfence"))
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "tools-list.json"))
    a = ap.parse_args()
    install_peers()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        work = Path(tmp) / "work"
        home.mkdir()
        work.mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith("RINGFENCE_")}
        env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"),
                   XDG_DATA_HOME=str(home / ".local/share"))
        rows = []
        for preset in ("full", "assistant", "llm-chat", "iris"):
            text = tools_list([a.bin, "--preset", preset, "serve", str(work)], env)
            rows.append({"server": f"ringfence --preset {preset}", "text": text})
        # Everything that can be on: the shell and delegation too (with a model named).
        on = dict(env, RINGFENCE_SHELL_ENABLED="true", RINGFENCE_DELEGATE_ENABLED="true")
        cfg = Path(tmp) / "all.toml"
        cfg.write_text('[llm]\nprovider = "sampling"\n')
        text = tools_list([a.bin, "--config", str(cfg), "serve", str(work)], on)
        rows.append({"server": "ringfence --preset full, shell and delegation on", "text": text})
        text = tools_list(["node", str(OFFICIAL), str(work)], env)
        rows.append({"server": "official server-filesystem", "text": text})
    counts = tokens([r["text"] for r in rows])
    results = []
    for r, n in zip(rows, counts):
        tools = json.loads(r["text"])["tools"]
        results.append({"server": r["server"], "tools": len(tools), "bytes": len(r["text"].encode()),
                        "tokens_o200k": n})
    official = results[-1]
    for r in results:
        r["bytes_vs_official"] = round(r["bytes"] / official["bytes"], 2)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(results, indent=2) + "\n")
    print(f"{'server':52} {'tools':>5} {'bytes':>7} {'tokens':>7} {'× official':>10}")
    for r in results:
        print(f"{r['server']:52} {r['tools']:5} {r['bytes']:7} {r['tokens_o200k']:7} "
              f"{r['bytes_vs_official']:10}")


if __name__ == "__main__":
    sys.exit(main())
