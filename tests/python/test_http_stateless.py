"""Stateless HTTP clients (protocol 2026-07-28, no MCP session) through the real binary and
the official SDK's `Client`: what a user's calls keep between them.

rmcp serves 2026-07-28 requests statelessly (SEP-2567), and ringfence's server factory runs
once per request. Regression test of the defect: every request got a fresh session, so a
read was forgotten by the next call (read_file then edit_file failed "read it first") and so
was the directory switch_workspace chose. Each user's stateless requests now share one
long-lived session per roots answer; users never share one, and legacy MCP sessions keep
their own.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from test_client_roots import answer_roots, call, http_server, modern_client, stdio
from test_http import client as legacy_client
from test_http_users import ALICE, BOB, tokens_config
from test_sdk_client import CALL_TIMEOUT_S, TEST_TIMEOUT_S, is_error, structured, text_of

pytestmark = pytest.mark.anyio

BOTH = tokens_config(alice=ALICE, bob=BOB)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def ok(r: Any) -> str:
    assert not is_error(r), text_of(r)
    return text_of(r)


def refused_unread(r: Any) -> None:
    """The read-first gate refused the call."""
    assert is_error(r), text_of(r)
    assert structured(r)["error"] == "not_read_first", text_of(r)


def workspace(tmp: Path) -> Path:
    ws = tmp / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / "notes.txt").write_text("one\ntwo\n")
    (ws / "sub" / "inner.txt").write_text("inner text\n")
    return ws


async def edit_flow(c: Any, ws: Path) -> None:
    """write, read, edit, overwrite, switch_workspace, relative read: each call a request of
    its own."""
    ok(await call(c, "write_file", {"path": "fresh.txt", "content": "alpha\n"}))
    # A tool's own write counts as a read: the next call may edit what it wrote.
    ok(await call(c, "edit_file", {"path": "fresh.txt", "old_string": "alpha",
                                   "new_string": "beta"}))
    ok(await call(c, "read_file", {"path": "notes.txt"}))
    ok(await call(c, "edit_file", {"path": "notes.txt", "old_string": "two",
                                   "new_string": "deux"}))
    ok(await call(c, "write_file", {"path": "notes.txt", "content": "replaced\n"}))
    ok(await call(c, "switch_workspace", {"path": "sub"}))
    assert "inner text" in ok(await call(c, "read_file", {"path": "inner.txt"}))
    assert (ws / "fresh.txt").read_text() == "beta\n"
    assert (ws / "notes.txt").read_text() == "replaced\n"


@pytest.mark.parametrize("token", [None, ALICE], ids=["loopback", "token user"])
async def test_a_stateless_client_keeps_reads_and_workspace_between_calls(tmp_path, token):
    ws = workspace(tmp_path)
    config = tokens_config(alice=ALICE) if token else ""
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with http_server(tmp_path, config, ws) as url:
            async with modern_client(url, token, None) as c:
                await edit_flow(c, ws)
                # The gate still guards what was not read.
                (ws / "sub" / "unread.txt").write_text("never shown\n")
                refused_unread(await call(c, "write_file", {"path": "unread.txt",
                                                            "content": "x\n"}))
                # ...and a file changed behind the client's back is stale, not overwritten.
                ok(await call(c, "read_file", {"path": "inner.txt"}))
                (ws / "sub" / "inner.txt").write_text("changed on disk\n")
                r = await call(c, "write_file", {"path": "inner.txt", "content": "x\n"})
                assert is_error(r) and structured(r)["error"] == "stale", text_of(r)
    assert (ws / "sub" / "unread.txt").read_text() == "never shown\n"
    assert (ws / "sub" / "inner.txt").read_text() == "changed on disk\n"


async def test_the_sdk_default_mode_is_stateless_and_can_edit(tmp_path):
    """`Client` without a mode, as a user of the current SDK writes it."""
    ws = workspace(tmp_path)
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with http_server(tmp_path, tokens_config(alice=ALICE), ws) as url:
            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {ALICE}"},
                                      timeout=CALL_TIMEOUT_S)
            async with http, Client(streamable_http_client(url, http_client=http)) as c:
                assert c.session.protocol_version == "2026-07-28"
                await edit_flow(c, ws)


async def test_two_users_stateless_calls_never_share_reads_or_workspace(tmp_path):
    ws = workspace(tmp_path)
    (ws / "bob-sub").mkdir()
    (ws / "bob-sub" / "inner.txt").write_text("bob's inner\n")
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with http_server(tmp_path, BOTH, ws) as url:
            async with modern_client(url, ALICE, None) as a, \
                    modern_client(url, BOB, None) as b:
                ok(await call(a, "read_file", {"path": "notes.txt"}))
                refused_unread(await call(b, "edit_file", {
                    "path": "notes.txt", "old_string": "one", "new_string": "bob"}))
                ok(await call(a, "switch_workspace", {"path": "sub"}))
                ok(await call(b, "switch_workspace", {"path": "bob-sub"}))
                assert "inner text" in ok(await call(a, "read_file", {"path": "inner.txt"}))
                assert "bob's inner" in ok(await call(b, "read_file", {"path": "inner.txt"}))
                # Alice read sub/inner.txt, Bob did not: her record does not let him write.
                refused_unread(await call(b, "write_file", {"path": "../sub/inner.txt",
                                                            "content": "bob\n"}))
                # Both at once, many times: each call runs in its own user's session.
                results: dict[str, list[Any]] = {"a": [], "b": []}

                async def many(who: str, c: Any, path: str) -> None:
                    for _ in range(5):
                        results[who].append(await call(c, "read_file", {"path": path}))
                        results[who].append(await call(c, "file_access_info", {}))

                async with anyio.create_task_group() as tg:
                    tg.start_soon(many, "a", a, "inner.txt")
                    tg.start_soon(many, "b", b, "inner.txt")
                assert all("inner text" in ok(r) for r in results["a"][0::2])
                assert all("bob's inner" in ok(r) for r in results["b"][0::2])
                assert all("bob-sub" not in ok(r) for r in results["a"][1::2])
                assert all("bob-sub" in ok(r) for r in results["b"][1::2])
                ok(await call(a, "edit_file", {"path": "../notes.txt", "old_string": "one",
                                               "new_string": "alice"}))
    assert (ws / "notes.txt").read_text() == "alice\ntwo\n"
    assert (ws / "sub" / "inner.txt").read_text() == "inner text\n"


async def test_one_users_stateless_clients_share_a_session_legacy_sessions_keep_their_own(
        tmp_path):
    """Two stateless clients of one user are one session (the gate's purpose, seeing before
    editing, holds per user); a legacy MCP session of the same user is a session of its own,
    in both directions."""
    ws = workspace(tmp_path)
    (ws / "legacy.txt").write_text("legacy\n")
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with http_server(tmp_path, BOTH, ws) as url:
            async with modern_client(url, ALICE, None) as a1, \
                    modern_client(url, ALICE, None) as a2, \
                    legacy_client(url, ALICE) as legacy:
                ok(await call(a1, "read_file", {"path": "notes.txt"}))
                ok(await call(a2, "edit_file", {"path": "notes.txt", "old_string": "one",
                                                "new_string": "uno"}))
                # The legacy session has read nothing, whatever the stateless ones did.
                refused_unread(await call(legacy, "edit_file", {
                    "path": "notes.txt", "old_string": "uno", "new_string": "x"}))
                ok(await call(legacy, "read_file", {"path": "legacy.txt"}))
                refused_unread(await call(a1, "edit_file", {
                    "path": "legacy.txt", "old_string": "legacy", "new_string": "x"}))
                # Workspaces are apart too.
                ok(await call(a1, "switch_workspace", {"path": "sub"}))
                assert "inner text" in ok(await call(a2, "read_file", {"path": "inner.txt"}))
                r = await call(legacy, "read_file", {"path": "inner.txt"})
                assert is_error(r) and structured(r)["error"] == "not_found", text_of(r)
                ok(await call(legacy, "switch_workspace", {"path": "sub"}))
                ok(await call(a1, "switch_workspace", {"path": ".."}))
                assert "legacy" in ok(await call(a1, "read_file", {"path": "legacy.txt"}))
                assert "inner text" in ok(await call(legacy, "read_file",
                                                     {"path": "inner.txt"}))
    assert (ws / "notes.txt").read_text() == "uno\ntwo\n"
    assert (ws / "legacy.txt").read_text() == "legacy\n"


async def test_a_roots_declaring_stateless_client_keeps_its_session(tmp_path):
    """A client announcing roots is narrowed on every call; the same answer keeps its
    session (reads, workspace), and another client of the same user with other roots, or
    none, runs in its own view at the same time."""
    ws = workspace(tmp_path)
    (ws / "sub" / "deeper").mkdir()
    (ws / "sub" / "deeper" / "d.txt").write_text("deep\n")
    asked: list[int] = []
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with http_server(tmp_path, BOTH, ws) as url:
            async with modern_client(url, ALICE, answer_roots(ws / "sub", calls=asked)) as n, \
                    modern_client(url, ALICE, None) as wide:
                ok(await call(n, "read_file", {"path": "inner.txt"}))
                ok(await call(n, "edit_file", {"path": "inner.txt", "old_string": "inner",
                                               "new_string": "narrow"}))
                ok(await call(n, "switch_workspace", {"path": "deeper"}))
                assert "deep" in ok(await call(n, "read_file", {"path": "d.txt"}))
                r = await call(n, "read_file", {"path": str(ws / "notes.txt")})
                assert is_error(r) and structured(r)["error"] == "outside_workspace", text_of(r)
                assert len(asked) >= 4, "the server never asked for the client's roots"

                # Both at once: the narrowed client never reaches beyond its roots while the
                # other one (no roots capability) works in the configured root.
                narrow_results: list[Any] = []
                wide_results: list[Any] = []

                async def narrow_calls() -> None:
                    for _ in range(5):
                        narrow_results.append(await call(
                            n, "read_file", {"path": str(ws / "notes.txt")}))

                async def wide_calls() -> None:
                    for _ in range(5):
                        wide_results.append(await call(
                            wide, "read_file", {"path": str(ws / "notes.txt")}))

                async with anyio.create_task_group() as tg:
                    tg.start_soon(narrow_calls)
                    tg.start_soon(wide_calls)
                for r in narrow_results:
                    assert is_error(r) and "one" not in text_of(r), text_of(r)
                for r in wide_results:
                    assert "one" in ok(r)
                # The narrowed client's session survived the other client's calls.
                assert "deep" in ok(await call(n, "read_file", {"path": "d.txt"}))
            # Another answer is another view: narrowed to it, with its own reads.
            async with modern_client(url, ALICE, answer_roots(ws)) as other:
                refused_unread(await call(other, "edit_file", {
                    "path": "sub/inner.txt", "old_string": "narrow", "new_string": "x"}))
                ok(await call(other, "read_file", {"path": "notes.txt"}))
    assert (ws / "sub" / "inner.txt").read_text() == "narrow text\n"


async def test_stdio_with_the_stateless_protocol_keeps_its_session(tmp_path):
    """Over stdio the one connection is one server and one session, in every mode."""
    ws = workspace(tmp_path)
    data = tmp_path / "data"
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with stdio(tmp_path, data, None, "narrow", "2026-07-28", str(ws)) as c:
            await edit_flow(c, ws)


async def test_an_answer_naming_too_many_roots_fails_closed(tmp_path):
    """Each root of a kept session holds a directory handle: an answer may name 64."""
    ws = workspace(tmp_path)
    many = [ws / f"d{i}" for i in range(65)]
    for d in many:
        d.mkdir()
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with http_server(tmp_path, tokens_config(alice=ALICE), ws) as url:
            async with modern_client(url, ALICE, answer_roots(*many)) as c:
                r = await call(c, "read_file", {"path": str(ws / "notes.txt")})
                assert is_error(r) and "at most 64" in text_of(r), text_of(r)
                assert "one" not in text_of(r)
            async with modern_client(url, ALICE, answer_roots(*many[:64])) as c:
                r = await call(c, "read_file", {"path": str(ws / "notes.txt")})
                assert is_error(r) and structured(r)["error"] == "outside_workspace", text_of(r)
                ok(await call(c, "glob", {"pattern": "*", "path": str(many[63])}))


async def test_stateless_calls_hold_no_session_place(tmp_path):
    """With `http.limits.sessions = 1` and that one place taken by a legacy session, the
    user's stateless calls — which open no session — still run, several at once."""
    ws = workspace(tmp_path)
    config = tokens_config(alice=ALICE) + "[http.limits]\nsessions = 1\n"
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with http_server(tmp_path, config, ws) as url:
            async with legacy_client(url, ALICE) as legacy, \
                    modern_client(url, ALICE, None) as c:
                ok(await call(legacy, "read_file", {"path": "notes.txt"}))
                results: list[Any] = []

                async def one() -> None:
                    results.append(await call(c, "read_file", {"path": "notes.txt"}))

                async with anyio.create_task_group() as tg:
                    for _ in range(4):
                        tg.start_soon(one)
                assert len(results) == 4 and all("two" in ok(r) for r in results)
                # The legacy session still works, and a second one is over the cap.
                ok(await call(legacy, "file_access_info", {}))
                async with httpx2.AsyncClient() as h:
                    r = await h.post(url, headers={
                        "Authorization": f"Bearer {ALICE}",
                        "Accept": "application/json, text/event-stream",
                        "Content-Type": "application/json"}, json={
                        "jsonrpc": "2.0", "id": 1, "method": "initialize",
                        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                   "clientInfo": {"name": "raw", "version": "0"}}})
                    assert r.status_code == 429 and "http.limits.sessions" in r.text, r.text
