"""The settings page (`/settings`) in a real browser: Debian's Chromium, headless, driven by
Playwright against `ringfence serve --http 127.0.0.1:0` with bearer-token users.

A person signs in with their access token and sees and changes what ringfence keeps for
them: truths and memories (search, filter, pages, edit, delete, pin, export, delete all),
follow-ups (cancel), activity and tools. Every change is checked where an
assistant would see it: through the official MCP Python SDK client over streamable HTTP.
The security tests are each their own: stored markup stays text, a cross-site POST and a
POST without the CSRF token are refused, one user reaches nothing of another's, the
headers forbid inline scripts and framing, and signing out ends the session.

The browser: `$RINGFENCE_TEST_CHROMIUM` (scripts/test.sh installs Debian's `chromium` and
sets it), else `chromium` on PATH; Playwright's own browser downloads are never used.
Without a browser (or without the playwright package) the tests skip, unless
`RINGFENCE_REQUIRE_BROWSER=1` (scripts/test.sh sets it), when they fail.
`RINGFENCE_SCREENSHOTS=1` writes the screenshots in docs/images/settings-*.png.

Memory search runs words-only here (`provider = "none"`): the texts below share a rare word
with the query that must find them, and nothing else does.
"""

from __future__ import annotations

import base64
import hashlib
import html.parser
import http.server
import json
import os
import re
import shutil
import threading
import urllib.parse
from contextlib import contextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Iterator

import anyio
import httpx2
import pytest

from store import on_postgres
from test_calendar_google import google as google_standin
from test_followups import SECRET, receiver
from test_http import call, client
from test_http_users import jwks, mint, rsa_key, self_signed, serve, tokens_config
from test_sdk_client import REPO_ROOT, TEST_TIMEOUT_S, is_error, structured, text_of

try:
    from playwright.async_api import async_playwright, expect
except ImportError:  # reported by the `browser` fixture: a failure in CI, else a skip
    async_playwright = None  # type: ignore[assignment]
    expect = None  # type: ignore[assignment]

pytestmark = pytest.mark.anyio

ALICE, BOB = "alice-settings-token-" + "a" * 20, "bob-settings-token-" + "b" * 20
WORDS_ONLY = '[memory.embeddings]\nprovider = "none"\n'
PINNED_URI = "ringfence://truths/pinned"
PAGE_ROWS = 50
SCREENSHOTS = REPO_ROOT / "docs" / "images"

# Bounds for Playwright's own waiting (a debug build on a loaded 2-core machine), not
# assertions about speed.
ACTION_TIMEOUT_MS = 60_000
if expect is not None:
    expect.set_options(timeout=ACTION_TIMEOUT_MS)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# --- the browser ----------------------------------------------------------------------------


def chromium_path() -> str | None:
    raw = os.environ.get("RINGFENCE_TEST_CHROMIUM")
    if raw:
        return raw if os.path.isfile(raw) and os.access(raw, os.X_OK) else None
    # Debian's browser itself, not its /usr/bin/chromium launcher script (which works too,
    # but whose /dev/shm check prints shell errors on some machines).
    if os.access("/usr/lib/chromium/chromium", os.X_OK):
        return "/usr/lib/chromium/chromium"
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


def browser_required() -> bool:
    return os.environ.get("RINGFENCE_REQUIRE_BROWSER", "") not in ("", "0")


def need_browser() -> str:
    """Chromium's path; a failure (CI) or a skip (a developer without it) otherwise."""
    exe = chromium_path()
    problem = None
    if async_playwright is None:
        problem = "the playwright package is not installed (pip install -r tests/python/requirements.txt)"
    elif exe is None:
        where = os.environ.get("RINGFENCE_TEST_CHROMIUM")
        problem = (f"RINGFENCE_TEST_CHROMIUM={where} is not an executable" if where else
                   "no chromium on PATH (apt-get install chromium, or set RINGFENCE_TEST_CHROMIUM)")
    if problem:
        if browser_required():
            pytest.fail(f"RINGFENCE_REQUIRE_BROWSER is set and {problem}")
        pytest.skip(problem)
    assert exe is not None
    return exe


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    """Headless Chromium. Playwright launches it with --no-sandbox by default
    (`chromium_sandbox=False`), which it needs as root, as CI runs."""
    exe = need_browser()
    async with async_playwright() as pw:
        b = await pw.chromium.launch(executable_path=exe, headless=True)
        try:
            yield b
        finally:
            await b.close()


async def new_page(browser: Any, **context_options: Any) -> Any:
    ctx = await browser.new_context(viewport={"width": 1280, "height": 860}, **context_options)
    ctx.set_default_timeout(ACTION_TIMEOUT_MS)
    return await ctx.new_page()


async def screenshot(page: Any, name: str) -> None:
    """docs/images/settings-NAME.png, only with RINGFENCE_SCREENSHOTS=1."""
    if os.environ.get("RINGFENCE_SCREENSHOTS") != "1":
        return
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(SCREENSHOTS / f"settings-{name}.png"), full_page=True)


# --- servers --------------------------------------------------------------------------------


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """Starts `ringfence serve --http` servers (Alice and Bob, words-only memory unless
    `config` says otherwise), each in a directory of its own; stops them after the test.
    On PostgreSQL they all share the test's database (store.store_env, in serve())."""
    started: list[Any] = []

    def _start(config: str | None = None, *extra: str, roots: tuple[str, ...] = ()) -> Any:
        d = tmp_path / f"server-{len(started)}"
        d.mkdir()
        cfg = config if config is not None else tokens_config(alice=ALICE, bob=BOB) + WORDS_ONLY
        srv = serve(d, cfg, *extra, roots=roots)
        started.append(srv)
        return srv

    yield _start
    for srv in started:
        srv.stop()


# --- MCP, as an assistant sees the same data ------------------------------------------------


async def mcp_store(srv: Any, token: str, kind: str, *texts: str, **extra: Any) -> list[int]:
    """Stores truths or memories through MCP; their ids."""
    tool, field = ("store_truth", "truthContent") if kind == "truth" else ("store_memory", "memoryContent")
    ids = []
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with client(srv.url, token) as s:
            for text in texts:
                r = await call(s, tool, {field: text, **extra})
                assert not is_error(r), text_of(r)
                sc = structured(r)
                assert sc["stored"] is True, sc
                ids.append(sc["id"])
    return ids


async def mcp_find(srv: Any, token: str, kind: str, query: str) -> list[str]:
    """The texts `search_truths` / `search_memory` finds for `query`."""
    tool = "search_truths" if kind == "truth" else "search_memory"
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with client(srv.url, token) as s:
            limit = 10 if kind == "truth" else 20  # each tool's largest
            r = await call(s, tool, {"searchQuery": query, "limit": limit})
            assert not is_error(r), text_of(r)
            return [hit["content"] for hit in structured(r)["results"]]


async def pinned_text(srv: Any, token: str) -> str:
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with client(srv.url, token) as s:
            return (await s.read_resource(PINNED_URI)).contents[0].text


# --- page helpers ---------------------------------------------------------------------------


def path_of(url: str) -> str:
    return urllib.parse.urlsplit(url).path


def location_path(response: Any) -> str:
    """The path a redirect points to (its Location may be relative)."""
    return path_of(urllib.parse.urljoin(response.url, response.headers["location"]))


def named(name: str) -> re.Pattern[str]:
    """An accessible name that is `name`, or begins with it as a word: a row's "Edit" may
    say which row in its name ("Edit Memory #3"), as WCAG's label-in-name allows."""
    return re.compile(rf"^{re.escape(name)}(?:\s.*)?$", re.S)


def control(scope: Any, name: str) -> Any:
    """A link or a button named `name` (see named(); the spec allows either for some)."""
    return scope.get_by_role("link", name=named(name)).or_(
        scope.get_by_role("button", name=named(name)))


def row(page: Any, text: str) -> Any:
    """The list row showing `text`: the innermost table row or list item with an Edit
    control."""
    return (page.locator("tr, li, article, [role=row], [role=listitem]")
            .filter(has_text=text).filter(has=control(page, "Edit")).last)


def rows(page: Any) -> Any:
    """One Edit control per row: their count is the number of rows shown."""
    return control(page, "Edit")


async def submit(page: Any, target: Any) -> tuple[Any, Any]:
    """Clicks `target` (a form's button or a link) and waits for the navigation; the
    first response (a redirect's own, when there was one) and the final one."""
    async with page.expect_navigation() as nav:
        await target.click()
    final = await nav.value
    request = final.request
    while request.redirected_from is not None:
        request = request.redirected_from
    return await request.response(), final


async def sign_in(page: Any, srv: Any, token: str) -> None:
    await page.goto(srv.base + "/settings/login")
    await page.get_by_label("Access token").fill(token)
    first, final = await submit(page, page.get_by_role("button", name="Sign in"))
    assert first.status == 303, (first.status, await final.text())
    assert location_path(first) == "/settings", first.headers
    assert final.ok, (final.status, final.url)
    assert path_of(page.url).startswith("/settings") and "login" not in page.url, page.url


