"""End-to-end tests of `delegate_task` through the real binary, with the official MCP
Python SDK as the client: the sub-agent's model is a scripted fake of each wire API started
in the test (an OpenAI-compatible chat completions server and an Anthropic Messages server),
or the client's own model through `sampling/createMessage` answered by a script — as plain
text (the JSON protocol) and with tools. Each task writes a file with write_file, runs a
command in the sandbox, and finishes; the result must list the files and the transcript.
"""

from __future__ import annotations

import http.server
import json
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Callable

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client

from test_memory import http_thread, write_config
from test_shell import running_with
from test_sdk_client import (  # noqa: F401 (fixtures)
    TEST_TIMEOUT_S, Server, dirs, is_error, ringfence_bin, serve, structured, text_of,
)

pytestmark = pytest.mark.anyio

KEY = "sk-e2e-delegate-7c1e9b"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def script(ws: Path) -> list[tuple[str, dict[str, Any]]]:
    """The sub-agent's moves: write a file, transform it with a command, finish."""
    return [
        ("write_file", {"path": str(ws / "greeting.txt"), "content": "hello from the sub-agent\n"}),
        ("run_shell_command", {"command": "tr a-z A-Z < greeting.txt > shout.txt && cat shout.txt"}),
        ("finish_task", {
            "status": "completed",
            "summary": "wrote greeting.txt and shout.txt",
            "criteria": [{"criterion": "shout.txt is upper case", "met": True,
                          "evidence": "cat shout.txt: HELLO FROM THE SUB-AGENT"}],
        }),
    ]


def check_result(result: Any, ws: Path) -> dict[str, Any]:
    assert not is_error(result), text_of(result)
    s = structured(result)
    assert s["status"] == "completed", s
    assert s["summary"] == "wrote greeting.txt and shout.txt"
    assert s["criteria"] == [{"criterion": "shout.txt is upper case", "met": True,
                              "evidence": "cat shout.txt: HELLO FROM THE SUB-AGENT"}]
    assert s["filesCreated"] == ["greeting.txt", "shout.txt"], s
    assert s["turns"] == 3
    # The command really ran, in the sandbox.
    assert (ws / "shout.txt").read_text() == "HELLO FROM THE SUB-AGENT\n"
    transcript = Path(s["transcriptFile"]).read_text()
    lines = [json.loads(line) for line in transcript.splitlines()]
    assert lines[0]["type"] == "task" and lines[-1]["type"] == "end"
    assert "HELLO FROM THE SUB-AGENT" in transcript  # the command's output, as the model saw it
    assert "run_shell_command" in transcript and "write_file" in transcript
    return s


def delegate_config(tmp: Path, llm: str) -> Path:
    return write_config(tmp, f"[shell]\nenabled = true\n[delegate]\nenabled = true\n[llm]\n{llm}")


ARGS = {"description": "Write a greeting, then shout it into shout.txt",
        "successCriteria": ["shout.txt is upper case"]}


class FakeOpenAi(http.server.BaseHTTPRequestHandler):
    """POST /v1/chat/completions: answers the next move of the script as a tool call
    (the turn is the number of assistant messages in the conversation)."""

    moves: list[tuple[str, dict[str, Any]]] = []
    requests: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        FakeOpenAi.requests.append({"path": self.path, "auth": self.headers.get("Authorization"),
                                    "body": body})
        turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
        name, args = FakeOpenAi.moves[turn]
        self.answer({
            "id": f"chatcmpl-{turn}", "object": "chat.completion", "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": None,
                "tool_calls": [{"id": f"call_{turn}", "type": "function",
                                "function": {"name": name, "arguments": json.dumps(args)}}]}}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
        })

    def answer(self, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_: Any) -> None:
        pass


class FakeAnthropic(FakeOpenAi):
    """POST /v1/messages: the same script as tool_use blocks."""

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        FakeAnthropic.requests.append({"path": self.path, "key": self.headers.get("x-api-key"),
                                       "body": body})
        turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
        name, args = FakeAnthropic.moves[turn]
        self.answer({
            "id": f"msg_{turn}", "type": "message", "role": "assistant", "model": body["model"],
            "content": [{"type": "text", "text": f"step {turn}"},
                        {"type": "tool_use", "id": f"toolu_{turn}", "name": name, "input": args}],
            "stop_reason": "tool_use", "stop_sequence": None,
            "usage": {"input_tokens": 100, "output_tokens": 20},
        })


