"""End-to-end tests of seed 003's four follow-up tools and their delivery through the real
binary, with the official MCP Python SDK as the client: the seed's documented calls
verbatim, the errors it names, argument errors naming their range, time zones and quiet
hours in the results, the proactive-messages setting, persistence across a restart,
per-user isolation over HTTP; then delivery to a signed webhook receiver and a command
started by the test, late delivery by the standalone scheduler, retries and failure, three
schedulers on one data directory, a scheduler killed mid-delivery, check-ins written by a
fake model, and the followups commands.
"""

from __future__ import annotations

import hashlib
import hmac
import http.server
import json
import os
import re
import signal
import subprocess
import threading
import time
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Iterator

import anyio
import pytest

from store import another_store, on_postgres, psql, store_env

import httpx2
from mcp import ClientSession, StdioServerParameters
from mcp.client import Client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from test_http import CALL_TIMEOUT_S, call, client, token_hash
from test_http_users import serve as serve_http, tokens_config
from test_sdk_client import (  # noqa: F401 (fixtures)
    TEST_TIMEOUT_S, _binary, dirs, is_error, ringfence_bin, serve, structured, text_of,
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
            # The default channel is mcp; the result says it needs a connected client.
            assert s["proactive"] is True and s["channels"] == ["mcp"]
            assert "MCP client" in s["deliveryNote"], s

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
    # Quiet from an hour ago to three hours ahead (UTC): the follow-up, 30 minutes out,
    # falls inside whatever the time of day.
    now = time.gmtime()
    quiet = f"{(now.tm_hour - 1) % 24:02d}:00-{(now.tm_hour + 3) % 24:02d}:00"
    cfg = config(ws.parent, f'[followups]\ntimezone = "UTC"\nquiet_hours = "{quiet}"\n')
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with followups_server(ringfence_bin, ws, data, cfg) as srv:
            r = await srv.call("schedule_followup", {"context": "water the plants",
                                                     "minutes_from_now": 30})
            s = structured(r)
            assert s["proactive"] is False
            assert "Proactive messages are off" in text_of(r)
            assert "RINGFENCE_FOLLOWUPS_PROACTIVE=true" in text_of(r)
        cfg.write_text('[followups]\nproactive = true\ntimezone = "UTC"\n'
                       f'quiet_hours = "{quiet}"\n'
                       '[[followups.channels]]\nkind = "command"\ncommand = ["true"]\n')
        # A restart keeps it; with delivery on, quiet hours say when it will come.
        async with followups_server(ringfence_bin, ws, data, cfg) as srv:
            s = structured(await srv.call("list_followups", {}))
            assert [f["context"] for f in s["followups"]] == ["water the plants"]
            r = await srv.call("update_followup", {"followup_id": 1, "context": "water the ferns"})
            assert f"quiet hours ({quiet}, UTC)" in text_of(r), text_of(r)
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


# --- delivery ---------------------------------------------------------------------------



SECRET = "webhook-secret-7f3a"


class Receiver:
    """A webhook receiver on loopback: records every request; `answer(i)` gives the status
    and the delay (seconds) for the i-th request (from 0)."""

    def __init__(self, answer: Callable[[int], tuple[int, float]] = lambda _i: (200, 0.0)):
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.answer = answer
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with receiver.lock:
                    i = len(receiver.requests)
                    receiver.requests.append({"headers": {k.lower(): v for k, v in self.headers.items()},
                                              "body": body,
                                              "doc": json.loads(body)})
                status, delay = receiver.answer(i)
                time.sleep(delay)
                try:
                    self.send_response(status)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                except OSError:
                    pass

            def log_message(self, *_: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_for(self, n: int, timeout: float) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.requests) >= n:
                    return list(self.requests)
            time.sleep(0.05)
        with self.lock:
            raise AssertionError(f"{len(self.requests)} of {n} deliveries arrived in {timeout} s")

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def receiver(answer: Callable[[int], tuple[int, float]] = lambda _i: (200, 0.0)) -> Iterator[Receiver]:
    r = Receiver(answer)
    try:
        yield r
    finally:
        r.close()


def webhook_config(tmp: Path, url: str, extra: str = "", channel_extra: str = "") -> Path:
    return config(tmp, '[followups]\nproactive = true\ntimezone = "UTC"\n' + extra +
                  f'[[followups.channels]]\nkind = "webhook"\nurl = "{url}"\n'
                  f'secret = "{SECRET}"\n' + channel_extra)


def ringfence(tmp: Path, cfg: Path, *args: str) -> list[str]:
    return [str(_binary()), "--config", str(cfg), "--data-dir", str(tmp / "data"), *args]


def env_for(tmp: Path) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp),
            "XDG_CONFIG_HOME": str(tmp / "xdg-config"), "RINGFENCE_LOG": "info", **store_env()}


