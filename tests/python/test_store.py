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

import pytest

import anyio

from store import CLUSTER_VAR, create_database, drop_database, on_postgres, psql, store_env
from test_followups import INTERVIEW, Heard, listening_http, said
from test_http import call, client
from test_http_users import serve as serve_http, tokens_config
from test_sdk_client import TEST_TIMEOUT_S, _binary, is_error, structured, text_of

ALICE = "alice-store-token-" + "a" * 24


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def env_of(tmp: Path, store: dict[str, str]) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp),
            "XDG_CONFIG_HOME": str(tmp / "xdg-config"), "RINGFENCE_LOG": "warn", **store}


def instance(tmp: Path, name: str, ws: Path, cfg: Path, store: dict[str, str] | None = None):
    """`ringfence call` as the instance `name`: its own data directory, the shared files,
    the test's store (or `store`'s variables)."""
    data = tmp / f"data-{name}"
    env = env_of(tmp, store_env() if store is None else store)

    def call(tool: str, args: dict[str, Any]) -> subprocess.CompletedProcess[str]:
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
    # A memory stored through A, searched for through B (no model here: found by words).
    done = a("store_memory", {"memoryContent": "User is allergic to shellfish"})
    assert done.returncode == 0, done.stderr
    found = b("search_memory", {"searchQuery": "shellfish"})
    assert found.returncode == 0, found.stderr

    if on_postgres():
        assert undone.returncode == 0, undone.stderr
        assert (ws / "notes.txt").read_text() == "first\n"
        assert "ask about the trip" in listed.stdout, listed.stdout
        assert "Dentist" in events.stdout, events.stdout
        assert "allergic to shellfish" in found.stdout, found.stdout
        url = store_env()["RINGFENCE_DATABASE_URL"]
        names = psql(url, "SELECT name FROM ringfence_schema ORDER BY name").splitlines()
        assert names == ["calendar", "edit journal", "followups", "memory"], names
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
        assert "allergic to shellfish" not in found.stdout, found.stdout


def test_store_migrate_moves_everything_there_and_back(tmp_path):
    """`store migrate`: an instance's SQLite state into PostgreSQL (where an instance with
    another data directory finds it), then back into a third instance's SQLite files."""
    if not os.environ.get(CLUSTER_VAR):
        pytest.skip(f"no PostgreSQL cluster ({CLUSTER_VAR})")
    ws = tmp_path / "shared-files"
    ws.mkdir()
    cfg = tmp_path / "ringfence.toml"
    cfg.write_text('[limits]\nrequire_read_before_write = false\n'
                   '[followups]\ntimezone = "UTC"\n[calendar]\ntimezone = "UTC"\n')
    name, url = create_database()
    try:
        on_pg = {"RINGFENCE_DATABASE_URL": url}
        a = instance(tmp_path, "a", ws, cfg, store={})
        b = instance(tmp_path, "b", ws, cfg, store=on_pg)
        c = instance(tmp_path, "c", ws, cfg, store={})
        for content in ("first\n", "second\n"):
            assert a("write_file", {"path": str(ws / "notes.txt"), "content": content}).returncode == 0
        assert a("schedule_followup", {"context": "ask about the trip",
                                       "minutes_from_now": 60}).returncode == 0
        start = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=1)).replace(microsecond=0)
        assert a("create_calendar_event", {
            "title": "Dentist", "startDateTime": start.isoformat(),
            "endDateTime": (start + dt.timedelta(hours=1)).isoformat()}).returncode == 0
        for fact in ("User is allergic to shellfish", "User plays the oboe"):
            assert a("store_memory", {"memoryContent": fact}).returncode == 0
        assert a("store_truth", {"truthContent": "TJ lives in Oslo"}).returncode == 0

        def migrate(data: str, *args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [str(_binary()), "--config", str(cfg), "--data-dir", str(tmp_path / data),
                 "store", "migrate", *args], capture_output=True, text=True,
                env=env_of(tmp_path, {}), timeout=120)

        there = migrate("data-a", "--from", "sqlite", "--to", "postgres", "--url", url)
        assert there.returncode == 0, there.stderr
        assert "followups: 1 rows read, 1 written (0 were there already), 1 in the target" in there.stderr
        assert "edit_journal: 2 rows read, 2 written" in there.stderr, there.stderr
        assert "items: 3 rows read, 3 written (0 were there already), 3 in the target" in there.stderr
        # B, on PostgreSQL, has A's state.
        assert "ask about the trip" in b("list_followups", {}).stdout
        assert "Dentist" in b("list_calendar_events", {"days": 7}).stdout
        assert "oboe" in b("search_memory", {"searchQuery": "oboe"}).stdout
        assert "Oslo" in b("search_truths", {"searchQuery": "Oslo"}).stdout
        # Numbering goes on where A's left off.
        stored = b("store_memory", {"memoryContent": "User sails on weekends"})
        assert stored.returncode == 0 and "#3" in stored.stdout, stored.stdout
        # Run again: nothing new, nothing lost.
        again = migrate("data-a", "--from", "sqlite", "--to", "postgres", "--url", url)
        assert again.returncode == 0 and "1 rows read, 0 written (1 were there already)" in again.stderr
        # Back into C's empty data directory (the URL from the environment this time).
        back = subprocess.run(
            [str(_binary()), "--config", str(cfg), "--data-dir", str(tmp_path / "data-c"),
             "store", "migrate", "--from", "postgres", "--to", "sqlite"],
            capture_output=True, text=True, env=env_of(tmp_path, on_pg), timeout=120)
        assert back.returncode == 0, back.stderr
        assert "ask about the trip" in c("list_followups", {}).stdout
        assert "sails on weekends" in c("search_memory", {"searchQuery": "sails"}).stdout
        undone = c("undo_edit", {"path": str(ws / "notes.txt")})
        assert undone.returncode == 0, undone.stdout + undone.stderr
        assert (ws / "notes.txt").read_text() == "first\n"
        # Mistakes are named.
        same = migrate("data-a", "--from", "sqlite", "--to", "sqlite", "--url", url)
        assert same.returncode == 2 and "name the same backend" in same.stderr, same.stderr
        nowhere = migrate("data-a", "--from", "sqlite", "--to", "postgres")
        assert nowhere.returncode == 2 and "give --url" in nowhere.stderr, nowhere.stderr
    finally:
        drop_database(name)


