"""The three seed documents' contracts, to the letter, through the official MCP SDK over
stdio: every tool's schema against the seeds' parameter tables (seed_facts.json, checked
against the documents themselves when they are at hand), the result and error strings the
seeds quote, and the calls of issue 30's list in the seeds' own words.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

import seeds
from test_sdk_client import (  # noqa: F401 (fixtures)
    Server, _attr, dirs, is_error, ringfence_bin, serve, structured, text_of,
)

pytestmark = pytest.mark.anyio

FACTS = json.loads((Path(__file__).parent / "seed_facts.json").read_text())

# JSON Schema types a seed's type may be declared as.
TYPES = {"string": {"string"}, "number": {"number", "integer"}, "integer": {"integer"},
         "boolean": {"boolean"}, "array": {"array"}, "string[]": {"array"}}

# read_file answers both seeds' forms (seed 000's `path`, seed 002's `paths`): neither can be
# `required` alone, and a top-level anyOf is refused by Anthropic's API (every Claude client
# would lose all tools), so the description says one of the two is required.
EITHER_FORM = {("000", "read_file", "path"), ("002", "read_file", "paths")}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def every_tool_config(tmp: Path) -> Path:
    """Shell and delegation on (the sampling model needs no key), so every tool is listed."""
    config = tmp / "every-tool.toml"
    config.write_text('[shell]\nenabled = true\n[delegate]\nenabled = true\n'
                      '[llm]\nprovider = "sampling"\n')
    return config


def model_env() -> dict[str, str]:
    model = os.environ.get("RINGFENCE_TEST_MODEL_DIR", "")
    return {"RINGFENCE_MODEL_DIR": model} if model else {}


async def schemas(srv: Server) -> dict[str, dict[str, Any]]:
    listed = await srv.session.list_tools()
    return {t.name: {"inputSchema": _attr(t, "input_schema", "inputSchema"),
                     "description": t.description or ""} for t in listed.tools}


async def test_every_schema_states_what_the_seeds_state(ringfence_bin, dirs):
    ws, data = dirs
    config = every_tool_config(ws.parent)
    async with serve(ringfence_bin, ws, data, preset=None,
                     options=("--config", str(config)), env=model_env()) as srv:
        tools = await schemas(srv)
    problems = []
    for seed, by_tool in FACTS.items():
        for tool, params in by_tool.items():
            assert tool in tools, f"seed {seed}'s {tool} is not listed"
            schema = tools[tool]["inputSchema"]
            assert "anyOf" not in schema and "oneOf" not in schema and "allOf" not in schema, (
                f"{tool}: a top-level combinator makes Anthropic's API refuse every tool")
            props, required = schema.get("properties", {}), schema.get("required", [])
            for name, fact in params.items():
                where = f"seed {seed} {tool}.{name}"
                if name not in props:
                    problems.append(f"{where}: not in the schema")
                    continue
                prop = props[name]
                declared = prop.get("type")
                declared = set(declared) if isinstance(declared, list) else {declared}
                want = {"integer"} if fact.get("integer") else TYPES[fact["type"]]
                if not declared & want:
                    problems.append(f"{where}: type {declared}, the seed says {fact['type']}")
                if "null" in declared or None in prop.get("enum", []):
                    problems.append(f"{where}: null among the values")
                if fact["required"] and name not in required:
                    if (seed, tool, name) in EITHER_FORM:
                        if "one of the two is required" not in tools[tool]["description"]:
                            problems.append(f"{where}: the description does not say which form is required")
                    else:
                        problems.append(f"{where}: required by the seed, not in `required`")
                if not fact["required"] and name in required:
                    problems.append(f"{where}: optional in the seed, required in the schema")
                for bound in ("minimum", "maximum"):
                    if bound in fact and prop.get(bound) != fact[bound]:
                        problems.append(f"{where}: {bound} {prop.get(bound)}, the seed says {fact[bound]}")
                if "enum" in fact and prop.get("enum") != fact["enum"]:
                    problems.append(f"{where}: enum {prop.get('enum')}, the seed says {fact['enum']}")
                if "open" in fact:
                    if "enum" in prop:
                        problems.append(f"{where}: the seed's set is open (\"etc.\"), the schema closes it")
                    missing = [v for v in fact["open"] if v not in prop.get("description", "")]
                    if missing:
                        problems.append(f"{where}: the description does not suggest {missing}")
    assert not problems, "\n".join(problems)


def test_seed_facts_are_what_the_seed_documents_say():
    """seed_facts.json, which the schema test uses everywhere, against the documents: the
    same tools and parameters, types and requiredness; every range and value it adds is
    written in the parameter's description in the seed."""
    if seeds.seeds_dir() is None:
        pytest.skip("the seed documents are not beside the project (../shared/seeds)")
    for seed, by_tool in FACTS.items():
        tables = seeds.parameter_tables(seed)
        assert set(tables) == set(by_tool), (seed, set(tables) ^ set(by_tool))
        for tool, params in by_tool.items():
            assert set(tables[tool]) == set(params), (seed, tool)
            for name, fact in params.items():
                said = tables[tool][name]
                assert (said["type"], said["required"]) == (fact["type"], fact["required"]), (
                    seed, tool, name, said)
                text = str(said["description"])
                for value in fact.get("enum", []) + fact.get("open", []):
                    assert value in text, (seed, tool, name, value, text)
                if "says" in fact:
                    assert fact["says"] in text, (seed, tool, name, fact["says"], text)
                if "open" in fact:
                    assert "etc." in text, (seed, tool, name, text)