async def session_cookie(page: Any) -> dict[str, Any]:
    cookies = [c for c in await page.context.cookies()
               if c["name"] in ("ringfence-session", "__Host-ringfence-session")]
    assert len(cookies) == 1, await page.context.cookies()
    return cookies[0]


async def open_memories(page: Any, srv: Any, query: str = "") -> Any:
    response = await page.goto(srv.base + "/settings/memories" + (f"?{query}" if query else ""))
    assert response.status == 200, (response.status, await response.text())
    return response


async def expect_header(page: Any, user: str) -> None:
    """Every signed-in page: a header with the user's name and a Sign out button."""
    banner = page.get_by_role("banner")
    await expect(banner).to_contain_text(user)
    await expect(banner.get_by_role("button", name="Sign out")).to_be_visible()


class Forms(html.parser.HTMLParser):
    """The forms of a page: method, action and their inputs' names and values."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[dict[str, Any]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.forms.append({"method": a.get("method", "get").lower(),
                               "action": a.get("action", ""), "fields": {}, "hidden": {}})
        elif tag == "input" and self.forms and a.get("name"):
            self.forms[-1]["fields"][a["name"]] = a.get("value", "")
            if a.get("type", "").lower() == "hidden":
                self.forms[-1]["hidden"][a["name"]] = a.get("value", "")


def forms_of(body: str) -> list[dict[str, Any]]:
    parser = Forms()
    parser.feed(body)
    return parser.forms


def hidden_fields(body: str, action_ends: str) -> dict[str, str]:
    """The hidden fields (the CSRF token, whatever its name) of the POST form whose action
    ends with `action_ends`."""
    for form in forms_of(body):
        if form["method"] == "post" and path_of(form["action"]).endswith(action_ends):
            return form["hidden"]
    raise AssertionError(f"no POST form to …{action_ends} in:\n{body[:3000]}")


def cookie_header(cookie: dict[str, Any]) -> dict[str, str]:
    return {"Cookie": f"{cookie['name']}={cookie['value']}"}


@contextmanager
def http_site(pages: dict[str, tuple[str, bytes, dict[str, str]]]) -> Iterator[str]:
    """A small site on another port of 127.0.0.1: path → (content type, body, extra
    headers); a POST answers 303 to the path in its `next` header entry, if any."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            path = urllib.parse.urlsplit(self.path).path
            if self.command == "POST":
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if path not in pages:
                self.send_error(404)
                return
            ctype, body, extra = pages[path]
            self.send_response(int(extra.get(":status", "200")))
            for k, v in extra.items():
                if not k.startswith(":"):
                    self.send_header(k, v)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, *args: Any) -> None:
            pass

    site = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=site.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{site.server_address[1]}"
    finally:
        site.shutdown()
        site.server_close()


# --- 0. the browser itself (needs no ringfence) ---------------------------------------------


async def test_browser_self_check(browser):
    """Chromium starts headless and the suite's helpers work in it: accessible locators, a
    POST answered 303 (the redirect's own status and Location), the cookie's attributes, a
    download, the Cookie a form POST carries."""
    login = (b"<!doctype html><title>Sign in</title><main><form method=post action=/login>"
             b"<input type=hidden name=csrf value=t0k>"
             b"<label for=t>Access token</label><input id=t type=password name=token>"
             b"<button>Sign in</button></form></main>")
    home = (b"<!doctype html><title>Home</title><header>alice "
            b"<form method=post action=/logout><input type=hidden name=csrf value=t0k>"
            b"<button>Sign out</button></form></header><main><table>"
            b"<tr><td>first row</td><td><a href=/e/1>Edit</a></td></tr>"
            b"<tr><td>second row</td><td><a href=/e/2>Edit</a> <button>Pin</button></td></tr>"
            b"</table><a href=/export>Export as JSON</a></main>")
    export = json.dumps([{"kind": "memory", "id": 1, "content": "first row"}]).encode()
    pages = {
        "/": ("text/html", login, {}),
        "/login": ("text/plain", b"", {":status": "303", "Location": "/home",
                                       "Set-Cookie": "ringfence-session=s3cret; HttpOnly; "
                                                     "SameSite=Lax; Path=/"}),
        "/home": ("text/html", home, {}),
        "/logout": ("text/plain", b"", {":status": "303", "Location": "/"}),
        "/export": ("application/json", export,
                    {"Content-Disposition": 'attachment; filename="memories.json"'}),
    }
    with http_site(pages) as base:
        page = await new_page(browser)
        await page.goto(base + "/")
        assert hidden_fields(await page.content(), "/login") == {"csrf": "t0k"}
        await page.get_by_label("Access token").fill("anything")
        first, final = await submit(page, page.get_by_role("button", name="Sign in"))
        assert first.status == 303 and location_path(first) == "/home"
        assert first.request.method == "POST" and final.status == 200
        cookie = await session_cookie(page)
        assert cookie["httpOnly"] is True and cookie["sameSite"] == "Lax", cookie
        await expect_header(page, "alice")
        await expect(rows(page)).to_have_count(2)
        await expect(row(page, "second row")).to_contain_text("second row")
        await expect(control(row(page, "second row"), "Pin")).to_be_visible()
        await expect(control(row(page, "first row"), "Pin")).to_have_count(0)
        async with page.expect_download() as dl:
            await page.get_by_role("link", name="Export as JSON").click()
        data = json.loads(Path(await (await dl.value).path()).read_text())
        assert data == [{"kind": "memory", "id": 1, "content": "first row"}]
        async with page.expect_response(lambda r: r.request.method == "POST") as info:
            await page.get_by_role("banner").get_by_role("button", name="Sign out").click()
        sent = await (await info.value).request.all_headers()
        assert "ringfence-session=s3cret" in sent.get("cookie", ""), sent
        await expect(page.get_by_label("Access token")).to_be_visible()


# --- 1. signing in and out ------------------------------------------------------------------


async def test_settings_without_a_session_redirects_to_the_login_form(start, browser):
    srv = start()
    async with httpx2.AsyncClient(follow_redirects=False) as h:
        r = await h.get(srv.base + "/settings")
        assert r.status_code == 303, (r.status_code, r.text)
        assert path_of(urllib.parse.urljoin(srv.base + "/settings", r.headers["location"])) == "/settings/login"
        r = await h.get(srv.base + "/settings/memories")
        assert r.status_code in (303, 401, 403), (r.status_code, r.text)
        if r.status_code == 303:
            assert path_of(urllib.parse.urljoin(srv.base, r.headers["location"])) == "/settings/login"
    page = await new_page(browser)
    await page.goto(srv.base + "/settings")
    assert path_of(page.url) == "/settings/login"
    token = page.get_by_label("Access token")
    await expect(token).to_be_visible()
    assert await token.get_attribute("type") == "password"
    assert await token.get_attribute("name") == "token"
    await expect(page.get_by_role("button", name="Sign in")).to_be_visible()
    await screenshot(page, "login")


async def test_sign_in_sets_a_lax_http_only_session_cookie(start, browser):
    srv = start()
    page = await new_page(browser)
    await sign_in(page, srv, ALICE)
    cookie = await session_cookie(page)
    assert cookie["name"] == "ringfence-session", cookie  # plain HTTP: no __Host- prefix
    assert cookie["httpOnly"] is True and cookie["sameSite"] == "Lax", cookie
    assert ALICE not in cookie["value"]
    await expect_header(page, "alice")


async def test_over_https_the_session_cookie_is_host_prefixed(start, browser, tmp_path):
    cert, key = self_signed(tmp_path)
    srv = start(None, roots=("--tls-cert", str(cert), "--tls-key", str(key)))
    assert srv.base.startswith("https://127.0.0.1:"), srv.base
    page = await new_page(browser, ignore_https_errors=True)
    await sign_in(page, srv, ALICE)
    cookie = await session_cookie(page)
    assert cookie["name"] == "__Host-ringfence-session", cookie
    assert cookie["secure"] is True and cookie["path"] == "/", cookie
    assert cookie["httpOnly"] is True and cookie["sameSite"] == "Lax", cookie
    await expect_header(page, "alice")


async def test_a_wrong_token_is_refused_with_the_form_again(start, browser):
    srv = start()
    page = await new_page(browser)
    await page.goto(srv.base + "/settings/login")
    wrong = "not-the-token-" + "x" * 24
    await page.get_by_label("Access token").fill(wrong)
    first, _ = await submit(page, page.get_by_role("button", name="Sign in"))
    assert first.status == 401, first.status
    await expect(page.get_by_text("not valid")).to_be_visible()
    await expect(page.get_by_label("Access token")).to_be_visible()
    await expect(page.get_by_role("button", name="Sign in")).to_be_visible()
    assert wrong not in await page.content()  # the token typed is not sent back
    assert not [c for c in await page.context.cookies() if "ringfence-session" in c["name"]]
    await screenshot(page, "login-refused")
    # The right token still works after one mistake.
    await sign_in(page, srv, ALICE)
    await expect_header(page, "alice")