async def test_off_unless_delegation_shell_and_model_are_configured(ringfence_bin, dirs):
    ws, data = dirs
    async with serve(ringfence_bin, ws, data, preset="full",
                     env={"RINGFENCE_DELEGATE_ENABLED": "true"}) as srv:
        names = {t.name for t in (await srv.session.list_tools()).tools}
        assert "delegate_task" not in names and "read_file" in names
    config = delegate_config(ws.parent, 'provider = "sampling"\n')
    async with serve(ringfence_bin, ws, data, preset="full", options=("--config", str(config))) as srv:
        tools = {t.name: t for t in (await srv.session.list_tools()).tools}
        schema = tools["delegate_task"].input_schema
        assert set(schema["properties"]) == {
            "description", "successCriteria", "contextFiles", "workingDirectory", "timeout"}
        assert schema["required"] == ["description"]
    # Without the shell among the selected tools there is no delegation either.
    async with serve(ringfence_bin, ws, data, preset="full", options=("--config", str(config)),
                     env={"RINGFENCE_DISABLE_TOOLS": "run_shell_command"}) as srv:
        names = {t.name for t in (await srv.session.list_tools()).tools}
        assert "delegate_task" not in names and "run_shell_command" not in names


@asynccontextmanager
async def serve_with_fake_openai(bin_path: Path, ws: Path, data: Path,
                                 moves: list[tuple[str, dict[str, Any]]],
                                 **env: str) -> AsyncIterator[Server]:
    """`ringfence serve` with delegation on, its sub-agent's model the scripted
    OpenAI-compatible server playing `moves`."""
    FakeOpenAi.moves = moves
    FakeOpenAi.requests = []
    with http_thread(FakeOpenAi) as url:
        config = delegate_config(
            ws.parent, f'provider = "openai"\nbase_url = "{url}/v1"\nmodel = "fake-gpt"\n')
        with anyio.fail_after(TEST_TIMEOUT_S):
            async with serve(bin_path, ws, data, preset="full",
                             options=("--config", str(config)),
                             env={"OPENAI_API_KEY": KEY, **env}) as srv:
                yield srv


async def test_a_task_through_an_openai_compatible_server(ringfence_bin, dirs):
    ws, data = dirs
    async with serve_with_fake_openai(ringfence_bin, ws, data, script(ws),
                                      RINGFENCE_DISABLE_TOOLS="delete_file") as srv:
        s = check_result(await srv.call("delegate_task", ARGS), ws)
        assert s["tokens"] == 360
        assert "fake-gpt" in s["model"]
    first = FakeOpenAi.requests[0]
    assert first["path"] == "/v1/chat/completions"
    assert first["auth"] == f"Bearer {KEY}"
    offered = {t["function"]["name"] for t in first["body"]["tools"]}
    assert {"write_file", "run_shell_command", "finish_task"} <= offered
    assert "delegate_task" not in offered
    # A tool the operator took away from the assistant is not its sub-agent's either.
    assert "delete_file" not in offered and "read_file" in offered
    # The command's output went back to the model as the tool's result.
    last = FakeOpenAi.requests[-1]["body"]["messages"]
    tool_msgs = [m for m in last if m["role"] == "tool"]
    assert "HELLO FROM THE SUB-AGENT" in tool_msgs[1]["content"], tool_msgs


async def test_a_task_through_an_anthropic_server(ringfence_bin, dirs):
    ws, data = dirs
    FakeAnthropic.moves = script(ws)
    FakeAnthropic.requests = []
    with http_thread(FakeAnthropic) as url:
        config = delegate_config(
            ws.parent, f'provider = "anthropic"\nbase_url = "{url}"\nmodel = "fake-claude"\n')
        with anyio.fail_after(TEST_TIMEOUT_S):
            async with serve(ringfence_bin, ws, data, preset="full",
                             options=("--config", str(config)),
                             env={"ANTHROPIC_API_KEY": KEY}) as srv:
                check_result(await srv.call("delegate_task", ARGS), ws)
    first = FakeAnthropic.requests[0]
    assert first["path"] == "/v1/messages"
    assert first["key"] == KEY
    assert "Write a greeting" in first["body"]["system"]
    assert "finish_task" in {t["name"] for t in first["body"]["tools"]}