# --- The strings the seeds quote -------------------------------------------------------

# (seed 002's example string with /my/project for the root, the call, how it must match, the
# files to write first — None removes one). "exact": the whole text; "first line": the text's
# first line (ringfence adds lines after it, see "Contract notes" in docs/contracts.md);
# "starts": the text begins with it; "second result": the batch's second result's first line.
ROOT = "/my/project"


def lines(n: int, at: dict[int, str] | None = None) -> str:
    return "".join((at or {}).get(i, f"const v{i} = {i};") + "\n" for i in range(1, n + 1))


QUOTED_CALLS: list[tuple[str, str, dict[str, Any], str, dict[str, str | None]]] = [
    ("--- /my/project/src/index.ts (lines 1-42 of 42) ---\\n...content...",
     "read_file", {"paths": ["src/index.ts"]}, "first line", {"src/index.ts": lines(42)}),
    ("--- /my/project/src/main.ts (lines 1-10 of 10) ---\\n...content...",
     "read_file", {"paths": ["src/main.ts", "src/utils.ts"]}, "first line",
     {"src/main.ts": lines(10), "src/utils.ts": lines(8)}),
    ("--- /my/project/src/utils.ts (lines 1-8 of 8) ---\\n...content...",
     "read_file", {"paths": ["src/main.ts", "src/utils.ts"]}, "second result", {}),
    ("--- /my/project/exists.txt (lines 1-5 of 5) ---\\n...content...",
     "read_file", {"paths": ["exists.txt", "missing.txt"]}, "first line",
     {"exists.txt": lines(5)}),
    ("File not found: ENOENT: no such file or directory, stat '/my/project/missing.txt'",
     "read_file", {"paths": ["exists.txt", "missing.txt"]}, "second result", {}),
    ("Written: /my/project/notes.txt", "write_file",
     {"path": "notes.txt", "content": "Hello, world!"}, "starts", {}),
    ("Replaced lines 10-12 in /my/project/src/main.ts", "replace_file_lines",
     {"path": "src/main.ts", "content": "const x = 42;", "start_line": 10, "end_line": 12},
     "exact", {"src/main.ts": lines(20)}),
    ("Inserted content at line 1 in /my/project/src/main.ts", "insert_file_content",
     {"path": "src/main.ts", "content": 'import { foo } from "./bar";', "line": 1}, "exact", {}),
    ("Replaced content in /my/project/src/main.ts", "replace_file_content",
     {"path": "src/main.ts", "old_content": "foo", "new_content": "bar"}, "exact",
     {"src/main.ts": "foo foo\nfoo\n"}),
    ("Replaced content in /my/project/src/main.ts", "replace_file_content",
     {"path": "src/main.ts", "old_content": "foo", "new_content": "bar", "replace_all": True},
     "first line", {"src/main.ts": "foo foo\nfoo\n"}),
    ("src/main.ts:10:   // TODO: implement this\\nsrc/utils.ts:42:   // TODO: add error handling",
     "search_entries", {"name_pattern": "\\.ts$", "content_pattern": "TODO"}, "exact",
     {"src/index.ts": None, "src/main.ts": lines(10, {10: "  // TODO: implement this"}),
      "src/utils.ts": lines(42, {42: "  // TODO: add error handling"})}),
    ("src/main.ts\\nsrc/utils.ts", "search_entries", {"name_pattern": "\\.ts$"}, "exact", {}),
    ("src/main.ts:10:   // FIXME: this is broken", "search_entries",
     {"content_pattern": "FIXME"}, "exact",
     {"src/main.ts": lines(10, {10: "  // FIXME: this is broken"})}),
    ("file1.txt\\nfile2.txt\\nsubdir/", "list_directory", {"path": "listing"}, "exact",
     {"listing/file1.txt": "x\n", "listing/file2.txt": "x\n", "listing/subdir/.keep": None}),
    ("Created directory: /my/project/src/components/", "create_folder",
     {"path": "src/components"}, "exact", {}),
    ("Deleted file: /my/project/old-file.txt", "delete_file", {"path": "old-file.txt"}, "exact",
     {"old-file.txt": "old\n"}),
    ("Deleted directory: /my/project/old-dir", "delete_file",
     {"path": "old-dir", "recursive": True}, "exact", {"old-dir/inner/f.txt": "f\n"}),
    ("Moved: /my/project/old-name.txt -> /my/project/new-name.txt", "move_file",
     {"source": "old-name.txt", "destination": "new-name.txt"}, "exact",
     {"old-name.txt": "name\n"}),
    ("Switched workspace to: /another/project", "switch_workspace",
     {"path": "/another/project"}, "exact", {}),
]