def call_cli(tmp: Path, cfg: Path, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    out = subprocess.run(ringfence(tmp, cfg, "call", tool, json.dumps(args)),
                         capture_output=True, text=True, env=env_for(tmp), timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout) if out.stdout.lstrip().startswith("{") else {"text": out.stdout}


def scheduler(tmp: Path, cfg: Path, name: str = "scheduler") -> subprocess.Popen[bytes]:
    log = open(tmp / f"{name}.log", "wb")  # noqa: SIM115 (closed with the process)
    return subprocess.Popen(ringfence(tmp, cfg, "scheduler"), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=log, env=env_for(tmp))


def signed_ok(req: dict[str, Any]) -> bool:
    """The signature a receiver checks: HMAC-SHA256 of "<timestamp>." + body, with a
    timestamp close to now (an old request replayed is refused)."""
    ts = req["headers"]["x-ringfence-timestamp"]
    if abs(int(ts) - time.time()) > 300:
        return False
    signed = ts.encode() + b"." + req["body"]
    want = "sha256=" + hmac.new(SECRET.encode(), signed, hashlib.sha256).hexdigest()
    return hmac.compare_digest(req["headers"]["x-ringfence-signature"], want)


async def test_serve_delivers_through_a_signed_webhook_and_a_command(ringfence_bin, dirs):
    ws, data = dirs
    out = ws.parent / "command-out.jsonl"
    with receiver() as hook:
        cfg = webhook_config(ws.parent, hook.url, channel_extra=(
            '[[followups.channels]]\nkind = "command"\n'
            f'command = ["/bin/sh", "-c", "cat >> {out}; echo >> {out}"]\n'))
        with anyio.fail_after(TEST_TIMEOUT_S):
            async with followups_server(ringfence_bin, ws, data, cfg) as srv:
                r = await srv.call("schedule_followup", {
                    "context": "Check in after job interview to see how it went",
                    "minutes_from_now": 0.02})
                assert structured(r)["channels"] == ["webhook", "command", "mcp"]
                [req] = await anyio.to_thread.run_sync(lambda: hook.wait_for(1, 20))
                assert signed_ok(req), req["headers"]
                doc = req["doc"]
                assert doc["id"] == 1 and doc["user"] == "local" and doc["attempt"] == 1
                assert doc["context"] == "Check in after job interview to see how it went"
                assert doc["message"] == doc["context"]
                assert 0 <= doc["late_by_seconds"] < 10, doc
                assert doc["scheduled_for"].endswith("Z") and doc["timezone"] == "UTC"
                assert req["headers"]["idempotency-key"] == doc["idempotency_key"]
                # Recorded as delivered, through both channels.
                for _ in range(100):
                    s = structured(await srv.call("list_followups", {"status": "completed"}))
                    if s["total"]:
                        break
                    await anyio.sleep(0.05)
                f = s["followups"][0]
                # This client hears it too (the mcp channel, on by default).
                assert f["status"] == "completed" and f["deliveredVia"] == "command,mcp,webhook", f
                assert structured(await srv.call("list_followups", {}))["total"] == 0
        lines = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
        assert [d["idempotency_key"] for d in lines] == [doc["idempotency_key"]]


async def test_the_standalone_scheduler_delivers_late_ones_and_stops_on_sigterm(tmp_path):
    with receiver() as hook:
        cfg = webhook_config(tmp_path, hook.url)
        # Scheduled while nothing delivers (a one-off call runs no scheduler) …
        call_cli(tmp_path, cfg, "schedule_followup",
                 {"context": "late one", "minutes_from_now": 0.01})
        await anyio.sleep(2.0)
        assert hook.requests == []
        # … and delivered at the next start, marked late.
        proc = scheduler(tmp_path, cfg)
        try:
            [req] = await anyio.to_thread.run_sync(lambda: hook.wait_for(1, 20))
            assert req["doc"]["context"] == "late one"
            assert req["doc"]["late_by_seconds"] >= 1.0, req["doc"]
            assert signed_ok(req)
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=40) == 0


