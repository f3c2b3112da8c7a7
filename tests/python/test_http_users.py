"""Several users on one `ringfence serve --http`: per-user workspaces, session ownership,
OAuth 2.1 resource-server mode (JWT access tokens minted here from a generated key pair),
per-user rate and concurrency limits, call time limits, body limits, graceful shutdown with a
call in flight, TLS and JSON logs. The official MCP Python SDK is the client wherever a real
MCP client fits; raw HTTP where the test is about the HTTP layer itself.
"""

from __future__ import annotations

import base64
import datetime
import http.server
import json
import os
import re
import signal
import stat
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
import jwt
import pytest

from store import store_env
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID
from mcp import types

from test_http import audit, call, client, token_hash, wait_for_url
from test_sdk_client import (
    TEST_TIMEOUT_S, _binary, is_error, structured, text_of,
)

pytestmark = pytest.mark.anyio

HDRS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INIT = json.dumps({
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "raw", "version": "0"}},
}).encode()
ALICE, BOB = "alice-token-" + "a" * 24, "bob-token-" + "b" * 24


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Server:
    def __init__(self, proc: subprocess.Popen[bytes], url: str, log: Path):
        self.proc, self.url, self.log = proc, url, log
        self.base = url.rsplit("/mcp", 1)[0]

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.wait()


def serve(tmp: Path, config: str, *extra: str, roots: tuple[str, ...] = ()) -> Server:
    cfg = tmp / "ringfence.toml"
    cfg.write_text(config)
    log = tmp / "http.log"
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp),
           "XDG_CONFIG_HOME": str(tmp / "xdg-config"), "RINGFENCE_LOG": "info", **store_env()}
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(_binary()), "--config", str(cfg), "--data-dir", str(tmp / "data"), *extra,
             "serve", "--http", "127.0.0.1:0", *roots],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=out, env=env,
        )
    return Server(proc, wait_for_url(proc, log), log)


def tokens_config(**users: str) -> str:
    entries = ", ".join(f'{{ user = "{u}", hash = "{token_hash(t)}" }}' for u, t in users.items())
    return f"[http]\ntokens = [{entries}]\n"


def user_roots_config(tmp: Path) -> str:
    """Alice and Bob, each with a workspace made from the template, and a shared read-only
    directory."""
    (tmp / "shared").mkdir(exist_ok=True)
    return (
        f'roots = [{{ path = "{tmp}/users/{{user}}", access = "write" }},'
        f' {{ path = "{tmp}/shared", access = "read" }}]\n'
        + tokens_config(alice=ALICE, bob=BOB)
    )


