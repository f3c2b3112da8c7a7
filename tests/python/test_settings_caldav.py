"""A person's own CalDAV login on the settings page (`/settings/calendar`), in a real browser
(Debian's Chromium through Playwright, as in test_settings_page.py) against
`ringfence serve --http` with bearer-token users and a real CalDAV server (Radicale on
loopback, as in test_calendar_caldav.py).

With `[calendar] provider = "caldav"` and no server configured, each person brings their
own login: entered on the page, it is what their assistant's calendar tools use (checked
through the official MCP client and on the CalDAV server itself); the password is never in
the page again, nor in the server's log; forgetting it disconnects the calendar. A URL
naming a private address is refused unless the operator lists it in
`[calendar] user_allow_private` (the tests' Radicale is on loopback, so they list
127.0.0.1), and nothing is kept then. One person's login is never another's. With
PostgreSQL, a login saved through one instance is used (and its forgetting seen) by another
on its next call.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import anyio
import caldav
import pytest

from store import on_postgres
from test_calendar_caldav import day_at, iso, other_client, radicale, summaries
from test_http import call, client
from test_http_users import tokens_config
from test_sdk_client import TEST_TIMEOUT_S, is_error, structured, text_of
from test_settings_page import (  # noqa: F401 (fixtures)
    ALICE, BOB, WORDS_ONLY, anyio_backend, browser, expect, new_page, sign_in, start, submit,
)

pytestmark = pytest.mark.anyio

ALICE_PW, BOB_PW = "alice-pw", "bob-pw"  # Radicale's users (test_calendar_caldav.radicale)


def caldav_config(allow_loopback: bool = True) -> str:
    """Every user's calendar is CalDAV with nothing configured: each brings their own."""
    allow = 'user_allow_private = ["127.0.0.1"]\n' if allow_loopback else ""
    return (tokens_config(alice=ALICE, bob=BOB) + WORDS_ONLY
            + '[calendar]\nprovider = "caldav"\ntimezone = "Europe/Berlin"\n' + allow)


def calendar_of(url: str, user: str, password: str) -> caldav.Calendar:
    """`user`'s "Work" calendar as another application sees it (made on first use)."""
    if user == "alice":
        return other_client(url)
    principal = caldav.DAVClient(url=url, username=user, password=password).principal()
    for c in principal.calendars():
        if c.get_display_name() == "Work":
            return c
    return principal.make_calendar(name="Work")


def kept_file(srv_dir: Path, user: str) -> Path:
    return srv_dir / "data" / "calendar" / f"caldav-{user}.json"


async def open_calendar(page: Any, srv: Any) -> None:
    await page.goto(srv.base + "/settings/calendar")
    await expect(page.get_by_role("heading", name="Calendar", exact=True).first).to_be_visible()


async def enter_login(page: Any, url: str, username: str, password: str) -> tuple[Any, Any]:
    """Fills the form and presses Save; the first response and the final one."""
    await page.get_by_label("CalDAV URL").fill(url)
    await page.get_by_label("Username").fill(username)
    await page.get_by_label("Password").fill(password)
    return await submit(page, page.get_by_role("button", name="Save"))


async def tool(srv: Any, token: str, name: str, args: dict[str, Any]) -> Any:
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with client(srv.url, token) as s:
            return await call(s, name, args)


def not_connected(r: Any) -> bool:
    return is_error(r) and "not connected" in text_of(r).lower()