@asynccontextmanager
async def serve_sampling(bin_path: Path, ws: Path, data: Path, config: Path,
                         callback: Callable[..., Any],
                         caps: types.SamplingCapability | None) -> AsyncIterator[Server]:
    """`ringfence serve` with a client that answers sampling/createMessage with `callback`."""
    tmp = data.parent
    params = StdioServerParameters(
        command=str(bin_path),
        args=["--data-dir", str(data), "--preset", "full", "--config", str(config), "serve", str(ws)],
        env={"XDG_CONFIG_HOME": str(tmp / "xdg-config"), "XDG_DATA_HOME": str(tmp / "xdg-data"),
             "RINGFENCE_LOG": "info"},
        cwd=str(tmp),
    )
    log_path = tmp / "server.stderr.log"
    with open(log_path, "w", encoding="utf-8") as errlog:
        try:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write, sampling_callback=callback,
                                         sampling_capabilities=caps) as session:
                    init = await session.initialize()
                    yield Server(session, init, ws, data)
        finally:
            print(log_path.read_text(encoding="utf-8", errors="replace")[-8000:])


async def test_a_task_through_the_clients_own_model_as_text(ringfence_bin, dirs):
    """A client without tools in sampling: the sub-agent answers one JSON object a turn."""
    ws, data = dirs
    moves = script(ws)
    seen: list[types.CreateMessageRequestParams] = []

    async def sample(_ctx: Any, params: types.CreateMessageRequestParams) -> Any:
        seen.append(params)
        turn = sum(1 for m in params.messages if m.role == "assistant")
        if turn == 0:
            # Not JSON: the server must tell the model and ask again.
            return types.CreateMessageResult(
                role="assistant", content=types.TextContent(type="text", text="Let me think."),
                model="scripted-sampler", stop_reason="endTurn")
        name, args = moves[turn - 1]
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=json.dumps({"tool": name, "arguments": args})),
            model="scripted-sampler", stop_reason="endTurn")

    config = delegate_config(ws.parent, 'provider = "sampling"\n')
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with serve_sampling(ringfence_bin, ws, data, config, sample, None) as srv:
            result = await srv.call("delegate_task", ARGS)
            assert not is_error(result), text_of(result)
            s = structured(result)
            assert s["status"] == "completed", s
            assert s["turns"] == 4
            assert s["filesCreated"] == ["greeting.txt", "shout.txt"], s
            assert (ws / "shout.txt").read_text() == "HELLO FROM THE SUB-AGENT\n"
            assert "scripted-sampler" in s["model"]
    assert seen[0].tools is None
    assert '{"tool": "<tool name>"' in seen[0].system_prompt
    assert "run_shell_command" in seen[0].system_prompt
    # The unreadable answer was answered with how to call a tool.
    retry = " ".join(c.text for m in seen[1].messages for c in m.content_as_list
                     if getattr(c, "type", "") == "text")
    assert "could not be read as a tool call" in retry, retry


async def test_a_task_through_the_clients_own_model_with_tools(ringfence_bin, dirs):
    ws, data = dirs
    moves = script(ws)
    seen: list[types.CreateMessageRequestParams] = []

    async def sample(_ctx: Any, params: types.CreateMessageRequestParams) -> Any:
        seen.append(params)
        turn = sum(1 for m in params.messages if m.role == "assistant")
        name, args = moves[turn]
        return types.CreateMessageResultWithTools(
            role="assistant",
            content=[types.ToolUseContent(type="tool_use", id=f"t{turn}", name=name, input=args)],
            model="scripted-tool-sampler", stop_reason="toolUse")

    config = delegate_config(ws.parent, 'provider = "sampling"\n')
    caps = types.SamplingCapability(tools=types.SamplingToolsCapability())
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with serve_sampling(ringfence_bin, ws, data, config, sample, caps) as srv:
            check_result(await srv.call("delegate_task", ARGS), ws)
    assert seen[0].tools is not None
    names = {t.name for t in seen[0].tools}
    assert {"write_file", "run_shell_command", "finish_task"} <= names
    assert "delegate_task" not in names


async def test_sampling_without_a_sampling_client_says_what_is_needed(ringfence_bin, dirs):
    ws, data = dirs
    config = delegate_config(ws.parent, 'provider = "sampling"\n')
    async with serve(ringfence_bin, ws, data, preset="full", options=("--config", str(config))) as srv:
        text = await srv.err("delegate_task", ARGS)
        assert '[llm] provider = "sampling"' in text, text
        assert "must declare the `sampling` capability" in text, text


# --- The task's other endings through the client's own model: a failed criterion, a
# timeout, a cancellation that kills the task's command, two tasks at once for one user.