async def test_a_failing_receiver_leaves_a_failed_follow_up_with_the_error(tmp_path):
    with receiver(lambda _i: (500, 0.0)) as hook:
        cfg = webhook_config(tmp_path, hook.url, extra="max_attempts = 1\n")
        call_cli(tmp_path, cfg, "schedule_followup", {"context": "x", "minutes_from_now": 0.01})
        proc = scheduler(tmp_path, cfg)
        try:
            await anyio.to_thread.run_sync(lambda: hook.wait_for(1, 20))
            for _ in range(100):
                listed = call_cli(tmp_path, cfg, "list_followups", {"status": "all"})
                if "failed" in listed["text"]:
                    break
                await anyio.sleep(0.1)
            assert "delivery failed after 1 attempts: webhook: HTTP 500" in listed["text"], listed
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=40)


async def test_three_schedulers_deliver_a_thousand_follow_ups_once_each(tmp_path, ringfence_bin):
    ws, data = tmp_path / "ws", tmp_path / "data"
    ws.mkdir()
    with receiver() as hook:
        # Scheduled with delivery off, then three schedulers share the data directory.
        off = config(tmp_path, "[followups]\nproactive = false\n")
        with anyio.fail_after(TEST_TIMEOUT_S):
            async with followups_server(ringfence_bin, ws, data, off) as srv:
                for i in range(1000):
                    r = await srv.session.call_tool(
                        "schedule_followup", {"context": f"n{i}", "minutes_from_now": 0.01})
                    assert not is_error(r)
        cfg = webhook_config(tmp_path, hook.url)
        procs = [scheduler(tmp_path, cfg, f"scheduler{i}") for i in range(3)]
        try:
            got = await anyio.to_thread.run_sync(lambda: hook.wait_for(1000, 120))
            await anyio.sleep(2.0)  # anything delivered twice would arrive by now
        finally:
            for p in procs:
                p.send_signal(signal.SIGTERM)
            for p in procs:
                p.wait(timeout=40)
        got = hook.requests
        keys = [r["doc"]["idempotency_key"] for r in got]
        contexts = sorted(r["doc"]["context"] for r in got)
        assert len(keys) == 1000 and len(set(keys)) == 1000, len(keys)
        assert contexts == sorted(f"n{i}" for i in range(1000))
        assert all(r["doc"]["attempt"] == 1 for r in got)


async def test_a_scheduler_killed_mid_delivery_is_taken_over_after_its_lease(tmp_path):
    # The first delivery hangs; its scheduler is SIGKILLed then. Another one takes the
    # follow-up over once the lease (5 s) ends and delivers it, with the same key.
    with receiver(lambda i: (200, 30.0) if i == 0 else (200, 0.0)) as hook:
        cfg = webhook_config(tmp_path, hook.url, extra="lease_secs = 5\n",
                             channel_extra="timeout_secs = 3\n")
        call_cli(tmp_path, cfg, "schedule_followup", {"context": "survive", "minutes_from_now": 0.01})
        first = scheduler(tmp_path, cfg, "first")
        try:
            await anyio.to_thread.run_sync(lambda: hook.wait_for(1, 20))
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=10)
        second = scheduler(tmp_path, cfg, "second")
        try:
            got = await anyio.to_thread.run_sync(lambda: hook.wait_for(2, 30))
        finally:
            second.send_signal(signal.SIGTERM)
            second.wait(timeout=40)
        a, b = got[0]["doc"], got[1]["doc"]
        assert (a["attempt"], b["attempt"]) == (1, 2)
        assert a["idempotency_key"] == b["idempotency_key"]
        listed = call_cli(tmp_path, cfg, "list_followups", {"status": "completed"})
        assert "#1 completed" in listed["text"], listed


