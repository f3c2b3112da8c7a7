"""End-to-end tests of the web family through the real binary with the official MCP Python
SDK: web_fetch reads a page served by a local server as Markdown, in pages, fetching it once;
the SSRF guard refuses loopback (the server sees no request) unless the operator allowed it;
web_search asks a configured provider (a local SearXNG-format fake)."""

from __future__ import annotations

import http.server
import json
import threading
import urllib.parse
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Iterator

import anyio
import pytest

from test_sdk_client import (  # noqa: F401  (ringfence_bin is a fixture)
    Server, is_error, ringfence_bin, serve, structured, text_of,
)

pytestmark = pytest.mark.anyio

PARAGRAPHS = [
    f"Paragraph {i} of the article explains step {i} of brewing tea at home, "
    f"with enough words that a page of a thousand characters holds only a few of them."
    for i in range(1, 41)
]
ARTICLE = (
    "<!doctype html><html><head><title>How to brew tea</title></head><body>"
    "<nav><a href='/'>Home</a> | <a href='/shop'>Shop</a></nav>"
    "<article><h1>How to brew tea</h1>"
    + "".join(f"<p>{p}</p>" for p in PARAGRAPHS)
    + "</article><footer>Copyright tea corp</footer></body></html>"
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@contextmanager
def site(routes: dict[str, tuple[str, bytes]]) -> Iterator[tuple[str, list[str]]]:
    """A local HTTP server answering `routes` (path -> (content type, body)); yields its base
    URL and the list of paths it was asked for."""
    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            seen.append(self.path)
            path = urllib.parse.urlsplit(self.path).path
            if path not in routes:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            ctype, body = routes[path]
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", seen
    finally:
        httpd.shutdown()


@asynccontextmanager
async def serve_web(
    bin_path: Path, tmp: Path, config: str = "", env: dict[str, str] | None = None
) -> AsyncIterator[Server]:
    """The web family alone, with `config` as the configuration file."""
    ws = tmp / "ws"
    ws.mkdir(exist_ok=True)
    cfg = tmp / "config.toml"
    cfg.write_text(config, encoding="utf-8")
    async with serve(
        bin_path, ws, tmp / "data", preset=None,
        options=("--config", str(cfg), "--tools", "web"), env=env,
    ) as srv:
        yield srv


async def test_fetch_page_and_read_on_with_start_index(ringfence_bin, tmp_path):
    routes = {
        "/article": ("text/html; charset=utf-8", ARTICLE.encode()),
        "/robots.txt": ("text/plain", b"User-agent: *\nDisallow: /private\n"),
    }
    with site(routes) as (base, seen):
        async with serve_web(ringfence_bin, tmp_path, env={"RINGFENCE_WEB_ALLOW_PRIVATE": "127.0.0.1"}) as srv:
            tools = {t.name: t for t in (await srv.session.list_tools()).tools}
            assert set(tools) == {"web_fetch", "web_search"}
            assert tools["web_fetch"].annotations.model_dump(by_alias=True)["openWorldHint"] is True
            assert set(tools["web_fetch"].model_dump(by_alias=True)["inputSchema"]["properties"]) == {
                "url", "max_length", "start_index", "format",
            }

            start, pages, joined = 0, 0, ""
            while True:
                result = await srv.call(
                    "web_fetch", {"url": f"{base}/article", "max_length": 1000, "start_index": start}
                )
                assert not is_error(result), text_of(result)
                pages += 1
                meta = structured(result)
                text = text_of(result)
                # The header says the title once; the URL asked for and the type of an HTML
                # page are not repeated (the structured result has them).
                assert text.startswith("Title: How to brew tea\n\n"), text
                assert "URL:" not in text and "Content-Type:" not in text, text
                assert "# How to brew tea" not in text, text
                body = text.split("\n\n", 1)[1].split("\n\n[Content truncated")[0]
                joined += body
                nxt = meta["next_start_index"]
                if nxt is None:
                    break
                assert f"start_index={nxt}" in text
                assert meta["returned_length"] <= 1000
                start = nxt
            assert pages >= 4
            assert meta["total_length"] == len(joined)
            # Every paragraph, once, in order; the navigation and the footer are not content.
            at = [joined.index(p) for p in PARAGRAPHS]
            assert at == sorted(at)
            assert all(joined.count(p) == 1 for p in PARAGRAPHS)
            assert "Shop" not in joined and "Copyright tea corp" not in joined, joined[:300]
            # One fetch of the page (and one of robots.txt) for all the pages.
            assert seen.count("/article") == 1, seen
            assert seen.count("/robots.txt") == 1, seen

            refused = await srv.call("web_fetch", {"url": f"{base}/private/x"})
            assert is_error(refused)
            assert "robots.txt" in text_of(refused)
            assert "/private/x" not in seen

            raw = await srv.ok("web_fetch", {"url": f"{base}/article", "format": "html"})
            assert "<article><h1>How to brew tea</h1>" in raw


async def test_loopback_is_refused_without_the_operator_and_never_contacted(ringfence_bin, tmp_path):
    with site({"/": ("text/html", b"<p>internal</p>")}) as (base, seen):
        port = base.rsplit(":", 1)[1]
        async with serve_web(ringfence_bin, tmp_path) as srv:
            for url in (
                f"{base}/",
                f"http://2130706433:{port}/",
                f"http://0x7f.1:{port}/",
                f"http://localhost:{port}/",
                f"http://[::ffff:127.0.0.1]:{port}/",
                f"http://user@127.0.0.1:{port}/",
                "file:///etc/passwd",
                "http://169.254.169.254/latest/meta-data/",
            ):
                msg = await srv.err("web_fetch", {"url": url})
                assert "refused" in msg, (url, msg)
            msg = await srv.err("web_fetch", {"url": f"{base}/"})
            assert "127.0.0.1 is a loopback address" in msg and "[web] allow_private" in msg, msg
            # The server keeps answering after refusals.
            ok = await srv.call("web_search", {"query": "x"})
            assert is_error(ok) and "[web.search] provider" in text_of(ok)
        assert seen == []


async def test_over_http_each_user_has_their_own_cache_and_audit(tmp_path):
    from test_http import call as http_call
    from test_http import client
    from test_http_users import serve as serve_http
    from test_http_users import tokens_config

    alice, bob = "alice-web-token-" + "a" * 24, "bob-web-token-" + "b" * 24
    with site({"/article": ("text/html", ARTICLE.encode())}) as (base, seen):
        config = (
            tokens_config(alice=alice, bob=bob)
            + '[tools]\nenable = ["web"]\n[web]\nallow_private = ["127.0.0.1"]\nrobots = false\n'
        )
        srv = serve_http(tmp_path, config)
        try:
            with anyio.fail_after(120):
                for token in (alice, alice, bob):
                    async with client(srv.url, token) as s:
                        r = await http_call(s, "web_fetch", {"url": f"{base}/article", "max_length": 500})
                        assert not is_error(r), text_of(r)
                        assert structured(r)["next_start_index"] is not None
            # Alice's second call was answered from her cache; Bob's was not.
            assert seen.count("/article") == 2, seen
        finally:
            assert srv.stop() == 0
    audit = "\n".join(p.read_text() for p in (tmp_path / "data" / "audit").rglob("*") if p.is_file())
    lines = [json.loads(line) for line in audit.splitlines() if '"web_fetch"' in line]
    assert {line.get("user") for line in lines} == {"alice", "bob"}, lines
    assert all(f"{base}/article" in json.dumps(line) for line in lines), lines


async def test_search_through_a_configured_searxng(ringfence_bin, tmp_path):
    answer = {
        "query": "tea",
        "results": [
            {"title": "Tea - Wikipedia", "url": "https://en.wikipedia.org/wiki/Tea",
             "content": "Tea is an aromatic beverage.", "publishedDate": "2026-11-02T10:00:00"},
            {"title": "Tea shop", "url": "https://shop.example.net/tea", "content": "Buy tea."},
        ],
    }
    with site({"/search": ("application/json", json.dumps(answer).encode())}) as (base, seen):
        config = f'[web.search]\nprovider = "searxng"\nurl = "{base}"\n'
        async with serve_web(ringfence_bin, tmp_path, config=config) as srv:
            result = await srv.call(
                "web_search", {"query": "tea", "max_results": 5, "blocked_domains": ["example.net"]}
            )
            assert not is_error(result), text_of(result)
            text = text_of(result)
            assert text.startswith('1 result for "tea" (searxng):'), text
            assert "1. Tea - Wikipedia\n   https://en.wikipedia.org/wiki/Tea\n   Date: 2026-11-02" in text
            assert structured(result)["results"][0]["snippet"] == "Tea is an aromatic beverage."
            assert len(seen) == 1 and seen[0].startswith("/search?") and "format=json" in seen[0], seen