def tool_sampler(moves_for: Callable[[str], list[tuple[str, dict[str, Any]]]],
                 delay_for: Callable[[str, int], float] = lambda _d, _t: 0.0) -> Callable[..., Any]:
    """A sampling client with tools that plays `moves_for(system prompt)`, turn by turn,
    after `delay_for(system prompt, turn)` seconds."""

    async def sample(_ctx: Any, params: types.CreateMessageRequestParams) -> Any:
        system = params.system_prompt or ""
        turn = sum(1 for m in params.messages if m.role == "assistant")
        delay = delay_for(system, turn)
        if delay:
            await anyio.sleep(delay)
        name, args = moves_for(system)[turn]
        return types.CreateMessageResultWithTools(
            role="assistant",
            content=[types.ToolUseContent(type="tool_use", id=f"t{turn}", name=name, input=args)],
            model="scripted-tool-sampler", stop_reason="toolUse")

    return sample


TOOL_CAPS = types.SamplingCapability(tools=types.SamplingToolsCapability())


def finish_move(status: str, summary: str, criteria: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    return ("finish_task", {"status": status, "summary": summary, "criteria": criteria})


async def test_a_failed_criterion_is_reported_with_the_files_a_command_changed(ringfence_bin, dirs):
    ws, data = dirs
    (ws / "gone.txt").write_text("bye\n")
    (ws / "edit.txt").write_text("a\n")
    moves = [
        ("run_shell_command", {"command": "rm gone.txt; echo b >> edit.txt"}),
        finish_move("failed", "the tests do not pass", [
            {"criterion": "tests pass", "met": False, "evidence": "2 failures"}]),
    ]
    config = delegate_config(ws.parent, 'provider = "sampling"\n')
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with serve_sampling(ringfence_bin, ws, data, config,
                                  tool_sampler(lambda _s: moves), TOOL_CAPS) as srv:
            result = await srv.call("delegate_task", {
                "description": "fix the tests", "successCriteria": ["tests pass", "docs updated"]})
    # A task that failed is a result the model can act on, not a tool error.
    assert not is_error(result), text_of(result)
    s = structured(result)
    assert s["status"] == "failed", s
    assert s["summary"] == "the tests do not pass"
    assert s["criteria"] == [
        {"criterion": "tests pass", "met": False, "evidence": "2 failures"},
        {"criterion": "docs updated", "met": False, "evidence": "not reported"}]
    assert s["filesDeleted"] == ["gone.txt"] and s["filesModified"] == ["edit.txt"], s
    assert "failed" in text_of(result) and "tests pass" in text_of(result)


async def test_a_slow_model_meets_the_timeout(ringfence_bin, dirs):
    ws, data = dirs
    moves = [finish_move("completed", "too late", [])]
    config = delegate_config(ws.parent, 'provider = "sampling"\n')
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with serve_sampling(ringfence_bin, ws, data, config,
                                  tool_sampler(lambda _s: moves, lambda _s, _t: 30.0),
                                  TOOL_CAPS) as srv:
            started = anyio.current_time()
            result = await srv.call("delegate_task", {"description": "be slow", "timeout": 2})
            took = anyio.current_time() - started
    assert not is_error(result), text_of(result)
    s = structured(result)
    assert s["status"] == "timed_out", s
    assert "ran out of time" in s["summary"], s
    # Not before its time; that it ended then and not when the model answered (30 s) is the
    # status (no upper bound in seconds: a loaded machine may be slow).
    assert took >= 2.0, took
    assert Path(s["transcriptFile"]).is_file()


async def test_cancelling_a_task_kills_its_command_and_frees_the_slot(ringfence_bin, dirs):
    ws, data = dirs

    # A duration no other process on the machine sleeps for: the command's mark.
    mark = f"60.{time.time_ns() % 1_000_000_000:09d}"

    def moves_for(system: str) -> list[tuple[str, dict[str, Any]]]:
        if "sleep a while" in system:
            return [("run_shell_command",
                     {"command": f"exec sleep {mark}", "timeout": 120}),
                    finish_move("completed", "never reached", [])]
        return [finish_move("completed", "the next task ran", [])]

    config = delegate_config(ws.parent, 'provider = "sampling"\n')
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with serve_sampling(ringfence_bin, ws, data, config,
                                  tool_sampler(moves_for), TOOL_CAPS) as srv:
            started: list[str] = []
            async with anyio.create_task_group() as tg:
                async def delegate() -> None:
                    await srv.session.call_tool("delegate_task", {"description": "sleep a while"})
                    pytest.fail("the cancelled call returned")

                tg.start_soon(delegate)
                for _ in range(400):
                    # Found by its arguments: its pid is its PID namespace's.
                    started = running_with(mark)
                    if started:
                        break
                    await anyio.sleep(0.05)
                assert started, "the task's command never started"
                # Cancelling the awaiting task sends notifications/cancelled to the server.
                tg.cancel_scope.cancel()
            for _ in range(100):
                if not running_with(mark):
                    break
                await anyio.sleep(0.1)
            assert not running_with(mark), f"{started} outlived the cancelled task"
            # The user's slot is free again (once the cancelled task has unwound, a moment
            # after its command died): the next task runs.
            for _ in range(100):
                result = await srv.call("delegate_task", {"description": "the next one"})
                if not (is_error(result) and "one task at a time" in text_of(result)):
                    break
                await anyio.sleep(0.1)
            assert not is_error(result), text_of(result)
            assert structured(result)["summary"] == "the next task ran"


async def test_one_task_per_user_at_a_time(ringfence_bin, dirs):
    ws, data = dirs

    def moves_for(system: str) -> list[tuple[str, dict[str, Any]]]:
        return [finish_move("completed", "first done" if "the first" in system else "?", [])]

    config = delegate_config(ws.parent, 'provider = "sampling"\n')
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with serve_sampling(ringfence_bin, ws, data, config,
                                  tool_sampler(moves_for, lambda s, _t: 3.0 if "the first" in s else 0.0),
                                  TOOL_CAPS) as srv:
            results: dict[str, Any] = {}
            async with anyio.create_task_group() as tg:
                async def first() -> None:
                    results["first"] = await srv.call("delegate_task",
                                                      {"description": "the first task, a slow one"})

                tg.start_soon(first)
                await anyio.sleep(1.0)
                text = await srv.err("delegate_task", {"description": "a second task"})
                assert "one task at a time per user" in text, text
                assert '"the first task, a slow one"' in text, text
                assert "UTC" in text and "wait for it to finish or cancel it" in text, text
            assert not is_error(results["first"]), text_of(results["first"])
            assert structured(results["first"])["summary"] == "first done"


async def test_the_sub_agents_commands_count_against_its_users_running_commands(ringfence_bin, dirs):
    # [shell] concurrent_per_user = 1: while the user's own command runs, the command a
    # delegated task asks for is refused — the sub-agent's shell has no count of its own.
    ws, data = dirs
    moves = [("run_shell_command", {"command": "echo from-the-sub-agent"}),
             finish_move("completed", "asked for a command", [])]
    config = write_config(ws.parent, "[shell]\nenabled = true\nconcurrent_per_user = 1\n"
                          "[delegate]\nenabled = true\n[llm]\nprovider = \"sampling\"\n")
    marker = ws / "own-command.started"
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with serve_sampling(ringfence_bin, ws, data, config,
                                  tool_sampler(lambda _s: moves), TOOL_CAPS) as srv:
            async with anyio.create_task_group() as tg:
                async def own_command() -> None:
                    await srv.call("run_shell_command",
                                   {"command": "touch own-command.started; sleep 4"})

                tg.start_soon(own_command)
                for _ in range(200):
                    if marker.exists():
                        break
                    await anyio.sleep(0.05)
                assert marker.exists(), "the user's own command never started"
                result = await srv.call("delegate_task", {"description": "run a command"})
            assert not is_error(result), text_of(result)
            transcript = Path(structured(result)["transcriptFile"]).read_text()
            assert "commands are running already (at most 1 at once)" in transcript, transcript


async def test_undo_edit_right_after_a_delegated_edit_reverts_it(ringfence_bin, dirs):
    """The sub-agent's edits go through the server's own file tools — one edit journal — so
    the assistant's undo_edit right after the task reverts the sub-agent's last change."""
    ws, data = dirs
    notes = ws / "notes.md"
    notes.write_text("# Notes\n- milk\n")
    moves = [
        ("read_file", {"path": str(notes)}),
        ("edit_file", {"path": str(notes), "old_string": "- milk", "new_string": "- oat milk"}),
        ("finish_task", {"status": "completed", "summary": "changed milk to oat milk",
                         "criteria": []}),
    ]
    async with serve_with_fake_openai(ringfence_bin, ws, data, moves) as srv:
        r = await srv.call("delegate_task", {"description": "Make it oat milk"})
        assert not is_error(r) and structured(r)["status"] == "completed", text_of(r)
        assert notes.read_text() == "# Notes\n- oat milk\n"
        r = await srv.call("undo_edit", {"path": "notes.md"})
        assert not is_error(r), text_of(r)
        assert notes.read_text() == "# Notes\n- milk\n"
