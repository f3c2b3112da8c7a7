"""State shared through `[store]`: two instances with their own data directories (as two
servers behind a load balancer have) see the same follow-ups, calendars and edit history
when the store is PostgreSQL — and, on SQLite, each sees only its own, as documented.

Run by `scripts/test.sh` in both modes (RINGFENCE_TEST_STORE; see store.py).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
from pathlib import Path
from typing import Any

from store import on_postgres, psql, store_env
from test_sdk_client import _binary


def instance(tmp: Path, name: str, ws: Path, cfg: Path):
    """`ringfence call` as the instance `name`: its own data directory, the shared files."""
    data = tmp / f"data-{name}"

    def call(tool: str, args: dict[str, Any]) -> subprocess.CompletedProcess[str]:
        env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp),
               "XDG_CONFIG_HOME": str(tmp / "xdg-config"), "RINGFENCE_LOG": "warn",
               **store_env()}
        return subprocess.run(
            [str(_binary()), "--config", str(cfg), "--data-dir", str(data), "call",
             "--root", str(ws), tool, json.dumps(args)],
            capture_output=True, text=True, env=env, timeout=60)

    return call


def test_two_instances_share_what_the_store_keeps(tmp_path):
    ws = tmp_path / "shared-files"
    ws.mkdir()
    cfg = tmp_path / "ringfence.toml"
    cfg.write_text('[limits]\nrequire_read_before_write = false\n'
                   '[followups]\ntimezone = "UTC"\n[calendar]\ntimezone = "UTC"\n')
    a, b = instance(tmp_path, "a", ws, cfg), instance(tmp_path, "b", ws, cfg)

    # The edit journal: A overwrites a file, B undoes it.
    for content in ("first\n", "second\n"):
        done = a("write_file", {"path": str(ws / "notes.txt"), "content": content})
        assert done.returncode == 0, done.stderr
    undone = b("undo_edit", {"path": str(ws / "notes.txt")})
    # A follow-up scheduled through A, listed through B.
    done = a("schedule_followup", {"context": "ask about the trip", "minutes_from_now": 60})
    assert done.returncode == 0, done.stderr
    listed = b("list_followups", {})
    # An event made through A, listed through B.
    start = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=1)).replace(microsecond=0)
    done = a("create_calendar_event", {
        "title": "Dentist", "startDateTime": start.isoformat(),
        "endDateTime": (start + dt.timedelta(hours=1)).isoformat()})
    assert done.returncode == 0, done.stderr
    events = b("list_calendar_events", {"days": 7})
    assert listed.returncode == 0 and events.returncode == 0, listed.stderr + events.stderr

    if on_postgres():
        assert undone.returncode == 0, undone.stderr
        assert (ws / "notes.txt").read_text() == "first\n"
        assert "ask about the trip" in listed.stdout, listed.stdout
        assert "Dentist" in events.stdout, events.stdout
        url = store_env()["RINGFENCE_DATABASE_URL"]
        names = psql(url, "SELECT name FROM ringfence_schema ORDER BY name").splitlines()
        assert names == ["calendar", "edit journal", "followups"], names
        for name in ("a", "b"):
            data = tmp_path / f"data-{name}"
            kept = {p.name for p in data.glob("*.db")}
            assert not kept, f"instance {name} made {kept} beside the shared store"
    else:
        # Each instance has its own history, follow-ups and calendar.
        assert undone.returncode != 0 and "nothing to undo" in undone.stdout, undone.stdout
        assert (ws / "notes.txt").read_text() == "second\n"
        assert "ask about the trip" not in listed.stdout, listed.stdout
        assert "Dentist" not in events.stdout, events.stdout