async def test_two_users_work_in_their_own_workspaces(tmp_path):
    """The issue's "done when": two users, one instance, own tokens, own workspaces, nothing
    of each other's reachable; every call (failures too) audited under its user."""
    shared = tmp_path / "shared"
    srv = serve(tmp_path, user_roots_config(tmp_path))
    (shared / "handbook.md").write_text("".join(f"rule {i}: be kind\n" for i in range(150)))
    try:
        with anyio.fail_after(TEST_TIMEOUT_S):
            async with client(srv.url, ALICE) as a, client(srv.url, BOB) as b:
                r = await call(a, "write_file", {"path": "diary.txt", "content": "alice only\n"})
                assert not is_error(r), text_of(r)
                r = await call(b, "write_file", {"path": "todo.txt", "content": "bob only\n"})
                assert not is_error(r), text_of(r)
                # Each sees their own root and the shared one, nothing of the other.
                info_a = text_of(await call(a, "file_access_info", {}))
                info_b = text_of(await call(b, "file_access_info", {}))
                assert f"{tmp_path}/users/alice" in info_a and "bob" not in info_a, info_a
                assert f"{tmp_path}/users/bob" in info_b and "alice" not in info_b, info_b
                assert str(shared) in info_a and str(shared) in info_b
                listing = text_of(await call(b, "list_directory", {"path": "."}))
                assert "todo.txt" in listing and "diary.txt" not in listing
                for spelling in (f"{tmp_path}/users/alice/diary.txt", "../alice/diary.txt",
                                 f"{shared}/../users/alice/diary.txt"):
                    r = await call(b, "read_file", {"path": spelling})
                    assert is_error(r) and "alice only" not in text_of(r), (spelling, text_of(r))
                r = await call(b, "search_entries", {"path": str(tmp_path), "pattern": "diary"})
                assert is_error(r) or "diary" not in text_of(r)
                # The shared root is read-only for both.
                r = await call(a, "write_file", {"path": f"{shared}/x.txt", "content": "x"})
                assert is_error(r) and "read" in text_of(r).lower()
                # Saved outputs are per user: Bob cannot open the file Alice's grep spilled.
                r = await call(a, "grep", {"pattern": "be kind", "path": str(shared),
                                           "output_mode": "content"})
                m = re.search(r"(/\S+tool-output/\S+?)[\s.]*(?:Use|$)", text_of(r))
                assert m, text_of(r)
                spill = m.group(1).rstrip(".")
                assert "/alice/" in spill, spill
                r = await call(a, "read_file", {"path": spill, "limit": 2})
                assert not is_error(r) and "be kind" in text_of(r), text_of(r)
                r = await call(b, "read_file", {"path": spill})
                assert is_error(r) and "be kind" not in text_of(r), text_of(r)
                # Alice's own write counts as her read; Bob's session knows nothing of it.
                r = await call(a, "edit_file", {"path": "diary.txt", "old_string": "alice",
                                                "new_string": "Alice"})
                assert not is_error(r), text_of(r)
    finally:
        assert srv.stop() == 0
    assert (tmp_path / "users/alice/diary.txt").read_text() == "Alice only\n"
    assert (tmp_path / "users/bob/todo.txt").read_text() == "bob only\n"
    assert not (tmp_path / "users/bob/diary.txt").exists()
    for user in ("alice", "bob"):  # made on first use, for the server's account only
        assert stat.S_IMODE((tmp_path / "users" / user).stat().st_mode) == 0o700
    lines = audit(tmp_path)
    assert {l["user"] for l in lines} == {"alice", "bob"}
    bob_errors = audit(tmp_path, "--user", "bob", "--outcome", "error")
    assert len(bob_errors) >= 4 and all(l["error"] for l in bob_errors)
    assert len(audit(tmp_path, "--user", "alice")) == 6


async def test_without_roots_each_user_gets_a_default_workspace(tmp_path):
    srv = serve(tmp_path, tokens_config(alice=ALICE, bob=BOB))
    try:
        with anyio.fail_after(TEST_TIMEOUT_S):
            async with client(srv.url, ALICE) as a, client(srv.url, BOB) as b:
                r = await call(a, "write_file", {"path": "a.txt", "content": "from alice\n"})
                assert not is_error(r), text_of(r)
                r = await call(b, "read_file", {"path": "a.txt"})
                assert is_error(r) and "from alice" not in text_of(r), text_of(r)
                assert "a.txt" not in text_of(await call(b, "list_directory", {"path": "."}))
    finally:
        assert srv.stop() == 0
    data = tmp_path / "data"
    assert (data / "users/alice/workspace/a.txt").read_text() == "from alice\n"
    assert not (data / "workspace/a.txt").exists()  # the local (stdio) user's workspace


def test_the_local_user_name_is_reserved(tmp_path):
    cfg = tmp_path / "ringfence.toml"
    cfg.write_text(tokens_config(local=ALICE))
    proc = subprocess.run(
        [str(_binary()), "--config", str(cfg), "--data-dir", str(tmp_path / "data"),
         "serve", "--http", "127.0.0.1:0"],
        capture_output=True, text=True, timeout=30,
    )
    assert proc.returncode == 2 and "reserved" in proc.stderr, proc.stderr


async def test_a_session_belongs_to_the_user_who_opened_it(tmp_path):
    srv = serve(tmp_path, user_roots_config(tmp_path))
    try:
        async with httpx2.AsyncClient() as h:
            r = await h.post(srv.url, headers={**HDRS, "Authorization": f"Bearer {ALICE}"},
                             content=INIT)
            assert r.status_code == 200, r.text
            sid = r.headers["mcp-session-id"]
            listing = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).encode()
            call_b = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
                "name": "file_access_info", "arguments": {}}}).encode()
            bob = {**HDRS, "Authorization": f"Bearer {BOB}", "mcp-session-id": sid,
                   "mcp-protocol-version": "2025-06-18"}
            for method, body in (("POST", listing), ("POST", call_b), ("GET", None),
                                 ("DELETE", None)):
                r = await h.request(method, srv.url, headers=bob, content=body)
                assert r.status_code == 404, (method, r.status_code, r.text)
                assert "alice" not in r.text
            # Alice's session is still hers and still alive.
            alice = {**bob, "Authorization": f"Bearer {ALICE}"}
            r = await h.post(srv.url, headers=alice, content=listing)
            assert r.status_code == 200 and "file_access_info" in r.text, r.text
    finally:
        assert srv.stop() == 0
    assert "another user's MCP session" in srv.log.read_text()


