"""Google Calendar through the real binary, against a local stand-in for Google (the real
service is unreachable here) that follows the documented v3 API and OAuth endpoints:
`ringfence calendar connect google` runs the installed-app flow (the test plays the browser:
it opens the printed address, the stand-in redirects to ringfence's loopback listener with a
code, and only the right PKCE verifier gets tokens); then create with a Meet link, list (a
recurring event's occurrence included), patch with If-Match, a conflict when someone else
changed the event, delete, an access token refreshed when it expires, and a revoked
connection reported as not connected."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import http.server
import json
import os
import subprocess
import threading
import urllib.parse
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator
from zoneinfo import ZoneInfo

import anyio
import pytest

from store import on_postgres, psql, store_env

from test_sdk_client import (  # noqa: F401 (fixtures)
    TEST_TIMEOUT_S, _binary, dirs, is_error, ringfence_bin, serve, structured, text_of,
)

pytestmark = pytest.mark.anyio

BERLIN = ZoneInfo("Europe/Berlin")
MEET = "https://meet.google.com/abc-defg-hij"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Google:
    """The stand-in's state: what it was asked, and the events it holds."""

    def __init__(self) -> None:
        self.challenge = ""
        self.code = "code-42"
        self.redirect = ""
        self.refreshes = 0
        self.revoked = False
        self.valid = set()
        self.expires_in = 3600
        self.requests: list[dict[str, Any]] = []
        self.events: dict[str, dict[str, Any]] = {}
        self.lock = threading.Lock()

    def token(self, n: int) -> dict[str, Any]:
        t = f"access-{n}"
        self.valid.add(t)
        return {"access_token": t, "expires_in": self.expires_in, "token_type": "Bearer",
                "scope": "https://www.googleapis.com/auth/calendar"}


