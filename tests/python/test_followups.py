"""End-to-end tests of seed 003's four follow-up tools through the real binary, with the
official MCP Python SDK as the client: the seed's documented calls verbatim, the errors it
names, argument errors naming their range, time zones and quiet hours in the results, the
proactive-messages setting, persistence across a restart, and per-user isolation over HTTP.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from test_http import call, client, token_hash
from test_http_users import serve as serve_http
from test_sdk_client import (  # noqa: F401 (fixtures)
    TEST_TIMEOUT_S, dirs, is_error, ringfence_bin, serve, structured, text_of,
)

pytestmark = pytest.mark.anyio

TOOLS = ["schedule_followup", "list_followups", "update_followup", "cancel_followup"]
ALICE, BOB = "alice-followups-token-" + "a" * 20, "bob-followups-token-" + "b" * 20


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def config(tmp: Path, text: str) -> Path:
    path = tmp / "ringfence.toml"
    path.write_text(text)
    return path


def followups_server(bin_path: Path, ws: Path, data: Path, cfg: Path) -> Any:
    return serve(bin_path, ws, data, preset=None,
                 options=("--config", str(cfg), "--tools", "followups"))


async def test_the_seed_calls_verbatim(ringfence_bin, dirs):
    ws, data = dirs
    cfg = config(ws.parent, '[followups]\nproactive = true\ntimezone = "Europe/Berlin"\n')
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with followups_server(ringfence_bin, ws, data, cfg) as srv:
            listed = await srv.session.list_tools()
            assert [t.name for t in listed.tools] == TOOLS
            # "I have a job interview in an hour, wish me luck!"
            r = await srv.call("schedule_followup", {
                "context": "Check in after job interview to see how it went",
                "minutes_from_now": 90})
            assert not is_error(r), text_of(r)
            s = structured(r)
            assert s["followupId"] == 1 and s["status"] == "pending"
            assert s["timezone"] == "Europe/Berlin"
            # December in Berlin: UTC+01:00; the UTC time is given too.
            assert s["scheduledFor"].endswith("+01:00"), s
            assert s["scheduledForUtc"].endswith("Z"), s
            assert "Follow-up 1 scheduled for" in text_of(r) and "in 1 h 30 min" in text_of(r)
            assert s["proactive"] is True and s["channels"] == ["mcp"]
            assert s["deliveryNote"] is None

            # "What follow-ups do you have scheduled?"
            r = await srv.call("list_followups", {"status": "pending"})
            s = structured(r)
            assert s["total"] == 1 and s["followups"][0]["context"] == (
                "Check in after job interview to see how it went")
            assert "#1 pending" in text_of(r)

            # "Actually, push that check-in back another hour" (the seed's id is 12; here 1)
            r = await srv.call("update_followup", {"followup_id": 1, "minutes_from_now": 120})
            assert not is_error(r), text_of(r)
            assert structured(r)["updated"] == ["time"]
            assert "in 2 h" in text_of(r)

            # "Never mind about that check-in, it's resolved"
            r = await srv.call("cancel_followup", {
                "followup_id": 1, "reason": "Issue resolved during conversation"})
            assert not is_error(r), text_of(r)
            assert structured(r)["status"] == "cancelled"

            r = await srv.call("list_followups", {"status": "all"})
            s = structured(r)
            assert s["followups"][0]["cancelReason"] == "Issue resolved during conversation"
            assert "cancelled: Issue resolved during conversation" in text_of(r)
            assert structured(await srv.call("list_followups", {}))["total"] == 0

            # The seed's error responses.
            text = await srv.err("update_followup", {"followup_id": 12, "minutes_from_now": 120})
            assert "not found" in text
            text = await srv.err("update_followup", {"followup_id": 1, "context": "x"})
            assert "already cancelled" in text and "schedule_followup" in text


async def test_bad_arguments_name_the_range(ringfence_bin, dirs):
    ws, data = dirs
    cfg = config(ws.parent, "[followups]\nproactive = true\n")
    bad = [
        ("schedule_followup", {"context": "x", "minutes_from_now": 0}, "more than 0 and at most"),
        ("schedule_followup", {"context": "x", "minutes_from_now": -5}, "more than 0 and at most"),
        ("schedule_followup", {"context": "x", "minutes_from_now": 600000}, "at most 527040"),
        ("schedule_followup", {"context": "x", "minutes_from_now": "soon"}, "expected a number"),
        ("schedule_followup", {"context": "  ", "minutes_from_now": 5}, "context is empty"),
        ("schedule_followup", {"minutes_from_now": 5}, "context"),
        ("schedule_followup", {"context": "x", "minutes": 5}, "minutes"),
        ("list_followups", {"limit": 0}, "between 1 and 50"),
        ("list_followups", {"limit": 51}, "between 1 and 50"),
        ("list_followups", {"status": "done"}, "pending, completed, all"),
        ("update_followup", {"followup_id": 1}, "at least one"),
        ("update_followup", {"followup_id": "one", "context": "x"}, "whole number"),
        ("cancel_followup", {}, "followup_id"),
    ]
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with followups_server(ringfence_bin, ws, data, cfg) as srv:
            for name, args, needle in bad:
                text = await srv.err(name, args)
                assert needle in text, f"{name}({args}): {text}"
            # Fractions of a minute are allowed; the server is still up.
            r = await srv.call("schedule_followup", {"context": "tea", "minutes_from_now": 0.5})
            assert not is_error(r) and "in 30 s" in text_of(r), text_of(r)


async def test_off_quiet_hours_and_a_restart(ringfence_bin, dirs):
    ws, data = dirs
    # Proactive messages off (the default): scheduling works and says nothing will come.
    cfg = config(ws.parent, '[followups]\ntimezone = "UTC"\nquiet_hours = "00:00-23:59"\n')
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with followups_server(ringfence_bin, ws, data, cfg) as srv:
            r = await srv.call("schedule_followup", {"context": "water the plants",
                                                     "minutes_from_now": 30})
            s = structured(r)
            assert s["proactive"] is False
            assert "Proactive messages are off" in text_of(r)
            assert "RINGFENCE_FOLLOWUPS_PROACTIVE=true" in text_of(r)
        cfg.write_text('[followups]\nproactive = true\ntimezone = "UTC"\n'
                       'quiet_hours = "00:00-23:59"\n')
        # A restart keeps it; with delivery on, quiet hours say when it will come.
        async with followups_server(ringfence_bin, ws, data, cfg) as srv:
            s = structured(await srv.call("list_followups", {}))
            assert [f["context"] for f in s["followups"]] == ["water the plants"]
            r = await srv.call("update_followup", {"followup_id": 1, "context": "water the ferns"})
            assert "quiet hours (00:00-23:59, UTC)" in text_of(r), text_of(r)
            r = await srv.call("schedule_followup", {"context": "second", "minutes_from_now": 5})
            assert structured(r)["followupId"] == 2


async def test_users_never_reach_each_others_follow_ups_over_http(tmp_path):
    cfg = (f'[http]\ntokens = [{{ user = "alice", hash = "{token_hash(ALICE)}" }}, '
           f'{{ user = "bob", hash = "{token_hash(BOB)}" }}]\n'
           '[followups]\nproactive = true\n')
    srv = serve_http(tmp_path, cfg, "--tools", "followups")
    try:
        with anyio.fail_after(TEST_TIMEOUT_S):
            async with client(srv.url, ALICE) as alice, client(srv.url, BOB) as bob:
                r = await call(alice, "schedule_followup",
                               {"context": "alice's private check-in", "minutes_from_now": 60})
                assert structured(r)["followupId"] == 1
                # Bob's own numbering starts at 1 too, and his list holds only his.
                r = await call(bob, "schedule_followup",
                               {"context": "bob's", "minutes_from_now": 60})
                assert structured(r)["followupId"] == 1
                listed = structured(await call(bob, "list_followups", {"status": "all"}))
                assert [f["context"] for f in listed["followups"]] == ["bob's"]
                # Alice's follow-up 2 does not exist; Bob's attempts on numbers he does not
                # have read exactly like that.
                r = await call(bob, "cancel_followup", {"followup_id": 2})
                assert is_error(r) and "follow-up 2 not found" in text_of(r)
                r = await call(alice, "update_followup", {"followup_id": 2, "context": "x"})
                assert is_error(r) and "follow-up 2 not found" in text_of(r)
                listed = structured(await call(alice, "list_followups", {}))
                assert [f["context"] for f in listed["followups"]] == ["alice's private check-in"]
    finally:
        srv.stop()
    # The audit trail keeps no context.
    audit = "".join(p.read_text() for p in (tmp_path / "data").rglob("*.jsonl"))
    assert "alice's private check-in" not in audit
