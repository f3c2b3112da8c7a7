"""web_fetch throughput: pages fetched and extracted per second from a local server, through
MCP over stdio, ringfence beside mcp-server-fetch (PyPI) in the same run.

The pages are Mozilla Readability's test pages (../shared/corpora/readability-pages/*/
source.html, read from there), served from memory by a threaded HTTP server in this process
with a robots.txt that allows everything. Each round asks every page once, sequentially, with
a query string unique to the round and the tool (so no cache answers). Both servers run with
their defaults (robots.txt checked; each converts HTML to Markdown); ringfence is told that
127.0.0.1 may be reached (RINGFENCE_WEB_ALLOW_PRIVATE), mcp-server-fetch the same with its
--allow-private-ips flag.

    python bench/web_fetch.py RINGFENCE_BIN PEER_PYTHON OUT_JSON [ROUNDS]
"""

from __future__ import annotations

import http.server
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mcp import McpClient, result_text  # noqa: E402

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpora" / "readability-pages"


def load_pages() -> dict[str, bytes]:
    pages = {}
    for d in sorted(CORPUS.iterdir()):
        src = d / "source.html"
        if src.is_file():
            pages[f"/{d.name}/"] = src.read_bytes()
    return pages


def start_site(pages: dict[str, bytes]) -> tuple[str, http.server.ThreadingHTTPServer]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # noqa: N802
            path = self.path.split("?", 1)[0]
            if path == "/robots.txt":
                body, ctype = b"User-agent: *\nAllow: /\n", "text/plain"
            elif path in pages:
                body, ctype = pages[path], "text/html; charset=utf-8"
            else:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{httpd.server_address[1]}", httpd


def run_tool(name: str, argv: list[str], env: dict[str, str], tool: str, base: str,
             paths: list[str], rounds: int, tmp: str) -> dict:
    with McpClient(argv, cwd=tmp, env=env, stderr_path=os.path.join(tmp, f"{name}.stderr")) as c:
        c.initialize()
        # Warm-up: a few pages, not timed.
        for p in paths[:5]:
            c.call(tool, {"url": f"{base}{p}?warm", "max_length": 999999})
        times, errors, chars = [], 0, 0
        cpu0 = c.cpu_seconds()
        for r in range(rounds):
            t0 = time.perf_counter()
            for p in paths:
                _, res = c.call(tool, {"url": f"{base}{p}?{name}-{r}", "max_length": 999999})
                if res.get("isError"):
                    errors += 1
                    if errors == 1:
                        print(f"{name}: {result_text(res)[:300]}", file=sys.stderr)
                else:
                    chars += len(result_text(res))
            times.append(time.perf_counter() - t0)
        cpu = c.cpu_seconds() - cpu0
        rss = c.status()
    best = min(times)
    return {
        "pages_per_round": len(paths),
        "round_seconds": times,
        "pages_per_s_median": len(paths) / statistics.median(times),
        "pages_per_s_best": len(paths) / best,
        "errors": errors,
        "chars_returned": chars,
        "server_cpu_s_per_page": cpu / (len(paths) * rounds),
        "peak_rss_kib": rss.get("VmHWM"),
    }


def main() -> None:
    ringfence, peer_python, out = sys.argv[1], sys.argv[2], sys.argv[3]
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    pages = load_pages()
    base, httpd = start_site(pages)
    paths = list(pages)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        ws = os.path.join(tmp, "ws")
        os.mkdir(ws)
        clean = {"PATH": os.environ.get("PATH", ""), "HOME": tmp}
        results["ringfence"] = run_tool(
            "ringfence",
            [ringfence, "--data-dir", os.path.join(tmp, "data"), "--tools", "web", "serve", ws],
            {**clean, "RINGFENCE_WEB_ALLOW_PRIVATE": "127.0.0.1", "XDG_CONFIG_HOME": os.path.join(tmp, "x")},
            "web_fetch", base, paths, rounds, tmp,
        )
        results["mcp-server-fetch"] = run_tool(
            "mcp-server-fetch", [peer_python, "-m", "mcp_server_fetch", "--allow-private-ips"], clean,
            "fetch", base, paths, rounds, tmp,
        )
    httpd.shutdown()
    r, p = results["ringfence"], results["mcp-server-fetch"]
    for name in ("ringfence", "mcp-server-fetch"):
        if results[name]["errors"]:
            raise SystemExit(f"{name} answered {results[name]['errors']} calls with an error; see its stderr")
    results["ratio_pages_per_s"] = r["pages_per_s_median"] / p["pages_per_s_median"]
    Path(out).write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