async def test_repeated_wrong_tokens_are_throttled(browser, start):
    srv = start(tokens_config(alice=ALICE) + WORDS_ONLY)
    codes = []
    async with httpx2.AsyncClient(follow_redirects=False) as h:
        for i in range(50):  # the spec names no threshold: 50 wrong tokens are "repeated"
            form = await h.get(srv.base + "/settings/login")
            assert form.status_code == 200, form.status_code
            r = await h.post(srv.base + "/settings/login", headers={"Origin": srv.base},
                             data={**hidden_fields(form.text, "/settings/login"),
                                   "token": f"wrong-token-{i:02d}-" + "w" * 24})
            codes.append(r.status_code)
            if r.status_code == 429:
                assert "Too many sign-in attempts" in r.text, r.text
                break
            assert r.status_code == 401, (i, r.status_code, r.text)
    assert codes[0] == 401 and codes[-1] == 429, codes
    # A person in the browser sees the same.
    page = await new_page(browser)
    await page.goto(srv.base + "/settings/login")
    await page.get_by_label("Access token").fill("yet-another-wrong-token-" + "y" * 20)
    first, _ = await submit(page, page.get_by_role("button", name="Sign in"))
    assert first.status == 429, first.status
    await expect(page.get_by_text("Too many sign-in attempts")).to_be_visible()


async def test_sign_out_ends_the_session(start, browser):
    srv = start()
    page = await new_page(browser)
    await sign_in(page, srv, ALICE)
    old = await session_cookie(page)
    first, _ = await submit(page, page.get_by_role("banner").get_by_role("button", name="Sign out"))
    assert first.status == 303 and first.request.method == "POST", first.status
    assert path_of(first.url) == "/settings/logout"
    await page.goto(srv.base + "/settings")
    assert path_of(page.url) == "/settings/login", page.url
    # The old cookie, put back in a fresh browser, opens nothing.
    other = await new_page(browser)
    await other.context.add_cookies([{"name": old["name"], "value": old["value"], "url": srv.base}])
    await other.goto(srv.base + "/settings")
    assert path_of(other.url) == "/settings/login", other.url
    await other.goto(srv.base + "/settings/memories")
    assert path_of(other.url) == "/settings/login", other.url
    async with httpx2.AsyncClient(follow_redirects=False) as h:
        r = await h.get(srv.base + "/settings/memories", headers=cookie_header(old))
        assert r.status_code in (303, 401, 403), (r.status_code, r.text)


# --- 2. navigation and the header -----------------------------------------------------------


@pytest.mark.parametrize("name", [
    "Memories",
    "Follow-ups",
    "Calendar",
    "Activity",
    "Tools",
])
async def test_navigation_link(start, browser, name):
    srv = start()
    page = await new_page(browser)
    await sign_in(page, srv, ALICE)
    link = page.get_by_role("navigation").get_by_role("link", name=name, exact=True)
    first, final = await submit(page, link)
    assert final.status == 200, (name, final.status, final.url)
    assert path_of(page.url).startswith("/settings/"), page.url
    if name == "Memories":
        assert path_of(page.url) == "/settings/memories", page.url
    await expect_header(page, "alice")


async def test_every_signed_in_page_has_the_header(start, browser):
    srv = start()
    [mid] = await mcp_store(srv, ALICE, "memory", "User keeps a fern called Gerald")
    [tid] = await mcp_store(srv, ALICE, "truth", "Alice was born in Tromso")
    page = await new_page(browser)
    await sign_in(page, srv, ALICE)
    await expect_header(page, "alice")
    for path in ("/settings/memories", f"/settings/memories/memory/{mid}/edit",
                 f"/settings/memories/memory/{mid}/delete", f"/settings/memories/truth/{tid}/edit"):
        r = await page.goto(srv.base + path)
        assert r.status == 200, (path, r.status)
        await expect_header(page, "alice")
    await open_memories(page, srv)
    await submit(page, control(page, "Delete all"))
    await expect(page.get_by_label("Type DELETE to confirm")).to_be_visible()
    await expect_header(page, "alice")


# --- 6. activity ---------------------------------------------------------------------------


async def test_activity_shows_ones_own_calls_newest_first_with_filters(start, browser):
    """Alice's activity: her calls only (bob's are not counted), newest first, 50 a page,
    filtered by tool and time; what a call carried (a memory's text, a query) is not there;
    a time the filter cannot read is refused with the forms it takes."""
    srv = start()
    secret = "Alice hides the spare key under the blue flowerpot"
    await mcp_store(srv, ALICE, "memory", secret)  # the oldest call
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with client(srv.url, ALICE) as s:
            for _ in range(53):
                r = await call(s, "search_memory", {"searchQuery": "flowerpot", "limit": 1})
                assert not is_error(r), text_of(r)
            r = await call(s, "search_truths", {"searchQuery": "anything", "limit": 1})
            assert not is_error(r), text_of(r)  # the newest
        async with client(srv.url, BOB) as s:
            await call(s, "search_memory", {"searchQuery": "bob", "limit": 1})
    page = await new_page(browser)
    await sign_in(page, srv, ALICE)
    # The trail is written by a background thread: look until all 55 are in (a bound for
    # the wait, not a claim about speed).
    with anyio.fail_after(TEST_TIMEOUT_S):
        while True:
            await page.goto(srv.base + "/settings/activity")
            if "55 calls" in await page.locator("p.count").inner_text():
                break
            await anyio.sleep(0.2)
    body = page.locator("tbody tr")
    await expect(body).to_have_count(PAGE_ROWS)
    await expect(body.first.locator("td").nth(1)).to_have_text("search_truths")
    html_text = await page.content()
    assert "flowerpot" not in html_text and "spare key" not in html_text
    await screenshot(page, "activity")
    first, final = await submit(page, page.get_by_role("link", name=named("Next")))
    assert final.status == 200, final.status
    await expect(body).to_have_count(5)
    await expect(body.last.locator("td").nth(1)).to_have_text("store_memory")
    # By tool, and by time.
    await page.goto(srv.base + "/settings/activity")
    await page.get_by_label("Tool").fill("store_memory")
    await submit(page, page.get_by_role("button", name="Filter"))
    await expect(page.locator("p.count")).to_have_text("1 calls")
    await page.goto(srv.base + "/settings/activity")
    await page.get_by_label("From").fill("2000-01-01")
    await page.get_by_label("Until").fill("2000-01-02")
    await submit(page, page.get_by_role("button", name="Filter"))
    await expect(page.locator("p.count")).to_have_text("0 calls")
    r = await page.goto(srv.base + "/settings/activity?until=soonish")
    assert r.status == 400, r.status
    await expect(page.get_by_role("alert")).to_contain_text("2h, 3d, today, yesterday")


# --- 3. memories ----------------------------------------------------------------------------


async def test_memories_list_shows_truths_and_memories(start, browser):
    srv = start()
    truths = ["Alice is a marine biologist in Bergen", "Alice's sister is called Ingrid"]
    memories = ["User prefers oat milk in coffee", "User is training for a half marathon",
                "User's cat is named Pixel"]
    await mcp_store(srv, ALICE, "truth", *truths)
    await mcp_store(srv, ALICE, "memory", *memories)
    page = await new_page(browser)
    await sign_in(page, srv, ALICE)
    await open_memories(page, srv)
    for text in truths + memories:
        await expect(row(page, text)).to_be_visible()
        await expect(control(row(page, text), "Edit")).to_be_visible()
        await expect(control(row(page, text), "Delete")).to_be_visible()
    await expect(rows(page)).to_have_count(len(truths) + len(memories))
    for text in truths:  # truths can be pinned; memories cannot
        await expect(control(row(page, text), "Pin").or_(control(row(page, text), "Unpin"))).to_have_count(1)
    for text in memories:
        await expect(control(row(page, text), "Pin").or_(control(row(page, text), "Unpin"))).to_have_count(0)
    await expect(page.get_by_label("Search memories")).to_be_visible()
    await expect(page.get_by_label("Kind")).to_be_visible()
    await expect(page.get_by_role("link", name="Export as JSON")).to_be_visible()
    await expect(control(page, "Delete all")).to_be_visible()
    await screenshot(page, "memories")


async def test_search_memories(start, browser):
    srv = start()
    await mcp_store(srv, ALICE, "memory", "User collects vintage harmonicas",
                    "User is learning Portuguese", "User dislikes cilantro")
    await mcp_store(srv, ALICE, "truth", "Alice plays the harmonicas in a band")
    page = await new_page(browser)
    await sign_in(page, srv, ALICE)
    await open_memories(page, srv)
    await page.get_by_label("Search memories").fill("harmonicas")
    first, final = await submit(page, page.get_by_role("button", name="Search"))
    assert first.request.method == "GET" and final.status == 200
    assert urllib.parse.parse_qs(urllib.parse.urlsplit(page.url).query).get("q") == ["harmonicas"], page.url
    await expect(row(page, "User collects vintage harmonicas")).to_be_visible()
    await expect(row(page, "Alice plays the harmonicas in a band")).to_be_visible()
    await expect(page.get_by_text("User is learning Portuguese")).to_have_count(0)
    await expect(page.get_by_text("User dislikes cilantro")).to_have_count(0)
    await expect(rows(page)).to_have_count(2)
    await expect(page.get_by_label("Search memories")).to_have_value("harmonicas")
    await screenshot(page, "search")