def handler(g: Google) -> type[http.server.BaseHTTPRequestHandler]:
    class H(http.server.BaseHTTPRequestHandler):
        def log_message(self, *_: Any) -> None:
            pass

        def reply(self, status: int, body: Any = None, headers: dict[str, str] | None = None) -> None:
            data = b"" if body is None else json.dumps(body).encode()
            self.send_response(status)
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            if body is not None:
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def body(self) -> bytes:
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def authorized(self) -> bool:
            auth = self.headers.get("Authorization", "")
            if not auth.startswith("Bearer ") or auth[7:] not in g.valid:
                self.reply(401, {"error": {"message": "Invalid Credentials"}})
                return False
            return True

        def do_GET(self) -> None:  # noqa: N802
            u = urllib.parse.urlparse(self.path)
            q = dict(urllib.parse.parse_qsl(u.query))
            with g.lock:
                g.requests.append({"method": "GET", "path": u.path, "query": q})
            if u.path == "/auth":
                assert q["response_type"] == "code" and q["code_challenge_method"] == "S256"
                assert q["client_id"] == "test-client" and "calendar" in q["scope"]
                g.challenge, g.redirect = q["code_challenge"], q["redirect_uri"]
                loc = f"{q['redirect_uri']}?code={g.code}&state={urllib.parse.quote(q['state'])}"
                self.reply(302, None, {"Location": loc})
                return
            if not self.authorized():
                return
            if u.path == "/calendar/v3/users/me/calendarList":
                self.reply(200, {"items": [{"id": "team@group.calendar.google.com", "summary": "Team"},
                                           {"id": "alice@example.org", "summary": "Alice", "primary": True}]})
                return
            parts = u.path.split("/")
            if len(parts) == 6 and parts[5] == "events":
                cal = urllib.parse.unquote(parts[4])
                lo, hi = q["timeMin"], q["timeMax"]
                assert q["singleEvents"] == "true"
                items = [e for e in g.events.values() if e["_cal"] == cal
                         and e["start"]["dateTime"] < hi and e["end"]["dateTime"] > lo]
                items.sort(key=lambda e: e["start"]["dateTime"])
                self.reply(200, {"items": [{k: v for k, v in e.items() if k != "_cal"} for e in items]})
                return
            if len(parts) == 7 and parts[5] == "events":
                e = g.events.get(urllib.parse.unquote(parts[6]))
                if e is None:
                    self.reply(404, {"error": {"message": "Not Found"}})
                else:
                    self.reply(200, {k: v for k, v in e.items() if k != "_cal"})
                return
            self.reply(404, {"error": {"message": "Not Found"}})

        def do_POST(self) -> None:  # noqa: N802
            u = urllib.parse.urlparse(self.path)
            q = dict(urllib.parse.parse_qsl(u.query))
            raw = self.body()
            if u.path == "/token":
                form = dict(urllib.parse.parse_qsl(raw.decode()))
                with g.lock:
                    g.requests.append({"method": "POST", "path": u.path, "form": form})
                    if form["grant_type"] == "authorization_code":
                        want = base64.urlsafe_b64encode(
                            hashlib.sha256(form["code_verifier"].encode()).digest()).rstrip(b"=").decode()
                        ok = (form["code"] == g.code and want == g.challenge
                              and form["redirect_uri"] == g.redirect and form["client_secret"] == "s3cret")
                        if not ok:
                            self.reply(400, {"error": "invalid_grant"})
                            return
                        self.reply(200, {**g.token(0), "refresh_token": "refresh-1"})
                        return
                    if form["grant_type"] == "refresh_token":
                        if g.revoked or form["refresh_token"] != "refresh-1":
                            self.reply(400, {"error": "invalid_grant"})
                            return
                        g.refreshes += 1
                        self.reply(200, g.token(g.refreshes))
                        return
                self.reply(400, {"error": "unsupported_grant_type"})
                return
            if not self.authorized():
                return
            body = json.loads(raw)
            with g.lock:
                g.requests.append({"method": "POST", "path": u.path, "query": q, "body": body})
                cal = urllib.parse.unquote(u.path.split("/")[4])
                eid = f"ev{len(g.events) + 1}"
                e = {**body, "id": eid, "etag": '"1"', "status": "confirmed", "_cal": cal}
                if "conferenceData" in body and q.get("conferenceDataVersion") == "1":
                    e["hangoutLink"] = MEET
                    e["conferenceData"] = {"entryPoints": [{"entryPointType": "video", "uri": MEET}]}
                g.events[eid] = e
            self.reply(200, {k: v for k, v in e.items() if k != "_cal"})

        def do_PATCH(self) -> None:  # noqa: N802
            if not self.authorized():
                return
            u = urllib.parse.urlparse(self.path)
            body = json.loads(self.body())
            eid = urllib.parse.unquote(u.path.split("/")[6])
            with g.lock:
                g.requests.append({"method": "PATCH", "path": u.path, "body": body,
                                   "if_match": self.headers.get("If-Match")})
                e = g.events.get(eid)
                if e is None:
                    self.reply(404, {"error": {"message": "Not Found"}})
                    return
                if self.headers.get("If-Match") not in (None, e["etag"]):
                    self.reply(412, {"error": {"message": "Precondition Failed"}})
                    return
                e.update(body)
                e["etag"] = f'"{int(e["etag"].strip(chr(34))) + 1}"'
            self.reply(200, {k: v for k, v in e.items() if k != "_cal"})

        def do_DELETE(self) -> None:  # noqa: N802
            if not self.authorized():
                return
            eid = urllib.parse.unquote(urllib.parse.urlparse(self.path).path.split("/")[6])
            with g.lock:
                g.requests.append({"method": "DELETE", "path": self.path, "if_match": self.headers.get("If-Match")})
                e = g.events.get(eid)
                if e is None:
                    self.reply(404, {"error": {"message": "Not Found"}})
                    return
                if self.headers.get("If-Match") not in (None, e["etag"]):
                    self.reply(412, {"error": {"message": "Precondition Failed"}})
                    return
                del g.events[eid]
            self.reply(204)
    return H