# --- OAuth 2.1 resource server -------------------------------------------------------------

ISSUER = "https://idp.test"


def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def jwks(*keys: tuple[str, Any]) -> dict[str, Any]:
    out = []
    for kid, key in keys:
        if isinstance(key, rsa.RSAPrivateKey):
            jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
            jwk.update(alg="RS256")
        else:
            jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(key.public_key()))
            jwk.update(alg="ES256")
        jwk.update(kid=kid, use="sig")
        out.append(jwk)
    return {"keys": out}


def mint(key: Any, kid: str, alg: str = "RS256", **claims: Any) -> str:
    now = int(time.time())
    body = {"iss": ISSUER, "sub": "carol", "aud": "https://mcp.test/mcp", "iat": now,
            "exp": now + 300, "scope": "files"}
    body.update(claims)
    body = {k: v for k, v in body.items() if v is not None}
    return jwt.encode(body, key, algorithm=alg, headers={"kid": kid})


def oauth_config(tmp: Path, keys_line: str) -> str:
    return (
        f'roots = [{{ path = "{tmp}/users/{{user}}" }}]\n'
        "[http]\n"
        'public_url = "https://mcp.test"\n'
        "[http.oauth]\n"
        f'issuer = "{ISSUER}"\n'
        f"{keys_line}\n"
        'required_scopes = ["files"]\n'
    )


async def test_jwt_access_tokens(tmp_path):
    key, other = rsa_key(), rsa_key()
    ec_key = ec.generate_private_key(ec.SECP256R1())
    (tmp_path / "jwks.json").write_text(json.dumps(jwks(("k1", key), ("e1", ec_key))))
    srv = serve(tmp_path, oauth_config(tmp_path, f'jwks_file = "{tmp_path}/jwks.json"'))
    try:
        # RFC 9728 metadata, where challenges point.
        async with httpx2.AsyncClient() as h:
            for path in ("/.well-known/oauth-protected-resource/mcp",
                         "/.well-known/oauth-protected-resource"):
                meta = (await h.get(srv.base + path)).json()
                assert meta["resource"] == "https://mcp.test/mcp"
                assert meta["authorization_servers"] == [ISSUER]
                assert meta["scopes_supported"] == ["files"]
            bad = {
                "missing": None,
                "expired": mint(key, "k1", exp=int(time.time()) - 3600),
                "wrong audience": mint(key, "k1", aud="https://elsewhere/mcp"),
                "wrong issuer": mint(key, "k1", iss="https://evil.test"),
                "unknown key": mint(other, "k1"),
                "unknown kid": mint(other, "k9"),
                "no expiry": mint(key, "k1", exp=None),
                "no user": mint(key, "k1", sub=None),
                "alg none": jwt.encode({"iss": ISSUER, "sub": "x", "aud": "https://mcp.test/mcp",
                                        "exp": int(time.time()) + 60}, None, algorithm="none"),
                "garbage": "not.a.jwt",
            }
            for why, token in bad.items():
                headers = {**HDRS, **({"Authorization": f"Bearer {token}"} if token else {})}
                r = await h.post(srv.url, headers=headers, content=INIT)
                assert r.status_code == 401, (why, r.status_code, r.text)
                challenge = r.headers["www-authenticate"]
                assert ('resource_metadata="https://mcp.test/.well-known/'
                        'oauth-protected-resource/mcp"') in challenge, challenge
                if token:
                    assert 'error="invalid_token"' in challenge, (why, challenge)
            r = await h.post(srv.url, content=INIT, headers={
                **HDRS, "Authorization": f"Bearer {mint(key, 'k1', scope='other')}"})
            assert r.status_code == 403, r.text
            assert 'error="insufficient_scope"' in r.headers["www-authenticate"]
            assert "expired" in (await h.post(srv.url, content=INIT, headers={
                **HDRS, "Authorization": f"Bearer {bad['expired']}"})).text
        # Valid tokens (RS256, ES256) work through the SDK; `sub` names the user.
        with anyio.fail_after(TEST_TIMEOUT_S):
            for token, user in ((mint(key, "k1"), "carol"),
                                (mint(ec_key, "e1", alg="ES256", sub="dave"), "dave")):
                async with client(srv.url, token) as s:
                    r = await call(s, "write_file", {"path": "hello.txt", "content": user})
                    assert not is_error(r), text_of(r)
    finally:
        assert srv.stop() == 0
    assert (tmp_path / "users/carol/hello.txt").read_text() == "carol"
    assert (tmp_path / "users/dave/hello.txt").read_text() == "dave"
    assert [l["user"] for l in audit(tmp_path)] == ["carol", "dave"]


