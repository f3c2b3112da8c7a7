"""Every page of the settings site under a long life, on one server.

One user (alice) holds N truths and memories (default 10,000, `ringfence memory import`),
1,000 pending and 1,000 past follow-ups (`ringfence followups import`: delivered, cancelled
and failed ones with their attempts), a local calendar with 200 events and thousands of
calls in the audit trail, both made as real MCP `tools/call` requests over HTTP (alice
8,000, a second user 2,000: the activity page reads the whole trail and keeps its user's).

Each page is timed as the server answers it over loopback (request to last byte, keep-alive
connection, signed in; RUNS after 3 warm-ups) and weighed (HTML, and the stylesheet once).
With a browser (RINGFENCE_TEST_CHROMIUM or chromium on PATH, and Playwright), also the
browser's own navigation timing of each page: time to DOM interactive and to load (p50 of
10 loads after 2). A section the binary does not serve (not in the page's navigation) is
reported as such, not measured.

    python3 bench/settings_page.py BIN OUT.json [N] [RUNS]

There is no peer for a person's settings page in the same run; the issue's budget is the
yardstick: the memories page with 10,000 memories stays usable (paged) with p50 server time
under 50 ms.
"""

from __future__ import annotations

import html
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
OTHER_TOKEN = "bench-settings-token-other-fedcba9876"
URL_RE = re.compile(r"url=(http://[0-9.]+:\d+)/mcp")
NAV_RE = re.compile(r'<nav aria-label="Sections">(.*?)</nav>', re.S)
HREF_RE = re.compile(r'href="/settings/([a-z0-9_-]+)"')
COUNT_RE = re.compile(r'<p class="count">(.*?)</p>|<h2[^>]*>(.*?)</h2>', re.S)
WORDS = ("coffee tea garden bicycle sister brother Lyon Paris doctor dentist piano guitar "
         "football marathon allergy peanuts vegetarian birthday anniversary project deadline "
         "meeting holiday Portugal Japan novel podcast yoga swimming cat dog").split()
PENDING, PAST = 1000, 1000
EVENTS = 200
CALLS = {"alice": 8000, "bob": 2000}
BROWSER_LOADS = 10
DAY_MS = 86_400_000


def token_hash(binary: str, token: str) -> str:
    out = subprocess.run([binary, "token-hash"], input=token.encode(), capture_output=True,
                         check=True)
    return out.stdout.decode().strip().splitlines()[-1]


def sentence(rng: random.Random, lo: int, hi: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))


def rows(n: int) -> str:
    rng = random.Random(33)
    lines = []
    for i in range(n):
        lines.append(json.dumps({
            "kind": "memory" if i % 10 else "truth",
            "content": f"Note {i}: {sentence(rng, 6, 14)}.",
            "category": rng.choice(["personal", "professional", "hobbies", "health", "goals"]),
        }))
    return "\n".join(lines) + "\n"


def followups(now_ms: int) -> str:
    """PENDING follow-ups due over the coming year (the first a day out, so none falls due
    during the run) and PAST ones from the last two years: 85 % delivered, 10 % cancelled,
    5 % failed after five attempts. The format is `ringfence followups export`'s."""
    rng = random.Random(34)
    lines = []
    for i in range(PENDING):
        created = now_ms - rng.randint(0, 30 * DAY_MS)
        lines.append({"user": "alice", "id": i + 1,
                      "context": f"Ask about {sentence(rng, 4, 12)}",
                      "due_ms": now_ms + DAY_MS + rng.randint(0, 365 * DAY_MS),
                      "status": "pending", "created_ms": created, "updated_ms": created,
                      "idempotency_key": f"bench-settings-pending-{i}"})
    for i in range(PAST):
        due = now_ms - rng.randint(DAY_MS, 730 * DAY_MS)
        created = due - rng.randint(3_600_000, 30 * DAY_MS)
        r = {"user": "alice", "id": PENDING + i + 1,
             "context": f"Check in on {sentence(rng, 4, 12)}", "due_ms": due,
             "created_ms": created, "idempotency_key": f"bench-settings-past-{i}"}
        kind = i % 20
        if kind < 17:
            r.update(status="completed", attempts=1, delivered_ms=due + rng.randint(1, 900),
                     delivered_via="webhook", updated_ms=due + 1000)
        elif kind < 19:
            r.update(status="cancelled", cancel_reason="no longer needed",
                     updated_ms=due - rng.randint(60_000, DAY_MS))
        else:
            r.update(status="failed", attempts=5, updated_ms=due + 600_000,
                     last_error="webhook: HTTP 503 Service Unavailable")
        lines.append(r)
    return "".join(json.dumps(r) + "\n" for r in lines)


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


