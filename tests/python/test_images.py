"""End-to-end tests of seed 003's `generate_image` through the real binary, with the official
MCP Python SDK as the client and `[images] base_url` pointed at a fake OpenAI Images API
started in the test: the image comes back as image content and is saved in the workspace
under images/<date>/; the seed's errors (bad size, content policy, no key); the daily cap
surviving a restart; the API key never written anywhere.
"""

from __future__ import annotations

import base64
import datetime
import http.server
import json
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest

from test_memory import env_for, http_thread, stdio, write_config
from test_sdk_client import is_error, structured, text_of

pytestmark = pytest.mark.anyio

KEY = "sk-e2e-images-4f8d2a"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def tiny_png() -> bytes:
    """A valid 1x1 PNG."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    ihdr = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
            + chunk(b"IDAT", zlib.compress(b"\x00\xff\x80\x00")) + chunk(b"IEND", b""))


PNG = tiny_png()


class FakeImages(http.server.BaseHTTPRequestHandler):
    """The OpenAI Images API as documented: POST /v1/images/generations, b64_json back; a
    prompt containing "forbidden" gets the moderation refusal."""

    requests: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        FakeImages.requests.append(
            {"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
        if self.path != "/v1/images/generations":
            self.answer(404, {"error": {"message": "not found"}})
        elif "forbidden" in body["prompt"]:
            self.answer(400, {"error": {
                "message": "Your request was rejected as a result of our safety system.",
                "type": "image_generation_user_error", "param": None,
                "code": "moderation_blocked"}})
        else:
            self.answer(200, {"created": 1, "data": [
                {"b64_json": base64.b64encode(PNG).decode()}]})

    def answer(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_: Any) -> None:
        pass


def images_config(tmp: Path, url: str, extra: str = "") -> Path:
    return write_config(tmp, f'[images]\nbase_url = "{url}/v1"\n{extra}')


def files_mentioning(root: Path, needle: str) -> list[Path]:
    return [p for p in root.rglob("*")
            if p.is_file() and needle.encode() in p.read_bytes()]


async def test_an_image_is_returned_inline_and_saved_in_the_workspace(tmp_path: Path) -> None:
    FakeImages.requests = []
    with http_thread(FakeImages) as url:
        config = images_config(tmp_path, url)
        env = env_for(tmp_path, model=False, OPENAI_API_KEY=KEY)
        async with stdio(tmp_path, config=config, env=env) as srv:
            tools = {t.name: t for t in (await srv.session.list_tools()).tools}
            schema = tools["generate_image"].input_schema
            assert schema["required"] == ["description"]
            assert schema["properties"]["size"]["enum"] == [
                "1024x1024", "1536x1024", "1024x1536"]

            result = await srv.call("generate_image", {
                "description": "A cozy coffee shop with warm lighting", "size": "1536x1024"})
            assert not is_error(result), text_of(result)
            images = [c for c in result.content if c.type == "image"]
            assert len(images) == 1
            assert images[0].mime_type == "image/png"
            assert base64.b64decode(images[0].data) == PNG

            rel = structured(result)["path"]
            today = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
            assert rel.startswith(f"images/{today}/a-cozy-coffee-shop-with-warm-lighting-")
            assert rel.endswith(".png")
            assert rel in text_of(result)
            assert (srv.workspace / rel).read_bytes() == PNG

    (sent,) = FakeImages.requests
    assert sent["auth"] == f"Bearer {KEY}"
    assert sent["body"]["model"] == "gpt-image-1"
    assert sent["body"]["size"] == "1536x1024"
    assert sent["body"]["prompt"] == "A cozy coffee shop with warm lighting"
    # The key was sent to the API and written nowhere: not the audit trail, not the log.
    assert files_mentioning(tmp_path, KEY) == []


async def test_the_seed_errors(tmp_path: Path) -> None:
    FakeImages.requests = []
    with http_thread(FakeImages) as url:
        config = images_config(tmp_path, url)
        env = env_for(tmp_path, model=False, OPENAI_API_KEY=KEY)
        async with stdio(tmp_path, config=config, env=env) as srv:
            text = await srv.err("generate_image", {"description": "a cat", "size": "512x512"})
            assert "1024x1024, 1536x1024, 1024x1536" in text, text
            text = await srv.err("generate_image", {"description": "something forbidden"})
            assert "Content policy violation" in text, text
            assert not (srv.workspace / "images").exists()
    assert len(FakeImages.requests) == 1, "the bad size never reached the API"


async def test_without_a_key_the_error_says_how_to_set_it(tmp_path: Path) -> None:
    # The default base URL (the real OpenAI API) and no key: nothing is sent anywhere.
    env = env_for(tmp_path, model=False)
    async with stdio(tmp_path, env=env) as srv:
        text = await srv.err("generate_image", {"description": "a cat"})
        assert "OpenAI API key not configured" in text, text
        assert "OPENAI_API_KEY" in text, text


async def test_the_daily_cap_holds_across_a_restart(tmp_path: Path) -> None:
    FakeImages.requests = []
    with http_thread(FakeImages) as url:
        config = images_config(tmp_path, url, "daily_limit = 1\n")
        env = env_for(tmp_path, model=False, OPENAI_API_KEY=KEY)
        async with stdio(tmp_path, config=config, env=env) as srv:
            await srv.ok("generate_image", {"description": "one lighthouse"})
            text = await srv.err("generate_image", {"description": "another lighthouse"})
            assert "daily image limit reached" in text and "00:00 UTC" in text, text
        async with stdio(tmp_path, config=config, env=env) as srv:
            text = await srv.err("generate_image", {"description": "after a restart"})
            assert "daily image limit reached" in text, text
    assert len(FakeImages.requests) == 1
