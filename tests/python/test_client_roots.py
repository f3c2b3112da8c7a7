"""MCP client roots through the real binary and the official SDK client: what a client's
`roots/list` answer may and may not add (`client_roots` = narrow, extend, extend-write), over
stdio (the initialize handshake and the 2026-07-28 per-request protocol) and HTTP (refused at
start with users; narrowed on the stateless 2026-07-28 path).

Regression tests of the adversarial review (issue 13, item 1): a client answering roots/list
with ringfence's data directory, or a directory holding it, got it as a write root; `extend`
added every client root read-write; a multi-user HTTP server accepted `extend`; and a
2026-07-28 request declaring roots ran against the wider configured roots.
"""

from __future__ import annotations

import json
import os
import subprocess
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator

import anyio
import httpx2
import pytest
from mcp import Client, ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from test_http import token_hash
from test_http_users import ALICE, jwks, oauth_config, rsa_key, serve
from test_sdk_client import CALL_TIMEOUT_S, TEST_TIMEOUT_S, _binary, is_error, structured, text_of

pytestmark = pytest.mark.anyio

SECRET = "ringfence-internal-secret"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def answer_roots(*dirs: Path, calls: list[int] | None = None):
    """A roots/list callback answering `dirs` (counting its calls in `calls`)."""
    async def callback(_ctx: Any) -> types.ListRootsResult:
        if calls is not None:
            calls.append(1)
        return types.ListRootsResult(roots=[types.Root(uri=d.as_uri()) for d in dirs])
    return callback


@asynccontextmanager
async def stdio(tmp: Path, data: Path, roots: Any, policy: str, mode: str,
                *configured: str) -> AsyncIterator[Any]:
    """`ringfence serve` over stdio with `--client-roots policy`, driven by the SDK: `legacy`
    (ClientSession with the initialize handshake; the server asks roots/list after it) or a
    protocol version (the SDK's Client; roots travel with each tool call)."""
    params = StdioServerParameters(
        command=str(_binary()),
        args=["--data-dir", str(data), "--client-roots", policy, "serve", *configured],
        env={"XDG_CONFIG_HOME": str(tmp / "xdg-config"), "HOME": str(tmp),
             "RINGFENCE_LOG": "info"},
        cwd=str(tmp),
    )
    log = tmp / "stdio.log"
    with open(log, "w", encoding="utf-8") as errlog:
        try:
            if mode == "legacy":
                async with stdio_client(params, errlog=errlog) as (read, write):
                    async with ClientSession(read, write, list_roots_callback=roots) as s:
                        with anyio.fail_after(CALL_TIMEOUT_S):
                            await s.initialize()
                        yield s
            else:
                async with Client(stdio_client(params, errlog=errlog), mode=mode,
                                  list_roots_callback=roots) as c:
                    assert c.session.protocol_version == mode
                    yield c
        finally:
            errlog.flush()
            print(log.read_text(errors="replace")[-6000:])


async def call(session: Any, name: str, args: dict[str, Any]) -> Any:
    with anyio.fail_after(CALL_TIMEOUT_S):
        return await session.call_tool(name, args)


def layout(tmp: Path) -> tuple[Path, Path, Path]:
    """`ws/` (the configured root), `state/data/` (the data directory, holding a secret) and
    `other/` (a directory outside both, holding `a.txt`)."""
    ws, data, other = tmp / "ws", tmp / "state" / "data", tmp / "other"
    for d in (ws, data, other):
        d.mkdir(parents=True)
    (data / "internal.txt").write_text(SECRET + "\n")
    (other / "a.txt").write_text("outside text\n")
    return ws, data, other