def test_followups_list_export_and_import(tmp_path):
    cfg = config(tmp_path, '[followups]\ntimezone = "UTC"\n')
    call_cli(tmp_path, cfg, "schedule_followup", {"context": "first", "minutes_from_now": 60})
    call_cli(tmp_path, cfg, "schedule_followup", {"context": "second", "minutes_from_now": 30})
    call_cli(tmp_path, cfg, "cancel_followup", {"followup_id": 2, "reason": "no longer needed"})

    other_store: dict[str, str] = {}

    def cli(data: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        env = {**env_for(tmp_path), **(other_store if data.name == "other-data" else {})}
        return subprocess.run([str(_binary()), "--config", str(cfg), "--data-dir", str(data),
                               "followups", *args], input=stdin, capture_output=True,
                              text=True, env=env, timeout=60)

    listed = cli(tmp_path / "data", "list")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].startswith("local\t#1\tpending\t") and lines[0].endswith("\tfirst"), lines
    assert "cancelled: no longer needed" in lines[1], lines
    assert cli(tmp_path / "data", "list", "--status", "pending").stdout.count("\n") == 1
    assert cli(tmp_path / "data", "list", "--status", "soon").returncode == 2

    export = tmp_path / "followups.jsonl"
    assert cli(tmp_path / "data", "export", "-o", str(export)).returncode == 0
    assert export.stat().st_mode & 0o777 == 0o600
    records = [json.loads(line) for line in export.read_text().splitlines()]
    assert [r["context"] for r in records] == ["first", "second"]
    assert records[1]["cancel_reason"] == "no longer needed"

    other = tmp_path / "other-data"
    with another_store() as env:
        other_store.update(env)
        import_elsewhere(cli, other, export)


def import_elsewhere(cli: Callable[..., subprocess.CompletedProcess[str]], other: Path,
                     export: Path) -> None:
    done = cli(other, "import", str(export), "--user", "alice")
    assert done.returncode == 0 and "imported 2 follow-ups (0 already here)" in done.stderr
    again = cli(other, "import", "-", stdin=export.read_text())
    assert "imported 0 follow-ups (2 already here)" in again.stderr, again.stderr
    assert cli(other, "list", "--user", "alice").stdout.count("alice\t#") == 2
    bad = cli(other, "import", "-", stdin='{"not": "a follow-up"}\n')
    assert bad.returncode != 0 and "line 1: not a follow-up record" in bad.stderr


class FakeChat(http.server.BaseHTTPRequestHandler):
    """POST /v1/chat/completions answering `reply` as plain text (or HTTP 500 when None)."""

    reply: str | None = None
    requests: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        FakeChat.requests.append(body)
        if FakeChat.reply is None:
            self.send_response(500)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        data = json.dumps({
            "id": "chatcmpl-1", "object": "chat.completion", "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": FakeChat.reply}}],
            "usage": {"prompt_tokens": 50, "completion_tokens": 12, "total_tokens": 62},
        }).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_: Any) -> None:
        pass


@pytest.mark.parametrize("reply", ["How did the interview go? I hope it went well!", None])
async def test_the_llm_writes_the_check_in_or_the_context_goes_as_is(tmp_path, reply):
    FakeChat.reply, FakeChat.requests = reply, []
    chat = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeChat)
    threading.Thread(target=chat.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{chat.server_address[1]}/v1"
    try:
        with receiver() as hook:
            cfg = webhook_config(tmp_path, hook.url)
            cfg.write_text(cfg.read_text() + f'[llm]\nprovider = "openai"\nbase_url = "{base}"\n'
                           'model = "check-in-writer"\n')
            call_cli(tmp_path, cfg, "schedule_followup", {
                "context": "Check in after job interview to see how it went",
                "minutes_from_now": 0.01})
            proc = scheduler(tmp_path, cfg)
            try:
                [req] = await anyio.to_thread.run_sync(lambda: hook.wait_for(1, 30))
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=40)
        doc = req["doc"]
        assert doc["context"] == "Check in after job interview to see how it went"
        assert doc["message"] == (reply or doc["context"]), doc
        # The model was asked with the note, and nothing else of the user's.
        sent = json.dumps(FakeChat.requests[0])
        assert "Check in after job interview to see how it went" in sent
    finally:
        chat.shutdown()
        chat.server_close()