class Mcp:
    """A minimal MCP client over streamable HTTP (one keep-alive connection, one session)."""

    def __init__(self, host: str, port: int, token: str) -> None:
        self.conn = http.client.HTTPConnection(host, port)
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json",
                        "Accept": "application/json, text/event-stream"}
        self.next_id = 0
        init = self.post("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                        "clientInfo": {"name": "settings-bench",
                                                       "version": "1"}})
        assert "result" in init, init
        self.post("notifications/initialized", None)

    def post(self, method: str, params: dict | None) -> dict:
        msg: dict = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            self.next_id += 1
            msg["id"] = self.next_id
            msg["params"] = params
        self.conn.request("POST", "/mcp", json.dumps(msg), self.headers)
        r = self.conn.getresponse()
        body = r.read().decode()
        if sid := r.getheader("mcp-session-id"):
            self.headers["mcp-session-id"] = sid
            self.headers["mcp-protocol-version"] = "2025-06-18"
        assert r.status in (200, 202), (method, r.status, body[:300])
        if "id" not in msg:
            return {}
        if (r.getheader("content-type") or "").startswith("text/event-stream"):
            for line in body.splitlines():
                if line.startswith("data:") and line[5:].strip():
                    doc = json.loads(line[5:])
                    if doc.get("id") == msg["id"]:
                        return doc
            raise AssertionError((method, body[:300]))
        return json.loads(body)

    def call(self, name: str, args: dict) -> dict:
        doc = self.post("tools/call", {"name": name, "arguments": args})
        assert "result" in doc, (name, doc)
        return doc["result"]


def make_calls(mcp: Mcp, user: str, count: int, rng: random.Random) -> dict:
    """A person's assistant at work: mostly reads, some searches, a few errors; alice's first
    EVENTS calendar calls make her events."""
    made = {"calls": 0, "errors": 0, "events": 0}
    today = time.time()
    for i in range(count):
        k = i % 10
        if user == "alice" and k == 0 and made["events"] < EVENTS:
            start = today + rng.randint(1, 60 * 24) * 3600
            s = time.strftime("%Y-%m-%dT%H:00:00+00:00", time.gmtime(start))
            e = time.strftime("%Y-%m-%dT%H:00:00+00:00", time.gmtime(start + 3600))
            name, args = "create_calendar_event", {"title": sentence(rng, 2, 5),
                                                   "startDateTime": s, "endDateTime": e}
        elif k in (0, 1, 2):
            name, args = "list_followups", {"status": rng.choice(["pending", "all"])}
        elif k == 3:
            name, args = "search_memory", {"searchQuery": sentence(rng, 1, 3)}
        elif k == 4:
            name, args = "search_truths", {"searchQuery": sentence(rng, 1, 3)}
        elif k in (5, 6):
            name, args = "list_calendar_events", {"days": rng.choice([1, 7, 30])}
        elif k in (7, 8):
            name, args = "list_directory", {"path": "."}
        else:
            name, args = "read_file", {"path": f"notes/{rng.choice(WORDS)}.md"}  # not there
        result = mcp.call(name, args)
        made["calls"] += 1
        made["errors"] += bool(result.get("isError"))
        made["events"] += name == "create_calendar_event" and not result.get("isError")
    return made


def summary(body: str) -> str:
    """What the page says it shows: its count line, else its section headings."""
    parts = []
    for count, h2 in COUNT_RE.findall(body):
        text = html.unescape(re.sub(r"<[^>]+>", "", count or h2)).strip()
        if text:
            parts.append(text)
    return "; ".join(parts)


