"""Follow-up delivery lateness, memory and idle CPU of `ringfence scheduler`.

100,000 follow-ups are pending far in the future (so they weigh on the database and the
claim query but do not fall due), and 1,000 more fall due spread evenly over a minute. They
are loaded with `ringfence followups import` (the real import path). SCHEDULERS `ringfence
scheduler` processes (default 1) deliver to a webhook receiver on loopback that records when
each arrives and how often; lateness is arrival minus due time. Then, with nothing due, the
schedulers' resident memory and CPU time over 30 s of idling are read from /proc (and, with
PostgreSQL, the database server's CPU time too: its backends do the work the SQLite library
does inside the scheduler).

    python3 bench/followups.py <ringfence binary> <results.json> [pending] [due] [due_secs]

Environment: DATABASE_URL (set: the store is that PostgreSQL database, emptied first; unset:
SQLite in a temporary data directory), PG_DATA (the cluster's data directory, to read its
backends' CPU), SCHEDULERS (1), HEAD_START (seconds from the import to the first due
follow-up: 20).
"""

from __future__ import annotations

import http.server
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def cpu_secs(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime + stime


def db_cpu_secs() -> float:
    """CPU time of the PostgreSQL cluster's processes (PG_DATA), 0 without one."""
    data = os.environ.get("PG_DATA")
    if not data:
        return 0.0
    postmaster = int(Path(data, "postmaster.pid").read_text().split()[0])
    total = cpu_secs(postmaster)
    for task in Path("/proc").iterdir():
        if task.name.isdigit():
            try:
                ppid = int(Path(task, "stat").read_text().rsplit(")", 1)[1].split()[1])
                if ppid == postmaster:
                    total += cpu_secs(int(task.name))
            except (OSError, ValueError, IndexError):
                pass
    return total


def main() -> None:
    binary, out_path = sys.argv[1], Path(sys.argv[2])
    pending = int(sys.argv[3]) if len(sys.argv) > 3 else 100_000
    due = int(sys.argv[4]) if len(sys.argv) > 4 else 1000
    due_secs = float(sys.argv[5]) if len(sys.argv) > 5 else 60.0
    tmp = Path(tempfile.mkdtemp(prefix="rf-bench-followups-"))
    url = os.environ.get("DATABASE_URL")
    schedulers = int(os.environ.get("SCHEDULERS", "1"))
    head_start = float(os.environ.get("HEAD_START", "20"))
    arrivals: dict[str, float] = {}
    received: dict[str, int] = {}
    lock = threading.Lock()

    class Hook(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers["Content-Length"]))
            now = time.time()
            doc = json.loads(body)
            with lock:
                arrivals.setdefault(doc["idempotency_key"], now)
                received[doc["idempotency_key"]] = received.get(doc["idempotency_key"], 0) + 1
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *_: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    cfg = tmp / "ringfence.toml"
    cfg.write_text(
        '[followups]\nproactive = true\ntimezone = "UTC"\n[[followups.channels]]\n'
        f'kind = "webhook"\nurl = "http://127.0.0.1:{server.server_address[1]}/hook"\n'
        'secret = "bench"\n')
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp), "RINGFENCE_LOG": "warn"}
    if url:
        env["RINGFENCE_DATABASE_URL"] = url
        subprocess.run(["psql", "-X", "-q", url, "-c", "DROP TABLE IF EXISTS followups, "
                        "followup_counters; DELETE FROM ringfence_schema WHERE name = 'followups'"],
                       capture_output=True, text=True)
    base = [binary, "--config", str(cfg), "--data-dir", str(tmp / "data")]

    # The first falls due once loading is over.
    start_ms = int(time.time() * 1000) + int(head_start * 1000)
    far_ms = start_ms + 365 * 86_400_000
    due_at: dict[str, float] = {}
    lines = []
    for i in range(pending):
        key = f"bench-pending-{i}"
        lines.append(json.dumps({
            "user": f"u{i % 100}", "id": i, "context": f"pending {i}", "due_ms": far_ms + i,
            "status": "pending", "created_ms": start_ms, "updated_ms": start_ms,
            "idempotency_key": key}))
    for i in range(due):
        key = f"bench-due-{i}"
        t = start_ms + int(i * due_secs * 1000 / max(due, 1))
        due_at[key] = t / 1000
        lines.append(json.dumps({
            "user": f"u{i % 100}", "id": pending + i, "context": f"due {i}", "due_ms": t,
            "status": "pending", "created_ms": start_ms, "updated_ms": start_ms,
            "idempotency_key": key}))
    load = time.time()
    imp = subprocess.run([*base, "followups", "import", "-"], input="\n".join(lines) + "\n",
                         text=True, capture_output=True, env=env)
    assert imp.returncode == 0, imp.stderr
    load_secs = time.time() - load
    assert time.time() * 1000 < start_ms, "loading took longer than the head start"

    procs = [subprocess.Popen([*base, "scheduler"], stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
             for _ in range(schedulers)]
    try:
        deadline = start_ms / 1000 + due_secs + 60
        while time.time() < deadline:
            with lock:
                if len(arrivals) >= due:
                    break
            time.sleep(0.2)
        with lock:
            got = dict(arrivals)
        late_ms = [(got[k] - due_at[k]) * 1000 for k in due_at if k in got]
        with lock:
            counts = dict(received)
        # Idle: nothing due for a year.
        time.sleep(2)
        rss = sum(rss_kib(p.pid) for p in procs)
        cpu0 = sum(cpu_secs(p.pid) for p in procs)
        db0 = db_cpu_secs()
        time.sleep(30)
        idle_cpu = sum(cpu_secs(p.pid) for p in procs) - cpu0
        idle_db_cpu = db_cpu_secs() - db0
        rss_after = sum(rss_kib(p.pid) for p in procs)
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(timeout=60)
        server.shutdown()
    results = {
        "machine": os.uname().release,
        "store": "postgres" if url else "sqlite",
        "schedulers": schedulers,
        "delivered_more_than_once": sum(1 for n in counts.values() if n > 1),
        "pending": pending,
        "due": due,
        "due_over_secs": due_secs,
        "import_secs": round(load_secs, 2),
        "delivered": len(late_ms),
        "lateness_ms": {
            "p50": round(pct(late_ms, 0.5), 1),
            "p99": round(pct(late_ms, 0.99), 1),
            "max": round(max(late_ms), 1),
            "mean": round(statistics.fmean(late_ms), 1),
        } if late_ms else None,
        "scheduler_rss_kib": {"after_deliveries": rss, "after_30s_idle": rss_after},
        "idle_cpu_secs_per_30s": round(idle_cpu, 3),
        "idle_database_cpu_secs_per_30s": round(idle_db_cpu, 3) if url else None,
    }
    out_path.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