async def test_a_command_that_leaves_a_child_behind_is_delivered_at_once(tmp_path):
    # The program exits 0 at once but leaves a child holding its stderr: the delivery counts
    # when the program exits (not at the timeout), and the child goes with its group.
    out = tmp_path / "got.json"
    marker = f"sleep 50.{os.getpid()}"
    cfg = config(tmp_path, '[followups]\nproactive = true\n[[followups.channels]]\n'
                 'kind = "command"\ntimeout_secs = 60\n'
                 f'command = ["/bin/sh", "-c", "cat > {out}; ({marker} &); exit 0"]\n')
    call_cli(tmp_path, cfg, "schedule_followup", {"context": "quick", "minutes_from_now": 0.01})
    proc = scheduler(tmp_path, cfg)
    try:
        started = time.monotonic()
        for _ in range(300):
            listed = call_cli(tmp_path, cfg, "list_followups", {"status": "completed"})
            if "#1 completed" in listed["text"]:
                break
            await anyio.sleep(0.1)
        assert "#1 completed" in listed["text"], listed
        assert time.monotonic() - started < 20
        assert json.loads(out.read_text())["context"] == "quick"
        left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
        assert left.stdout.strip() == "", "the command's child outlived its delivery"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=40)


async def test_the_email_channel_sends_through_an_smtp_server(tmp_path):
    from aiosmtpd.controller import Controller
    from aiosmtpd.smtp import AuthResult, LoginPassword

    received: list[Any] = []
    logins: list[tuple[bytes, bytes]] = []

    class Handler:
        async def handle_DATA(self, _server: Any, _session: Any, envelope: Any) -> str:  # noqa: N802
            received.append(envelope)
            return "250 OK"

    def authenticator(_server: Any, _session: Any, _envelope: Any, mechanism: str,
                      data: Any) -> AuthResult:
        if isinstance(data, LoginPassword):
            logins.append((data.login, data.password))
            return AuthResult(success=data.password == b"mail-pass")
        return AuthResult(success=False)

    import socket
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    smtp = Controller(Handler(), hostname="127.0.0.1", port=port, authenticator=authenticator,
                      auth_require_tls=False)
    smtp.start()
    try:
        cfg = config(tmp_path, '[followups]\nproactive = true\ntimezone = "Europe/Berlin"\n'
                     '[[followups.channels]]\nkind = "email"\nsmtp_host = "127.0.0.1"\n'
                     f'smtp_port = {port}\nstarttls = false\nusername = "iris"\n'
                     'password_env = "RF_MAIL_PASS"\nfrom = "iris@example.org"\n'
                     '[followups.users.local]\nemail = "me@example.org"\n')
        env = {**env_for(tmp_path), "RF_MAIL_PASS": "mail-pass"}
        out = subprocess.run(ringfence(tmp_path, cfg, "call", "schedule_followup", json.dumps(
            {"context": "Check in after job interview to see how it went",
             "minutes_from_now": 0.01})), capture_output=True, text=True, env=env, timeout=60)
        assert out.returncode == 0, out.stderr
        log = open(tmp_path / "scheduler.log", "wb")  # noqa: SIM115
        proc = subprocess.Popen(ringfence(tmp_path, cfg, "scheduler"), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=log, env=env)
        try:
            for _ in range(300):
                if received:
                    break
                await anyio.sleep(0.1)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=40)
        assert received, (tmp_path / "scheduler.log").read_text()
        mail = received[0]
        assert mail.mail_from == "iris@example.org" and mail.rcpt_tos == ["me@example.org"]
        text = mail.content.decode()
        assert "Subject: Follow-up: Check in after job interview to see how it went" in text
        assert "Message-ID: <rf-followup-" in text
        assert "scheduled for" in text and "(Europe/Berlin)" in text
        assert logins == [(b"iris", b"mail-pass")]
    finally:
        smtp.stop()