# Quoted strings ringfence deliberately does not return as they stand, and why
# (docs/contracts.md, "Contract notes").
DIFFERENCES = {
    "success": "a status word of seed 002's result shape, carried by MCP's isError",
    "error": "a status word of seed 002's result shape, carried by MCP's isError",
    "src/main.ts  (created: 2025-01-15T10:00:00.000Z, modified: 2025-03-20T14:30:00.000Z)":
        "timestamps of files made in a test cannot be the seed's: test_timestamp_form checks the form",
    "readme.txt\\ndocs/\\nsrc/\\nsrc/main.ts\\n...":
        "a listing of the seed's own tree: test_listing_everything checks the form",
}


def project(tmp: Path) -> tuple[Path, Path]:
    """An empty stand-in for seed 002's /my/project, and the /another/project it switches to."""
    root = tmp / "my" / "project"
    (root / "src").mkdir(parents=True)
    (root / "src" / "index.ts").write_text(lines(42))
    other = tmp / "another" / "project"
    other.mkdir(parents=True)
    return root, other


def place(root: Path, files: dict[str, str | None]) -> None:
    for rel, content in files.items():
        path = root / rel
        if content is None:
            if path.name == ".keep":
                path.parent.mkdir(parents=True, exist_ok=True)
            else:
                path.unlink(missing_ok=True)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)


def expect(template: str, root: Path, other: Path) -> str:
    return (template.replace("\\n", "\n").replace("/another/project", str(other))
            .replace(ROOT, str(root)))


def texts(result: Any) -> list[str]:
    return [c.text for c in result.content if getattr(c, "type", "") == "text"]


def matches(how: str, want: str, result: Any) -> bool:
    if how == "second result":
        got = texts(result)
        return len(got) > 1 and got[1].split("\n")[0] == want.split("\n")[0]
    text = text_of(result)
    if how == "exact":
        return text == want
    if how == "starts":
        return text.startswith(want)
    return text.split("\n")[0] == want.split("\n")[0]


