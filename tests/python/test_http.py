"""End-to-end over MCP streamable HTTP: the official Python SDK's `streamable_http_client`
against `ringfence serve --http 127.0.0.1:0` (the port the OS picks is read from the log).

What is built so far of the HTTP transport: loopback serving at `/mcp` with MCP sessions,
one ringfence session (workspace state, read tracker) per MCP session, Host validation,
refusal to bind anything but loopback (authentication does not exist yet), SIGTERM shutdown.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator

import anyio
import httpx2
import pytest

from store import store_env
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from test_sdk_client import CALL_TIMEOUT_S, TEST_TIMEOUT_S, _binary, is_error, text_of

pytestmark = pytest.mark.anyio

URL_RE = re.compile(r'url"?[=:]"?(https?://[^\s"]+/mcp)')


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class HttpServer:
    def __init__(self, proc: subprocess.Popen[bytes], url: str, log: Path):
        self.proc = proc
        self.url = url
        self.log = log


def start_server(tmp: Path, *extra: str) -> HttpServer:
    ws = tmp / "ws"
    ws.mkdir(exist_ok=True)
    log = tmp / "http.log"
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp),
        "XDG_CONFIG_HOME": str(tmp / "xdg-config"),
        "RINGFENCE_LOG": "info",
        **store_env(),
    }
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(_binary()), "--data-dir", str(tmp / "data"), *extra,
             "serve", "--http", "127.0.0.1:0", str(ws)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=out, env=env,
        )
    return HttpServer(proc, wait_for_url(proc, log), log)


def wait_for_url(proc: subprocess.Popen[bytes], log: Path) -> str:
    """The `/mcp` URL the server logs once it listens (text or JSON log lines)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        m = URL_RE.search(log.read_text(errors="replace"))
        if m:
            return m.group(1)
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"server did not start:\n{log.read_text(errors='replace')}")


@pytest.fixture
def http_server(tmp_path: Path):
    srv = start_server(tmp_path)
    yield srv
    if srv.proc.poll() is None:
        srv.proc.send_signal(signal.SIGTERM)
        try:
            srv.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            srv.proc.kill()


@asynccontextmanager
async def client(url: str, token: str | None = None, *, verify: Any = True,
                 roots_callback: Any = None) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"} if token else None
    http = httpx2.AsyncClient(headers=headers, timeout=CALL_TIMEOUT_S, verify=verify)
    async with http, streamable_http_client(url, http_client=http) as streams:
        read, write = streams[0], streams[1]
        async with ClientSession(read, write, list_roots_callback=roots_callback) as session:
            with anyio.fail_after(CALL_TIMEOUT_S):
                await session.initialize()
            yield session


async def call(session: ClientSession, name: str, args: dict[str, Any]) -> Any:
    with anyio.fail_after(CALL_TIMEOUT_S):
        return await session.call_tool(name, args)


async def test_tools_over_http(http_server, tmp_path):
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with client(http_server.url) as s:
            listed = await s.list_tools()
            assert {"read_file", "write_file", "search_entries"} <= {t.name for t in listed.tools}
            r = await call(s, "write_file", {"path": "notes.txt", "content": "over http\n"})
            assert not is_error(r), text_of(r)
            r = await call(s, "read_file", {"path": "notes.txt"})
            assert text_of(r).startswith("     1\tover http")
            r = await call(s, "read_file", {"path": "../../etc/passwd"})
            assert is_error(r)
    assert (tmp_path / "ws" / "notes.txt").read_text() == "over http\n"