# --- the mcp channel ----------------------------------------------------------------------

DUE = "ringfence://followups/due"
INTERVIEW = "Check in after job interview to see how it went"


class Heard:
    """What a client was told between its requests: log messages and resource updates."""

    def __init__(self) -> None:
        self.messages: list[Any] = []
        self.updates: list[str] = []
        self.capabilities: Any = None

    async def on_log(self, params: Any) -> None:
        self.messages.append(params)

    async def on_message(self, message: Any) -> None:
        root = getattr(message, "root", message)
        if getattr(root, "method", None) == "notifications/resources/updated":
            self.updates.append(str(root.params.uri))

    async def wait(self, what: Callable[[], bool], seconds: float = 15) -> None:
        with anyio.fail_after(seconds):
            while not what():
                await anyio.sleep(0.05)


@asynccontextmanager
async def listening_stdio(bin_path: Path, tmp: Path, cfg: Path, heard: Heard,
                          log_name: str = "server.log") -> AsyncIterator[ClientSession]:
    """A stdio client of `serve` that records what it is told."""
    params = StdioServerParameters(
        command=str(bin_path),
        args=["--config", str(cfg), "--data-dir", str(tmp / "data"), "--tools", "followups",
              "serve", str(tmp)],
        env=env_for(tmp), cwd=str(tmp))
    with open(tmp / log_name, "w", encoding="utf-8") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write, logging_callback=heard.on_log,
                                     message_handler=heard.on_message) as session:
                with anyio.fail_after(TEST_TIMEOUT_S):
                    heard.capabilities = (await session.initialize()).capabilities
                yield session


@asynccontextmanager
async def listening_http(url: str, token: str | None, heard: Heard) -> AsyncIterator[ClientSession]:
    """An HTTP client (with its event stream, as the SDK opens one) that records what it is
    told."""
    headers = {"Authorization": f"Bearer {token}"} if token else None
    http = httpx2.AsyncClient(headers=headers, timeout=CALL_TIMEOUT_S)
    async with http, streamable_http_client(url, http_client=http) as streams:
        async with ClientSession(streams[0], streams[1], logging_callback=heard.on_log,
                                 message_handler=heard.on_message) as session:
            with anyio.fail_after(CALL_TIMEOUT_S):
                await session.initialize()
            yield session


async def delivered_in_resource(read: Callable[[str], Any], context: str = INTERVIEW) -> str:
    """The due resource once it shows `context` delivered via mcp (polled: the notices go
    out a moment before the delivery is recorded)."""
    text = ""
    for _ in range(100):
        text = (await read(DUE)).contents[0].text
        entry = text.split(context)[0].rsplit("\n- #", 1)[-1] if context in text else ""
        if "via mcp" in entry:
            return text
        await anyio.sleep(0.05)
    raise AssertionError(f"{context!r} not shown delivered via mcp:\n{text}")


def said(heard: Heard, context: str) -> list[Any]:
    return [m for m in heard.messages if isinstance(m.data, dict)
            and m.data.get("followup", {}).get("context") == context]