async def test_the_strings_seed_002_quotes(ringfence_bin, tmp_path):
    root, other = project(tmp_path)
    failures = []
    async with serve(ringfence_bin, root, tmp_path / "data", preset="llm-chat",
                     extra_roots=(str(other),),
                     env={"LLM_CHAT_FS_REQUIRE_READ_BEFORE_WRITE": "false"}) as srv:
        for template, tool, args, how, files in QUOTED_CALLS:
            place(root, files)
            if tool == "switch_workspace":
                args = {"path": str(other)}
            result = await srv.call(tool, args)
            want = expect(template, root, other)
            if not matches(how, want, result):
                failures.append(f"{tool}({args}) [{how}]\n  want: {want!r}\n  got:  {texts(result)!r}")
    assert not failures, "\n".join(failures)


async def test_every_string_the_seeds_quote_is_covered():
    if seeds.seeds_dir() is None:
        pytest.skip("the seed documents are not beside the project (../shared/seeds)")
    covered = {t for t, _, _, _, _ in QUOTED_CALLS} | set(DIFFERENCES)
    missing = [s for s in seeds.quoted_strings("002") if s not in covered]
    assert not missing, f"quoted by seed 002 but neither tested nor listed as a difference: {missing}"
    # Seed 003's error strings: each is in the tool's own words (the tests named here).
    for said in seeds.quoted_strings("003"):
        assert said in SEED_003_ERRORS, f"seed 003 quotes {said!r}; add where it is tested"


# Seed 003's quoted errors, and the test that calls for each.
SEED_003_ERRORS = {
    "Google Calendar is not connected": "test_calendar_google.py, test_calendar.py",
    "No events found": "test_seed_003_errors_in_their_words (here)",
    "not found": "test_seed_003_errors_in_their_words (here)",
    "already completed": "test_followups.py (delivered follow-ups)",
    "OpenAI API key not configured": "test_images.py",
}


async def test_timestamp_form(ringfence_bin, tmp_path):
    root, _ = project(tmp_path)
    async with serve(ringfence_bin, root, tmp_path / "data", preset="llm-chat") as srv:
        text = await srv.ok("search_entries", {"modified_after": "2025-01-01T00:00:00.000Z",
                                               "name_pattern": "index"})
    assert re.fullmatch(r"src/index\.ts  \(created: \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z, "
                        r"modified: \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\)", text), text


async def test_listing_everything(ringfence_bin, tmp_path):
    root, _ = project(tmp_path)
    place(root, {"readme.txt": "r\n", "docs/a.md": "a\n", "src/main.ts": lines(3)})
    async with serve(ringfence_bin, root, tmp_path / "data", preset="llm-chat") as srv:
        text = await srv.ok("search_entries", {})
    listed = text.split("\n")
    assert {"readme.txt", "docs/", "src/", "src/main.ts", "docs/a.md"} <= set(listed), text
    assert all(not line.startswith("/") for line in listed), text


async def test_seed_003_errors_in_their_words(ringfence_bin, dirs):
    ws, data = dirs
    async with serve(ringfence_bin, ws, data, preset=None, env=model_env()) as srv:
        r = await srv.call("list_calendar_events", {"days": 7})
        assert not is_error(r) and "No events found" in text_of(r), text_of(r)
        r = await srv.call("update_followup", {"followup_id": 12, "minutes_from_now": 120})
        assert is_error(r) and "not found" in text_of(r), text_of(r)


# --- Issue 30's list, each in the seeds' words ------------------------------------------


async def test_a_memory_category_is_an_open_set(ringfence_bin, dirs):
    ws, data = dirs
    if not model_env():
        pytest.skip("RINGFENCE_TEST_MODEL_DIR is not set (scripts/test.sh sets it)")
    async with serve(ringfence_bin, ws, data, preset=None, env=model_env()) as srv:
        # Seed 003: "personal, professional, hobbies, health, etc."
        await srv.ok("store_memory", {"memoryContent": "User loves Thai green curry",
                                      "memoryType": "preference", "category": "food"})
        r = await srv.call("store_memory", {"memoryContent": "User is allergic to shellfish",
                                            "memoryType": "fact", "category": "  Food  Allergies "})
        assert not is_error(r), text_of(r)
        assert structured(r)["category"] == "food allergies", structured(r)
        r = await srv.call("search_memory", {"searchQuery": "dietary restrictions food allergies",
                                             "category": "Food Allergies", "limit": 5})
        assert not is_error(r) and "shellfish" in text_of(r) and "curry" not in text_of(r), text_of(r)
        text = await srv.err("store_memory", {"memoryContent": "x", "category": "c" * 41})
        assert "category" in text and "40 characters" in text, text
        # Truths keep the seed's closed list.
        text = await srv.err("store_truth", {"truthContent": "TJ likes food", "category": "food"})
        assert "category" in text and "personal" in text, text


