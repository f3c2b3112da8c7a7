"""Hardening of `ringfence serve --http` against the attacks of an adversarial review (issue
13, items 3, 4 and 7): each test plays the attacker against the real binary, with raw HTTP
where the attack is about the HTTP layer and the official MCP Python SDK where a real client
fits.

- A request body is read only after its sender is authenticated, within a time limit, and
  inspected during a shutdown without building it into a tree (the server's peak memory is
  read from /proc/<pid>/status, VmHWM).
- One user's sessions and event streams are capped, so a user at their cap cannot lock
  others out of the descriptors; idle event streams are closed.
- /metrics is for the operator only; ending a session answers 204.
"""

from __future__ import annotations

import json
import logging
import signal
import socket
import stat
import threading
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from test_http import call, client, token_hash
from test_http_users import ALICE, BOB, HDRS, INIT, serve, slow_roots, tokens_config
from test_sdk_client import TEST_TIMEOUT_S, _binary, is_error, text_of

pytestmark = pytest.mark.anyio

PROTOCOL = "2025-06-18"
INITIALIZED = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()
# 64 MiB of `[0,0,…]`: the largest body the server takes, and, parsed into a JSON tree, over
# 30 million values (about 1 GiB).
NUMBERS = b"[" + b"0," * ((64 << 20) // 2 - 2) + b"0]"
OPS = "operator-metrics-token-" + "o" * 20


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def assert_refusal(r: httpx2.Response, status: int, setting: str) -> dict[str, Any]:
    """A refusal is `status` with a JSON-RPC error naming the limit and the setting that
    raises it."""
    assert r.status_code == status, (r.status_code, r.text[:300])
    assert r.headers["content-type"].startswith("application/json"), r.headers
    body = r.json()
    assert body["jsonrpc"] == "2.0" and body["id"] is None, body
    assert setting in body["error"]["message"], body
    assert body["error"]["data"]["setting"] == setting, body
    return body


class PeakMemory:
    """Follows a process's peak resident memory (VmHWM, KiB) from a thread, so the last value
    read before it exits is kept."""

    def __init__(self, pid: int):
        self.pid, self.kib, self._stop = pid, 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def read(self) -> int:
        try:
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    self.kib = max(self.kib, int(line.split()[1]))
        except OSError:
            pass  # the process is gone: the last value read stands
        return self.kib

    def _run(self) -> None:
        while not self._stop.is_set():
            self.read()
            time.sleep(0.02)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.kib


async def post_quietly(h: httpx2.AsyncClient, url: str, headers: dict[str, str],
                       body: bytes) -> int | None:
    """POSTs `body`; the status, or None when the server closed the connection before
    taking all of it (what it should do with a body it will not read)."""
    try:
        return (await h.post(url, headers=headers, content=body)).status_code
    except (httpx2.WriteError, httpx2.RemoteProtocolError, httpx2.ReadError):
        return None


# --- item 3: authenticate before reading bodies -------------------------------------------

async def test_bodies_sent_during_the_drain_are_not_built_into_memory(tmp_path):
    """The review's attack: while SIGTERM waits for a running call, one unauthenticated
    64 MiB request took the server from 15 MiB to 1 GiB (the body was parsed into a JSON tree
    before anyone asked who sent it). Now it is refused unread; and an authenticated one is
    inspected without building a tree."""
    ws = tmp_path / "ws"
    ws.mkdir()
    srv = serve(tmp_path, tokens_config(alice=ALICE), roots=(str(ws),))
    peak = PeakMemory(srv.proc.pid)
    seen: dict[str, Any] = {}
    try:
        with anyio.fail_after(TEST_TIMEOUT_S):
            # The call waits 9 s for the client's roots, so the drain lasts that long.
            async with client(srv.url, ALICE, roots_callback=slow_roots(9, ws)) as s:
                await s.list_tools()

                async def running() -> None:
                    seen["call"] = await call(s, "list_directory", {"path": "."})

                async with anyio.create_task_group() as tg:
                    tg.start_soon(running)
                    await anyio.sleep(1)
                    srv.proc.send_signal(signal.SIGTERM)
                    await anyio.sleep(0.5)
                    assert srv.proc.poll() is None  # draining
                    async with httpx2.AsyncClient(timeout=60) as h:
                        before = peak.read()
                        seen["anonymous"] = await post_quietly(h, srv.url, HDRS, NUMBERS)
                        await anyio.sleep(0.5)
                        seen["anonymous_growth"] = peak.read() - before
                        before = peak.read()
                        seen["alice"] = await post_quietly(
                            h, srv.url, {**HDRS, **bearer(ALICE)}, NUMBERS)
                        await anyio.sleep(0.5)
                        seen["alice_growth"] = peak.read() - before
    except* (httpx2.ConnectError, httpx2.RemoteProtocolError):
        pass  # the client's goodbye finds the server gone
    finally:
        peak.stop()
    # Refused without reading: 401 (or the connection closed under the unread upload).
    assert seen["anonymous"] in (401, None), seen
    assert seen["anonymous_growth"] < 32 * 1024, seen  # KiB
    # Alice's body is read (up to the body limit) and found to start new work: 503. Memory
    # grows by the body, not by a tree of it.
    assert seen["alice"] in (503, None), seen
    assert seen["alice_growth"] < 160 * 1024, seen
    # The running call finished, and the server stopped cleanly.
    r = seen["call"]
    assert not is_error(r), text_of(r)
    assert srv.proc.wait(timeout=30) == 0


def test_a_body_sent_byte_by_byte_is_cut_off(tmp_path):
    """A client that sends its body slower than `body_timeout_secs` is answered 408 and
    disconnected; it does not hold a connection and a buffer for as long as it likes."""
    srv = serve(tmp_path, tokens_config(alice=ALICE) + "body_timeout_secs = 2\n",
                roots=(str(tmp_path),))
    try:
        host, port = srv.base.removeprefix("http://").rsplit(":", 1)
        sock = socket.create_connection((host, int(port)), timeout=5)
        sock.settimeout(0.25)
        head = (f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\n"
                f"Authorization: Bearer {ALICE}\r\nContent-Type: application/json\r\n"
                "Accept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n")
        sock.sendall(head.encode())
        started, answer, closed = time.monotonic(), b"", False
        while time.monotonic() - started < 8 and not closed:
            try:
                sock.sendall(b" ")  # one byte every 0.25 s: 1000 bytes would take 250 s
            except OSError:
                closed = True
            try:
                chunk = sock.recv(65536)
                answer += chunk
                closed = closed or chunk == b""
            except socket.timeout:
                pass
            except OSError:
                closed = True
        elapsed = time.monotonic() - started
        sock.close()
        assert answer.startswith(b"HTTP/1.1 408"), (elapsed, answer[:300])
        assert b"http.body_timeout_secs" in answer, answer
        assert closed and elapsed < 6, elapsed
        with httpx2.Client(timeout=5) as h:  # still up
            assert h.get(srv.base + "/healthz").status_code == 200
    finally:
        assert srv.stop() == 0


# --- item 4: per-user caps on sessions and streams ----------------------------------------

async def open_session(h: httpx2.AsyncClient, url: str, token: str) -> httpx2.Response:
    """initialize + initialized over raw HTTP; the initialize response (its
    `mcp-session-id` names the session)."""
    r = await h.post(url, headers={**HDRS, **bearer(token)}, content=INIT)
    if r.status_code == 200:
        sid = r.headers["mcp-session-id"]
        n = await h.post(url, content=INITIALIZED, headers={
            **HDRS, **bearer(token), "mcp-session-id": sid, "mcp-protocol-version": PROTOCOL})
        assert n.status_code == 202, n.text
    return r


async def open_stream(h: httpx2.AsyncClient, stack: AsyncExitStack, url: str, token: str,
                      sid: str) -> httpx2.Response:
    """The session's event stream (GET), left open until `stack` closes; a refusal is read
    whole."""
    req = h.build_request("GET", url, headers={
        "Accept": "text/event-stream", **bearer(token), "mcp-session-id": sid,
        "mcp-protocol-version": PROTOCOL})
    r = await h.send(req, stream=True)
    stack.push_async_callback(r.aclose)
    if r.status_code != 200:
        await r.aread()
    return r


def few_descriptors(tmp: Path, monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    """The servers started from now on get only `n` file descriptors (soft and hard)."""
    wrapper = tmp / "ringfence-few-fds"
    wrapper.write_text(f'#!/bin/sh\nulimit -n {n}\nexec "{_binary()}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("RINGFENCE_BIN", str(wrapper))


async def test_one_user_cannot_lock_the_others_out(tmp_path, monkeypatch):
    """The review's attack: one user opened 90 sessions with an event stream each, the
    server ran out of descriptors, and nobody else could connect. With the default caps
    (16 sessions, 32 streams per user) Alice is refused at her cap, while Bob works and
    /healthz answers — here with only 128 descriptors."""
    few_descriptors(tmp_path, monkeypatch, 128)
    ws = tmp_path / "ws"
    ws.mkdir()
    # No rate limit: the caps must hold on their own.
    srv = serve(tmp_path, tokens_config(alice=ALICE, bob=BOB) + "[http.limits]\nrate = 0\n",
                roots=(str(ws),))
    pool = httpx2.Limits(max_connections=None, max_keepalive_connections=None)
    try:
        async with AsyncExitStack() as streams, \
                httpx2.AsyncClient(timeout=5, limits=pool) as h:
            sessions: list[str] = []
            refused: list[httpx2.Response] = []
            opened = 0
            with anyio.fail_after(TEST_TIMEOUT_S):
                for _ in range(90):
                    try:
                        r = await open_session(h, srv.url, ALICE)
                        if r.status_code != 200:
                            refused.append(r)
                            continue
                        sessions.append(r.headers["mcp-session-id"])
                        s = await open_stream(h, streams, srv.url, ALICE, sessions[-1])
                        if s.status_code == 200:
                            opened += 1
                        else:
                            refused.append(s)
                    except httpx2.HTTPError:
                        break  # the server no longer accepts connections
                # More streams on her sessions, past the stream cap.
                for i in range(40):
                    try:
                        s = await open_stream(h, streams, srv.url, ALICE,
                                              sessions[i % len(sessions)])
                    except httpx2.HTTPError:
                        break
                    if s.status_code == 200:
                        opened += 1
                    else:
                        refused.append(s)
            # Everyone else is still served: the health check and Bob's tool calls.
            async with httpx2.AsyncClient(timeout=5) as other:
                assert (await other.get(srv.base + "/healthz")).status_code == 200
            with anyio.fail_after(30):
                async with client(srv.url, BOB) as b:
                    r = await call(b, "write_file", {"path": "bob.txt", "content": "still in\n"})
                    assert not is_error(r), text_of(r)
            # Alice got her 16 sessions and 32 streams, and clear refusals past them.
            assert len(sessions) == 16 and opened == 32, (len(sessions), opened)
            by_setting = {}
            for r in refused:
                body = r.json()
                by_setting.setdefault(body["error"]["data"]["setting"], r)
            assert set(by_setting) == {"http.limits.sessions", "http.limits.streams"}, by_setting
            for setting, r in by_setting.items():
                assert_refusal(r, 429, setting)
                assert int(r.headers["retry-after"]) >= 1
    finally:
        assert srv.stop() == 0
    assert (ws / "bob.txt").read_text() == "still in\n"


async def test_at_the_session_cap_the_longest_unused_session_makes_way(tmp_path):
    """Clients that never end their sessions are not locked out: at `sessions = 2` a third
    session ends the one unused for longest (its id then answers 404, so its client starts
    anew). A session with a request or stream open never makes way: with both in use a new
    one is refused with 429. DELETE ends a session (204) and frees its place."""
    srv = serve(tmp_path, tokens_config(alice=ALICE) + "[http.limits]\nsessions = 2\n",
                roots=(str(tmp_path),))

    async def ping(h: httpx2.AsyncClient, sid: str) -> httpx2.Response:
        return await h.post(srv.url, headers={
            **HDRS, **bearer(ALICE), "mcp-session-id": sid, "mcp-protocol-version": PROTOCOL},
            content=b'{"jsonrpc":"2.0","id":7,"method":"ping"}')

    try:
        async with AsyncExitStack() as streams, httpx2.AsyncClient(timeout=10) as h:
            first = (await open_session(h, srv.url, ALICE)).headers["mcp-session-id"]
            second = (await open_session(h, srv.url, ALICE)).headers["mcp-session-id"]
            assert (await ping(h, first)).status_code == 200
            # `second` is now the one unused for longest.
            third = (await open_session(h, srv.url, ALICE)).headers["mcp-session-id"]
            assert (await ping(h, second)).status_code == 404
            assert (await ping(h, first)).status_code == 200
            assert (await ping(h, third)).status_code == 200
            # Both in use (an event stream open on each): nothing makes way.
            for sid in (first, third):
                assert (await open_stream(h, streams, srv.url, ALICE, sid)).status_code == 200
            r = await open_session(h, srv.url, ALICE)
            body = assert_refusal(r, 429, "http.limits.sessions")
            assert "2" in body["error"]["message"] and "in use" in body["error"]["message"]
            assert r.headers["retry-after"]
            # DELETE ends the session: 204 (the SDK warns on 202), and the place is free.
            r = await h.delete(srv.url, headers={
                **bearer(ALICE), "mcp-session-id": first, "mcp-protocol-version": PROTOCOL})
            assert r.status_code == 204, (r.status_code, r.text)
            assert (await open_session(h, srv.url, ALICE)).status_code == 200
            assert (await ping(h, third)).status_code == 200
    finally:
        assert srv.stop() == 0


async def test_idle_event_streams_are_closed(tmp_path):
    """An event stream that carries nothing for `stream_idle_secs` is closed, and its place
    among the user's streams is free again (a client reconnects when it needs one)."""
    srv = serve(tmp_path, tokens_config(alice=ALICE)
                + "stream_idle_secs = 2\n[http.limits]\nstreams = 1\n", roots=(str(tmp_path),))
    try:
        async with AsyncExitStack() as streams, httpx2.AsyncClient(timeout=10) as h:
            sid = (await open_session(h, srv.url, ALICE)).headers["mcp-session-id"]
            first = await open_stream(h, streams, srv.url, ALICE, sid)
            assert first.status_code == 200
            second = await open_stream(h, streams, srv.url, ALICE, sid)
            assert_refusal(second, 429, "http.limits.streams")
            started = time.monotonic()
            with anyio.fail_after(10):
                async for _ in first.aiter_bytes():
                    pass  # the priming event, then nothing: the server ends it
            assert 1.5 < time.monotonic() - started < 6
            third = await open_stream(h, streams, srv.url, ALICE, sid)
            assert third.status_code == 200
    finally:
        assert srv.stop() == 0


# --- item 7: /metrics for the operator; DELETE answers 204 --------------------------------

async def test_metrics_are_for_the_operator_only(tmp_path):
    srv = serve(tmp_path, tokens_config(alice=ALICE)
                + f'metrics_token_hash = "{token_hash(OPS)}"\n', roots=(str(tmp_path),))
    try:
        with anyio.fail_after(TEST_TIMEOUT_S):
            async with client(srv.url, ALICE) as s:
                await call(s, "write_file", {"path": "secret-project.txt", "content": "x"})
        async with httpx2.AsyncClient(timeout=10) as h:
            r = await h.get(srv.base + "/metrics", headers=bearer(ALICE))
            assert_refusal(r, 403, "http.metrics_token_hash")
            assert "write_file" not in r.text
            r = await h.get(srv.base + "/metrics")
            assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")
            r = await h.get(srv.base + "/metrics", headers=bearer(OPS))
            assert r.status_code == 200, r.text
            assert 'ringfence_tool_calls_total{tool="write_file",outcome="ok"} 1' in r.text
            # The operator's token is no user: it opens no MCP session.
            r = await h.post(srv.url, headers={**HDRS, **bearer(OPS)}, content=INIT)
            assert r.status_code == 401, r.text
    finally:
        assert srv.stop() == 0


async def test_metrics_need_an_operator_token_once_users_have_tokens(tmp_path):
    srv = serve(tmp_path, tokens_config(alice=ALICE), roots=(str(tmp_path),))
    try:
        async with httpx2.AsyncClient(timeout=10) as h:
            r = await h.get(srv.base + "/metrics", headers=bearer(ALICE))
            assert_refusal(r, 403, "http.metrics_token_hash")
    finally:
        assert srv.stop() == 0


async def test_the_sdk_ends_its_session_without_a_warning(tmp_path, caplog):
    srv = serve(tmp_path, tokens_config(alice=ALICE), roots=(str(tmp_path),))
    try:
        with caplog.at_level(logging.WARNING, logger="mcp"), anyio.fail_after(TEST_TIMEOUT_S):
            async with client(srv.url, ALICE) as s:
                await s.list_tools()
        failed = [r.getMessage() for r in caplog.records if "termination" in r.getMessage()]
        assert failed == [], failed
    finally:
        assert srv.stop() == 0