async def test_each_http_session_has_its_own_state(http_server, tmp_path):
    (tmp_path / "ws" / "shared.txt").write_text("original\n")
    (tmp_path / "ws" / "sub").mkdir()
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with client(http_server.url) as a, client(http_server.url) as b:
            # A reads the file; B has not, so B may not overwrite it.
            await call(a, "read_file", {"path": "shared.txt"})
            r = await call(b, "write_file", {"path": "shared.txt", "content": "from b\n"})
            assert is_error(r) and "read_file" in text_of(r), text_of(r)
            r = await call(a, "write_file", {"path": "shared.txt", "content": "from a\n"})
            assert not is_error(r), text_of(r)
            # A's workspace switch does not move B.
            await call(a, "switch_workspace", {"path": "sub"})
            r = await call(b, "list_directory", {"path": "."})
            assert "shared.txt" in text_of(r)
            r = await call(a, "list_directory", {"path": "."})
            assert "shared.txt" not in text_of(r)
    assert (tmp_path / "ws" / "shared.txt").read_text() == "from a\n"


async def test_foreign_host_header_is_refused(http_server):
    # DNS rebinding: a page on evil.example resolving to 127.0.0.1 sends its own Host.
    async with httpx2.AsyncClient() as h:
        r = await h.post(
            http_server.url,
            headers={"Host": "evil.example", "Accept": "application/json, text/event-stream",
                     "Content-Type": "application/json"},
            content=b'{"jsonrpc":"2.0","id":1,"method":"ping"}',
        )
        assert r.status_code == 403, r.text