@contextmanager
def google() -> Iterator[tuple[Google, str]]:
    g = Google()
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler(g))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield g, f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()


def config(tmp: Path, base: str) -> Path:
    path = tmp / "ringfence.toml"
    path.write_text(
        '[calendar]\nprovider = "google"\ntimezone = "Europe/Berlin"\nclient_id = "test-client"\n'
        'client_secret_env = "GOOGLE_CLIENT_SECRET"\n'
        f'google_auth_url = "{base}/auth"\ngoogle_token_url = "{base}/token"\n'
        f'google_api_url = "{base}/calendar/v3/"\n')
    return path


def env_for(tmp: Path) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp), "XDG_CONFIG_HOME": str(tmp / "xdg"),
            "GOOGLE_CLIENT_SECRET": "s3cret", **store_env()}


def connect(tmp: Path, cfg: Path) -> subprocess.CompletedProcess[str]:
    """`ringfence calendar connect google`, with the test as the browser."""
    proc = subprocess.Popen([str(_binary()), "--config", str(cfg), "--data-dir", str(tmp / "data"),
                             "calendar", "connect", "google", "--wait-secs", "30"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env_for(tmp))
    said = []
    assert proc.stderr is not None
    for line in proc.stderr:
        said.append(line)
        if line.startswith("http"):
            page = urllib.request.urlopen(line.strip(), timeout=30).read().decode()
            assert "connected" in page, page
            break
    out, err = proc.communicate(timeout=30)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, "".join(said) + err)


def at(days: int, hour: int) -> dt.datetime:
    d = dt.datetime.now(BERLIN).date() + dt.timedelta(days=days)
    return dt.datetime(d.year, d.month, d.day, hour, tzinfo=BERLIN)


