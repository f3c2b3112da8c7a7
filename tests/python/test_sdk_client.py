"""End-to-end tests: the official MCP Python SDK client drives `ringfence serve`.

Each test spawns `ringfence --data-dir <tmp>/data serve <tmp>/ws` over stdio with
`mcp.client.stdio.stdio_client` and talks to it through `mcp.ClientSession`, exactly as
an MCP host would. The binary is `$RINGFENCE_BIN`, else `target/debug/ringfence` under the
repository root (build it first: `bash scripts/test.sh` does).

Async tests run on anyio's pytest plugin (shipped with anyio, which mcp depends on).
"""

from __future__ import annotations

import os
import re
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator

import anyio
import pytest

from store import store_env
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

REPO_ROOT = Path(__file__).resolve().parents[2]

TOOL_NAMES = {"read_file", "write_file", "edit_file", "grep", "glob"}
READ_ONLY_TOOLS = {"read_file", "grep", "glob"}
DESTRUCTIVE_TOOLS = {"write_file", "edit_file"}

# Generous: a debug build on a loaded 2-core CI machine. A hang fails instead of stalling CI.
CALL_TIMEOUT_S = 60.0
TEST_TIMEOUT_S = 120.0

SPILL_RE = re.compile(r"Full output saved to (/\S+?)\.(?:\s|$)")

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _binary() -> Path:
    raw = os.environ.get("RINGFENCE_BIN")
    path = Path(raw) if raw else Path("target/debug/ringfence")
    if not path.is_absolute():
        path = REPO_ROOT / path
    return path


@pytest.fixture(scope="session")
def ringfence_bin() -> Path:
    path = _binary()
    assert path.is_file() and os.access(path, os.X_OK), (
        f"ringfence binary not found at {path}; run `cargo build -p ringfence` "
        "or set RINGFENCE_BIN"
    )
    return path


# --- SDK version shims ----------------------------------------------------------------
# mcp 2.x exposes snake_case attributes (is_error, structured_content, input_schema, ...);
# mcp 1.x used the camelCase wire names. Read whichever the installed SDK has.


def _attr(obj: Any, snake: str, camel: str) -> Any:
    if hasattr(obj, snake):
        return getattr(obj, snake)
    return getattr(obj, camel)


def is_error(result: Any) -> bool:
    return bool(_attr(result, "is_error", "isError"))


def structured(result: Any) -> Any:
    return _attr(result, "structured_content", "structuredContent")


def text_of(result: Any) -> str:
    """The concatenated text blocks of a tool result (ringfence sends exactly one)."""
    texts = [c.text for c in result.content if getattr(c, "type", None) == "text"]
    assert texts, f"tool result has no text content: {result!r}"
    return "\n".join(texts)


def spill_path_of(text: str) -> str:
    m = SPILL_RE.search(text)
    assert m, f"no 'Full output saved to <path>' line in:\n{text[-600:]}"
    return m.group(1)


# --- Server harness -------------------------------------------------------------------


class Server:
    """A live ringfence server plus the directories it was started with."""

    def __init__(self, session: ClientSession, init: Any, workspace: Path, data_dir: Path):
        self.session = session
        self.init = init
        self.workspace = workspace
        self.data_dir = data_dir

    async def call(self, name: str, args: dict[str, Any], **kw: Any) -> Any:
        with anyio.fail_after(CALL_TIMEOUT_S):
            return await self.session.call_tool(name, args, **kw)

    async def ok(self, name: str, args: dict[str, Any], **kw: Any) -> str:
        """Calls a tool that must succeed; returns its text."""
        result = await self.call(name, args, **kw)
        assert not is_error(result), f"{name}({args}) failed: {text_of(result)}"
        return text_of(result)

    async def err(self, name: str, args: dict[str, Any]) -> str:
        """Calls a tool that must fail with an isError result; returns its text."""
        result = await self.call(name, args)
        assert is_error(result), f"{name}({args}) unexpectedly succeeded: {text_of(result)}"
        return text_of(result)


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    ws = tmp_path / "ws"
    ws.mkdir()
    data = tmp_path / "data"
    return ws, data