async def test_jwt_and_token_identities_never_meet(tmp_path):
    """A JWT whose user claim equals a bearer-token user's name does not become that user
    (with `preferred_username`, a name people often choose themselves); numeric claims map
    to one name each; an `exp` beyond 64 bits is far in the future, not expired."""
    key = rsa_key()
    (tmp_path / "jwks.json").write_text(json.dumps(jwks(("k1", key))))
    entry = f'{{ user = "bob", hash = "{token_hash(BOB)}" }}'
    config = (
        oauth_config(tmp_path, f'jwks_file = "{tmp_path}/jwks.json"')
        + 'user_claim = "preferred_username"\n'
    ).replace("[http]\n", f"[http]\ntokens = [{entry}]\n")
    srv = serve(tmp_path, config)
    try:
        async with httpx2.AsyncClient() as h:
            async def status(token: str) -> tuple[int, str]:
                r = await h.post(srv.url, content=INIT,
                                 headers={**HDRS, "Authorization": f"Bearer {token}"})
                return r.status_code, r.text

            code, body = await status(mint(key, "k1", preferred_username="bob"))
            assert code == 401 and "bearer token" in body, (code, body)
            code, body = await status(mint(key, "k1", preferred_username=42.0))
            assert code == 401 and "not an integer" in body, (code, body)
            code, body = await status(mint(key, "k1", preferred_username="carol",
                                           exp=10**20))
            assert code == 200, (code, body)
        with anyio.fail_after(TEST_TIMEOUT_S):
            for token, user in ((BOB, "bob"),
                                (mint(key, "k1", preferred_username=42), "42")):
                async with client(srv.url, token) as s:
                    r = await call(s, "write_file", {"path": "who.txt", "content": user})
                    assert not is_error(r), text_of(r)
    finally:
        assert srv.stop() == 0
    assert (tmp_path / "users/bob/who.txt").read_text() == "bob"
    assert (tmp_path / "users/42/who.txt").read_text() == "42"
    assert [l["user"] for l in audit(tmp_path)] == ["bob", "42"]


async def test_an_unauthenticated_token_cannot_forge_log_lines(tmp_path):
    """The reason a token is refused can quote the token (its `alg`); before anyone is
    authenticated, that text reaches the log escaped: no line break, no terminal escape."""
    key = rsa_key()
    (tmp_path / "jwks.json").write_text(json.dumps(jwks(("k1", key))))
    srv = serve(tmp_path, oauth_config(tmp_path, f'jwks_file = "{tmp_path}/jwks.json"'))
    forged = "x\n2026-01-01T00:00:00Z  INFO ringfence: FORGED line\x1b[31m"
    header = base64.urlsafe_b64encode(json.dumps({"alg": forged, "kid": "k1"}).encode())
    token = header.decode().rstrip("=") + ".e30.c2ln"
    try:
        async with httpx2.AsyncClient() as h:
            r = await h.post(srv.url, content=INIT,
                             headers={**HDRS, "Authorization": f"Bearer {token}"})
            assert r.status_code == 401, r.text
    finally:
        assert srv.stop() == 0
    log = srv.log.read_bytes()
    assert b"FORGED" in log, "the refusal was not logged"
    assert b"\x1b" not in log
    assert not any(line.lstrip().startswith(b"2026-01-01") for line in log.splitlines())


