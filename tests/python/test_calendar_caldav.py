"""The calendar tools against a real CalDAV server (Radicale, started by the test), with an
independent CalDAV client (the `caldav` package) on the other side: what ringfence creates,
moves and deletes is really there (or gone) for others; what others create shows up in
ringfence's list; a recurring series made elsewhere is listed occurrence by occurrence and
one occurrence is changed and one removed the standard way (RECURRENCE-ID, EXDATE); a change
made by the other client between ringfence's read and its update is a conflict, and the
other change is kept; a wrong password says the calendar is not connected."""

from __future__ import annotations

import datetime as dt
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator
from zoneinfo import ZoneInfo

import anyio
import caldav
import pytest

from test_sdk_client import (  # noqa: F401 (fixtures)
    TEST_TIMEOUT_S, dirs, is_error, ringfence_bin, serve, structured, text_of,
)

pytestmark = pytest.mark.anyio

BERLIN = ZoneInfo("Europe/Berlin")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def radicale(tmp: Path) -> Iterator[str]:
    """A Radicale server on loopback with users alice and bob (plain htpasswd)."""
    (tmp / "users").write_text("alice:alice-pw\nbob:bob-pw\n")
    port = free_port()
    log = open(tmp / "radicale.log", "wb")  # noqa: SIM115 (closed below)
    proc = subprocess.Popen(
        [sys.executable, "-m", "radicale", "--server-hosts", f"127.0.0.1:{port}",
         "--storage-filesystem-folder", str(tmp / "collections"),
         "--auth-type", "htpasswd", "--auth-htpasswd-filename", str(tmp / "users"),
         "--auth-htpasswd-encryption", "plain", "--rights-type", "owner_only"],
        stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, (tmp / "radicale.log").read_text()
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()


def other_client(url: str) -> caldav.Calendar:
    """Alice's "Work" calendar as another application sees it (made on first use)."""
    principal = caldav.DAVClient(url=url, username="alice", password="alice-pw").principal()
    for c in principal.calendars():
        if c.get_display_name() == "Work":
            return c
    return principal.make_calendar(name="Work")


def caldav_config(tmp: Path, url: str) -> Path:
    path = tmp / "ringfence.toml"
    path.write_text(f'[calendar]\nprovider = "caldav"\nurl = "{url}"\nusername = "alice"\n'
                    'password_env = "RINGFENCE_CALDAV_PASSWORD"\ntimezone = "Europe/Berlin"\n')
    return path


def day_at(days: int, hour: int, minute: int = 0) -> dt.datetime:
    d = dt.datetime.now(BERLIN).date() + dt.timedelta(days=days)
    return dt.datetime(d.year, d.month, d.day, hour, minute, tzinfo=BERLIN)


def iso(t: dt.datetime) -> str:
    return t.isoformat(timespec="seconds")


def summaries(cal: caldav.Calendar) -> dict[str, Any]:
    """Every event's summary → its VEVENT (the master), as the other client reads them."""
    out = {}
    for e in cal.events():
        for comp in e.icalendar_instance.walk("VEVENT"):
            if comp.get("RECURRENCE-ID") is None:
                out[str(comp.get("SUMMARY"))] = comp
    return out


async def test_ringfence_and_another_client_share_one_calendar(ringfence_bin, dirs):
    ws, data = dirs
    tmp = ws.parent
    with radicale(tmp) as url:
        work = other_client(url)
        dentist = day_at(2, 9)
        work.save_event(dtstart=dentist, dtend=dentist + dt.timedelta(hours=1), summary="Dentist",
                        location="Main St 1")
        cfg = caldav_config(tmp, url)
        env = {"RINGFENCE_CALDAV_PASSWORD": "alice-pw"}
        with anyio.fail_after(TEST_TIMEOUT_S):
            async with serve(ringfence_bin, ws, data, preset=None, env=env,
                             options=("--config", str(cfg), "--tools", "calendar")) as srv:
                # Made elsewhere, listed here, in the user's zone.
                r = await srv.call("list_calendar_events", {"days": 7})
                [e] = structured(r)["events"]
                assert (e["title"], e["startLocal"], e["location"], e["calendar"]) == (
                    "Dentist", iso(dentist), "Main St 1", "Work"), e
                # Made here, there for the other client.
                sync = day_at(1, 10)
                r = await srv.call("create_calendar_event", {
                    "title": "Team Sync", "startDateTime": iso(sync),
                    "endDateTime": iso(sync + dt.timedelta(minutes=30)), "description": "agenda"})
                assert not is_error(r), text_of(r)
                sync_id = structured(r)["eventId"]
                theirs = summaries(work)["Team Sync"]
                assert theirs.decoded("DTSTART") == sync and str(theirs.get("DESCRIPTION")) == "agenda"
                # Moved here ("to 3pm"), moved there.
                moved = day_at(1, 15)
                r = await srv.call("update_calendar_event", {
                    "eventId": sync_id, "startDateTime": iso(moved),
                    "endDateTime": iso(moved + dt.timedelta(hours=1))})
                assert not is_error(r), text_of(r)
                theirs = summaries(work)["Team Sync"]
                assert theirs.decoded("DTSTART") == moved and theirs.decoded("DTEND") == moved + dt.timedelta(hours=1)
                assert str(theirs.get("DESCRIPTION")) == "agenda", "only the given fields change"

                # The other client renames the dentist after ringfence listed it: ringfence's
                # update is a conflict, and the other change stays.
                [dentist_id] = [e["eventId"] for e in structured(
                    await srv.call("list_calendar_events", {"days": 7}))["events"] if e["title"] == "Dentist"]
                [obj] = [o for o in work.events() if "Dentist" in o.data]
                obj.icalendar_component["SUMMARY"] = "Dentist (check-up)"
                obj.save()
                r = await srv.call("update_calendar_event", {"eventId": dentist_id, "location": "Elm St 2"})
                assert is_error(r) and structured(r)["error"] == "conflict", text_of(r)
                assert "nothing was overwritten" in text_of(r)
                kept = summaries(work)
                assert "Dentist (check-up)" in kept and str(kept["Dentist (check-up)"].get("LOCATION")) == "Main St 1"
                # Having seen the change (listed again), the update goes through on top of it.
                await srv.call("list_calendar_events", {"days": 7})
                r = await srv.call("update_calendar_event", {"eventId": dentist_id, "location": "Elm St 2"})
                assert not is_error(r), text_of(r)
                assert str(summaries(work)["Dentist (check-up)"].get("LOCATION")) == "Elm St 2"

                # Deleted here, gone there.
                r = await srv.call("delete_calendar_event", {"eventId": sync_id})
                assert not is_error(r), text_of(r)
                assert "Team Sync" not in summaries(work)


async def test_a_series_made_elsewhere_changed_one_occurrence_at_a_time(ringfence_bin, dirs):
    ws, data = dirs
    tmp = ws.parent
    with radicale(tmp) as url:
        work = other_client(url)
        first = day_at(1, 8, 30)
        work.save_event(dtstart=first, dtend=first + dt.timedelta(minutes=15), summary="Standup",
                        rrule={"FREQ": "DAILY", "COUNT": 4})
        cfg = caldav_config(tmp, url)
        env = {"RINGFENCE_CALDAV_PASSWORD": "alice-pw"}
        with anyio.fail_after(TEST_TIMEOUT_S):
            async with serve(ringfence_bin, ws, data, preset=None, env=env,
                             options=("--config", str(cfg), "--tools", "calendar")) as srv:
                events = structured(await srv.call("list_calendar_events", {"days": 7}))["events"]
                assert [e["startLocal"] for e in events] == [iso(first + dt.timedelta(days=n)) for n in range(4)]
                assert all(e["recurring"] for e in events)
                r = await srv.call("update_calendar_event", {"eventId": events[1]["eventId"],
                                                             "title": "Standup (demo day)"})
                assert not is_error(r), text_of(r)
                r = await srv.call("delete_calendar_event", {"eventId": events[2]["eventId"]})
                assert not is_error(r) and "This occurrence" in text_of(r), text_of(r)
                after = structured(await srv.call("list_calendar_events", {"days": 7}))["events"]
                assert [(e["title"], e["startLocal"]) for e in after] == [
                    ("Standup", iso(first)),
                    ("Standup (demo day)", iso(first + dt.timedelta(days=1))),
                    ("Standup", iso(first + dt.timedelta(days=3))),
                ]
        # The other client sees the standard form: an override and an exception date.
        [obj] = [o for o in work.events() if "Standup" in o.data]
        comps = list(obj.icalendar_instance.walk("VEVENT"))
        [override] = [c for c in comps if c.get("RECURRENCE-ID") is not None]
        assert str(override["SUMMARY"]) == "Standup (demo day)"
        assert override.decoded("RECURRENCE-ID") == first + dt.timedelta(days=1)
        [master] = [c for c in comps if c.get("RECURRENCE-ID") is None]
        exdates = [d.dt for x in ([master["EXDATE"]] if not isinstance(master["EXDATE"], list)
                                  else master["EXDATE"]) for d in x.dts]
        assert exdates == [first + dt.timedelta(days=2)]


def test_a_wrong_password_says_the_calendar_is_not_connected(tmp_path):
    with radicale(tmp_path) as url:
        other_client(url)
        cfg = caldav_config(tmp_path, url)
        from test_sdk_client import _binary
        for env, want in [({"RINGFENCE_CALDAV_PASSWORD": "not-alices-pw-4711"}, "refused the login"),
                          ({}, "RINGFENCE_CALDAV_PASSWORD (calendar.password_env) is not set")]:
            out = subprocess.run(
                [str(_binary()), "--config", str(cfg), "--data-dir", str(tmp_path / "data"),
                 "call", "list_calendar_events", "{}"],
                capture_output=True, text=True, timeout=60,
                env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), **env})
            assert out.returncode != 0
            said = out.stdout + out.stderr
            assert "CalDAV calendar is not connected" in said and want in said, said
            assert "not-alices-pw-4711" not in said and "alice-pw" not in said