@asynccontextmanager
async def serve(
    bin_path: Path,
    workspace: Path,
    data_dir: Path,
    preset: str | None = "iris",
    extra_roots: tuple[str, ...] = (),
    options: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> AsyncIterator[Server]:
    """Serves `workspace` (plus `extra_roots`, each `PATH` or `PATH:ro`) with a tool preset:
    `iris` (seed 000's five tools, the default here), `llm-chat` (seed 002's thirteen) or
    `full`; `None` for none, when `options` choose the tools), with more global `options`
    (`--config FILE`, `--tools web`) and environment variables."""
    tmp = data_dir.parent
    params = StdioServerParameters(
        command=str(bin_path),
        args=[
            "--data-dir",
            str(data_dir),
            *(("--preset", preset) if preset else ()),
            *options,
            "serve",
            str(workspace),
            *extra_roots,
        ],
        # Keep a developer's own ringfence config out of the run.
        env={
            "XDG_CONFIG_HOME": str(tmp / "xdg-config"),
            "XDG_DATA_HOME": str(tmp / "xdg-data"),
            "RINGFENCE_LOG": "info",
            **store_env(),
            **(env or {}),
        },
        cwd=str(tmp),
    )
    log_path = tmp / "server.stderr.log"
    with open(log_path, "w", encoding="utf-8") as errlog:
        try:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    with anyio.fail_after(CALL_TIMEOUT_S):
                        init = await session.initialize()
                    yield Server(session, init, workspace, data_dir)
        finally:
            errlog.flush()
            # Shown by pytest only when the test fails.
            print(f"--- ringfence stderr ({log_path}) ---")
            print(log_path.read_text(encoding="utf-8", errors="replace")[-8000:])


# --- Tests ----------------------------------------------------------------------------


async def test_initialize_identity_and_instructions(ringfence_bin, dirs):
    ws, data = dirs
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with serve(ringfence_bin, ws, data) as srv:
            info = _attr(srv.init, "server_info", "serverInfo")
            assert info.name == "ringfence"
            assert info.version
            assert srv.init.instructions, "instructions should be non-empty"
            assert "read_file" in srv.init.instructions
            caps = srv.init.capabilities
            assert caps.tools is not None, "server must advertise the tools capability"
            # The session is usable after the handshake.
            with anyio.fail_after(CALL_TIMEOUT_S):
                await srv.session.send_ping()


async def test_tools_list_schemas_and_annotations(ringfence_bin, dirs):
    ws, data = dirs
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with serve(ringfence_bin, ws, data) as srv:
            with anyio.fail_after(CALL_TIMEOUT_S):
                listed = await srv.session.list_tools()
            tools = {t.name: t for t in listed.tools}
            assert set(tools) == TOOL_NAMES
            assert len(listed.tools) == len(TOOL_NAMES), "no duplicate tool names"
            required = {
                # `path` (seed 000) or `paths` (seed 002): neither is required by the schema;
                # the tool refuses a call with neither, or with both.
                "read_file": set(),
                "write_file": {"path", "content"},
                "edit_file": {"path", "old_string", "new_string"},
                "grep": {"pattern"},
                "glob": {"pattern"},
            }
            for name, tool in tools.items():
                assert tool.description, name
                schema = _attr(tool, "input_schema", "inputSchema")
                assert schema["type"] == "object", name
                assert set(schema.get("required", [])) == required[name], name
                assert required[name] <= set(schema["properties"]), name
                if name == "read_file":
                    assert {"path", "offset", "limit"} <= set(schema["properties"])
                ann = tool.annotations
                assert ann is not None, f"{name} has no annotations"
                read_only = _attr(ann, "read_only_hint", "readOnlyHint")
                destructive = _attr(ann, "destructive_hint", "destructiveHint")
                if name in READ_ONLY_TOOLS:
                    assert read_only is True, name
                    assert destructive is not True, name
                else:
                    assert name in DESTRUCTIVE_TOOLS
                    assert destructive is True, name
                    assert read_only is not True, name
                assert _attr(ann, "open_world_hint", "openWorldHint") is False, name
            modes = tools["grep"].input_schema["properties"]["output_mode"]["enum"]
            assert set(modes) == {"files_with_matches", "content", "count"}


async def test_seed_000_write_read_edit_read(ringfence_bin, dirs):
    ws, data = dirs
    content = "line one\nline two\nline three\n"
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with serve(ringfence_bin, ws, data) as srv:
            # write_file: a new file (and its directory) needs no prior read.
            text = await srv.ok("write_file", {"path": "notes/todo.md", "content": content})
            assert "notes/todo.md" in text
            assert str(len(content.encode())) in text, f"byte count missing: {text}"
            assert (ws / "notes" / "todo.md").read_text() == content

            # read_file: cat -n style, 1-based, 6-wide right-aligned number, then a tab.
            text = await srv.ok("read_file", {"path": "notes/todo.md"})
            assert text.startswith("     1\tline one\n     2\tline two\n     3\tline three")
            assert "Showing lines" not in text

            # edit_file: exact, unique replacement.
            text = await srv.ok(
                "edit_file",
                {"path": "notes/todo.md", "old_string": "line two", "new_string": "line 2"},
            )
            assert "notes/todo.md" in text
            assert "1 replacement" in text, text

            # read_file again shows the change.
            text = await srv.ok("read_file", {"path": "notes/todo.md"})
            assert text.startswith("     1\tline one\n     2\tline 2\n     3\tline three")
            assert (ws / "notes" / "todo.md").read_text() == "line one\nline 2\nline three\n"

            # The read registered by the last read_file allows a full overwrite.
            await srv.ok("write_file", {"path": "notes/todo.md", "content": "replaced\n"})
            assert (ws / "notes" / "todo.md").read_text() == "replaced\n"


async def test_overwrite_of_unread_file_is_refused(ringfence_bin, dirs):
    ws, data = dirs
    (ws / "existing.txt").write_text("original\n")
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with serve(ringfence_bin, ws, data) as srv:
            msg = await srv.err("write_file", {"path": "existing.txt", "content": "clobber\n"})
            assert "read_file" in msg, msg
            msg = await srv.err(
                "edit_file",
                {"path": "existing.txt", "old_string": "original", "new_string": "x"},
            )
            assert "read_file" in msg, msg
            assert (ws / "existing.txt").read_text() == "original\n"

            # After reading, the same write goes through.
            await srv.ok("read_file", {"path": "existing.txt"})
            await srv.ok("write_file", {"path": "existing.txt", "content": "clobber\n"})
            assert (ws / "existing.txt").read_text() == "clobber\n"


async def test_traversal_is_refused_and_server_keeps_answering(ringfence_bin, dirs):
    ws, data = dirs
    (ws / "inside.txt").write_text("still here\n")
    outside = ws.parent / "escape.txt"
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with serve(ringfence_bin, ws, data) as srv:
            msg = await srv.err("read_file", {"path": "../../etc/passwd"})
            assert "root:" not in msg, "contents of /etc/passwd leaked"
            await srv.err("read_file", {"path": "/etc/passwd"})
            await srv.err("write_file", {"path": "../escape.txt", "content": "x"})
            assert not outside.exists()
            await srv.err("grep", {"pattern": "root", "path": "../.."})
            await srv.err("glob", {"pattern": "*", "path": ".."})

            # The server keeps answering, in the same session.
            with anyio.fail_after(CALL_TIMEOUT_S):
                await srv.session.send_ping()
            text = await srv.ok("read_file", {"path": "inside.txt"})
            assert text.startswith("     1\tstill here")


async def test_grep_output_modes(ringfence_bin, dirs):
    ws, data = dirs
    (ws / "src").mkdir()
    (ws / "src" / "a.py").write_text("import os\nTODO: first\nprint(1)\nTODO: second\n")
    (ws / "src" / "b.py").write_text("nothing to see\n")
    (ws / "README.md").write_text("# readme\nTODO: docs\n")
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with serve(ringfence_bin, ws, data) as srv:
            # Default mode: files_with_matches.
            text = await srv.ok("grep", {"pattern": "TODO"})
            assert text.splitlines() == ["README.md", "src/a.py"]
            text = await srv.ok("grep", {"pattern": "TODO", "output_mode": "files_with_matches"})
            assert text.splitlines() == ["README.md", "src/a.py"]

            text = await srv.ok("grep", {"pattern": "TODO", "output_mode": "content"})
            assert text.splitlines() == [
                "README.md:2: TODO: docs",
                "src/a.py:2: TODO: first",
                "src/a.py:4: TODO: second",
            ]

            text = await srv.ok("grep", {"pattern": "TODO", "output_mode": "count"})
            assert text.splitlines() == ["README.md:1", "src/a.py:2"]

            # Scoping by path and glob.
            text = await srv.ok("grep", {"pattern": "TODO", "path": "src", "output_mode": "content"})
            assert all(line.startswith("src/a.py:") for line in text.splitlines())
            text = await srv.ok("grep", {"pattern": "TODO", "glob": "*.md"})
            assert text.splitlines() == ["README.md"]

            # No match is a successful call with a human-readable message.
            text = await srv.ok("grep", {"pattern": "NO_SUCH_TOKEN_42"})
            assert "No matches" in text

            # A bad regex is a tool error the model can act on, not a protocol error.
            msg = await srv.err("grep", {"pattern": "(unclosed"})
            assert "regular expression" in msg


async def test_glob_is_sorted(ringfence_bin, dirs):
    ws, data = dirs
    # Created out of order, in several directories.
    for rel in ["zeta.md", "b/notes.md", "alpha.md", "a/z.md", "a/b/c.md", "B.md", "img.png"]:
        p = ws / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(rel + "\n")
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with serve(ringfence_bin, ws, data) as srv:
            text = await srv.ok("glob", {"pattern": "**/*.md"})
            paths = text.splitlines()
            assert paths == sorted(paths)
            assert set(paths) == {"zeta.md", "b/notes.md", "alpha.md", "a/z.md", "a/b/c.md", "B.md"}

            text = await srv.ok("glob", {"pattern": "*.md"})
            assert text.splitlines() == sorted(["zeta.md", "alpha.md", "B.md"])

            # Scoped to a subdirectory: still workspace-relative paths, still sorted.
            text = await srv.ok("glob", {"pattern": "**/*.md", "path": "a"})
            assert text.splitlines() == ["a/b/c.md", "a/z.md"]

            # No match is a successful call that says so.
            text = await srv.ok("glob", {"pattern": "**/*.nothing"})
            assert "No files match" in text


async def test_grep_over_cap_spills_and_spill_is_readable(ringfence_bin, dirs):
    ws, data = dirs
    total = 150
    (ws / "many.txt").write_text("".join(f"needle {i}\n" for i in range(1, total + 1)))
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with serve(ringfence_bin, ws, data) as srv:
            result = await srv.call("grep", {"pattern": "needle", "output_mode": "content"})
            assert not is_error(result), text_of(result)
            text = text_of(result)
            assert f"Showing 100 of {total} matches" in text, text[-600:]
            shown = [line for line in text.splitlines() if line.startswith("many.txt:")]
            assert len(shown) == 100
            assert shown[0] == "many.txt:1: needle 1"
            assert shown[-1] == "many.txt:100: needle 100"

            spill = spill_path_of(text)
            assert os.path.isabs(spill)
            # One spill directory per configuration and user, under <data dir>/tool-output.
            assert Path(spill).parent.parent.parent == data / "tool-output", spill
            assert Path(spill).parent.name == "local", spill
            assert Path(spill).is_file()
            # Matches travel as text only: a client preferring structuredContent must not
            # get a result without the matches.
            assert structured(result) is None

            # The full output is readable through read_file by absolute path, with offset/limit.
            text = await srv.ok("read_file", {"path": spill, "offset": 101, "limit": 10})
            lines = [line for line in text.splitlines() if "\t" in line]
            assert lines == [f"{n:>6}\tmany.txt:{n}: needle {n}" for n in range(101, 111)], text
            text = await srv.ok("read_file", {"path": spill, "offset": total})
            assert text.startswith(f"{total:>6}\tmany.txt:{total}: needle {total}")

            # ...but the spill directory is read-only to the tools.
            await srv.err("write_file", {"path": spill, "content": "overwritten\n"})
            assert "needle 1\n" in Path(spill).read_text()


async def test_read_file_over_cap_spills(ringfence_bin, dirs):
    ws, data = dirs
    (ws / "long.txt").write_text("".join(f"row {i}\n" for i in range(1, 3001)))
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with serve(ringfence_bin, ws, data) as srv:
            text = await srv.ok("read_file", {"path": "long.txt"})
            assert "Showing lines 1-500 of 3,000" in text, text[-600:]
            assert "   500\trow 500" in text
            assert "   501\trow 501" not in text
            spill = spill_path_of(text)
            # One spill directory per configuration and user, under <data dir>/tool-output.
            assert Path(spill).parent.parent.parent == data / "tool-output", spill
            assert Path(spill).parent.name == "local", spill
            # The saved output is plain text (no line-number prefixes), paged with offset/limit.
            text = await srv.ok("read_file", {"path": spill, "offset": 501, "limit": 2})
            assert text.startswith("   501\trow 501\n   502\trow 502")
            text = await srv.ok("read_file", {"path": "long.txt", "offset": 1500, "limit": 1})
            assert text.startswith("  1500\trow 1500")


async def test_read_file_spill_holds_the_whole_file(ringfence_bin, dirs):
    ws, data = dirs
    (ws / "long.txt").write_text("".join(f"row {i}\n" for i in range(1, 3001)))
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with serve(ringfence_bin, ws, data) as srv:
            text = await srv.ok("read_file", {"path": "long.txt"})
            assert "Showing lines 1-500 of 3,000" in text, text[-600:]
            spill = spill_path_of(text)
            text = await srv.ok("read_file", {"path": spill, "offset": 2999, "limit": 2})
            assert text.startswith("  2999\trow 2999\n  3000\trow 3000")


async def test_unknown_tool_is_protocol_error_and_session_survives(ringfence_bin, dirs):
    ws, data = dirs
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with serve(ringfence_bin, ws, data) as srv:
            with pytest.raises(Exception) as info:
                result = await srv.call("no_such_tool", {})
                # Some SDK versions surface it as an isError result instead of raising.
                if is_error(result):
                    raise RuntimeError(text_of(result))
            assert "no_such_tool" in str(info.value)
            # Invalid arguments are a tool error, not a protocol error.
            msg = await srv.err("read_file", {})
            assert "path" in msg
            await srv.ok("glob", {"pattern": "*"})


def _make_tree(root: Path, dirs: int, files_per_dir: int) -> None:
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda".split()
    block = "".join(
        " ".join(words[(i * 7 + j * 3) % len(words)] for j in range(12)) + "\n" for i in range(300)
    )
    for d in range(dirs):
        sub = root / f"d{d:02}"
        sub.mkdir(parents=True)
        for i in range(files_per_dir):
            (sub / f"f{i:03}.txt").write_text(block + (f"MARKER {d} {i}\n" if i % 50 == 0 else ""))


async def test_grep_with_progress_callback(ringfence_bin, dirs):
    ws, data = dirs
    n_dirs, per_dir = 25, 100  # 2,500 files, ~50 MB: a search of a few hundred ms.
    _make_tree(ws / "big", n_dirs, per_dir)
    events: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        events.append((progress, total, message))

    with anyio.fail_after(TEST_TIMEOUT_S):
        async with serve(ringfence_bin, ws, data) as srv:
            # A pattern without a literal prefix keeps the search busy long enough that
            # progress (sent at most every 250 ms) usually arrives; it is not required to.
            result = await srv.call(
                "grep",
                {
                    "pattern": r"(?:alpha|beta)\s+\w{5}\s+\d|MARKER \d+ \d+",
                    "path": "big",
                    "output_mode": "count",
                    "case_insensitive": True,
                },
                progress_callback=on_progress,
            )
            assert not is_error(result), text_of(result)
            lines = text_of(result).splitlines()
            expected = n_dirs * len(range(0, per_dir, 50))
            assert len(lines) == expected, lines
            assert all(re.fullmatch(r"big/d\d\d/f\d{3}\.txt:1", line) for line in lines)

    progress = [p for p, _, _ in events]
    assert progress == sorted(progress) and len(set(progress)) == len(progress), events
    for p, total, _ in events:
        assert p > 0
        if total is not None:
            assert p <= total
    print(f"progress notifications received: {len(events)} {events}")


# --- Seed 002 (preset llm-chat) ------------------------------------------------------------

LLM_CHAT_TOOLS = {
    "search_entries": set(),
    "list_directory": {"path"},
    "read_file": set(),
    "write_file": {"path", "content"},
    "replace_file_lines": {"path", "content", "start_line"},
    "insert_file_content": {"path", "content"},
    "replace_file_content": {"path", "old_content", "new_content"},
    "entry_info": {"path"},
    "delete_file": {"path"},
    "create_folder": {"path"},
    "move_file": {"source", "destination"},
    "file_access_info": set(),
    "switch_workspace": {"path"},
}


async def test_llm_chat_preset_lists_exactly_seed_002_tools(ringfence_bin, dirs):
    ws, data = dirs
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with serve(ringfence_bin, ws, data, preset="llm-chat") as srv:
            with anyio.fail_after(CALL_TIMEOUT_S):
                listed = await srv.session.list_tools()
            tools = {t.name: t for t in listed.tools}
            assert set(tools) == set(LLM_CHAT_TOOLS)
            for name, required in LLM_CHAT_TOOLS.items():
                schema = _attr(tools[name], "input_schema", "inputSchema")
                assert schema["type"] == "object", name
                assert set(schema.get("required", [])) == required, name
            # read_file takes both seeds' forms.
            props = _attr(tools["read_file"], "input_schema", "inputSchema")["properties"]
            assert {"path", "offset", "limit", "paths", "start_line", "end_line", "max_chars"} <= set(props)


async def test_seed_002_documented_flow(ringfence_bin, dirs):
    ws, data = dirs
    (ws / "exists.txt").write_text("".join(f"line {i}\n" for i in range(1, 6)))
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with serve(ringfence_bin, ws, data, preset="llm-chat") as srv:
            # Batch read with a partial failure: one result per file, each with its status.
            result = await srv.call("read_file", {"paths": ["exists.txt", "missing.txt"]})
            assert not is_error(result)
            blocks = [c.text for c in result.content if getattr(c, "type", None) == "text"]
            assert blocks[0].startswith(f"--- {ws}/exists.txt (lines 1-5 of 5) ---\n")
            assert blocks[1] == (
                f"File not found: ENOENT: no such file or directory, stat '{ws}/missing.txt'"
            )
            statuses = [r["status"] for r in structured(result)["results"]]
            assert statuses == ["success", "error"]

            text = await srv.ok("write_file", {"path": "notes.txt", "content": "Hello, world!"})
            assert text.startswith(f"Written: {ws}/notes.txt")
            text = await srv.ok(
                "replace_file_lines",
                {"path": "exists.txt", "content": "const x = 42;", "start_line": 2, "end_line": 3},
            )
            assert text == f"Replaced lines 2-3 in {ws}/exists.txt"
            text = await srv.ok(
                "insert_file_content",
                {"path": "exists.txt", "content": "import x;", "line": 1},
            )
            assert text == f"Inserted content at line 1 in {ws}/exists.txt"
            text = await srv.ok(
                "replace_file_content",
                {"path": "exists.txt", "old_content": "line", "new_content": "row"},
            )
            assert text == f"Replaced content in {ws}/exists.txt"
            assert (ws / "exists.txt").read_text() == "import x;\nrow 1\nconst x = 42;\nline 4\nline 5\n"

            text = await srv.ok("create_folder", {"path": "src/components"})
            assert text == f"Created directory: {ws}/src/components/"
            text = await srv.ok("move_file", {"source": "notes.txt", "destination": "src/notes.txt"})
            assert text == f"Moved: {ws}/notes.txt -> {ws}/src/notes.txt"
            text = await srv.ok("list_directory", {"path": "."})
            assert text == "exists.txt\nsrc/"
            text = await srv.ok("search_entries", {"name_pattern": "\\.txt$"})
            assert text == "exists.txt\nsrc/notes.txt"
            text = await srv.ok("entry_info", {"path": "src/notes.txt"})
            assert text.splitlines()[:3] == [f"Path: {ws}/src/notes.txt", "Type: file", "Size: 13 bytes"]
            text = await srv.ok("delete_file", {"path": "src", "recursive": True})
            assert text == f"Deleted directory: {ws}/src"


async def test_seed_002_several_directories(ringfence_bin, dirs, tmp_path):
    ws, data = dirs
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "app.log").write_text("started\n")
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with serve(ringfence_bin, ws, data, preset="llm-chat", extra_roots=(f"{logs}:ro",)) as srv:
            text = await srv.ok("file_access_info", {})
            assert text == (
                "Configured file system access:\n"
                f"  {str(ws):<56} write  (current workspace)\n"
                f"  {str(logs):<56} read"
            )
            text = await srv.ok("switch_workspace", {"path": str(logs)})
            assert text == f"Switched workspace to: {logs}"
            text = await srv.ok("read_file", {"paths": ["app.log"]})
            assert "started" in text
            msg = await srv.err("write_file", {"path": "new.log", "content": "x"})
            assert "read-only" in msg, msg
            assert not (logs / "new.log").exists()