async def choose_kind(page: Any, kind: str) -> str:
    """Selects the Kind option for `kind` (all, truth, memory: its value, or its label in
    either number); the value chosen."""
    select = page.get_by_label("Kind")
    options = await select.locator("option").evaluate_all(
        "os => os.map(o => [o.value, o.textContent.trim()])")
    names = {kind, kind + "s", {"memory": "memories", "truth": "truths", "all": "all"}[kind]}
    for value, label in options:
        if value.lower() in names or label.lower() in names:
            await select.select_option(value=value)
            return value
    raise AssertionError(f"no option for {kind!r} in the Kind select: {options}")


async def test_kind_filter(start, browser):
    srv = start()
    await mcp_store(srv, ALICE, "truth", "Alice grew up near Lofoten", "Alice speaks Norwegian")
    await mcp_store(srv, ALICE, "memory", "User bought a red kayak", "User naps after lunch",
                    "User reads crime novels")
    page = await new_page(browser)
    await sign_in(page, srv, ALICE)
    for kind, shown, hidden in (
        ("truth", ["Alice grew up near Lofoten", "Alice speaks Norwegian"], ["User bought a red kayak"]),
        ("memory", ["User bought a red kayak", "User naps after lunch", "User reads crime novels"],
         ["Alice speaks Norwegian"]),
        ("all", ["Alice speaks Norwegian", "User naps after lunch"], []),
    ):
        await open_memories(page, srv)
        value = await choose_kind(page, kind)
        _, final = await submit(page, page.get_by_role("button", name="Search"))
        assert final.status == 200, (kind, final.status)
        await expect(page.get_by_label("Kind")).to_have_value(value)
        for text in shown:
            await expect(row(page, text)).to_be_visible()
        for text in hidden:
            await expect(page.get_by_text(text)).to_have_count(0)
        await expect(rows(page)).to_have_count({"truth": 2, "memory": 3, "all": 5}[kind])


async def shown_numbers(page: Any) -> set[int]:
    """The numbers of the "Paging fact NNN" rows the page shows."""
    body = await page.locator("body").inner_text()
    return {int(n) for n in re.findall(r"Paging fact (\d{3})", body)}


async def test_paging_shows_fifty_rows_a_page(start, browser):
    srv = start()
    texts = [f"Paging fact {i:03d}: the user owns teapot number {i:03d}" for i in range(1, 56)]
    await mcp_store(srv, ALICE, "memory", *texts)
    page = await new_page(browser)
    await sign_in(page, srv, ALICE)
    await open_memories(page, srv)
    await expect(rows(page)).to_have_count(PAGE_ROWS)
    await expect(page.get_by_role("link", name="Previous page")).to_have_count(0)
    first_page = await shown_numbers(page)
    assert len(first_page) == PAGE_ROWS, first_page
    _, final = await submit(page, page.get_by_role("link", name="Next page"))
    assert final.status == 200
    await expect(rows(page)).to_have_count(len(texts) - PAGE_ROWS)
    await expect(page.get_by_role("link", name="Next page")).to_have_count(0)
    second_page = await shown_numbers(page)
    assert not first_page & second_page, (first_page, second_page)
    assert first_page | second_page == set(range(1, len(texts) + 1)), (first_page, second_page)
    await submit(page, page.get_by_role("link", name="Previous page"))
    await expect(rows(page)).to_have_count(PAGE_ROWS)


@pytest.mark.parametrize("kind", ["memory", "truth"])
async def test_edit_is_seen_through_mcp(start, browser, kind):
    srv = start()
    old = ("User's favourite bird is the puffin" if kind == "memory"
           else "Alice's favourite bird is the puffin")
    new = old.replace("puffin", "zeppelin-shaped kittiwake")
    [rid] = await mcp_store(srv, ALICE, kind, old)
    await mcp_store(srv, ALICE, kind, "Something else entirely about gardening"
                    if kind == "memory" else "Alice owns a greenhouse")
    assert await mcp_find(srv, ALICE, kind, "puffin") == [old]
    page = await new_page(browser)
    await sign_in(page, srv, ALICE)
    await open_memories(page, srv)
    await submit(page, control(row(page, old), "Edit"))
    assert path_of(page.url) == f"/settings/memories/{kind}/{rid}/edit", page.url
    text = page.get_by_label("Text", exact=True)
    await expect(text).to_have_value(old)
    assert await text.evaluate("e => e.tagName") == "TEXTAREA"
    if kind == "memory":
        await screenshot(page, "edit")
    await text.fill(new)
    first, final = await submit(page, page.get_by_role("button", name="Save"))
    assert first.status == 303 and first.request.method == "POST", first.status
    assert path_of(page.url) == "/settings/memories" and final.status == 200, page.url
    await expect(row(page, new)).to_be_visible()
    await expect(page.get_by_text(old, exact=True)).to_have_count(0)
    assert await mcp_find(srv, ALICE, kind, "kittiwake") == [new]
    assert await mcp_find(srv, ALICE, kind, "puffin") == []


async def test_delete_one(start, browser):
    srv = start()
    gone, kept = "User once owned a tamagotchi", "User owns a tandem bicycle"
    [gid, _] = await mcp_store(srv, ALICE, "memory", gone, kept)
    page = await new_page(browser)
    await sign_in(page, srv, ALICE)
    await open_memories(page, srv)
    await submit(page, control(row(page, gone), "Delete"))
    assert path_of(page.url) == f"/settings/memories/memory/{gid}/delete", page.url
    await screenshot(page, "delete")
    first, _ = await submit(page, page.get_by_role("button", name=named("Delete")))
    assert first.status == 303 and first.request.method == "POST", first.status
    assert path_of(page.url) == "/settings/memories", page.url
    await expect(row(page, kept)).to_be_visible()
    await expect(page.get_by_text(gone)).to_have_count(0)
    await expect(rows(page)).to_have_count(1)
    assert await mcp_find(srv, ALICE, "memory", "tamagotchi") == []
    assert await mcp_find(srv, ALICE, "memory", "tandem") == [kept]


async def test_pin_and_unpin_a_truth(start, browser):
    srv = start()
    text = "Alice's daughter is called Solveig"
    await mcp_store(srv, ALICE, "truth", text, isPinned=False)
    assert text not in await pinned_text(srv, ALICE)
    page = await new_page(browser)
    await sign_in(page, srv, ALICE)
    await open_memories(page, srv)
    await expect(control(row(page, text), "Unpin")).to_have_count(0)
    await submit(page, control(row(page, text), "Pin"))
    await open_memories(page, srv)
    await expect(control(row(page, text), "Unpin")).to_be_visible()
    await expect(control(row(page, text), "Pin")).to_have_count(0)
    assert text in await pinned_text(srv, ALICE)
    await submit(page, control(row(page, text), "Unpin"))
    await open_memories(page, srv)
    await expect(control(row(page, text), "Pin")).to_be_visible()
    assert text not in await pinned_text(srv, ALICE)


async def test_export_as_json(start, browser):
    srv = start()
    [tid] = await mcp_store(srv, ALICE, "truth", "Alice was born in 1990")
    mids = await mcp_store(srv, ALICE, "memory", "User likes jazz", "User hates mornings")
    await mcp_store(srv, BOB, "memory", "Bob's secret: he likes polka")
    page = await new_page(browser)
    await sign_in(page, srv, ALICE)
    await open_memories(page, srv)
    async with page.expect_download() as dl:
        await page.get_by_role("link", name="Export as JSON").click()
    data = json.loads(Path(await (await dl.value).path()).read_text())
    assert isinstance(data, list), data
    assert all({"kind", "id", "content"} <= set(item) for item in data), data
    got = {(item["kind"], item["id"], item["content"]) for item in data}
    assert got == {("truth", tid, "Alice was born in 1990"), ("memory", mids[0], "User likes jazz"),
                   ("memory", mids[1], "User hates mornings")}, data


async def test_delete_all_needs_the_typed_confirmation(start, browser):
    srv = start()
    await mcp_store(srv, ALICE, "truth", "Alice sails a wooden dinghy")
    await mcp_store(srv, ALICE, "memory", "User grows chillies on the balcony",
                    "User sings in a choir")
    await mcp_store(srv, BOB, "memory", "Bob grows chillies too")
    page = await new_page(browser)
    await sign_in(page, srv, ALICE)

    async def delete_all(typed: str) -> Any:
        await open_memories(page, srv)
        await submit(page, control(page, "Delete all"))
        if typed == "DELETE":
            await screenshot(page, "delete-all")
        await page.get_by_label("Type DELETE to confirm").fill(typed)
        first, _ = await submit(page, page.get_by_role("button", name=named("Delete all")))
        return first

    await delete_all("delete")  # not the word asked for: nothing is deleted
    assert await mcp_find(srv, ALICE, "memory", "chillies") == ["User grows chillies on the balcony"]
    assert await mcp_find(srv, ALICE, "truth", "dinghy") == ["Alice sails a wooden dinghy"]
    await open_memories(page, srv)
    await expect(rows(page)).to_have_count(3)

    done = await delete_all("DELETE")
    assert done.status == 303 and done.request.method == "POST", done.status
    await open_memories(page, srv)
    await expect(rows(page)).to_have_count(0)
    assert await mcp_find(srv, ALICE, "memory", "chillies") == []
    assert await mcp_find(srv, ALICE, "memory", "choir") == []
    assert await mcp_find(srv, ALICE, "truth", "dinghy") == []
    assert await mcp_find(srv, BOB, "memory", "chillies") == ["Bob grows chillies too"]