async def test_errors_name_the_parameter_as_the_tool_spells_it(ringfence_bin, tmp_path):
    root, _ = project(tmp_path)
    (root / "notes.txt").write_text("alpha\n")
    async with serve(ringfence_bin, root, tmp_path / "data", preset="full") as srv:
        await srv.ok("read_file", {"paths": ["notes.txt"]})
        text = await srv.err("replace_file_content", {"path": "notes.txt", "old_content": "omega",
                                                      "new_content": "beta"})
        assert "old_content was not found" in text and "old_string" not in text, text
        await srv.ok("read_file", {"path": "notes.txt"})
        text = await srv.err("edit_file", {"path": "notes.txt", "old_string": "omega",
                                           "new_string": "beta"})
        assert "old_string was not found" in text and "old_content" not in text, text


async def test_a_tool_turned_off_says_how_to_turn_it_on(ringfence_bin, dirs):
    ws, data = dirs
    async with serve(ringfence_bin, ws, data, preset=None) as srv:
        r = await srv.call("run_shell_command", {"command": "git log --oneline -10"})
        assert is_error(r) and structured(r)["error"] == "disabled", text_of(r)
        text = text_of(r)
        assert "turned off" in text and "[shell] enabled = true" in text
        assert "RINGFENCE_SHELL_ENABLED=true" in text and "unknown tool" not in text, text
        r = await srv.call("delegate_task", {"description": "Create Laravel project"})
        assert is_error(r) and "[delegate] enabled = true" in text_of(r), text_of(r)
    async with serve(ringfence_bin, ws, data, preset="iris") as srv:
        r = await srv.call("search_entries", {"content_pattern": "FIXME"})
        assert is_error(r) and 'tools.add = ["search_entries"]' in text_of(r), text_of(r)
        # A tool ringfence has never heard of is still a protocol error.
        from mcp.shared.exceptions import MCPError
        with pytest.raises(MCPError):
            await srv.session.call_tool("teleport", {})


async def test_the_iris_switches(ringfence_bin, tmp_path):
    ws, data = tmp_path / "ws", tmp_path / "data"
    ws.mkdir()
    # IRIS_FILESYSTEM_ENABLED=false turns the file tools off.
    async with serve(ringfence_bin, ws, data, preset=None,
                     env={"IRIS_FILESYSTEM_ENABLED": "false", **model_env()}) as srv:
        names = set(await schemas(srv))
        assert "read_file" not in names and "store_truth" in names, names
        r = await srv.call("read_file", {"path": "notes/todo.md"})
        assert is_error(r) and "IRIS_FILESYSTEM_ENABLED" in text_of(r), text_of(r)
    # IRIS_WORKSPACE_ROOT: a root that does not exist is an error on every call, never made.
    missing = tmp_path / "var" / "data" / "iris" / "workspace"
    params = ("--data-dir", str(data), "serve")
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from test_sdk_client import _binary

    async def run(env: dict[str, str]):
        p = StdioServerParameters(command=str(_binary()), args=list(params), env={
            "PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path),
            "XDG_CONFIG_HOME": str(tmp_path / "xdg"), **env})
        return stdio_client(p)

    async with await run({"IRIS_WORKSPACE_ROOT": str(missing)}) as (read, write):
        async with ClientSession(read, write) as s:
            await s.initialize()
            for _ in range(2):
                r = await s.call_tool("write_file", {"path": "notes/todo.md", "content": "- milk\n"})
                assert is_error(r) and structured(r)["error"] == "root_missing", r
    assert not missing.exists()
    missing.mkdir(parents=True)
    async with await run({"IRIS_WORKSPACE_ROOT": str(missing)}) as (read, write):
        async with ClientSession(read, write) as s:
            await s.initialize()
            r = await s.call_tool("write_file", {"path": "notes/todo.md", "content": "- milk\n"})
            assert not is_error(r), r
    assert (missing / "notes" / "todo.md").read_text() == "- milk\n"
    # IRIS_SHELL_ENABLED and IRIS_SUBAGENT_ENABLED (with a model) offer the two tools.
    config = tmp_path / "llm.toml"
    config.write_text('[llm]\nprovider = "sampling"\n')
    async with serve(ringfence_bin, ws, data, preset=None, options=("--config", str(config)),
                     env={"IRIS_SHELL_ENABLED": "true", "IRIS_SUBAGENT_ENABLED": "true",
                          **model_env()}) as srv:
        names = set(await schemas(srv))
        assert {"run_shell_command", "delegate_task"} <= names, names