def main() -> None:
    binary, out = sys.argv[1], Path(sys.argv[2])
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 10_000
    runs = int(sys.argv[4]) if len(sys.argv) > 4 else 50
    load_before = os.getloadavg()[0]
    tmp = Path(tempfile.mkdtemp(prefix="rf-settings-bench-"))
    try:
        cfg = tmp / "cfg.toml"
        # A webhook channel nobody listens on: nothing falls due during the run, and the
        # follow-ups page shows a user who is served as a configured one would be.
        cfg.write_text(
            f'[http]\ntokens = [{{ user = "alice", hash = "{token_hash(binary, TOKEN)}" }}, '
            f'{{ user = "bob", hash = "{token_hash(binary, OTHER_TOKEN)}" }}]\n'
            # The seeding calls come faster than the default 50 a second a user allows.
            '[http.limits]\nrate = 0\nburst = 0\n'
            '[memory.embeddings]\nprovider = "none"\n'
            '[followups]\nproactive = true\ntimezone = "Europe/Paris"\n'
            '[[followups.channels]]\nkind = "webhook"\nurl = "http://127.0.0.1:9/hook"\n'
            'secret = "bench"\n'
            '[calendar.users.alice]\nprovider = "local"\n'
            '[calendar.users.bob]\nprovider = "local"\n')
        data = tmp / "data"
        common = ["--config", str(cfg), "--data-dir", str(data)]
        version = subprocess.run([binary, "--version"], capture_output=True,
                                 text=True).stdout.strip()
        (tmp / "rows.jsonl").write_text(rows(n))
        t0 = time.monotonic()
        imported = subprocess.run([binary, *common, "memory", "import", str(tmp / "rows.jsonl"),
                                   "--user", "alice"], capture_output=True, text=True)
        assert imported.returncode == 0, imported.stderr[-2000:]
        imported_s = time.monotonic() - t0
        (tmp / "followups.jsonl").write_text(followups(int(time.time() * 1000)))
        t0 = time.monotonic()
        imported = subprocess.run([binary, *common, "followups", "import",
                                   str(tmp / "followups.jsonl"), "--user", "alice"],
                                  capture_output=True, text=True)
        assert imported.returncode == 0, imported.stderr[-2000:]
        followups_s = time.monotonic() - t0
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

            # The activity: real tool calls, as each user's assistant makes them.
            t0 = time.monotonic()
            rng = random.Random(35)
            made = {user: make_calls(Mcp(host, int(port), tok), user, CALLS[user], rng)
                    for user, tok in (("alice", TOKEN), ("bob", OTHER_TOKEN))}
            calls_s = time.monotonic() - t0
            total = sum(m["calls"] for m in made.values())
            trail = data / "audit" / "audit.jsonl"
            for _ in range(600):  # the trail is written by a background thread
                if trail.exists() and trail.read_bytes().count(b"\n") >= total:
                    break
                time.sleep(0.05)
            trail_lines = trail.read_bytes().count(b"\n") if trail.exists() else 0
            trail_bytes = trail.stat().st_size if trail.exists() else 0

            conn = http.client.HTTPConnection(host, int(port))
            conn.request("POST", "/settings/login",
                         body=urllib.parse.urlencode({"token": TOKEN}),
                         headers={"Content-Type": "application/x-www-form-urlencoded"})
            r = conn.getresponse()
            r.read()
            cookie = r.getheader("Set-Cookie").split(";")[0]
            assert r.status == 303, r.status
            conn.request("GET", "/settings/memories", headers={"Cookie": cookie})
            r = conn.getresponse()
            nav = NAV_RE.search(r.read().decode())
            assert nav, "no navigation on the memories page"
            served = HREF_RE.findall(nav.group(1))

            fu = f"{PENDING:,} pending, {PAST:,} past"
            own = f"{made['alice']['calls']:,} own calls of {trail_lines:,} in the trail"
            # name: (section, path, data)
            pages = {
                "memories, first page": ("memories", "/settings/memories", f"{n:,} memories"),
                "memories, page 100": ("memories", "/settings/memories?page=100",
                                       f"{n:,} memories"),
                "memories, search (two words)": ("memories", "/settings/memories?q=coffee+Lyon",
                                                 f"{n:,} memories"),
                "memories, truths only": ("memories", "/settings/memories?kind=truth",
                                          f"{n:,} memories"),
                "edit one memory": ("memories", f"/settings/memories/memory/{n // 2}/edit",
                                    f"{n:,} memories"),
                "follow-ups": ("followups", "/settings/followups", fu),
                "calendar": ("calendar", "/settings/calendar",
                             f"local, {made['alice']['events']} events"),
                "activity, first page": ("activity", "/settings/activity", own),
                "activity, one tool": ("activity", "/settings/activity?tool=list_followups",
                                       own),
                "activity, last 2 h, page 20": ("activity",
                                                "/settings/activity?since=2h&page=20", own),
                "tools": ("tools", "/settings/tools", "the configuration's tools"),
                "stylesheet": (None, "/settings/style.css", "once, no script"),
            }
            results, not_served = {}, []
            for name, (section, path, what) in pages.items():
                if section and section not in served:
                    if section not in not_served:
                        not_served.append(section)
                    results[name] = {"path": path, "data": what, "served": False}
                    print(f"{name:32} not served by this binary (no {section} in the "
                          "navigation)", flush=True)
                    continue
                times, size, body = [], 0, b""
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
                results[name] = {"path": path, "data": what,
                                 "p50_ms": round(statistics.median(times), 2),
                                 "p95_ms": round(pct(times, 95), 2), "bytes": size}
                if section:
                    results[name]["shows"] = summary(body.decode(errors="replace"))
                print(f"{name:32} p50 {results[name]['p50_ms']:7.2f} ms  "
                      f"p95 {results[name]['p95_ms']:7.2f} ms  {size:7d} bytes", flush=True)
            browse = [(name, page[1]) for name, page in pages.items()
                      if page[0] and results[name].get("served", True)]
            browser = browser_timing(base, cookie, browse, BROWSER_LOADS)
            if browser:
                for name, timing in browser["pages"].items():
                    results[name].update(timing)
                    print(f"{name:32} browser: interactive {timing['dom_interactive_p50_ms']:6.1f}"
                          f" ms  load {timing['load_p50_ms']:6.1f} ms", flush=True)
            rss = int(Path(f"/proc/{proc.pid}/status").read_text().split("VmRSS:")[1]
                      .split()[0]) / 1024
        finally:
            proc.terminate()
            proc.wait(10)
        first = results["memories, first page"]
        report = {
            "binary": version, "memories": n, "runs": runs, "import_s": round(imported_s, 1),
            "followups": {"pending": PENDING, "past": PAST, "import_s": round(followups_s, 1)},
            "activity": {"calls": made, "made_in_s": round(calls_s, 1),
                         "trail_lines": trail_lines, "trail_bytes": trail_bytes},
            "sections_served": served, "sections_not_served": not_served,
            "pages": results,
            # The memories page as before (kept for earlier readers of this file).
            "browser": None if not browser else {
                "chromium": browser["chromium"], "loads": BROWSER_LOADS,
                "dom_interactive_p50_ms": first.get("dom_interactive_p50_ms"),
                "load_p50_ms": first.get("load_p50_ms")},
            "server_rss_mib": round(rss, 1),
            # The machine is shared: its 1-minute load average before and after the run.
            "loadavg_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        }
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=2) + "\n")
        print(json.dumps(report, indent=2))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def browser_timing(base: str, cookie: str, pages: list[tuple[str, str]],
                   runs: int) -> dict | None:
    exe = os.environ.get("RINGFENCE_TEST_CHROMIUM") or shutil.which("chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    if not exe:
        return None
    name, value = cookie.split("=", 1)
    timings = {}
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=["--no-sandbox"])
        ctx = b.new_context()
        ctx.add_cookies([{"name": name, "value": value, "url": base}])
        page = ctx.new_page()
        for label, path in pages:
            interactive, loaded = [], []
            for _ in range(runs + 2):
                page.goto(base + path)
                nav = page.evaluate("() => JSON.parse(JSON.stringify("
                                    "performance.getEntriesByType('navigation')[0]))")
                interactive.append(nav["domInteractive"] - nav["startTime"])
                loaded.append(nav["loadEventEnd"] - nav["startTime"])
            interactive, loaded = interactive[2:], loaded[2:]
            timings[label] = {"dom_interactive_p50_ms": round(statistics.median(interactive), 1),
                              "load_p50_ms": round(statistics.median(loaded), 1)}
        version = b.version
        b.close()
    return {"chromium": version, "pages": timings}


if __name__ == "__main__":
    main()