# --- 4. security ----------------------------------------------------------------------------


async def test_stored_markup_is_shown_as_text(start, browser):
    """(1) What an assistant stored is text: no element, no script, no dialog, in the list,
    the edit and delete pages, or a search that quotes it back."""
    srv = start()
    img = '<img src=x onerror="window.__pwned=1">'
    script = "<script>window.__pwned=2</script>"
    breakout = '</textarea><script>window.__pwned=3</script><textarea>'
    ids = await mcp_store(srv, ALICE, "memory", img, script, breakout)
    page = await new_page(browser)
    dialogs: list[str] = []

    async def on_dialog(dialog: Any) -> None:
        dialogs.append(dialog.message)
        await dialog.dismiss()

    page.on("dialog", on_dialog)
    await sign_in(page, srv, ALICE)
    await open_memories(page, srv)
    await page.wait_for_load_state("load")  # an <img>'s error fires before `load`
    for text in (img, script, breakout):
        await expect(page.get_by_text(text).first).to_be_visible()

    async def no_injection(where: str) -> None:
        await page.wait_for_load_state("load")
        assert await page.evaluate("typeof window.__pwned") == "undefined", where
        assert await page.locator("img[src=x]").count() == 0, where
        scripts = await page.locator("script").evaluate_all("s => s.map(e => e.textContent)")
        assert not [s for s in scripts if "__pwned" in s], (where, scripts)
        assert not dialogs, (where, dialogs)

    await no_injection("list")
    for rid, text in zip(ids, (img, script, breakout)):
        await page.goto(f"{srv.base}/settings/memories/memory/{rid}/edit")
        await expect(page.get_by_label("Text", exact=True)).to_have_value(text)
        await no_injection(f"edit {rid}")
        await page.goto(f"{srv.base}/settings/memories/memory/{rid}/delete")
        await no_injection(f"delete {rid}")
    await page.goto(srv.base + "/settings/memories?q=" + urllib.parse.quote(img))
    await no_injection("search")
    await expect(page.get_by_label("Search memories")).to_have_value(img)


async def test_a_cross_site_post_is_refused(start, browser):
    """(2) A page on another origin (another port) whose form posts a delete as soon as it
    loads: the browser sends the session cookie (same host, so same site) but no CSRF token
    and a foreign Origin; the server answers 403 and the memory stays."""
    srv = start()
    text = "User keeps a diary in a locked drawer"
    [rid] = await mcp_store(srv, ALICE, "memory", text)
    target = f"{srv.base}/settings/memories/memory/{rid}/delete"
    attack = (f'<!doctype html><title>win a prize</title><form id=f method=post action="{target}">'
              '<input type=hidden name=confirm value=yes></form>'
              '<script>document.getElementById("f").submit()</script>').encode()
    page = await new_page(browser)
    await sign_in(page, srv, ALICE)
    cookie = await session_cookie(page)
    with http_site({"/": ("text/html", attack, {})}) as evil:
        async with page.expect_response(
                lambda r: r.request.method == "POST" and path_of(r.url) == path_of(target)) as info:
            await page.goto(evil + "/")
        refused = await info.value
        sent = await refused.request.all_headers()
    assert f"{cookie['name']}={cookie['value']}" in sent.get("cookie", ""), sent
    assert refused.status == 403, (refused.status, await refused.text())
    assert await mcp_find(srv, ALICE, "memory", "diary") == [text]
    await open_memories(page, srv)
    await expect(row(page, text)).to_be_visible()


async def test_a_post_without_the_csrf_token_is_refused(start, browser):
    """(2) The session cookie alone does not make a change: no token, or a wrong one → 403."""
    srv = start()
    text = "User hides spare keys under the blue flowerpot"
    [rid] = await mcp_store(srv, ALICE, "memory", text)
    page = await new_page(browser)
    await sign_in(page, srv, ALICE)
    cookie = await session_cookie(page)
    path = f"/settings/memories/memory/{rid}/delete"
    await page.goto(srv.base + path)
    hidden = hidden_fields(await page.content(), path)
    assert hidden, "the delete form carries no hidden (CSRF) field"
    forged = {name: "forged-" + "0" * 32 for name in hidden}
    async with httpx2.AsyncClient(follow_redirects=False) as h:
        for why, headers, data in (
            ("no token", {}, {}),
            ("no token, own Origin", {"Origin": srv.base}, {}),
            ("wrong token, own Origin", {"Origin": srv.base}, forged),
        ):
            r = await h.post(srv.base + path, headers={**cookie_header(cookie), **headers}, data=data)
            assert r.status_code == 403, (why, r.status_code, r.text)
    assert await mcp_find(srv, ALICE, "memory", "flowerpot") == [text]


async def test_another_user_reaches_nothing_of_alices(start, browser):
    """(3) Bob, signed in, sees none of Alice's rows, and her ids (which Bob does not have:
    ids are numbered per user) are 404 for him, to look at or to change."""
    srv = start()
    secrets = ["Alice's bank PIN hint is her first dog", "Alice is planning a surprise party"]
    [mid, _] = await mcp_store(srv, ALICE, "memory", *secrets)
    [tid] = await mcp_store(srv, ALICE, "truth", "Alice's middle name is Henrikke")
    page = await new_page(browser)
    await sign_in(page, srv, BOB)
    await expect_header(page, "bob")
    await open_memories(page, srv)
    await expect(rows(page)).to_have_count(0)
    for text in secrets + ["Henrikke"]:
        await expect(page.get_by_text(text)).to_have_count(0)
    async with page.expect_download() as dl:
        await page.get_by_role("link", name="Export as JSON").click()
    assert json.loads(Path(await (await dl.value).path()).read_text()) == []
    hidden = hidden_fields(await page.content(), "/settings/logout")  # Bob's own CSRF token
    for kind, rid in (("memory", mid), ("memory", 1), ("truth", tid)):
        for action in ("edit", "delete"):
            url = f"{srv.base}/settings/memories/{kind}/{rid}/{action}"
            r = await page.goto(url)
            assert r.status == 404, (url, r.status)
            body = await page.content()
            assert not [s for s in secrets if s in body]
            fields = {**hidden, **({"text": "bob was here", "content": "bob was here"}
                                   if action == "edit" else {})}
            r = await page.request.post(url, form=fields, headers={"Origin": srv.base},
                                        max_redirects=0)
            assert r.status == 404, ("POST", url, r.status)
    assert await mcp_find(srv, ALICE, "memory", "bank") == [secrets[0]]
    assert await mcp_find(srv, ALICE, "memory", "surprise") == [secrets[1]]
    assert await mcp_find(srv, ALICE, "truth", "Henrikke") == ["Alice's middle name is Henrikke"]