async def test_a_login_entered_on_the_page_is_what_the_tools_use(start, browser, tmp_path):
    with radicale(tmp_path) as url:
        alice_work = calendar_of(url, "alice", ALICE_PW)
        bob_work = calendar_of(url, "bob", BOB_PW)
        srv = start(caldav_config())
        srv_dir = tmp_path / "server-0"

        # Nothing entered yet: the tools say where to enter it.
        r = await tool(srv, ALICE, "list_calendar_events", {"days": 7})
        assert not_connected(r) and "settings page" in text_of(r), text_of(r)

        page = await new_page(browser)
        await sign_in(page, srv, ALICE)
        await open_calendar(page, srv)
        await expect(page.locator("main")).to_contain_text("Not connected")
        await expect(page.get_by_role("button", name="Forget CalDAV login")).to_have_count(0)
        first, final = await enter_login(page, url, "alice", ALICE_PW)
        assert first.status == 303, (first.status, await final.text())
        await expect(page.get_by_role("status")).to_contain_text("CalDAV login is saved")
        await expect(page.get_by_role("button", name="Forget CalDAV login")).to_be_visible()
        # The URL and username are shown again; the password nowhere, not even in its field.
        html = await page.content()
        assert url in html
        await expect(page.get_by_label("CalDAV URL")).to_have_value(url)
        await expect(page.get_by_label("Username")).to_have_value("alice")
        assert ALICE_PW not in html, "the password is in the page"
        assert await page.get_by_label("Password").input_value() == ""
        await page.reload()
        assert ALICE_PW not in await page.content()
        if not on_postgres():
            kept = kept_file(srv_dir, "alice")
            assert kept.stat().st_mode & 0o777 == 0o600, oct(kept.stat().st_mode)
            assert kept.parent.stat().st_mode & 0o777 == 0o700
            assert not list(kept.parent.glob("*.partial"))

        # Alice's assistant now works on her CalDAV calendar.
        sync = day_at(1, 10)
        r = await tool(srv, ALICE, "create_calendar_event", {
            "title": "Team Sync", "startDateTime": iso(sync),
            "endDateTime": iso(sync + dt.timedelta(minutes=30))})
        assert not is_error(r), text_of(r)
        assert "Team Sync" in summaries(alice_work)
        r = await tool(srv, ALICE, "list_calendar_events", {"days": 7})
        assert not is_error(r), text_of(r)
        assert [e["title"] for e in structured(r)["events"]] == ["Team Sync"]

        # Bob has none of it: not on his page, not for his assistant.
        bob = await new_page(browser)
        await sign_in(bob, srv, BOB)
        await open_calendar(bob, srv)
        await expect(bob.locator("main")).to_contain_text("Not connected")
        assert url not in await bob.content()
        await expect(bob.get_by_role("button", name="Forget CalDAV login")).to_have_count(0)
        r = await tool(srv, BOB, "list_calendar_events", {"days": 7})
        assert not_connected(r), text_of(r)
        # His own login reaches his calendar, and Alice's stays hers.
        first, _ = await enter_login(bob, url, "bob", BOB_PW)
        assert first.status == 303, first.status
        r = await tool(srv, BOB, "create_calendar_event", {
            "title": "Bob's Lunch", "startDateTime": iso(day_at(1, 12)),
            "endDateTime": iso(day_at(1, 13))})
        assert not is_error(r), text_of(r)
        assert "Bob's Lunch" in summaries(bob_work) and "Bob's Lunch" not in summaries(alice_work)
        r = await tool(srv, ALICE, "list_calendar_events", {"days": 7})
        assert [e["title"] for e in structured(r)["events"]] == ["Team Sync"], text_of(r)

        # Alice forgets hers: gone from the page and the store, and her tools say so.
        first, _ = await submit(page, page.get_by_role("button", name="Forget CalDAV login"))
        assert first.status == 303, first.status
        await expect(page.get_by_role("status")).to_contain_text("forgotten")
        await expect(page.locator("main")).to_contain_text("Not connected")
        assert await page.get_by_label("CalDAV URL").input_value() == ""
        if not on_postgres():
            assert not kept_file(srv_dir, "alice").exists()
        r = await tool(srv, ALICE, "list_calendar_events", {"days": 7})
        assert not_connected(r), text_of(r)
        r = await tool(srv, BOB, "list_calendar_events", {"days": 7})
        assert not is_error(r), text_of(r)

        # Neither password was ever logged.
        srv.stop()
        log = srv.log.read_text(errors="replace")
        assert ALICE_PW not in log and BOB_PW not in log


