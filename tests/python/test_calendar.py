"""End-to-end tests of seed 003's four calendar tools on the local calendar, through the real
binary with the official MCP Python SDK as the client: the seed's calls verbatim (the Meet
link refused, not ignored), argument errors naming the fix, time zones (another zone than
the user's, a move across a daylight-saving change keeping the wall-clock time), a recurring
series imported from an iCalendar file with one occurrence changed and one deleted, export
and import, and two HTTP users who never see each other's events."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import anyio
import pytest

from store import on_postgres, psql, store_env

from test_http import call, client, token_hash
from test_http_users import serve as serve_http
from test_sdk_client import (  # noqa: F401 (fixtures)
    TEST_TIMEOUT_S, _binary, dirs, is_error, ringfence_bin, serve, structured, text_of,
)

pytestmark = pytest.mark.anyio

TOOLS = ["list_calendar_events", "create_calendar_event", "update_calendar_event",
         "delete_calendar_event"]
NY = ZoneInfo("America/New_York")
ALICE, BOB = "alice-calendar-token-" + "a" * 20, "bob-calendar-token-" + "b" * 20


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def config(tmp: Path, text: str = '[calendar]\ntimezone = "America/New_York"\n') -> Path:
    path = tmp / "ringfence.toml"
    path.write_text(text)
    return path


def calendar_server(bin_path: Path, ws: Path, data: Path, cfg: Path) -> Any:
    return serve(bin_path, ws, data, preset=None,
                 options=("--config", str(cfg), "--tools", "calendar"))


def tomorrow_at(hour: int, minute: int = 0, days: int = 1) -> dt.datetime:
    d = dt.datetime.now(NY).date() + dt.timedelta(days=days)
    return dt.datetime(d.year, d.month, d.day, hour, minute, tzinfo=NY)


def iso(t: dt.datetime) -> str:
    return t.isoformat(timespec="seconds")


def cli(tmp: Path, cfg: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp),
           "XDG_CONFIG_HOME": str(tmp / "xdg-config"), **store_env()}
    return subprocess.run([str(_binary()), "--config", str(cfg), "--data-dir", str(tmp / "data"), *args],
                          capture_output=True, text=True, env=env, input=stdin, timeout=60)


async def test_the_seed_calls_verbatim(ringfence_bin, dirs):
    ws, data = dirs
    cfg = config(ws.parent)
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with calendar_server(ringfence_bin, ws, data, cfg) as srv:
            listed = await srv.session.list_tools()
            assert [t.name for t in listed.tools] == TOOLS
            # "What's on my calendar next week?"
            r = await srv.call("list_calendar_events", {"days": 7})
            assert not is_error(r) and "No events found" in text_of(r), text_of(r)
            assert structured(r)["events"] == []
            # "Schedule a team sync tomorrow at 10am for 30 minutes" — with a Meet link,
            # which the local calendar cannot make: refused, not silently dropped.
            seed_create = {"title": "Team Sync", "startDateTime": "2026-01-29T10:00:00-05:00",
                           "endDateTime": "2026-01-29T10:30:00-05:00", "addMeetLink": True}
            r = await srv.call("create_calendar_event", seed_create)
            assert is_error(r) and "Meet" in text_of(r) and "addMeetLink" in text_of(r), text_of(r)
            assert structured(r)["error"] == "refused"
            del seed_create["addMeetLink"]
            r = await srv.call("create_calendar_event", seed_create)
            assert not is_error(r), text_of(r)
            ev = structured(r)
            assert ev["title"] == "Team Sync" and ev["calendar"] == "Personal"
            assert ev["start"] == "2026-01-29T10:00:00-05:00" and ev["startUtc"] == "2026-01-29T15:00:00.000Z"
            assert ev["eventTimezone"] == "America/New_York" and not ev["recurring"] and not ev["allDay"]
            assert ev["eventId"] in text_of(r)
            # "Move my dentist appointment to 3pm": the seed's own ID is no event here.
            seed_update = {"eventId": "abc123", "startDateTime": "2026-01-29T15:00:00-05:00",
                           "endDateTime": "2026-01-29T16:00:00-05:00"}
            r = await srv.call("update_calendar_event", seed_update)
            assert is_error(r) and "list_calendar_events" in text_of(r), text_of(r)
            assert structured(r)["error"] == "not_found"
            r = await srv.call("update_calendar_event", {**seed_update, "eventId": ev["eventId"]})
            assert not is_error(r), text_of(r)
            moved = structured(r)
            assert moved["start"] == "2026-01-29T15:00:00-05:00" and moved["end"] == "2026-01-29T16:00:00-05:00"
            assert moved["title"] == "Team Sync", "only the given fields change"
            r = await srv.call("delete_calendar_event", {"eventId": ev["eventId"]})
            assert not is_error(r) and "deleted" in text_of(r), text_of(r)
            r = await srv.call("delete_calendar_event", {"eventId": ev["eventId"]})
            assert is_error(r) and structured(r)["error"] == "not_found"


async def test_bad_arguments_name_the_fix(ringfence_bin, dirs):
    ws, data = dirs
    cfg = config(ws.parent)
    start = tomorrow_at(10)
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with calendar_server(ringfence_bin, ws, data, cfg) as srv:
            for days in (0, 31, -1, 0.5):
                msg = await srv.err("list_calendar_events", {"days": days})
                assert "days must be from 1 to 30" in msg, msg
            msg = await srv.err("create_calendar_event", {
                "title": "No zone", "startDateTime": "2026-01-29T10:00:00",
                "endDateTime": "2026-01-29T10:30:00"})
            assert "no time zone offset" in msg and "2026-01-29T10:00:00-05:00" in msg, msg
            msg = await srv.err("create_calendar_event", {
                "title": "Backwards", "startDateTime": iso(start),
                "endDateTime": iso(start - dt.timedelta(hours=1))})
            assert "must be after startDateTime" in msg, msg
            msg = await srv.err("create_calendar_event", {
                "title": " ", "startDateTime": iso(start), "endDateTime": iso(start + dt.timedelta(hours=1))})
            assert "title is empty" in msg, msg
            msg = await srv.err("list_calendar_events", {"calendarId": "Holidays"})
            assert "no calendar" in msg and "Personal (personal)" in msg, msg
            msg = await srv.err("update_calendar_event", {"eventId": "abc123"})
            assert "nothing to change" in msg, msg


async def test_zones_and_a_move_across_daylight_saving(ringfence_bin, dirs):
    ws, data = dirs
    cfg = config(ws.parent)
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with calendar_server(ringfence_bin, ws, data, cfg) as srv:
            # A call with colleagues in Tokyo, given in their offset: shown in the user's
            # zone (and UTC), the instant unchanged.
            t = tomorrow_at(19)
            tokyo = t.astimezone(dt.timezone(dt.timedelta(hours=9)))
            r = await srv.call("create_calendar_event", {
                "title": "Tokyo call", "startDateTime": iso(tokyo),
                "endDateTime": iso(tokyo + dt.timedelta(minutes=45)), "location": "Zoom"})
            ev = structured(r)
            assert ev["startLocal"] == iso(t), ev
            listed = structured(await srv.call("list_calendar_events", {"days": 2}))
            [e] = [e for e in listed["events"] if e["title"] == "Tokyo call"]
            assert e["startLocal"] == iso(t) and e["location"] == "Zoom"
            assert t.strftime("%H:%M") in text_of(await srv.call("list_calendar_events", {"days": 2}))
            # 2026-03-06 10:00 New York (EST, -05:00) moved a week on, past the change to
            # EDT on 03-08, written at that date's offset: still 10:00 on the clock.
            r = await srv.call("create_calendar_event", {
                "title": "Dentist", "startDateTime": "2026-03-06T10:00:00-05:00",
                "endDateTime": "2026-03-06T11:00:00-05:00"})
            ev = structured(r)
            r = await srv.call("update_calendar_event", {
                "eventId": ev["eventId"], "startDateTime": "2026-03-13T10:00:00-04:00"})
            moved = structured(r)
            assert moved["start"] == "2026-03-13T10:00:00-04:00", moved
            assert moved["end"] == "2026-03-13T11:00:00-04:00", "the hour's length is kept"
            assert moved["startUtc"] == "2026-03-13T14:00:00.000Z"


def weekly_ics(first: dt.datetime) -> str:
    """A daily series of five from `first` (New York time): the third day excluded, the
    second moved an hour later and renamed."""
    fmt = "%Y%m%dT%H%M%S"
    second = first + dt.timedelta(days=1)
    third = first + dt.timedelta(days=2)
    return "\r\n".join([
        "BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//test//EN",
        "BEGIN:VEVENT", "UID:series-1@test",
        f"DTSTART;TZID=America/New_York:{first.strftime(fmt)}",
        f"DTEND;TZID=America/New_York:{(first + dt.timedelta(minutes=30)).strftime(fmt)}",
        "RRULE:FREQ=DAILY;COUNT=5",
        f"EXDATE;TZID=America/New_York:{third.strftime(fmt)}",
        "SUMMARY:Standup", "END:VEVENT",
        "BEGIN:VEVENT", "UID:series-1@test",
        f"RECURRENCE-ID;TZID=America/New_York:{second.strftime(fmt)}",
        f"DTSTART;TZID=America/New_York:{(second + dt.timedelta(hours=1)).strftime(fmt)}",
        f"DTEND;TZID=America/New_York:{(second + dt.timedelta(hours=1, minutes=30)).strftime(fmt)}",
        "SUMMARY:Standup (late)", "END:VEVENT",
        "BEGIN:VEVENT", "UID:allday@test", "DTSTART;VALUE=DATE:" + first.strftime("%Y%m%d"),
        "DTEND;VALUE=DATE:" + (first + dt.timedelta(days=1)).strftime("%Y%m%d"),
        "SUMMARY:Holiday", "END:VEVENT",
        "END:VCALENDAR", ""])


async def test_a_recurring_series_one_occurrence_changed_and_one_deleted(ringfence_bin, dirs):
    ws, data = dirs
    tmp = ws.parent
    cfg = config(tmp)
    first = tomorrow_at(9)
    out = cli(tmp, cfg, "calendar", "import", "-", stdin=weekly_ics(first))
    assert out.returncode == 0 and "imported 2 events" in out.stderr, out.stderr
    again = cli(tmp, cfg, "calendar", "import", "-", stdin=weekly_ics(first))
    assert "imported 0 events" in again.stderr and "2 already there" in again.stderr, again.stderr
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with calendar_server(ringfence_bin, ws, data, cfg) as srv:
            listed = structured(await srv.call("list_calendar_events", {"days": 7}))
            got = [(e["title"], e["startLocal"]) for e in listed["events"]]
            day = lambda n, h=9: iso(first + dt.timedelta(days=n, hours=h - 9))  # noqa: E731
            assert got == [
                ("Holiday", first.date().isoformat()),
                ("Standup", day(0)),
                ("Standup (late)", day(1, 10)),
                ("Standup", day(3)),
                ("Standup", day(4)),
            ], got
            series = [e for e in listed["events"] if e["title"].startswith("Standup")]
            assert all(e["recurring"] for e in series) and listed["events"][0]["allDay"]
            assert len({e["eventId"] for e in series}) == 4, "each occurrence has its own ID"
            assert "recurring" in text_of(await srv.call("list_calendar_events", {"days": 7}))
            # Change the fourth day's occurrence only; delete the fifth's only.
            r = await srv.call("update_calendar_event", {"eventId": series[2]["eventId"],
                                                         "title": "Standup with guests"})
            assert not is_error(r) and structured(r)["startLocal"] == day(3), text_of(r)
            r = await srv.call("delete_calendar_event", {"eventId": series[3]["eventId"]})
            assert not is_error(r) and "This occurrence" in text_of(r), text_of(r)
            listed = structured(await srv.call("list_calendar_events", {"days": 7}))
            got = [(e["title"], e["startLocal"]) for e in listed["events"]]
            assert got == [
                ("Holiday", first.date().isoformat()),
                ("Standup", day(0)),
                ("Standup (late)", day(1, 10)),
                ("Standup with guests", day(3)),
            ], got
    # Exported, the series carries its exception and overrides.
    exported = cli(tmp, cfg, "calendar", "export")
    assert exported.returncode == 0, exported.stderr
    text = exported.stdout
    assert text.count("BEGIN:VEVENT") == 4 and "RRULE:FREQ=DAILY;COUNT=5" in text
    assert text.count("EXDATE") == 2 and "Standup with guests" in text


async def test_two_http_users_never_see_each_others_events(tmp_path):
    cfg = (f'[http]\ntokens = [{{ user = "alice", hash = "{token_hash(ALICE)}" }},'
           f' {{ user = "bob", hash = "{token_hash(BOB)}" }}]\n'
           '[calendar]\ntimezone = "America/New_York"\n'
           '[calendar.users.bob]\ntimezone = "Europe/Berlin"\n')
    srv = serve_http(tmp_path, cfg, "--tools", "calendar")
    start = tomorrow_at(10)
    try:
        with anyio.fail_after(TEST_TIMEOUT_S):
            async with client(srv.url, ALICE) as a, client(srv.url, BOB) as b:
                r = await call(a, "create_calendar_event", {
                    "title": "Alice's private appointment", "startDateTime": iso(start),
                    "endDateTime": iso(start + dt.timedelta(hours=1)), "description": "very private"})
                assert not is_error(r), text_of(r)
                alice_id = structured(r)["eventId"]
                r = await call(b, "list_calendar_events", {"days": 7})
                assert "No events found" in text_of(r) and structured(r)["timezone"] == "Europe/Berlin"
                for tool, args in [("update_calendar_event", {"eventId": alice_id, "title": "mine"}),
                                   ("delete_calendar_event", {"eventId": alice_id})]:
                    r = await call(b, tool, args)
                    assert is_error(r) and structured(r)["error"] == "not_found", text_of(r)
                r = await call(a, "list_calendar_events", {"days": 7})
                [e] = structured(r)["events"]
                assert e["title"] == "Alice's private appointment" and e["timezone"] == "America/New_York"
        # The audit trail holds no event's title or notes.
        audit = "".join(p.read_text() for p in (tmp_path / "data" / "audit").glob("*.jsonl*"))
        assert "create_calendar_event" in audit
        assert "private appointment" not in audit and "very private" not in audit
    finally:
        srv.stop()


def test_google_says_plainly_it_is_not_connected(tmp_path):
    cfg = config(tmp_path, '[calendar]\nprovider = "google"\n')
    out = cli(tmp_path, cfg, "call", "list_calendar_events", "{}")
    assert out.returncode != 0
    assert "Google Calendar is not connected" in out.stdout + out.stderr, out


async def test_an_http_user_without_a_table_never_gets_the_operators_login(tmp_path):
    """The default [calendar] account holds a login: only the local user's. A token user
    without a table of their own is told their calendar is not connected; one with a table
    uses their own login, never the default's."""
    cfg = (f'[http]\ntokens = [{{ user = "alice", hash = "{token_hash(ALICE)}" }},'
           f' {{ user = "bob", hash = "{token_hash(BOB)}" }}]\n'
           '[calendar]\nprovider = "caldav"\nurl = "http://127.0.0.1:9/dav/"\nusername = "operator"\n'
           'password = "operator-secret"\n'
           '[calendar.users.bob]\nusername = "bob"\n')
    srv = serve_http(tmp_path, cfg, "--tools", "calendar")
    try:
        with anyio.fail_after(TEST_TIMEOUT_S):
            async with client(srv.url, ALICE) as a, client(srv.url, BOB) as b:
                r = await call(a, "list_calendar_events", {})
                assert is_error(r) and "not connected" in text_of(r), text_of(r)
                assert "[calendar.users.alice]" in text_of(r) and "operator-secret" not in text_of(r)
                # Bob's table names his login but no password: not connected, and the
                # operator's password is not tried for him.
                r = await call(b, "list_calendar_events", {})
                assert is_error(r) and "no password" in text_of(r), text_of(r)
    finally:
        srv.stop()


def test_local_calendars_live_in_the_configured_store(tmp_path):
    """SQLite: calendar.db in the data directory. PostgreSQL (RINGFENCE_TEST_STORE): the
    objects are rows of the database, and no file is made."""
    cfg = config(tmp_path)
    ics = ("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//test//EN\r\nBEGIN:VEVENT\r\n"
           "UID:where-1@test\r\nDTSTAMP:20261201T000000Z\r\nDTSTART:20261210T150000Z\r\n"
           "DTEND:20261210T160000Z\r\nSUMMARY:Where am I\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n")
    done = cli(tmp_path, cfg, "calendar", "import", "-", stdin=ics)
    assert done.returncode == 0, done.stderr
    db_file = tmp_path / "data" / "calendar.db"
    if on_postgres():
        url = store_env()["RINGFENCE_DATABASE_URL"]
        assert psql(url, "SELECT count(*) FROM calendar_objects WHERE ics LIKE '%Where am I%'").strip() == "1"
        assert not db_file.exists()
    else:
        assert db_file.exists()