MODES = ["legacy", "2026-07-28"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("policy", ["extend", "extend-write"])
@pytest.mark.parametrize("which", ["data dir", "its parent", "a symlink to its parent", "inside it"])
async def test_client_roots_never_add_the_data_directory(tmp_path, mode, policy, which):
    ws, data, _ = layout(tmp_path)
    (tmp_path / "alias").symlink_to(data.parent)
    (data / "sub").mkdir()
    offered = {
        "data dir": data,
        "its parent": data.parent,
        "a symlink to its parent": tmp_path / "alias",
        "inside it": data / "sub",
    }[which]
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with stdio(tmp_path, data, answer_roots(ws, offered), policy, mode, str(ws)) as s:
            for path in (data / "internal.txt", offered / "internal.txt"):
                r = await call(s, "read_file", {"path": str(path)})
                assert is_error(r), text_of(r)
                assert SECRET not in text_of(r)
                assert structured(r)["error"] in ("outside_workspace", "not_found"), text_of(r)
            r = await call(s, "write_file", {"path": str(offered / "planted.txt"),
                                             "content": "x\n"})
            assert is_error(r), text_of(r)
            assert not (offered / "planted.txt").exists()
            info = text_of(await call(s, "file_access_info", {}))
            assert str(offered) not in info and str(data) not in info, info
            # The configured root still works.
            r = await call(s, "write_file", {"path": "ok.txt", "content": "fine\n"})
            assert not is_error(r), text_of(r)
    assert (ws / "ok.txt").read_text() == "fine\n"


@pytest.mark.parametrize("mode", MODES)
async def test_extend_adds_client_roots_read_only(tmp_path, mode):
    ws, data, other = layout(tmp_path)
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with stdio(tmp_path, data, answer_roots(ws, other), "extend", mode, str(ws)) as s:
            r = await call(s, "read_file", {"path": str(other / "a.txt")})
            assert not is_error(r), text_of(r)
            assert "outside text" in text_of(r)
            r = await call(s, "write_file", {"path": str(other / "b.txt"), "content": "x\n"})
            assert is_error(r), text_of(r)
            assert structured(r)["error"] == "read_only", text_of(r)
            assert not (other / "b.txt").exists()
            # The configured root keeps its own access level.
            r = await call(s, "write_file", {"path": "ok.txt", "content": "fine\n"})
            assert not is_error(r), text_of(r)


@pytest.mark.parametrize("mode", MODES)
async def test_extend_write_adds_client_roots_writable(tmp_path, mode):
    ws, data, other = layout(tmp_path)
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with stdio(tmp_path, data, answer_roots(ws, other), "extend-write", mode,
                         str(ws)) as s:
            r = await call(s, "write_file", {"path": str(other / "b.txt"), "content": "x\n"})
            assert not is_error(r), text_of(r)
    assert (other / "b.txt").read_text() == "x\n"


# --- HTTP ----------------------------------------------------------------------------------

def run_http(tmp: Path, config: str, *extra: str, env: dict[str, str] | None = None,
             ) -> subprocess.CompletedProcess[str]:
    cfg = tmp / "ringfence.toml"
    cfg.write_text(config)
    return subprocess.run(
        [str(_binary()), "--config", str(cfg), "--data-dir", str(tmp / "data"), *extra,
         "serve", "--http", "127.0.0.1:0", str(tmp)],
        capture_output=True, text=True, timeout=30,
        env={"PATH": os.environ.get("PATH", ""), "HOME": str(tmp),
             "XDG_CONFIG_HOME": str(tmp / "xdg-config"), **(env or {})},
    )


def test_extend_is_refused_at_start_with_http_users(tmp_path):
    tokens = f'[http]\ntokens = [{{ user = "alice", hash = "{token_hash(ALICE)}" }}]\n'
    (tmp_path / "jwks.json").write_text(json.dumps(jwks(("k1", rsa_key()))))
    oauth = oauth_config(tmp_path, f'jwks_file = "{tmp_path}/jwks.json"')
    for config, extra, env in (
        ('client_roots = "extend"\n' + tokens, (), None),
        (tokens, ("--client-roots", "extend-write"), None),
        (oauth, (), {"RINGFENCE_CLIENT_ROOTS": "extend"}),
    ):
        proc = run_http(tmp_path, config, *extra, env=env)
        assert proc.returncode == 2, (config, extra, proc.stderr)
        assert "client_roots" in proc.stderr and "narrow" in proc.stderr, proc.stderr
        assert proc.stdout == ""


def test_extend_without_http_users_still_starts(tmp_path):
    """Unauthenticated loopback HTTP serves only the local user, like stdio: `extend` is
    the operator's to choose there."""
    srv = serve(tmp_path, 'client_roots = "extend"\n', roots=(str(tmp_path),))
    srv.proc.kill()
    srv.proc.wait()


@asynccontextmanager
async def http_server(tmp: Path, config: str, root: Path) -> AsyncIterator[str]:
    srv = serve(tmp, config, roots=(str(root),))
    try:
        yield srv.url
    finally:
        srv.proc.kill()
        srv.proc.wait()
        print(srv.log.read_text(errors="replace")[-6000:])


@asynccontextmanager
async def modern_client(url: str, token: str | None, roots: Any) -> AsyncIterator[Client]:
    """The SDK's Client on the 2026-07-28 protocol (no session: every request carries the
    client's capabilities in `_meta`)."""
    headers = {"Authorization": f"Bearer {token}"} if token else None
    http = httpx2.AsyncClient(headers=headers, timeout=CALL_TIMEOUT_S)
    async with http, Client(streamable_http_client(url, http_client=http), mode="2026-07-28",
                            list_roots_callback=roots) as c:
        assert c.session.protocol_version == "2026-07-28"
        yield c


@pytest.mark.parametrize("token", [None, ALICE], ids=["loopback", "token user"])
async def test_stateless_requests_run_narrowed_to_the_clients_roots(tmp_path, token):
    ws = tmp_path / "ws"
    (ws / "project").mkdir(parents=True)
    (ws / "project" / "inside.txt").write_text("inside text\n")
    (ws / "elsewhere.txt").write_text("elsewhere text\n")
    config = (f'[http]\ntokens = [{{ user = "alice", hash = "{token_hash(ALICE)}" }}]\n'
              if token else "")
    asked: list[int] = []
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with http_server(tmp_path, config, ws) as url:
            async with modern_client(url, token, answer_roots(ws / "project", calls=asked)) as c:
                # Relative paths start in the client's root...
                r = await call(c, "read_file", {"path": "inside.txt"})
                assert not is_error(r), text_of(r)
                assert "inside text" in text_of(r)
                # ...and the rest of the configured root is out of reach.
                r = await call(c, "read_file", {"path": str(ws / "elsewhere.txt")})
                assert is_error(r), text_of(r)
                assert structured(r)["error"] == "outside_workspace", text_of(r)
                assert "elsewhere text" not in text_of(r)
                assert len(asked) >= 2, "the server never asked for the client's roots"
            # An answer that is not a roots list fails closed (not the configured roots).
            async with modern_client(url, token, answer_roots(ws / "project")) as c:
                with anyio.fail_after(CALL_TIMEOUT_S):
                    r = await c.call_tool(
                        "read_file", {"path": str(ws / "elsewhere.txt")},
                        input_responses={"roots": types.ElicitResult(action="decline")})
                assert is_error(r) and "could not be read" in text_of(r), text_of(r)
                assert "elsewhere text" not in text_of(r)
            # A client announcing roots outside every configured root reaches nothing.
            async with modern_client(url, token, answer_roots(tmp_path / "nowhere")) as c:
                r = await call(c, "read_file", {"path": str(ws / "elsewhere.txt")})
                assert is_error(r) and "do not overlap" in text_of(r), text_of(r)
            # Without the roots capability the configured roots apply, as on a session.
            async with modern_client(url, token, None) as c:
                r = await call(c, "read_file", {"path": str(ws / "elsewhere.txt")})
                assert not is_error(r), text_of(r)
