"""`list_calendar_events(days: 30)` over 10,000 events, p50/p95 in milliseconds.

- local: the events imported into ringfence's local calendar (`ringfence calendar import`),
  listed through `ringfence serve` over stdio; the peer is the Python iCalendar stack a
  script would use on the same data (`icalendar` + `recurring_ical_events` reading the same
  .ics file and expanding the same 30 days).
- caldav: the same events in a Radicale server on loopback (uploaded as one calendar),
  listed by ringfence (provider = "caldav"), and by the `caldav` package
  (`search(start, end, event=True, expand=True)`) on the same server in the same run.

Both sides must find the same number of events; the script stops if they do not. Events are
generated from a fixed seed from today's date: 95 % single events at random times of day in
New York time, 3 % all-day ones, 2 % weekly series of 20 (spread over a year).

    python3 bench/calendar_list.py <ringfence binary> <results.json> [events] [runs]

Run it with the test venv's Python (radicale, caldav, icalendar, recurring_ical_events).
"""

from __future__ import annotations

import datetime as dt
import json
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable
from zoneinfo import ZoneInfo


def _bench_mcp() -> Any:
    """bench/mcp.py (a plain stdio client), loaded by path: the SDK is also named `mcp`."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("bench_mcp", Path(__file__).parent / "mcp.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


McpClient = _bench_mcp().McpClient

NY = ZoneInfo("America/New_York")


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def summary(xs: list[float]) -> dict[str, float]:
    return {"p50_ms": round(pct(xs, 0.5) * 1000, 2), "p95_ms": round(pct(xs, 0.95) * 1000, 2),
            "mean_ms": round(statistics.mean(xs) * 1000, 2), "runs": len(xs)}


def events_ics(n: int) -> str:
    rng = random.Random(17)
    today = dt.datetime.now(NY).date()
    fmt = "%Y%m%dT%H%M%S"
    lines = ["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//ringfence bench//EN"]
    for i in range(n):
        day = today + dt.timedelta(days=rng.randrange(0, 365))
        kind = rng.random()
        lines += ["BEGIN:VEVENT", f"UID:bench-{i}@ringfence", "DTSTAMP:20260101T000000Z",
                  f"SUMMARY:Event {i}"]
        if kind < 0.03:
            lines += [f"DTSTART;VALUE=DATE:{day.strftime('%Y%m%d')}",
                      f"DTEND;VALUE=DATE:{(day + dt.timedelta(days=1)).strftime('%Y%m%d')}"]
        else:
            start = dt.datetime(day.year, day.month, day.day, rng.randrange(7, 21),
                                rng.choice([0, 15, 30, 45]))
            end = start + dt.timedelta(minutes=rng.choice([30, 45, 60, 90, 120]))
            lines += [f"DTSTART;TZID=America/New_York:{start.strftime(fmt)}",
                      f"DTEND;TZID=America/New_York:{end.strftime(fmt)}"]
            if kind > 0.98:
                lines.append("RRULE:FREQ=WEEKLY;COUNT=20")
        lines += [f"LOCATION:Room {i % 50}", "END:VEVENT"]
    lines.append("END:VCALENDAR")
    return "\r\n".join(lines) + "\r\n"


def time_runs(fn: Callable[[], int], runs: int, warmup: int = 3) -> tuple[list[float], int]:
    count = 0
    for _ in range(warmup):
        count = fn()
    xs = []
    for _ in range(runs):
        t0 = time.perf_counter()
        c = fn()
        xs.append(time.perf_counter() - t0)
        assert c == count, (c, count)
    return xs, count


def ringfence_lister(binary: str, cfg: Path, data: Path, ws: Path, env: dict[str, str],
                     log: Path) -> tuple[Any, Callable[[], int]]:
    client = McpClient([binary, "--config", str(cfg), "--data-dir", str(data), "--tools", "calendar",
                        "serve", str(ws)], env=env, stderr_path=str(log))
    client.initialize()

    def list_once() -> int:
        _, res = client.call("list_calendar_events", {"days": 30})
        assert not res.get("isError"), res
        return len(res["structuredContent"]["events"])
    return client, list_once


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    binary, out_path = sys.argv[1], Path(sys.argv[2])
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 10_000
    runs = int(sys.argv[4]) if len(sys.argv) > 4 else 30
    tmp = Path(tempfile.mkdtemp(prefix="rf-bench-calendar-"))
    ics = events_ics(n)
    (tmp / "events.ics").write_text(ics)
    ws = tmp / "ws"
    ws.mkdir()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp), "XDG_CONFIG_HOME": str(tmp / "xdg"),
           "RINGFENCE_LOG": "warn"}
    results: dict[str, Any] = {"events": n, "days": 30, "runs": runs}

    # --- local ---------------------------------------------------------------------------
    cfg = tmp / "local.toml"
    cfg.write_text('[calendar]\ntimezone = "America/New_York"\n')
    t0 = time.perf_counter()
    subprocess.run([binary, "--config", str(cfg), "--data-dir", str(tmp / "data"), "calendar", "import",
                    str(tmp / "events.ics")], check=True, env=env, capture_output=True)
    results["local_import_s"] = round(time.perf_counter() - t0, 2)
    client, list_once = ringfence_lister(binary, cfg, tmp / "data", ws, env, tmp / "local.log")
    try:
        xs, count = time_runs(list_once, runs)
        results["local"] = {"ringfence": summary(xs), "listed": count,
                            "rss_kib": client.status().get("VmHWM")}
    finally:
        client.close()
    import icalendar
    import recurring_ical_events

    def peer_local() -> int:
        cal = icalendar.Calendar.from_ical((tmp / "events.ics").read_bytes())
        now = dt.datetime.now(dt.timezone.utc)
        return len(recurring_ical_events.of(cal).between(now, now + dt.timedelta(days=30)))
    pxs, pcount = time_runs(peer_local, max(5, runs // 3), warmup=1)
    results["local"]["peer_icalendar"] = summary(pxs)
    results["local"]["peer_listed"] = pcount
    results["local"]["ratio"] = round(results["local"]["ringfence"]["p50_ms"]
                                      / results["local"]["peer_icalendar"]["p50_ms"], 3)
    print(json.dumps(results["local"]), file=sys.stderr)

    # --- caldav (Radicale) ----------------------------------------------------------------
    import caldav
    (tmp / "users").write_text("alice:alice-pw\n")
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    rad = subprocess.Popen(
        [sys.executable, "-m", "radicale", "--server-hosts", f"127.0.0.1:{port}",
         "--storage-filesystem-folder", str(tmp / "collections"), "--auth-type", "htpasswd",
         "--auth-htpasswd-filename", str(tmp / "users"), "--auth-htpasswd-encryption", "plain",
         "--logging-level", "warning"],
        stdout=subprocess.DEVNULL, stderr=open(tmp / "radicale.log", "wb"))  # noqa: SIM115
    try:
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        dav = caldav.DAVClient(url=url, username="alice", password="alice-pw", timeout=1800)
        cal = dav.principal().make_calendar(name="Bench")
        t0 = time.perf_counter()
        # One PUT of the whole calendar: Radicale splits it into one object per UID.
        r = dav.put(str(cal.url), ics, {"Content-Type": "text/calendar; charset=utf-8"})
        assert r.status in (200, 201, 204), (r.status, r.raw)
        results["caldav_upload_s"] = round(time.perf_counter() - t0, 2)
        dcfg = tmp / "caldav.toml"
        dcfg.write_text(f'[calendar]\nprovider = "caldav"\nurl = "{url}"\nusername = "alice"\n'
                        'password_env = "PW"\ntimezone = "America/New_York"\n')
        client, list_once = ringfence_lister(binary, dcfg, tmp / "data2", ws, {**env, "PW": "alice-pw"},
                                             tmp / "caldav.log")
        try:
            xs, count = time_runs(list_once, runs)
        finally:
            client.close()

        def peer() -> int:
            now = dt.datetime.now(dt.timezone.utc)
            return len(cal.search(start=now, end=now + dt.timedelta(days=30), event=True, expand=True))
        pxs, pcount = time_runs(peer, runs)
        results["caldav"] = {"ringfence": summary(xs), "listed": count,
                             "peer_caldav_package": summary(pxs), "peer_listed": pcount,
                             "ratio": round(pct(xs, 0.5) / pct(pxs, 0.5), 3)}
        print(json.dumps(results["caldav"]), file=sys.stderr)
    finally:
        rad.terminate()
        try:
            rad.wait(timeout=10)
        except subprocess.TimeoutExpired:
            rad.kill()
    out_path.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