def csp_directives(header: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for part in header.split(";"):
        words = part.split()
        if words:
            out.setdefault(words[0].lower(), [w.lower() for w in words[1:]])
    return out


async def test_security_headers(start, browser):
    """(4) A Content-Security-Policy without inline scripts, and no framing."""
    srv = start()
    [mid] = await mcp_store(srv, ALICE, "memory", "User likes headers")
    page = await new_page(browser)
    await sign_in(page, srv, ALICE)
    cookie = cookie_header(await session_cookie(page))
    async with httpx2.AsyncClient(follow_redirects=False) as h:
        responses = {
            "login form": await h.get(srv.base + "/settings/login"),
            "wrong token": await h.post(srv.base + "/settings/login", headers={"Origin": srv.base},
                                        data={"token": "wrong-" + "z" * 30}),
            "memories": await h.get(srv.base + "/settings/memories", headers=cookie),
            "edit": await h.get(f"{srv.base}/settings/memories/memory/{mid}/edit", headers=cookie),
            "not found": await h.get(f"{srv.base}/settings/memories/memory/999/edit", headers=cookie),
        }
    for what, r in responses.items():
        csp = r.headers.get("content-security-policy")
        assert csp, (what, r.status_code, dict(r.headers))
        d = csp_directives(csp)
        scripts = d.get("script-src", d.get("default-src"))
        assert scripts is not None, (what, csp)
        assert "'unsafe-inline'" not in scripts, (what, csp)
        xfo = r.headers.get("x-frame-options", "").strip().upper()
        assert xfo == "DENY" or d.get("frame-ancestors") == ["'none'"], (what, xfo, csp)


# --- 1b. signing in through the OAuth authorization server ------------------------------------

AUDIENCE = "https://mcp.test/mcp"
CLIENT_ID = "ringfence-settings"


class AuthorizationServer:
    """A stand-in OAuth authorization server on loopback: RFC 8414 metadata, a JWKS, an
    authorization endpoint that "consents" at once (or answers `error` when told to), and a
    token endpoint that checks the code, the redirect address, the client and the PKCE
    verifier (S256) before it mints a JWT for `sub`."""

    def __init__(self) -> None:
        self.key = rsa_key()
        self.sub = "carol"
        self.audience = AUDIENCE
        self.refuse: str | None = None
        self.authorize_requests: list[dict[str, str]] = []
        self.token_requests: list[dict[str, str]] = []
        self.codes: dict[str, dict[str, str]] = {}
        idp = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def answer(self, status: int, doc: Any = None, location: str | None = None) -> None:
                body = json.dumps(doc).encode() if doc is not None else b""
                self.send_response(status)
                if location:
                    self.send_header("Location", location)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802
                url = urllib.parse.urlsplit(self.path)
                if url.path == "/.well-known/oauth-authorization-server":
                    self.answer(200, {"issuer": idp.issuer,
                                      "authorization_endpoint": idp.issuer + "/authorize",
                                      "token_endpoint": idp.issuer + "/token",
                                      "jwks_uri": idp.issuer + "/jwks",
                                      "code_challenge_methods_supported": ["S256"]})
                elif url.path == "/jwks":
                    self.answer(200, jwks(("k1", idp.key)))
                elif url.path == "/authorize":
                    q = dict(urllib.parse.parse_qsl(url.query))
                    idp.authorize_requests.append(q)
                    back = q.get("redirect_uri", "")
                    if idp.refuse:
                        answer = {"error": idp.refuse, "state": q.get("state", ""),
                                  "error_description": "<b>Evil</b> text from the server"}
                    else:
                        code = f"code-{len(idp.codes)}"
                        idp.codes[code] = q
                        answer = {"code": code, "state": q.get("state", "")}
                    self.answer(302, location=back + "?" + urllib.parse.urlencode(answer))
                else:
                    self.answer(404, {"error": "not_found"})

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length", "0"))
                form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
                idp.token_requests.append(form)
                asked = idp.codes.pop(form.get("code", ""), None)
                verifier = form.get("code_verifier", "")
                challenge = base64.urlsafe_b64encode(
                    hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
                if (asked is None or form.get("grant_type") != "authorization_code"
                        or form.get("redirect_uri") != asked.get("redirect_uri")
                        or form.get("client_id") != asked.get("client_id")
                        or challenge != asked.get("code_challenge")):
                    self.answer(400, {"error": "invalid_grant"})
                    return
                token = mint(idp.key, "k1", iss=idp.issuer, sub=idp.sub, aud=idp.audience)
                self.answer(200, {"access_token": token, "token_type": "Bearer",
                                  "expires_in": 300})

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.issuer = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def config(self) -> str:
        return (tokens_config(alice=ALICE, bob=BOB) + "[http.oauth]\n"
                f'issuer = "{self.issuer}"\njwks_url = "{self.issuer}/jwks"\n'
                f'audience = "{AUDIENCE}"\nclient_id = "{CLIENT_ID}"\n'
                'required_scopes = ["files"]\n' + WORDS_ONLY)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def idp() -> Iterator[AuthorizationServer]:
    server = AuthorizationServer()
    yield server
    server.close()


async def test_sign_in_through_the_authorization_server(start, browser, idp):
    """The authorization-code flow with PKCE: the browser goes to the authorization server
    and back, the server exchanges the code with the verifier, and the token's user (a JWT
    /mcp accepts) is signed in. The verifier never travels through the browser's address
    bar; the state is checked; the flow's cookie is gone afterwards."""
    srv = start(idp.config())
    await mcp_store(srv, ALICE, "memory", "Alice keeps her diary under the floorboard")
    page = await new_page(browser)
    await page.goto(srv.base + "/settings/login")
    host = urllib.parse.urlsplit(idp.issuer).hostname
    button = page.get_by_role("link", name=f"Sign in with {host}")
    await expect(button).to_be_visible()
    await screenshot(page, "login-oauth")
    first, final = await submit(page, button)
    assert final.ok, (final.status, await final.text())
    assert path_of(page.url) == "/settings", page.url
    await expect_header(page, "carol")
    (asked,) = idp.authorize_requests
    assert asked["client_id"] == CLIENT_ID and asked["response_type"] == "code", asked
    assert asked["code_challenge_method"] == "S256" and len(asked["state"]) >= 43, asked
    assert asked["redirect_uri"] == srv.base + "/settings/login/callback", asked
    assert asked["resource"] == AUDIENCE and asked["scope"] == "files", asked
    (exchanged,) = idp.token_requests
    assert exchanged["code_verifier"] not in json.dumps(asked), "the verifier left in the URL"
    names = {c["name"] for c in await page.context.cookies()}
    assert not any("signin" in n for n in names), names
    await session_cookie(page)
    # Carol's session is hers alone: none of Alice's memories.
    r = await page.goto(srv.base + "/settings/memories")
    assert r.status == 200, r.status
    assert "floorboard" not in await page.content()


async def test_a_sign_in_not_started_in_this_browser_is_refused(start, browser, idp):
    """A callback without this browser's own state (login CSRF: someone else's code pushed
    into the victim's browser), or with another state, signs nobody in and never reaches the
    token endpoint; an authorization server's refusal is told in our words, not its own."""
    srv = start(idp.config())
    page = await new_page(browser)
    r = await page.goto(srv.base + "/settings/login/callback?code=code-0&state=" + "s" * 43)
    assert r.status == 400, r.status
    await expect(page.get_by_role("alert")).to_contain_text("not started in this browser")
    # Started here, but the state that comes back is another.
    started = await page.request.get(srv.base + "/settings/login/oauth", max_redirects=0)
    assert started.status == 303, started.status
    r = await page.goto(srv.base + "/settings/login/callback?code=code-0&state=" + "t" * 43)
    assert r.status == 400, r.status
    assert idp.token_requests == [], idp.token_requests
    r = await page.goto(srv.base + "/settings")
    assert path_of(page.url) == "/settings/login", page.url
    # The person declines at the authorization server.
    idp.refuse = "access_denied"
    await page.goto(srv.base + "/settings/login")
    host = urllib.parse.urlsplit(idp.issuer).hostname
    first, final = await submit(page, page.get_by_role("link", name=f"Sign in with {host}"))
    assert final.status == 401, final.status
    await expect(page.get_by_role("alert")).to_contain_text("declined the sign-in")
    assert "Evil" not in await page.content()


async def test_a_token_for_another_audience_signs_nobody_in(start, browser, idp):
    """The token the authorization server gives must pass the same checks as an MCP
    request's: one minted for another resource is refused, and nobody is signed in."""
    idp.audience = "https://elsewhere.test/mcp"
    srv = start(idp.config())
    page = await new_page(browser)
    await page.goto(srv.base + "/settings/login")
    host = urllib.parse.urlsplit(idp.issuer).hostname
    first, final = await submit(page, page.get_by_role("link", name=f"Sign in with {host}"))
    assert final.status == 401, final.status
    await expect(page.get_by_role("alert")).to_contain_text("not accepted by this server")
    await page.goto(srv.base + "/settings")
    assert path_of(page.url) == "/settings/login", page.url


# --- 5. follow-ups ---------------------------------------------------------------------------


async def test_cancel_a_follow_up(start, browser):
    srv = start(tokens_config(alice=ALICE, bob=BOB) + WORDS_ONLY + "[followups]\nproactive = true\n")
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with client(srv.url, ALICE) as s:
            for context in ("Ask how the dentist appointment went", "Remind about the library books"):
                r = await call(s, "schedule_followup", {"context": context, "minutes_from_now": 600})
                assert not is_error(r), text_of(r)
    page = await new_page(browser)
    await sign_in(page, srv, ALICE)
    r = await page.goto(srv.base + "/settings/followups")
    assert r.status == 200, r.status
    await expect_header(page, "alice")
    await screenshot(page, "followups")

    def followup(text: str) -> Any:
        return page.locator("tr, li, article, [role=row], [role=listitem]").filter(has_text=text).last

    cancel = named("Cancel follow-up")
    dentist, library = "Ask how the dentist appointment went", "Remind about the library books"
    await expect(followup(library).get_by_role("button", name=cancel)).to_be_visible()
    await submit(page, followup(dentist).get_by_role("button", name=cancel))
    await page.goto(srv.base + "/settings/followups")
    # No longer pending: nothing to cancel (the page may still show it among past ones).
    await expect(followup(dentist).get_by_role("button", name=cancel)).to_have_count(0)
    await expect(followup(library).get_by_role("button", name=cancel)).to_be_visible()
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with client(srv.url, ALICE) as s:
            listed = structured(await call(s, "list_followups", {"status": "all"}))
    status = {f["context"]: f["status"] for f in listed["followups"]}
    assert status == {"Ask how the dentist appointment went": "cancelled",
                      "Remind about the library books": "pending"}, listed


async def test_follow_ups_come_fifty_a_page(start, browser):
    srv = start()
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with client(srv.url, ALICE) as s:
            for i in range(55):
                r = await call(s, "schedule_followup",
                               {"context": f"Check-in number {i}", "minutes_from_now": 600})
                assert not is_error(r), text_of(r)
                r = await call(s, "cancel_followup", {"followup_id": structured(r)["followupId"]})
                assert not is_error(r), text_of(r)
    page = await new_page(browser)
    await sign_in(page, srv, ALICE)
    await page.goto(srv.base + "/settings/followups")
    await expect(page.get_by_role("heading", name="Past (55)")).to_be_visible()
    past = page.locator("section[aria-labelledby=past] li.item")
    await expect(past).to_have_count(PAGE_ROWS)
    await expect(past.first).to_contain_text("Check-in number 54")  # newest first
    await submit(page, page.get_by_role("navigation", name="Past pages")
                 .get_by_role("link", name="Next page"))
    await expect(past).to_have_count(5)
    await expect(past.last).to_contain_text("Check-in number 0")
    # Pending ones too, soonest first, each list keeping the other's page.
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with client(srv.url, ALICE) as s:
            for i in range(52):
                r = await call(s, "schedule_followup",
                               {"context": f"Pending number {i}", "minutes_from_now": 60 + i})
                assert not is_error(r), text_of(r)
    await page.goto(srv.base + "/settings/followups?page=1")
    pending = page.locator("section[aria-labelledby=pending] li.item")
    await expect(pending).to_have_count(PAGE_ROWS)
    await expect(pending.first).to_contain_text("Pending number 0")
    await submit(page, page.get_by_role("navigation", name="Pending pages")
                 .get_by_role("link", name="Next page"))
    await expect(pending).to_have_count(2)
    await expect(pending.last).to_contain_text("Pending number 51")
    await expect(past).to_have_count(5)


async def test_send_a_test_through_a_channel(start, browser):
    """"Send a test" reaches the channel now, signed as a delivery is, marked as a test, and
    stores nothing; only a channel that serves the user is offered."""
    with receiver() as hook:
        srv = start(tokens_config(alice=ALICE, bob=BOB) + WORDS_ONLY +
                    '[followups]\nproactive = true\n'
                    f'[[followups.channels]]\nkind = "webhook"\nurl = "{hook.url}"\n'
                    f'secret = "{SECRET}"\nusers = ["alice"]\n')
        page = await new_page(browser)
        await sign_in(page, srv, ALICE)
        await page.goto(srv.base + "/settings/followups")
        first, final = await submit(page, page.get_by_role("button", name="Send a test through webhook"))
        assert first.status == 303 and final.status == 200, (first.status, final.status)
        await expect(page.get_by_role("status")).to_contain_text("A test was sent through webhook")
        (sent,) = hook.wait_for(1, 30)
        assert sent["doc"]["test"] is True and sent["doc"]["user"] == "alice", sent["doc"]
        assert sent["headers"].get("x-ringfence-signature"), sent["headers"]
        with anyio.fail_after(TEST_TIMEOUT_S):
            async with client(srv.url, ALICE) as s:
                listed = structured(await call(s, "list_followups", {"status": "all"}))
        assert listed["followups"] == [], listed
        # Bob is not served by that channel: no button, and its address is not found.
        bob = await new_page(browser)
        await sign_in(bob, srv, BOB)
        await bob.goto(srv.base + "/settings/followups")
        await expect(bob.get_by_role("button", name="Send a test through webhook")).to_have_count(0)
        token = await bob.locator("input[name=csrf]").first.get_attribute("value")
        r = await bob.request.post(srv.base + "/settings/followups/test/0",
                                   form={"csrf": token}, headers={"Origin": srv.base})
        assert r.status == 404, r.status
        assert len(hook.requests) == 1


async def test_own_delivery_choices_reach_the_tools_and_the_scheduler(start, browser):
    """A person's own switch, time zone and quiet hours: saved on the page, read by the
    follow-up tools (list_followups) and by the scheduler, which then delivers what it held
    back while delivery was off in the configuration. Bad input is refused, naming the fix,
    and changes nothing."""
    with receiver() as hook:
        srv = start(tokens_config(alice=ALICE, bob=BOB) + WORDS_ONLY +
                    '[followups]\nproactive = false\ntimezone = "UTC"\n'
                    f'[[followups.channels]]\nkind = "webhook"\nurl = "{hook.url}"\n'
                    f'secret = "{SECRET}"\n')
        with anyio.fail_after(TEST_TIMEOUT_S):
            async with client(srv.url, ALICE) as s:
                r = await call(s, "schedule_followup",
                               {"context": "Ask about the piano exam", "minutes_from_now": 0.01})
                assert not is_error(r), text_of(r)
                before = structured(await call(s, "list_followups", {"status": "pending"}))
            async with client(srv.url, BOB) as s:
                r = await call(s, "schedule_followup",
                               {"context": "Ask bob about the boat", "minutes_from_now": 0.01})
                assert not is_error(r), text_of(r)
        assert before["proactive"] is False and before["timezone"] == "UTC", before
        page = await new_page(browser)
        await sign_in(page, srv, ALICE)
        await page.goto(srv.base + "/settings/followups")
        await expect(page.get_by_label("Proactive messages")).to_have_value("")
        # Bad input: refused with the fix named, nothing kept.
        await page.get_by_label("Time zone").fill("Mars/Olympus_Mons")
        first, final = await submit(page, page.get_by_role("button", name="Save delivery settings"))
        assert final.status == 400, final.status
        await expect(page.get_by_role("alert")).to_contain_text("IANA name such as Europe/Berlin")
        await page.goto(srv.base + "/settings/followups")
        await page.get_by_label("Quiet hours").fill("25:00-07:00")
        first, final = await submit(page, page.get_by_role("button", name="Save delivery settings"))
        assert final.status == 400, final.status
        await expect(page.get_by_role("alert")).to_contain_text("HH:MM-HH:MM")
        await page.goto(srv.base + "/settings/followups")
        await expect(page.get_by_label("Time zone")).to_have_value("")
        await expect(page.get_by_label("Quiet hours")).to_have_value("")
        assert hook.requests == [], "delivered while delivery was off"
        # Her own choices: on, in Tokyo, no quiet hours.
        await page.get_by_label("Proactive messages").select_option("on")
        await page.get_by_label("Time zone").fill("Asia/Tokyo")
        await page.get_by_label("Quiet hours").fill("none")
        first, final = await submit(page, page.get_by_role("button", name="Save delivery settings"))
        assert first.status == 303 and final.status == 200, (first.status, final.status)
        await expect(page.get_by_role("status")).to_contain_text("Your delivery settings are saved")
        await expect(page.get_by_label("Proactive messages")).to_have_value("on")
        await expect(page.get_by_label("Time zone")).to_have_value("Asia/Tokyo")
        await expect(page.get_by_label("Quiet hours")).to_have_value("none")
        await screenshot(page, "followups-choices")
        # The scheduler reads them: the held-back follow-up goes out, in her zone.
        (sent,) = hook.wait_for(1, 60)
        assert sent["doc"]["user"] == "alice" and sent["doc"]["timezone"] == "Asia/Tokyo", sent["doc"]
        with anyio.fail_after(TEST_TIMEOUT_S):
            async with client(srv.url, ALICE) as s:
                after = structured(await call(s, "list_followups", {"status": "all"}))
            async with client(srv.url, BOB) as s:
                bobs = structured(await call(s, "list_followups", {"status": "pending"}))
        assert after["proactive"] is True and after["timezone"] == "Asia/Tokyo", after
        assert after["followups"][0]["status"] == "completed", after
        # Bob's are his own: still the configuration's, and his follow-up, due as long as
        # hers, is still pending (hers was claimed and delivered in the meantime).
        assert bobs["proactive"] is False and bobs["timezone"] == "UTC", bobs
        assert [f["status"] for f in bobs["followups"]] == ["pending"], bobs
        assert [d["doc"]["user"] for d in hook.requests] == ["alice"], hook.requests


async def test_an_operator_may_keep_delivery_to_the_configuration(start, browser):
    """With [followups] user_choices = false the page shows the configuration's settings and
    takes no choice."""
    srv = start(tokens_config(alice=ALICE, bob=BOB) + WORDS_ONLY +
                '[followups]\nproactive = false\nuser_choices = false\n')
    page = await new_page(browser)
    await sign_in(page, srv, ALICE)
    await page.goto(srv.base + "/settings/followups")
    await expect(page.get_by_role("button", name="Save delivery settings")).to_have_count(0)
    await expect(page.locator("main")).to_contain_text("The server's operator sets these")
    token = await page.locator("input[name=csrf]").first.get_attribute("value")
    r = await page.request.post(srv.base + "/settings/followups/delivery",
                                form={"csrf": token, "proactive": "on"},
                                headers={"Origin": srv.base})
    assert r.status == 400, r.status
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with client(srv.url, ALICE) as s:
            listed = structured(await call(s, "list_followups", {"status": "pending"}))
    assert listed["proactive"] is False, listed


def google_calendar_config(base: str) -> str:
    return ('[calendar]\nprovider = "google"\ntimezone = "Europe/Berlin"\n'
            'client_id = "test-client"\nclient_secret = "s3cret"\n'
            f'google_auth_url = "{base}/auth"\ngoogle_token_url = "{base}/token"\n'
            f'google_api_url = "{base}/calendar/v3/"\n'
            # Over HTTP each user's calendar is their own table (the default is the local
            # user's); the OAuth client is inherited.
            '[calendar.users.alice]\nprovider = "google"\n[calendar.users.bob]\nprovider = "google"\n')


async def test_connect_google_calendar_in_the_browser(start, browser):
    """The web authorization-code flow against the Google stand-in: PKCE and state checked
    by the stand-in and the server, the refresh token stored for that user only, the
    calendar then usable through MCP; an answer for another person's request is refused;
    disconnecting forgets the token."""
    with google_standin() as (g, base):
        srv = start(tokens_config(alice=ALICE, bob=BOB) + WORDS_ONLY + google_calendar_config(base))
        page = await new_page(browser)
        await sign_in(page, srv, ALICE)
        await page.goto(srv.base + "/settings/calendar")
        await expect(page.locator("main")).to_contain_text("Not connected")
        await page.get_by_role("link", name="Connect Google Calendar").click()
        await expect(page.get_by_role("status")).to_contain_text("Google Calendar is connected")
        assert g.redirect == srv.base + "/settings/calendar/google", g.redirect
        await screenshot(page, "calendar")
        await expect(page.get_by_role("button", name="Disconnect Google Calendar")).to_be_visible()
        with anyio.fail_after(TEST_TIMEOUT_S):
            async with client(srv.url, ALICE) as s:
                r = await call(s, "list_calendar_events", {"days": 7})
                assert not is_error(r), text_of(r)
            async with client(srv.url, BOB) as s:
                r = await call(s, "list_calendar_events", {"days": 7})
                assert is_error(r) and "not connected" in text_of(r).lower(), text_of(r)
        # Bob replays an answer meant for a request he never made: refused, nothing stored.
        bob = await new_page(browser)
        await sign_in(bob, srv, BOB)
        r = await bob.goto(srv.base + f"/settings/calendar/google?code={g.code}&state=forged")
        assert r.status == 400, r.status
        await expect(bob.locator("main")).to_contain_text("not for a connection you started")
        await bob.goto(srv.base + "/settings/calendar")
        await expect(bob.locator("main")).to_contain_text("Not connected")
        # Alice disconnects: the token is forgotten, and the tools say so.
        await submit(page, page.get_by_role("button", name="Disconnect Google Calendar"))
        await expect(page.get_by_role("status")).to_contain_text("disconnected")
        await expect(page.get_by_role("link", name="Connect Google Calendar")).to_be_visible()
        with anyio.fail_after(TEST_TIMEOUT_S):
            async with client(srv.url, ALICE) as s:
                r = await call(s, "list_calendar_events", {"days": 7})
                assert is_error(r) and "not connected" in text_of(r).lower(), text_of(r)


def test_ringfence_ui_signs_in_once_with_its_link(tmp_path):
    """`ringfence ui` prints a link that signs `local` in once; the same link again is
    refused, and so is one the server did not make."""
    import subprocess
    import urllib.error
    import urllib.request

    from test_sdk_client import _binary

    (tmp_path / "cfg.toml").write_text(WORDS_ONLY)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path),
           "XDG_CONFIG_HOME": str(tmp_path / "xdg"), "RINGFENCE_LOG": "info"}
    proc = subprocess.Popen([str(_binary()), "--config", str(tmp_path / "cfg.toml"),
                             "--data-dir", str(tmp_path / "data"), "ui", "--no-open"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env, text=True)
    try:
        line = proc.stdout.readline()
        m = re.search(r"(http://127\.0\.0\.1:\d+)(/settings/login\?once=[\w-]+)", line)
        assert m, line
        base, link = m.group(1), m.group(2)

        class NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *_a: Any, **_k: Any) -> None:
                return None

        opener = urllib.request.build_opener(NoRedirect)

        def get(path: str) -> tuple[int, str]:
            try:
                r = opener.open(base + path)
                return r.status, r.headers.get("Set-Cookie", "")
            except urllib.error.HTTPError as e:
                return e.code, e.headers.get("Set-Cookie", "")

        status, cookie = get(link)
        assert status == 303 and cookie.startswith("ringfence-session="), (status, cookie)
        assert get(link)[0] == 401, "a used link signs nobody in"
        assert get("/settings/login?once=" + "A" * 43)[0] == 401
        session = cookie.split(";")[0]
        r = urllib.request.urlopen(urllib.request.Request(base + "/settings/memories",
                                                          headers={"Cookie": session}))
        assert r.status == 200 and "Signed in as" in r.read().decode()
    finally:
        proc.terminate()
        proc.wait(10)