async def test_jwks_from_a_url_with_key_rotation(tmp_path):
    key, rotated = rsa_key(), rsa_key()
    served = {"doc": jwks(("k1", key))}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            body = json.dumps(served["doc"]).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    idp = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=idp.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{idp.server_address[1]}/jwks"
    srv = serve(tmp_path, oauth_config(tmp_path, f'jwks_url = "{url}"'))
    try:
        async with httpx2.AsyncClient() as h:
            r = await h.post(srv.url, content=INIT,
                             headers={**HDRS, "Authorization": f"Bearer {mint(key, 'k1')}"})
            assert r.status_code == 200, r.text
            # The authorization server rotates its key: a token naming the new kid makes the
            # server fetch the set again.
            served["doc"] = jwks(("k2", rotated))
            r = await h.post(srv.url, content=INIT,
                             headers={**HDRS, "Authorization": f"Bearer {mint(rotated, 'k2')}"})
            assert r.status_code == 200, r.text
    finally:
        assert srv.stop() == 0
        idp.shutdown()


def test_bad_oauth_settings_fail_closed(tmp_path):
    for keys_line, expected in (
        ("", "jwks_file"),
        (f'jwks_file = "{tmp_path}/missing.json"', "missing.json"),
        ('jwks_url = "http://idp.example/jwks"', "https://"),
    ):
        cfg = tmp_path / "bad.toml"
        cfg.write_text(oauth_config(tmp_path, keys_line))
        proc = subprocess.run(
            [str(_binary()), "--config", str(cfg), "--data-dir", str(tmp_path / "data"),
             "serve", "--http", "127.0.0.1:0"],
            capture_output=True, text=True, timeout=30,
        )
        assert proc.returncode == 2, (keys_line, proc.stderr)
        assert expected in proc.stderr, (keys_line, proc.stderr)


# --- limits --------------------------------------------------------------------------------

async def test_rate_limit_is_per_user_with_retry_after(tmp_path):
    ops = "operator-token-" + "o" * 24
    srv = serve(tmp_path, tokens_config(alice=ALICE, bob=BOB)
                + f'metrics_token_hash = "{token_hash(ops)}"\n'
                + "[http.limits]\nrate = 0.5\nburst = 3\n", roots=(str(tmp_path),))
    try:
        async with httpx2.AsyncClient() as h:
            codes = []
            for _ in range(5):
                r = await h.post(srv.url, content=INIT,
                                 headers={**HDRS, "Authorization": f"Bearer {ALICE}"})
                codes.append(r.status_code)
                if r.status_code == 429:
                    assert int(r.headers["retry-after"]) >= 1
                    assert "rate limit" in r.text
            assert codes[:3] == [200, 200, 200] and codes[3:] == [429, 429], codes
            # Bob has his own budget.
            r = await h.post(srv.url, content=INIT,
                             headers={**HDRS, "Authorization": f"Bearer {BOB}"})
            assert r.status_code == 200, r.text
            r = await h.get(srv.base + "/metrics", headers={"Authorization": f"Bearer {ops}"})
            assert 'ringfence_http_refusals_total{status="429"} 2' in r.text, r.text
    finally:
        assert srv.stop() == 0


def slow_roots(delay: float, root: Path):
    async def callback(_context: Any) -> types.ListRootsResult:
        await anyio.sleep(delay)
        return types.ListRootsResult(roots=[types.Root(uri=root.as_uri())])
    return callback