@pytest.mark.anyio
async def test_a_follow_up_scheduled_through_one_instance_is_told_by_another(tmp_path):
    """Two HTTP servers on one PostgreSQL: Alice schedules through A and leaves; her session
    on B is told when it falls due (B's scheduler claims it, as she is reachable there)."""
    if not on_postgres():
        pytest.skip("instances share follow-ups only through PostgreSQL (RINGFENCE_TEST_STORE=postgres)")
    cfg = tokens_config(alice=ALICE) + '[followups]\nproactive = true\ntimezone = "UTC"\n'
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = serve_http(tmp_path / "a", cfg, "--tools", "followups")
    b = serve_http(tmp_path / "b", cfg, "--tools", "followups")
    heard = Heard()
    try:
        with anyio.fail_after(TEST_TIMEOUT_S):
            async with listening_http(b.url, ALICE, heard) as on_b:
                async with client(a.url, ALICE) as on_a:
                    r = await call(on_a, "schedule_followup",
                                   {"context": INTERVIEW, "minutes_from_now": 0.05})
                    assert not is_error(r), text_of(r)
                # A's session has ended: only B can reach Alice now.
                await heard.wait(lambda: bool(said(heard, INTERVIEW)), 30)
                [f] = structured(await call(on_b, "list_followups", {"status": "completed"}))["followups"]
                assert f["context"] == INTERVIEW and f["attempts"] == 1, f
                await anyio.sleep(1.5)
                assert len(said(heard, INTERVIEW)) == 1, heard.messages
        # B's scheduler delivered it; A's never claimed it.
        assert "follow-ups delivered=1" in (tmp_path / "b" / "http.log").read_text()
        assert "delivered=" not in (tmp_path / "a" / "http.log").read_text()
    finally:
        a.stop()
        b.stop()


@pytest.mark.anyio
async def test_the_audit_trail_of_every_instance_is_read_in_one_place(tmp_path):
    """Two HTTP servers: each keeps its JSON-lines file; with PostgreSQL `ringfence audit`
    (here from a third data directory) reads both servers' calls from the shared table."""
    cfg = tokens_config(alice=ALICE)
    servers = []
    for name in ("a", "b"):
        (tmp_path / name / "ws").mkdir(parents=True)
        servers.append(serve_http(tmp_path / name, cfg, "--tools", "files",
                                  roots=(str(tmp_path / name / "ws"),)))
    try:
        with anyio.fail_after(TEST_TIMEOUT_S):
            for name, srv in zip(("a", "b"), servers):
                async with client(srv.url, ALICE) as s:
                    r = await call(s, "write_file", {"path": f"from-{name}.txt", "content": name})
                    assert not is_error(r), text_of(r)
    finally:
        for srv in servers:
            srv.stop()
    for name in ("a", "b"):
        own = (tmp_path / name / "data" / "audit" / "audit.jsonl").read_text()
        other = "b" if name == "a" else "a"
        assert f"from-{name}.txt" in own and f"from-{other}.txt" not in own, own
        assert [json.loads(x)["tool"] for x in own.splitlines()] == ["write_file"], own
    out = subprocess.run(
        [str(_binary()), "--data-dir", str(tmp_path / "c"), "audit", "--user", "alice",
         "--tool", "write_file"], capture_output=True, text=True,
        env=env_of(tmp_path, store_env()), timeout=60)
    assert out.returncode == 0, out.stderr
    lines = [json.loads(x) for x in out.stdout.splitlines()]
    if on_postgres():
        assert [(x["user"], x["tool"], x["outcome"]) for x in lines] == [("alice", "write_file", "ok")] * 2
        assert [x["args"]["path"] for x in lines] == ["from-a.txt", "from-b.txt"]
    else:
        assert lines == [], lines