async def test_a_meet_link_on_the_local_calendar_says_how_to_connect_google(ringfence_bin, dirs):
    ws, data = dirs
    async with serve(ringfence_bin, ws, data, preset=None) as srv:
        text = await srv.err("create_calendar_event", {
            "title": "Team Sync", "startDateTime": "2026-01-29T10:00:00-05:00",
            "endDateTime": "2026-01-29T10:30:00-05:00", "addMeetLink": True})
    assert 'provider = \\"google\\"' in text or 'provider = "google"' in text, text
    assert "ringfence calendar connect google" in text and "cannot connect" not in text, text


async def test_replace_all_twice_on_a_line_is_one_hunk(ringfence_bin, dirs):
    ws, data = dirs
    (ws / "f.txt").write_text("x foo y foo z\nline2\nfoo\n")
    async with serve(ringfence_bin, ws, data) as srv:
        await srv.ok("read_file", {"path": "f.txt"})
        text = await srv.ok("edit_file", {"path": "f.txt", "old_string": "foo",
                                          "new_string": "bar", "replace_all": True})
    assert text.count("@@ -") == 1, text
    assert "-x foo y foo z\n+x bar y bar z\n line2\n-foo\n+bar" in text, text


async def test_switching_to_a_missing_directory_is_not_found(ringfence_bin, tmp_path):
    root, other = project(tmp_path)
    async with serve(ringfence_bin, root, tmp_path / "data", preset="llm-chat") as srv:
        r = await srv.call("switch_workspace", {"path": "nope"})
        assert is_error(r) and structured(r)["error"] == "not_found", text_of(r)
        tools = await schemas(srv)
    description = tools["read_file"]["description"]
    assert "Only UTF-8" not in description and "UTF-16" in description, description


async def test_errors_carry_no_prefix_of_their_own(ringfence_bin, tmp_path):
    root, _ = project(tmp_path)
    async with serve(ringfence_bin, root, tmp_path / "data", preset="full") as srv:
        single = await srv.call("read_file", {"path": "missing.txt"})
        batch = await srv.call("read_file", {"paths": ["missing.txt"]})
    for r in (single, batch):
        assert is_error(r) and not text_of(r).startswith("Error"), text_of(r)
        assert text_of(r) == structured(r)["message"], (text_of(r), structured(r))
    assert text_of(batch) == (
        f"File not found: ENOENT: no such file or directory, stat '{root / 'missing.txt'}'")


async def test_completions_are_not_advertised_when_nothing_takes_arguments(ringfence_bin, dirs):
    """No prompt or resource template of ringfence's takes arguments, so there is nothing to
    complete: the capability is not advertised (a client that asks anyway gets -32601)."""
    ws, data = dirs
    async with serve(ringfence_bin, ws, data, preset=None, env=model_env()) as srv:
        caps = _attr(srv.init, "capabilities", "capabilities")
        assert _attr(caps, "completions", "completions") is None, caps
        prompts = await srv.session.list_prompts()
        assert prompts.prompts, "the memory family offers a prompt"
        assert all(not p.arguments for p in prompts.prompts), prompts
        templates = await srv.session.list_resource_templates()
        assert not _attr(templates, "resource_templates", "resourceTemplates"), templates