async def test_connect_then_create_list_patch_delete_with_meet_and_refresh(ringfence_bin, dirs):
    ws, data = dirs
    tmp = ws.parent
    with google() as (g, base):
        cfg = config(tmp, base)
        # Not connected yet: the tools say so, and how.
        out = subprocess.run([str(_binary()), "--config", str(cfg), "--data-dir", str(data), "call",
                              "list_calendar_events", "{}"], capture_output=True, text=True, env=env_for(tmp))
        said = out.stdout + out.stderr
        assert out.returncode != 0 and "Google Calendar is not connected" in said, said
        assert "ringfence calendar connect google" in said

        done = connect(tmp, cfg)
        assert done.returncode == 0, done.stderr
        assert "Google Calendar is connected" in done.stderr and "s3cret" not in done.stderr
        token_file = data / "calendar" / "google-local.json"
        if on_postgres():
            # Kept in the shared store, for every instance; no file.
            text = psql(store_env()["RINGFENCE_DATABASE_URL"],
                        "SELECT doc FROM credentials WHERE \"user\" = 'local' AND provider = 'google'")
            assert not token_file.exists() and "shared store" in done.stderr
        else:
            assert oct(token_file.stat().st_mode & 0o777) == "0o600"
            text = token_file.read_text()
        stored = json.loads(text)
        assert stored["refresh_token"] == "refresh-1" and "s3cret" not in text

        # A recurring event's occurrence someone made in the web app.
        occ = at(2, 9)
        g.events["series1_x"] = {
            "id": "series1_x", "etag": '"5"', "status": "confirmed", "_cal": "team@group.calendar.google.com",
            "summary": "Standup", "recurringEventId": "series1",
            "start": {"dateTime": occ.isoformat(), "timeZone": "Europe/Berlin"},
            "end": {"dateTime": (occ + dt.timedelta(minutes=15)).isoformat(), "timeZone": "Europe/Berlin"}}
        g.expires_in = 61  # kept one second: the next call after that refreshes
        with anyio.fail_after(TEST_TIMEOUT_S):
            async with serve(ringfence_bin, ws, data, preset=None, env={"GOOGLE_CLIENT_SECRET": "s3cret"},
                             options=("--config", str(cfg), "--tools", "calendar")) as srv:
                start = at(1, 10)
                r = await srv.call("create_calendar_event", {
                    "title": "Team Sync", "startDateTime": start.isoformat(),
                    "endDateTime": (start + dt.timedelta(minutes=30)).isoformat(), "addMeetLink": True})
                assert not is_error(r), text_of(r)
                ev = structured(r)
                assert ev["meetLink"] == MEET and MEET in text_of(r) and ev["calendar"] == "Alice"
                [post] = [q for q in g.requests if q["method"] == "POST" and q["path"].endswith("/events")]
                assert post["query"]["conferenceDataVersion"] == "1"
                assert post["body"]["conferenceData"]["createRequest"]["conferenceSolutionKey"]["type"] == "hangoutsMeet"
                assert post["body"]["start"] == {"dateTime": start.isoformat(), "timeZone": "Europe/Berlin"}

                await anyio.sleep(1.2)
                listed = structured(await srv.call("list_calendar_events", {"days": 7}))["events"]
                assert [(e["title"], e["calendar"], e["recurring"]) for e in listed] == [
                    ("Team Sync", "Alice", False), ("Standup", "Team", True)], listed
                assert g.refreshes >= 2, "the expired access token was refreshed"

                # Only the given field is sent, with the ETag seen.
                r = await srv.call("update_calendar_event", {"eventId": ev["eventId"], "location": "Room 4"})
                assert not is_error(r), text_of(r)
                [patch] = [q for q in g.requests if q["method"] == "PATCH"]
                assert patch["body"] == {"location": "Room 4"} and patch["if_match"] == '"1"'
                # Someone else changes the occurrence in the web app: a conflict, theirs kept.
                g.events["series1_x"]["summary"] = "Standup (moved room)"
                g.events["series1_x"]["etag"] = '"6"'
                standup = listed[1]["eventId"]
                r = await srv.call("update_calendar_event", {"eventId": standup, "title": "Mine"})
                assert is_error(r) and structured(r)["error"] == "conflict", text_of(r)
                assert g.events["series1_x"]["summary"] == "Standup (moved room)"
                r = await srv.call("delete_calendar_event", {"eventId": standup})
                assert is_error(r) and structured(r)["error"] == "conflict", text_of(r)
                await srv.call("list_calendar_events", {"days": 7})
                r = await srv.call("delete_calendar_event", {"eventId": standup})
                assert not is_error(r) and "This occurrence" in text_of(r), text_of(r)
                assert "series1_x" not in g.events
                r = await srv.call("delete_calendar_event", {"eventId": ev["eventId"]})
                assert not is_error(r), text_of(r)
                assert not g.events

        # Access revoked in the Google account: the next server cannot refresh — not connected.
        g.revoked = True
        out = subprocess.run([str(_binary()), "--config", str(cfg), "--data-dir", str(data), "call",
                              "list_calendar_events", "{}"], capture_output=True, text=True, env=env_for(tmp))
        said = out.stdout + out.stderr
        assert out.returncode != 0 and "no longer accepts" in said and "connect google" in said, said


def test_a_wrong_verifier_gets_no_tokens(tmp_path):
    """The stand-in checks PKCE: an answer replayed without ringfence's verifier is refused."""
    with google() as (g, base):
        cfg = config(tmp_path, base)
        done = connect(tmp_path, cfg)
        assert done.returncode == 0
        # The code again, with a verifier that is not the one behind the challenge.
        req = urllib.request.Request(f"{base}/token", data=urllib.parse.urlencode({
            "grant_type": "authorization_code", "code": g.code, "redirect_uri": g.redirect,
            "client_id": "test-client", "client_secret": "s3cret", "code_verifier": "guess"}).encode())
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=10)
        assert e.value.code == 400