async def test_the_mcp_channel_tells_a_connected_session(ringfence_bin, tmp_path):
    cfg = config(tmp_path, '[followups]\nproactive = true\ntimezone = "UTC"\n')
    heard = Heard()
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with listening_stdio(ringfence_bin, tmp_path, cfg, heard) as s:
            caps = heard.capabilities
            assert caps.resources.subscribe and caps.logging is not None
            listed = await s.list_resources()
            assert DUE in [str(r.uri) for r in listed.resources]
            assert "due_followups" in [p.name for p in (await s.list_prompts()).prompts]
            await s.subscribe_resource(DUE)
            r = await s.call_tool("schedule_followup", {"context": INTERVIEW, "minutes_from_now": 0.02})
            assert not is_error(r), text_of(r)
            assert structured(r)["channels"] == ["mcp"]
            await heard.wait(lambda: said(heard, INTERVIEW) and DUE in heard.updates)
            [m] = said(heard, INTERVIEW)
            assert m.level == "notice" and m.logger == "ringfence.followups"
            assert m.data["message"] == INTERVIEW and m.data["followup"]["id"] == 1
            assert m.data["followup"]["idempotency_key"]
            # The resource and the prompt hold it (marked delivered a moment after the
            # notices went out).
            text = await delivered_in_resource(s.read_resource)
            assert INTERVIEW in text and "#1" in text, text
            prompt = await s.get_prompt("due_followups")
            assert "Check in with me" in prompt.messages[0].content.text
            assert INTERVIEW in prompt.messages[0].content.text
            done = structured(await s.call_tool("list_followups", {"status": "completed"}))
            assert done["followups"][0]["deliveredVia"] == "mcp", done
            # A client that asked for neither notices nor the resource would hear nothing:
            # it does not count as listening, so the follow-up is not even tried.
            await s.set_logging_level("warning")
            await s.unsubscribe_resource(DUE)
            updates = len(heard.updates)
            r = await s.call_tool("schedule_followup", {"context": "water the plants", "minutes_from_now": 0.01})
            assert not is_error(r), text_of(r)
            await anyio.sleep(2.5)
            [f] = structured(await s.call_tool("list_followups", {}))["followups"]
            assert f["status"] == "pending" and f["attempts"] == 0 and not f["lastError"], f
            # Subscribing again makes it a listener: the resource update comes (no message:
            # the level is still above notice).
            await s.subscribe_resource(DUE)
            await heard.wait(lambda: len(heard.updates) > updates)
            assert not said(heard, "water the plants")
            text = await delivered_in_resource(s.read_resource, "water the plants")
            assert "water the plants" in text
            # Unknown resources cannot be subscribed to.
            with pytest.raises(Exception, match="no resource"):
                await s.subscribe_resource("ringfence://nothing")


async def test_what_fell_due_with_no_client_open_comes_when_one_connects(ringfence_bin, tmp_path):
    cfg = config(tmp_path, '[followups]\nproactive = true\ntimezone = "UTC"\n')
    # Scheduled with no server running at all; it falls due while nothing is connected.
    out = call_cli(tmp_path, cfg, "schedule_followup", {"context": INTERVIEW, "minutes_from_now": 0.01})
    assert "MCP client" in json.dumps(out), out
    time.sleep(3)
    heard = Heard()
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with listening_stdio(ringfence_bin, tmp_path, cfg, heard):
            await heard.wait(lambda: bool(said(heard, INTERVIEW)))
            [m] = said(heard, INTERVIEW)
            # Due 0.6 s after scheduling, 3 s before the client came: over 2 s late.
            assert m.data["followup"]["late_by_seconds"] >= 2.0, m.data
    # Delivered once, and nothing was claimed or held while no one could hear it.
    log = (tmp_path / "server.log").read_text()
    assert not re.search(r"held=[1-9]", log), log[-3000:]


async def test_over_http_each_user_hears_only_their_own(tmp_path):
    srv = serve_http(tmp_path, tokens_config(alice=ALICE, bob=BOB)
                     + '[followups]\nproactive = true\ntimezone = "UTC"\n', "--tools", "followups")
    alice, bob = Heard(), Heard()
    try:
        with anyio.fail_after(TEST_TIMEOUT_S):
            async with listening_http(srv.url, ALICE, alice) as a, listening_http(srv.url, BOB, bob) as b:
                await b.subscribe_resource(DUE)
                r = await call(a, "schedule_followup", {"context": INTERVIEW, "minutes_from_now": 0.02})
                assert not is_error(r), text_of(r)
                # Bob's own comes a little later: once he has heard it, his stream was open
                # when Alice's went out.
                r = await call(b, "schedule_followup", {"context": "bob's own", "minutes_from_now": 0.04})
                assert not is_error(r), text_of(r)
                await alice.wait(lambda: bool(said(alice, INTERVIEW)))
                await bob.wait(lambda: bool(said(bob, "bob's own")) and DUE in bob.updates)
                assert not said(bob, INTERVIEW) and len(bob.updates) == 1, (bob.messages, bob.updates)
                assert not said(alice, "bob's own")
                assert INTERVIEW not in (await b.read_resource(DUE)).contents[0].text
                assert INTERVIEW in (await a.read_resource(DUE)).contents[0].text
    finally:
        srv.stop()