async def test_private_urls_are_refused_without_the_operators_allow_list(start, browser, tmp_path):
    with radicale(tmp_path) as url:
        srv = start(caldav_config(allow_loopback=False))
        page = await new_page(browser)
        await sign_in(page, srv, ALICE)
        for target, kind in [(url, "loopback"),
                             ("http://169.254.169.254/latest/meta-data/", "link-local"),
                             ("http://10.0.0.1/dav/", "private-network")]:
            await open_calendar(page, srv)
            first, final = await enter_login(page, target, "alice", ALICE_PW)
            assert first.status == 400, (target, first.status)
            main = page.locator("main")
            await expect(main).to_contain_text(kind)
            await expect(main).to_contain_text("[calendar] user_allow_private")
            await expect(main).to_contain_text("Nothing was saved")
            assert ALICE_PW not in await page.content()
        # Mistakes the browser's own checks let through (or a hand-made request) are named
        # with their fix, and nothing is kept either.
        await open_calendar(page, srv)
        token = await page.locator("input[name=csrf]").first.get_attribute("value")
        for fields, says in [
            ({"url": "", "username": "alice", "password": "x"}, "URL is empty"),
            ({"url": "ftp://dav.example.org/", "username": "alice", "password": "x"}, "`ftp:`"),
            ({"url": "https://alice:x@dav.example.org/", "username": "alice", "password": "x"},
             "leave them out of the URL"),
            ({"url": "https://dav.example.org/", "username": "", "password": "x"},
             "username is empty"),
            ({"url": "https://dav.example.org/", "username": "alice", "password": ""},
             "password is empty"),
            ({"url": "https://dav.example.org/" + "a" * 3000, "username": "alice", "password": "x"},
             "at most 2048"),
        ]:
            r = await page.request.post(srv.base + "/settings/calendar/caldav",
                                        form={"csrf": token, **fields},
                                        headers={"Origin": srv.base}, max_redirects=0)
            assert r.status == 400, (fields, r.status)
            body = await r.text()
            assert says in body and "Nothing was saved" in body, (says, body)
        if not on_postgres():
            assert not kept_file(tmp_path / "server-0", "alice").exists()
        r = await tool(srv, ALICE, "list_calendar_events", {"days": 7})
        assert not_connected(r) and "settings page" in text_of(r), text_of(r)
        await open_calendar(page, srv)
        await expect(page.locator("main")).to_contain_text("Not connected")


async def test_other_providers_offer_no_form(start, browser):
    """The operator chose the local calendar: the page says so and takes no CalDAV login."""
    srv = start(tokens_config(alice=ALICE, bob=BOB) + WORDS_ONLY
                + '[calendar]\nprovider = "local"\n')
    page = await new_page(browser)
    await sign_in(page, srv, ALICE)
    await open_calendar(page, srv)
    await expect(page.locator("main")).to_contain_text("set by the server's operator")
    await expect(page.get_by_label("CalDAV URL")).to_have_count(0)
    await expect(page.get_by_role("button", name="Save")).to_have_count(0)


@pytest.mark.skipif(not on_postgres(),
                    reason="logins are shared between instances only through PostgreSQL "
                           "(RINGFENCE_TEST_STORE=postgres)")
async def test_a_login_saved_through_one_instance_is_used_by_another(start, browser, tmp_path):
    """Saved on A, used on B; forgotten on A, B's next call (its client made for the old
    login) is not connected."""
    with radicale(tmp_path) as url:
        alice_work = calendar_of(url, "alice", ALICE_PW)
        a, b = start(caldav_config()), start(caldav_config())
        page = await new_page(browser)
        await sign_in(page, a, ALICE)
        await open_calendar(page, a)
        first, _ = await enter_login(page, url, "alice", ALICE_PW)
        assert first.status == 303, first.status
        r = await tool(b, ALICE, "create_calendar_event", {
            "title": "Planning", "startDateTime": iso(day_at(2, 9)),
            "endDateTime": iso(day_at(2, 10))})
        assert not is_error(r), text_of(r)
        assert "Planning" in summaries(alice_work)
        await submit(page, page.get_by_role("button", name="Forget CalDAV login"))
        r = await tool(b, ALICE, "list_calendar_events", {"days": 7})
        assert not_connected(r), text_of(r)
