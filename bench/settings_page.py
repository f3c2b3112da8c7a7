"""The settings page under a long life: a user with N memories (default 10,000).

Times each page as the server answers it over loopback (request to last byte, keep-alive
connection, signed in), and each page's weight (HTML, and the stylesheet once). With a
browser (RINGFENCE_TEST_CHROMIUM or chromium on PATH, and Playwright), also the browser's own
navigation timing of the memories page: time to DOM interactive and to load.

    python3 bench/settings_page.py BIN OUT.json [N] [RUNS]

There is no peer for a person's settings page in the same run; the issue's budget is the
yardstick: the memories page with 10,000 memories stays usable (paged) with p50 server time
under 50 ms.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

TOKEN = "bench-settings-token-0123456789abcdef"
URL_RE = re.compile(r"url=(http://[0-9.]+:\d+)/mcp")
WORDS = ("coffee tea garden bicycle sister brother Lyon Paris doctor dentist piano guitar "
         "football marathon allergy peanuts vegetarian birthday anniversary project deadline "
         "meeting holiday Portugal Japan novel podcast yoga swimming cat dog").split()


def token_hash(binary: str) -> str:
    out = subprocess.run([binary, "token-hash"], input=TOKEN.encode(), capture_output=True,
                         check=True)
    return out.stdout.decode().strip().splitlines()[-1]


def rows(n: int) -> str:
    rng = random.Random(33)
    lines = []
    for i in range(n):
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14)))
        lines.append(json.dumps({
            "kind": "memory" if i % 10 else "truth",
            "content": f"Note {i}: {words}.",
            "category": rng.choice(["personal", "professional", "hobbies", "health", "goals"]),
        }))
    return "\n".join(lines) + "\n"


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def main() -> None:
    binary, out = sys.argv[1], Path(sys.argv[2])
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 10_000
    runs = int(sys.argv[4]) if len(sys.argv) > 4 else 50
    tmp = Path(tempfile.mkdtemp(prefix="rf-settings-bench-"))
    try:
        cfg = tmp / "cfg.toml"
        cfg.write_text(f'[http]\ntokens = [{{ user = "alice", hash = "{token_hash(binary)}" }}]\n'
                       '[memory.embeddings]\nprovider = "none"\n')
        data = tmp / "data"
        common = ["--config", str(cfg), "--data-dir", str(data)]
        (tmp / "rows.jsonl").write_text(rows(n))
        t0 = time.monotonic()
        imported = subprocess.run([binary, *common, "memory", "import", str(tmp / "rows.jsonl"),
                                   "--user", "alice"], capture_output=True, text=True)
        assert imported.returncode == 0, imported.stderr[-2000:]
        imported_s = time.monotonic() - t0
        log = tmp / "log"
        with open(log, "wb") as f:
            proc = subprocess.Popen([binary, *common, "serve", "--http", "127.0.0.1:0"],
                                    stdout=subprocess.DEVNULL, stderr=f)
        try:
            base = None
            for _ in range(600):
                m = URL_RE.search(log.read_text(errors="replace"))
                if m:
                    base = m.group(1)
                    break
                time.sleep(0.05)
            assert base, log.read_text()
            host, port = base.removeprefix("http://").split(":")
            conn = http.client.HTTPConnection(host, int(port))
            conn.request("POST", "/settings/login",
                         body=urllib.parse.urlencode({"token": TOKEN}),
                         headers={"Content-Type": "application/x-www-form-urlencoded"})
            r = conn.getresponse()
            r.read()
            cookie = r.getheader("Set-Cookie").split(";")[0]
            assert r.status == 303, r.status
            pages = {
                "memories, first page": "/settings/memories",
                "memories, page 100": "/settings/memories?page=100",
                "memories, search (two words)": "/settings/memories?q=coffee+Lyon",
                "memories, truths only": "/settings/memories?kind=truth",
                "edit one memory": "/settings/memories/memory/5000/edit",
                "stylesheet": "/settings/style.css",
            }
            results = {}
            for name, path in pages.items():
                times, size = [], 0
                for i in range(runs + 3):
                    t = time.perf_counter()
                    conn.request("GET", path, headers={"Cookie": cookie})
                    r = conn.getresponse()
                    body = r.read()
                    dt = (time.perf_counter() - t) * 1000
                    assert r.status == 200, (path, r.status, body[:300])
                    size = len(body)
                    if i >= 3:
                        times.append(dt)
                results[name] = {"p50_ms": round(statistics.median(times), 2),
                                 "p95_ms": round(pct(times, 95), 2), "bytes": size}
                print(f"{name:32} p50 {results[name]['p50_ms']:7.2f} ms  "
                      f"p95 {results[name]['p95_ms']:7.2f} ms  {size:7d} bytes", flush=True)
            browser = browser_timing(base, cookie, runs=10)
            rss = int(Path(f"/proc/{proc.pid}/status").read_text().split("VmRSS:")[1]
                      .split()[0]) / 1024
        finally:
            proc.terminate()
            proc.wait(10)
        report = {"memories": n, "runs": runs, "import_s": round(imported_s, 1),
                  "pages": results, "browser": browser, "server_rss_mib": round(rss, 1)}
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=2) + "\n")
        print(json.dumps(report, indent=2))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def browser_timing(base: str, cookie: str, runs: int) -> dict | None:
    exe = os.environ.get("RINGFENCE_TEST_CHROMIUM") or shutil.which("chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    if not exe:
        return None
    name, value = cookie.split("=", 1)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=["--no-sandbox"])
        ctx = b.new_context()
        ctx.add_cookies([{"name": name, "value": value, "url": base}])
        page = ctx.new_page()
        interactive, loaded = [], []
        for _ in range(runs + 2):
            page.goto(base + "/settings/memories")
            nav = page.evaluate("() => JSON.parse(JSON.stringify("
                                "performance.getEntriesByType('navigation')[0]))")
            interactive.append(nav["domInteractive"] - nav["startTime"])
            loaded.append(nav["loadEventEnd"] - nav["startTime"])
        b.close()
    interactive, loaded = interactive[2:], loaded[2:]
    return {"dom_interactive_p50_ms": round(statistics.median(interactive), 1),
            "load_p50_ms": round(statistics.median(loaded), 1)}


if __name__ == "__main__":
    main()