async def test_concurrency_limit_and_call_timeout(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    srv = serve(tmp_path, tokens_config(alice=ALICE, bob=BOB)
                + "call_timeout_secs = 2\n[http.limits]\nconcurrent = 1\n", roots=(str(ws),))
    try:
        with anyio.fail_after(TEST_TIMEOUT_S):
            # The client declares roots and answers roots/list only after 6 s: a tool call
            # waits for that answer, so it stays in flight until the 2 s limit stops it.
            async with client(srv.url, ALICE, roots_callback=slow_roots(6, ws)) as s:
                result: dict[str, Any] = {}

                async def slow() -> None:
                    started = time.monotonic()
                    result["r"] = await call(s, "list_directory", {"path": "."})
                    result["s"] = time.monotonic() - started

                async with anyio.create_task_group() as tg:
                    tg.start_soon(slow)
                    await anyio.sleep(0.7)
                    async with httpx2.AsyncClient() as h:
                        r = await h.post(srv.url, content=INIT,
                                         headers={**HDRS, "Authorization": f"Bearer {ALICE}"})
                        assert r.status_code == 429, r.text
                        assert r.headers["retry-after"] == "1"
                        r = await h.post(srv.url, content=INIT,
                                         headers={**HDRS, "Authorization": f"Bearer {BOB}"})
                        assert r.status_code == 200, r.text
                r = result["r"]
                assert is_error(r) and "longer than this server allows" in text_of(r), text_of(r)
                assert structured(r)["error"] == "timeout"
                assert 1.5 < result["s"] < 5.5, result["s"]
    finally:
        assert srv.stop() == 0
    assert [l["error"] for l in audit(tmp_path, "--user", "alice")] == ["timeout"]


async def test_oversized_body_is_refused(tmp_path):
    srv = serve(tmp_path, tokens_config(alice=ALICE), roots=(str(tmp_path),))
    try:
        async with httpx2.AsyncClient(timeout=60) as h:
            big = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"' + b"x" * (65 << 20)
            r = await h.post(srv.url, content=big + b'"}}',
                             headers={**HDRS, "Authorization": f"Bearer {ALICE}"})
            assert r.status_code == 413, (r.status_code, r.text[:200])
            assert (await h.get(srv.base + "/healthz")).status_code == 200  # still up
    finally:
        assert srv.stop() == 0


async def test_sigterm_finishes_running_calls_and_refuses_new_ones(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "kept.txt").write_text("still here\n")
    srv = serve(tmp_path, tokens_config(alice=ALICE), roots=(str(ws),))
    result: dict[str, Any] = {}
    try:
        with anyio.fail_after(TEST_TIMEOUT_S):
            # The call waits 3 s for the client's roots; SIGTERM arrives after 1 s.
            async with client(srv.url, ALICE, roots_callback=slow_roots(3, ws)) as s:
                # The SDK checks results against the tool list; fetch it before the
                # shutdown, as any client does on start.
                await s.list_tools()

                async def running() -> None:
                    result["r"] = await call(s, "list_directory", {"path": "."})

                async with anyio.create_task_group() as tg:
                    tg.start_soon(running)
                    await anyio.sleep(1)
                    srv.proc.send_signal(signal.SIGTERM)
                    await anyio.sleep(0.5)
                    assert srv.proc.poll() is None  # still finishing the call
                    async with httpx2.AsyncClient() as h:
                        r = await h.post(srv.url, content=INIT,
                                         headers={**HDRS, "Authorization": f"Bearer {ALICE}"})
                        assert r.status_code == 503, r.text
                        assert r.headers["retry-after"]
    except* (httpx2.ConnectError, httpx2.RemoteProtocolError):
        pass  # the client's own goodbye (DELETE, stream reconnect) finds the server gone
    r = result["r"]
    assert not is_error(r) and "kept.txt" in text_of(r), text_of(r)
    assert srv.proc.wait(timeout=30) == 0
    log = srv.log.read_text()
    assert "waiting for running calls to finish" in log, log
    assert [l["outcome"] for l in audit(tmp_path)] == ["ok"]


# --- TLS and logs --------------------------------------------------------------------------

def self_signed(tmp: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    import ipaddress
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = tmp / "cert.pem", tmp / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


async def test_https_and_json_logs(tmp_path):
    import ssl
    cert, key = self_signed(tmp_path)
    ws = tmp_path / "ws"
    ws.mkdir()
    srv = serve(tmp_path, tokens_config(alice=ALICE), "--log-format", "json",
                roots=(str(ws), "--tls-cert", str(cert), "--tls-key", str(key)))
    try:
        assert srv.url.startswith("https://127.0.0.1:")
        ctx = ssl.create_default_context(cafile=str(cert))
        with anyio.fail_after(TEST_TIMEOUT_S):
            async with client(srv.url, ALICE, verify=ctx) as s:
                r = await call(s, "write_file", {"path": "tls.txt", "content": "secure\n"})
                assert not is_error(r), text_of(r)
        async with httpx2.AsyncClient() as h:  # plain HTTP to the TLS port gets nowhere
            with pytest.raises(httpx2.HTTPError):
                await h.post(srv.url.replace("https://", "http://"), content=INIT, headers=HDRS)
    finally:
        assert srv.stop() == 0
    assert (ws / "tls.txt").read_text() == "secure\n"
    lines = [l for l in srv.log.read_text().splitlines() if l.strip()]
    records = [json.loads(l) for l in lines]  # every line is one JSON object
    assert all("level" in r and "timestamp" in r for r in records)
    assert any(r.get("message") == "serving MCP over streamable HTTP" for r in records)