async def ping_from(url: str, origin: str) -> httpx2.Response:
    async with httpx2.AsyncClient() as h:
        return await h.post(
            url,
            headers={"Origin": origin, "Accept": "application/json, text/event-stream",
                     "Content-Type": "application/json"},
            content=b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{'
                    b'"protocolVersion":"2025-06-18","capabilities":{},'
                    b'"clientInfo":{"name":"page","version":"0"}}}',
        )


async def test_only_the_servers_own_browser_origins_are_accepted(http_server):
    """A page of the server's own origin (its loopback names on its port) may drive it — a
    browser client on the same machine; a page of any other origin (another port of
    localhost, a rebinding attacker's name, `null`) is refused with 403."""
    port = http_server.url.split(":")[2].split("/")[0]
    for origin in [f"http://127.0.0.1:{port}", f"http://localhost:{port}",
                   f"http://[::1]:{port}"]:
        r = await ping_from(http_server.url, origin)
        assert r.status_code == 200, (origin, r.status_code, r.text)
    for origin in ["http://localhost:3000", f"https://127.0.0.1:{port}",
                   f"http://evil.example.com:{port}", "null", "http://127.0.0.1"]:
        r = await ping_from(http_server.url, origin)
        assert r.status_code == 403, (origin, r.status_code, r.text)


async def test_allowed_origins_are_accepted_and_bad_entries_refused_at_start(tmp_path):
    (tmp_path / "xdg-config" / "ringfence").mkdir(parents=True)
    config = tmp_path / "xdg-config" / "ringfence" / "config.toml"
    config.write_text('[http]\nallowed_origins = ["http://localhost:3000", "https://app.example.com"]\n')
    srv = start_server(tmp_path)
    try:
        for origin in ["http://localhost:3000", "https://app.example.com",
                       "https://app.example.com:443"]:
            r = await ping_from(srv.url, origin)
            assert r.status_code == 200, (origin, r.status_code, r.text)
        for origin in ["http://localhost:3001", "http://app.example.com"]:
            r = await ping_from(srv.url, origin)
            assert r.status_code == 403, (origin, r.status_code, r.text)
    finally:
        srv.proc.send_signal(signal.SIGTERM)
        assert srv.proc.wait(timeout=15) == 0
    config.write_text('[http]\nallowed_origins = ["https://app.example.com/page"]\n')
    proc = subprocess.run(
        [str(_binary()), "--data-dir", str(tmp_path / "data"), "serve", "--http", "127.0.0.1:0",
         str(tmp_path / "ws")],
        capture_output=True, text=True, timeout=30,
        env={"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path),
             "XDG_CONFIG_HOME": str(tmp_path / "xdg-config")})
    assert proc.returncode == 2, proc.stderr
    assert "http.allowed_origins" in proc.stderr and "no path" in proc.stderr, proc.stderr


def test_non_loopback_bind_is_refused_without_authentication(tmp_path):
    proc = subprocess.run(
        [str(_binary()), "--data-dir", str(tmp_path / "data"), "serve", "--http", "0.0.0.0:0",
         str(tmp_path)],
        capture_output=True, text=True, timeout=30,
    )
    assert proc.returncode == 2
    assert "loopback" in proc.stderr and "authentication" in proc.stderr
    assert proc.stdout == ""


def test_sigterm_stops_the_http_server(tmp_path):
    srv = start_server(tmp_path)
    srv.proc.send_signal(signal.SIGTERM)
    assert srv.proc.wait(timeout=15) == 0
    assert "SIGTERM received" in srv.log.read_text(errors="replace")


def token_hash(token: str) -> str:
    out = subprocess.run([str(_binary()), "token-hash"], input=token, capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


async def test_bearer_tokens(tmp_path):
    alice, bob = "alice-" + "a" * 30, "bob-" + "b" * 30
    cfg = tmp_path / "ringfence.toml"
    cfg.write_text(
        "[http]\n"
        f'tokens = [{{ user = "alice", hash = "{token_hash(alice)}" }},'
        f' {{ user = "bob", hash = "{token_hash(bob)}" }}]\n'
    )
    assert alice not in cfg.read_text()  # only hashes are stored
    srv = start_server(tmp_path, "--config", str(cfg))
    try:
        base = srv.url.rsplit("/mcp", 1)[0]
        body = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
        hdrs = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        async with httpx2.AsyncClient() as h:
            # Health checks need no token.
            r = await h.get(base + "/healthz")
            assert r.status_code == 200 and r.text.strip() == "ok"
            # Metrics are behind the same authentication as /mcp.
            r = await h.get(base + "/metrics")
            assert r.status_code == 401
            r = await h.post(srv.url, headers=hdrs, content=body)
            assert r.status_code == 401
            assert r.headers["www-authenticate"].startswith("Bearer")
            r = await h.post(srv.url, headers={**hdrs, "Authorization": "Bearer wrong-token-xxxxxxxx"},
                             content=body)
            assert r.status_code == 401
            assert "invalid_token" in r.headers["www-authenticate"]
        with anyio.fail_after(TEST_TIMEOUT_S):
            for name, token in (("alice", alice), ("bob", bob)):
                async with client(srv.url, token) as s:
                    r = await call(s, "write_file", {"path": f"{name}.txt", "content": "hi\n"})
                    assert not is_error(r), text_of(r)
        log = srv.log.read_text(errors="replace")
        assert alice not in log and bob not in log  # tokens are never logged
    finally:
        srv.proc.send_signal(signal.SIGTERM)
        srv.proc.wait(timeout=15)
    # Every call is in the audit trail under the token's user, contents redacted.
    lines = audit(tmp_path, "--user", "alice")
    assert [l["tool"] for l in lines] == ["write_file"]
    assert lines[0]["args"]["path"] == "alice.txt"
    assert lines[0]["args"]["content"]["len"] == 3 and "hi" not in json.dumps(lines[0])
    assert lines[0]["outcome"] == "ok"
    assert [l["user"] for l in audit(tmp_path, "--tool", "write_file")] == ["alice", "bob"]


def audit(tmp: Path, *filters: str) -> list[dict[str, Any]]:
    out = subprocess.run(
        [str(_binary()), "--data-dir", str(tmp / "data"), "audit", *filters],
        capture_output=True, text=True, timeout=30,
    )
    assert out.returncode == 0, out.stderr
    return [json.loads(l) for l in out.stdout.splitlines() if l.strip()]


async def test_metrics(http_server):
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with client(http_server.url) as s:
            await call(s, "write_file", {"path": "m.txt", "content": "x\n"})
            await call(s, "read_file", {"path": "nope.txt"})
            async with httpx2.AsyncClient() as h:
                r = await h.get(http_server.url.rsplit("/mcp", 1)[0] + "/metrics")
            assert r.status_code == 200
            text = r.text
            assert 'ringfence_tool_calls_total{tool="write_file",outcome="ok"} 1' in text
            assert 'ringfence_tool_calls_total{tool="read_file",outcome="error"} 1' in text
            assert 'ringfence_tool_call_duration_seconds_count{tool="write_file"} 1' in text
            assert "ringfence_active_sessions 1" in text


async def test_failed_calls_are_audited_too(http_server, tmp_path):
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with client(http_server.url) as s:
            await call(s, "read_file", {"path": "../../etc/passwd"})
            await call(s, "read_file", {"path": "missing.txt"})
    http_server.proc.send_signal(signal.SIGTERM)
    http_server.proc.wait(timeout=15)
    lines = audit(tmp_path, "--outcome", "error")
    assert [(l["user"], l["error"]) for l in lines] == [
        ("local", "outside_workspace"), ("local", "not_found")]
    assert all(l["duration_ms"] >= 0 and l["session"] for l in lines)
    assert audit(tmp_path, "--since", "2999-01-01") == []


def test_bad_token_hash_in_config_fails_closed(tmp_path):
    cfg = tmp_path / "ringfence.toml"
    cfg.write_text('[http]\ntokens = [{ user = "alice", hash = "plain-text-token" }]\n')
    proc = subprocess.run(
        [str(_binary()), "--config", str(cfg), "--data-dir", str(tmp_path / "data"),
         "serve", "--http", "127.0.0.1:0", str(tmp_path)],
        capture_output=True, text=True, timeout=30,
    )
    assert proc.returncode == 2
    assert "http.tokens[0]" in proc.stderr and "token-hash" in proc.stderr


async def test_audit_trail_holds_no_personal_content(tmp_path):
    """Memories, truths, their tags and search questions reach the audit trail only as a
    length and a hash: the words themselves appear nowhere in the audit file."""
    cfg = tmp_path / "ringfence.toml"
    cfg.write_text('[memory.embeddings]\nprovider = "none"\n')
    srv = start_server(tmp_path, "--config", str(cfg))
    secrets = {
        "truth": "Kestrel Vandermeer was born in Ljubljana",
        "memory": "Kestrel is allergic to quinoa-flavoured marzipan",
        "tag": "marzipanallergy",
        "update": "Kestrel outgrew the marzipan allergy in Trondheim",
        "question": "which sweets make Kestrel sick",
    }
    try:
        with anyio.fail_after(TEST_TIMEOUT_S):
            async with client(srv.url) as s:
                r = await call(s, "store_truth", {"truthContent": secrets["truth"]})
                assert not is_error(r), text_of(r)
                r = await call(s, "store_memory", {
                    "memoryContent": secrets["memory"], "tags": [secrets["tag"]]})
                assert not is_error(r), text_of(r)
                r = await call(s, "update_memory", {
                    "memoryId": 1, "updatedContent": secrets["update"]})
                assert not is_error(r), text_of(r)
                r = await call(s, "search_memory", {
                    "searchQuery": secrets["question"], "tags": [secrets["tag"]]})
                assert not is_error(r), text_of(r)
                r = await call(s, "search_truths", {"searchQuery": secrets["question"]})
                assert not is_error(r), text_of(r)
    finally:
        srv.proc.send_signal(signal.SIGTERM)
        srv.proc.wait(timeout=15)
    lines = audit(tmp_path)
    assert [l["tool"] for l in lines] == [
        "store_truth", "store_memory", "update_memory", "search_memory", "search_truths"]
    assert lines[0]["args"]["truthContent"]["len"] == len(secrets["truth"])
    assert lines[2]["args"]["memoryId"] == 1
    raw = b"".join(p.read_bytes() for p in (tmp_path / "data" / "audit").iterdir())
    assert raw.count(b"\n") == 5
    for name, text in secrets.items():
        for word in [text, *text.split()]:
            if len(word) >= 6:
                assert word.encode() not in raw, f"{name}: {word!r} is in the audit file"