# --- 6. several instances on one PostgreSQL -------------------------------------------------


@pytest.mark.skipif(not on_postgres(),
                    reason="sessions are shared between instances only through PostgreSQL "
                           "(RINGFENCE_TEST_STORE=postgres)")
async def test_a_session_works_on_every_instance(start, browser):
    """Signed in on instance A, the same cookie edits a memory on instance B; signing out
    on A ends it on B too."""
    a, b = start(), start()
    old = "User's umbrella is yellow"
    [rid] = await mcp_store(a, ALICE, "memory", old)
    page_a = await new_page(browser)
    await sign_in(page_a, a, ALICE)
    cookie = await session_cookie(page_a)
    page_b = await new_page(browser)  # a context of its own: only the cookie is carried over
    await page_b.context.add_cookies([{"name": cookie["name"], "value": cookie["value"],
                                       "url": b.base}])
    r = await page_b.goto(f"{b.base}/settings/memories/memory/{rid}/edit")
    assert r.status == 200 and "login" not in page_b.url, (r.status, page_b.url)
    await expect_header(page_b, "alice")
    await page_b.get_by_label("Text", exact=True).fill("User's umbrella is polka-dotted")
    first, _ = await submit(page_b, page_b.get_by_role("button", name="Save"))
    assert first.status == 303, first.status
    assert await mcp_find(a, ALICE, "memory", "umbrella") == ["User's umbrella is polka-dotted"]
    await open_memories(page_a, a)
    await expect(row(page_a, "User's umbrella is polka-dotted")).to_be_visible()
    await submit(page_a, page_a.get_by_role("banner").get_by_role("button", name="Sign out"))
    await page_b.goto(b.base + "/settings/memories")
    assert path_of(page_b.url) == "/settings/login", page_b.url