async def test_an_http_session_without_an_event_stream_is_not_told(tmp_path):
    srv = serve_http(tmp_path, '[followups]\nproactive = true\ntimezone = "UTC"\n', "--tools", "followups")
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "MCP-Protocol-Version": "2025-11-25"}

    def rpc(h: Any, body: dict[str, Any]) -> Any:
        r = h.post(srv.url, json=body, headers=headers)
        assert r.status_code in (200, 202), r.text
        for line in r.text.splitlines():
            if line.startswith("data:") and line[5:].strip():
                return json.loads(line[5:])
        return r.json() if r.text.strip().startswith("{") else None

    try:
        with httpx2.Client(timeout=CALL_TIMEOUT_S) as h:
            init = h.post(srv.url, headers=headers, json={
                "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": {"name": "no-stream", "version": "1"}}})
            assert init.status_code == 200, init.text
            headers["Mcp-Session-Id"] = init.headers["mcp-session-id"]
            rpc(h, {"jsonrpc": "2.0", "method": "notifications/initialized"})
            r = rpc(h, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                "name": "schedule_followup",
                "arguments": {"context": INTERVIEW, "minutes_from_now": 0.01}}})
            assert not r["result"].get("isError"), r
            time.sleep(3)
            # No event stream: nothing could reach the client, so nothing was claimed.
            r = rpc(h, {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                        "params": {"name": "list_followups", "arguments": {}}})
            [f] = r["result"]["structuredContent"]["followups"]
            assert f["status"] == "pending" and f["attempts"] == 0, f
            # The client opens its event stream: the follow-up comes on it.
            with h.stream("GET", srv.url, headers={**headers, "Accept": "text/event-stream"}) as stream:
                assert stream.status_code == 200
                deadline = time.monotonic() + 15
                for line in stream.iter_lines():
                    if line.startswith("data:") and "notifications/message" in line:
                        note = json.loads(line[5:])
                        assert note["params"]["data"]["message"] == INTERVIEW, note
                        break
                    assert time.monotonic() < deadline, "nothing came on the event stream"
    finally:
        srv.stop()


async def test_a_2026_client_hears_through_subscriptions_listen(tmp_path):
    srv = serve_http(tmp_path, '[followups]\nproactive = true\ntimezone = "UTC"\n', "--tools", "followups")
    try:
        with anyio.fail_after(TEST_TIMEOUT_S):
            http = httpx2.AsyncClient(timeout=CALL_TIMEOUT_S)
            async with http, Client(streamable_http_client(srv.url, http_client=http),
                                    mode="2026-07-28") as c:
                async with c.listen(resource_subscriptions=[DUE, "ringfence://nothing"]) as sub:
                    assert sub.honored.resource_subscriptions == [DUE], sub.honored
                    r = await c.call_tool("schedule_followup", {"context": INTERVIEW, "minutes_from_now": 0.02})
                    assert not is_error(r), text_of(r)
                    async for event in sub:
                        assert event.uri == DUE, event
                        break
                text = await delivered_in_resource(c.read_resource)
                assert INTERVIEW in text, text
    finally:
        srv.stop()


def test_follow_ups_live_in_the_configured_store(tmp_path):
    """SQLite: followups.db in the data directory. PostgreSQL (RINGFENCE_TEST_STORE): the
    rows are in the database, and no file is made."""
    cfg = config(tmp_path, '[followups]\ntimezone = "UTC"\n')
    call_cli(tmp_path, cfg, "schedule_followup", {"context": "where am I", "minutes_from_now": 5})
    db_file = tmp_path / "data" / "followups.db"
    if on_postgres():
        url = store_env()["RINGFENCE_DATABASE_URL"]
        assert psql(url, 'SELECT "user", context FROM followups').strip() == "local|where am I"
        assert psql(url, "SELECT version FROM ringfence_schema WHERE name = 'followups'").strip() == "4"
        assert not db_file.exists()
    else:
        assert db_file.exists()