@pytest.mark.skipif(not on_postgres(),
                    reason="a Google request on its way is shared between instances only "
                           "through PostgreSQL (RINGFENCE_TEST_STORE=postgres)")
async def test_a_google_connection_started_on_one_instance_finishes_on_another(start, browser):
    """Behind a load balancer the person comes back from Google to whichever instance: the
    request on its way (state and PKCE verifier) is in the shared store, so B finishes what
    A started, once."""
    with google_standin() as (g, base):
        config = google_calendar_config(base)
        a = start(tokens_config(alice=ALICE, bob=BOB) + WORDS_ONLY + config)
        # One public address for both, as behind a load balancer: A's.
        b = start(tokens_config(alice=ALICE, bob=BOB) + f'public_url = "{a.base}"\n'
                  + WORDS_ONLY + config)
        page = await new_page(browser)
        await sign_in(page, a, ALICE)  # cookies do not tell ports apart: B reads it too
        # The stand-in sends the browser back to A (the public address); the "load
        # balancer" here takes it to B. (A route sees only the first request of a redirect
        # chain: the click on Connect, whose hops are made here.)
        connect = re.compile(re.escape(a.base + "/settings/calendar/google/connect"))
        answers: list[str] = []

        async def to_b(route: Any) -> None:
            started = await route.fetch(max_redirects=0)  # A keeps the request on its way
            consent = started.headers["location"]
            assert consent.startswith(base + "/auth"), consent
            answer = (await route.fetch(url=consent, max_redirects=0)).headers["location"]
            assert answer.startswith(a.base + "/settings/calendar/google?"), answer
            answers.append(answer)
            await route.fulfill(status=302, headers={
                "Location": answer.replace(a.base, b.base, 1)})

        await page.route(connect, to_b)
        await page.goto(a.base + "/settings/calendar")
        await page.get_by_role("link", name="Connect Google Calendar").click()
        await expect(page.get_by_role("status")).to_contain_text("Google Calendar is connected")
        assert len(answers) == 1, (answers, a.base, b.base, page.url)
        assert path_of(page.url) == "/settings/calendar" and page.url.startswith(b.base), (
            page.url, a.base, b.base)
        with anyio.fail_after(TEST_TIMEOUT_S):
            async with client(a.url, ALICE) as s:
                r = await call(s, "list_calendar_events", {"days": 7})
                assert not is_error(r), text_of(r)
        # The same answer again, on either instance: the request was taken once.
        await page.unroute(connect)
        for srv in (a, b):
            r = await page.goto(answers[0].replace(a.base, srv.base, 1))
            assert r.status == 400, (srv.base, r.status)
