"""Several `serve --http` instances on one PostgreSQL behave as one server: any instance
serves any request of an MCP session, a stream resumes on another instance from its
`Last-Event-ID`, and a client whose instance was killed carries on through another.

PostgreSQL only (RINGFENCE_TEST_STORE=postgres; see store.py): with SQLite each instance
keeps its sessions in memory, as documented.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from store import on_postgres, store_env
from test_followups import receiver
from test_http import call, client
from test_http_users import ALICE, BOB, Server, serve, tokens_config
from test_sdk_client import TEST_TIMEOUT_S, _binary, is_error, text_of

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not on_postgres(),
                       reason="instances share sessions only through PostgreSQL (RINGFENCE_TEST_STORE=postgres)"),
]

PROTOCOL = "2025-06-18"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def instances(tmp: Path, n: int) -> tuple[Path, list[Server]]:
    """`n` instances with their own data directories, one shared workspace, Alice and Bob."""
    ws = tmp / "shared-files"
    ws.mkdir()
    cfg = tokens_config(alice=ALICE, bob=BOB)
    servers = []
    for i in range(n):
        (tmp / f"i{i}").mkdir()
        servers.append(serve(tmp / f"i{i}", cfg, "--tools", "files", roots=(str(ws),)))
    return ws, servers


def sse_events(body: str) -> list[dict[str, Any]]:
    """The events of an SSE body: their id and JSON data (`None` for a priming event)."""
    events, current = [], {}
    for line in body.splitlines() + [""]:
        if not line:
            if "data" in current or "id" in current:
                data = current.get("data")
                events.append({"id": current.get("id"), "data": json.loads(data) if data else None})
            current = {}
        elif line.startswith("id:"):
            current["id"] = line[3:].strip()
        elif line.startswith("data:"):
            current["data"] = current.get("data", "") + line[5:].strip()
    return events


class Raw:
    """JSON-RPC over plain HTTP, to choose the instance of every request."""

    def __init__(self, http: httpx2.AsyncClient):
        self.http = http
        self.session: str | None = None
        self.next_id = 1

    def headers(self, token: str, **extra: str) -> dict[str, str]:
        h = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream",
             "Content-Type": "application/json", "MCP-Protocol-Version": PROTOCOL, **extra}
        if self.session:
            h["Mcp-Session-Id"] = self.session
        return h

    async def post(self, srv: Server, token: str, method: str, params: dict[str, Any] | None = None,
                   notify: bool = False) -> tuple[httpx2.Response, list[dict[str, Any]]]:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        if not notify:
            msg["id"] = self.next_id
            self.next_id += 1
        r = await self.http.post(srv.url, headers=self.headers(token), content=json.dumps(msg))
        events = sse_events(r.text) if r.headers.get("content-type", "").startswith("text/event-stream") else []
        return r, events


async def test_any_instance_serves_a_session_and_resumes_its_streams(tmp_path):
    ws, (a, b) = instances(tmp_path, 2)
    try:
        with anyio.fail_after(TEST_TIMEOUT_S):
            async with httpx2.AsyncClient(timeout=30) as http:
                alice = Raw(http)
                r, events = await alice.post(a, ALICE, "initialize", {
                    "protocolVersion": PROTOCOL, "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "1"}})
                assert r.status_code == 200, r.text
                alice.session = r.headers["mcp-session-id"]
                r, _ = await alice.post(a, ALICE, "notifications/initialized", notify=True)
                assert r.status_code == 202, r.text
                # B never saw the session: it re-creates it from the shared store.
                r, events = await alice.post(b, ALICE, "tools/call", {
                    "name": "write_file", "arguments": {"path": "via-b.txt", "content": "b\n"}})
                assert r.status_code == 200, r.text
                [answer] = [e for e in events if e["data"] and ("result" in e["data"] or "error" in e["data"])]
                assert answer["data"]["result"]["isError"] is False, answer
                assert (ws / "via-b.txt").read_text() == "b\n"
                first_id = events[0]["id"]  # the stream's first event (rmcp's priming event)
                assert first_id and first_id != answer["id"], events
                # And A goes on serving it.
                r, events = await alice.post(a, ALICE, "tools/call", {
                    "name": "read_file", "arguments": {"path": "via-b.txt"}})
                assert r.status_code == 200, r.text
                [read] = [e["data"] for e in events if e["data"]]
                assert read["result"]["content"][0]["text"] == "     1\tb\n", read
                # The stream of B's call, resumed on A from its first event: the answer B sent.
                r = await http.get(a.url, headers=alice.headers(ALICE, **{"Last-Event-ID": first_id}))
                assert r.status_code == 200, r.text
                replayed = sse_events(r.text)
                assert [e["id"] for e in replayed] == [answer["id"]], replayed
                assert replayed[0]["data"] == answer["data"]
                # The session is Alice's everywhere: Bob's token gets 404 on both instances.
                bob = Raw(http)
                bob.session = alice.session
                for srv in (a, b):
                    r, _ = await bob.post(srv, BOB, "tools/list", {})
                    assert r.status_code == 404, (srv.url, r.status_code, r.text)
                # Bob, in a session of his own, cannot resume Alice's standalone stream by
                # naming it in Last-Event-ID.
                bob.session = None
                r, _ = await bob.post(a, BOB, "initialize", {
                    "protocolVersion": PROTOCOL, "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "1"}})
                assert r.status_code == 200, r.text
                bob.session = r.headers["mcp-session-id"]
                async with http.stream("GET", b.url, headers=bob.headers(BOB, **{
                        "Last-Event-ID": f"0@{alice.session}"})) as r:
                    assert r.status_code == 404, r.status_code  # not Alice's event stream
                # Nor by naming her stream in the form of a request's stream.
                async with http.stream("GET", b.url, headers=bob.headers(BOB, **{
                        "Last-Event-ID": f"0/{alice.session}:common"})) as r:
                    assert r.status_code == 404, r.status_code
                # Nor without a session, as a stateless request.
                stateless = Raw(http)
                async with http.stream("GET", b.url, headers={
                        **stateless.headers(BOB, **{"Last-Event-ID": f"0@{alice.session}"}),
                        "MCP-Protocol-Version": "2026-07-28"}) as r:
                    assert r.status_code != 200, r.status_code
                # An unknown session is unknown to every instance.
                ghost = Raw(http)
                ghost.session = "no-such-session"
                r, _ = await ghost.post(b, ALICE, "tools/list", {})
                assert r.status_code == 404, r.text
                # Ended through B: gone from the store, so a third instance cannot revive it.
                r = await http.delete(b.url, headers=alice.headers(ALICE))
                assert r.status_code in (200, 204), r.text
    finally:
        for srv in (a, b):
            srv.stop()
    (tmp_path / "i2").mkdir()
    c = serve(tmp_path / "i2", tokens_config(alice=ALICE), "--tools", "files", roots=(str(ws),))
    try:
        async with httpx2.AsyncClient(timeout=30) as http:
            revived = Raw(http)
            revived.session = alice.session
            r, _ = await revived.post(c, ALICE, "tools/list", {})
            assert r.status_code == 404, r.text
    finally:
        c.stop()


class Balancer:
    """A TCP load balancer: each new connection goes to the current backend."""

    def __init__(self, target: str):
        self.target = target
        self.connections: list[anyio.abc.SocketStream] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    async def serve(self, task_status: anyio.abc.TaskStatus = anyio.TASK_STATUS_IGNORED) -> None:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        self.port = listener.extra(anyio.abc.SocketAttribute.local_port)
        task_status.started()
        await listener.serve(self.relay)

    async def relay(self, down: anyio.abc.SocketStream) -> None:
        host, port = self.target.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)
        try:
            up = await anyio.connect_tcp(host, int(port))
        except OSError:
            await down.aclose()
            return
        self.connections += [up, down]

        async def pump(src: anyio.abc.SocketStream, dst: anyio.abc.SocketStream) -> None:
            try:
                async for chunk in src:
                    await dst.send(chunk)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                pass
            finally:
                await dst.aclose()

        async with anyio.create_task_group() as tg:
            tg.start_soon(pump, down, up)
            tg.start_soon(pump, up, down)

    async def switch(self, target: str) -> None:
        """New connections go to `target`; open ones are cut (as when an instance dies)."""
        self.target = target
        for c in self.connections:
            await c.aclose()
        self.connections.clear()


async def test_a_client_carries_on_when_its_instance_is_killed(tmp_path):
    """The official SDK's client behind a balancer: its instance is SIGKILLed between calls;
    the balancer sends it to another, and the same MCP session goes on there."""
    ws, (a, b) = instances(tmp_path, 2)
    (ws / "plan.txt").write_text("step one\n")
    lb = Balancer(a.url)
    try:
        with anyio.fail_after(TEST_TIMEOUT_S):
            async with anyio.create_task_group() as tg:
                await tg.start(lb.serve)
                async with client(lb.url, ALICE) as s:
                    r = await call(s, "write_file", {"path": "log.txt", "content": "before\n"})
                    assert not is_error(r), text_of(r)
                    # Read on A: the read-first record is the session's, wherever it runs.
                    r = await call(s, "read_file", {"path": "plan.txt"})
                    assert not is_error(r) and "step one" in text_of(r), text_of(r)
                    a.proc.send_signal(signal.SIGKILL)
                    a.proc.wait(timeout=10)
                    await lb.switch(b.url)
                    r = await call(s, "edit_file", {"path": "plan.txt", "old_string": "step one",
                                                    "new_string": "step two"})
                    assert not is_error(r), text_of(r)
                    # A file this session never read is still refused on B.
                    (ws / "other.txt").write_text("x\n")
                    r = await call(s, "edit_file", {"path": "other.txt", "old_string": "x",
                                                    "new_string": "y"})
                    assert is_error(r) and "has not been read" in text_of(r), text_of(r)
                    r = await call(s, "read_file", {"path": "log.txt"})
                    assert "before" in text_of(r), text_of(r)
                tg.cancel_scope.cancel()
        assert (ws / "plan.txt").read_text() == "step two\n"
    finally:
        for srv in (a, b):
            srv.stop()


CAROL = "carol-instances-token-" + "c" * 24


async def test_three_instances_lose_nothing_when_one_is_killed_under_load(tmp_path):
    """The issue's test: three instances behind a balancer, six clients (two users each
    connected to each instance) storing memories, writing files and scheduling follow-ups;
    one instance is SIGKILLed mid-load and its clients are sent to the others. Every
    acknowledged write is there afterwards, every session carried on without a new
    `initialize`, and the 1,000 follow-ups are each delivered once."""
    ws = tmp_path / "shared-files"
    ws.mkdir()
    total = 1000
    with receiver() as hook:
        cfg = (tokens_config(alice=ALICE, bob=BOB, carol=CAROL)
               + "[http.limits]\nrate = 0\n"
               + '[followups]\nproactive = true\ntimezone = "UTC"\nlease_secs = 5\n'
               + f'[[followups.channels]]\nkind = "webhook"\nurl = "{hook.url}"\n'
               + 'secret = "s3cret-for-the-test"\ntimeout_secs = 3\n')
        servers = []
        for i in range(3):
            (tmp_path / f"i{i}").mkdir()
            servers.append(serve(tmp_path / f"i{i}", cfg, "--tools", "files,memory,followups",
                                 roots=(str(ws),)))
        users = [("alice", ALICE), ("bob", BOB), ("carol", CAROL)]
        clients = [(users[k % 3], k % 3) for k in range(6)]  # (user, first instance)
        balancers = [Balancer(servers[first].url) for _, first in clients]
        acked: dict[str, list[Any]] = {"memory": [], "file": [], "followup": []}
        failed: list[str] = []
        state = {"next": 0, "killed": False, "after_kill_failures": 0}
        killed = servers[0]

        async def work(k: int, lb: Balancer, token: str) -> None:
            """One client: a session opened once, then calls through its balancer until the
            follow-ups are all scheduled. A call cut by the kill fails; the session goes on."""
            async with httpx2.AsyncClient(timeout=60) as http:
                raw = Raw(http)
                r, _ = await raw.post(lb, token, "initialize", {
                    "protocolVersion": PROTOCOL, "capabilities": {},
                    "clientInfo": {"name": f"load-{k}", "version": "1"}})
                assert r.status_code == 200, r.text
                raw.session = r.headers["mcp-session-id"]
                r, _ = await raw.post(lb, token, "notifications/initialized", notify=True)
                assert r.status_code == 202, r.text

                async def tool(name: str, args: dict[str, Any]) -> None:
                    r, events = await raw.post(lb, token, "tools/call", {"name": name,
                                                                         "arguments": args})
                    answers = [e["data"] for e in events if e["data"] and "id" in e["data"]]
                    if r.status_code != 200 or not answers or "result" not in answers[-1] \
                            or answers[-1]["result"].get("isError"):
                        raise AssertionError(f"{name}: {r.status_code} {r.text[:300]}")

                i = 0
                while len(acked["followup"]) < total or i < 40:
                    i += 1
                    was_killed = state["killed"]
                    try:
                        if len(acked["followup"]) < total:
                            state["next"] += 1
                            n = state["next"]
                            # Due 20 to 35 s from now, spread.
                            await tool("schedule_followup", {
                                "context": f"fu-{n}", "minutes_from_now": (20 + n % 16) / 60})
                            acked["followup"].append(f"fu-{n}")
                        fact = f"Client {k} noted fact number {i} about topic t{k}x{i}"
                        await tool("store_memory", {"memoryContent": fact})
                        acked["memory"].append(fact)
                        name = f"c{k}-{i}.txt"
                        await tool("write_file", {"path": name, "content": f"{k}/{i}\n"})
                        acked["file"].append(name)
                    except Exception as e:  # noqa: BLE001 - calls cut by the kill are expected
                        failed.append(f"client {k} call {i}: {e!r}")
                        if was_killed:
                            state["after_kill_failures"] += 1
                        await anyio.sleep(0.2)

        async def killer() -> None:
            while len(acked["followup"]) < total // 3:
                await anyio.sleep(0.05)
            killed.proc.send_signal(signal.SIGKILL)
            killed.proc.wait(timeout=10)
            # The balancer sends the dead instance's clients to the other two.
            moved = 0
            for lb, (_, first) in zip(balancers, clients):
                if first == 0:
                    await lb.switch(servers[1 + moved % 2].url)
                    moved += 1
            state["killed"] = True

        try:
            with anyio.fail_after(240):
                async with anyio.create_task_group() as tg:
                    for lb in balancers:
                        await tg.start(lb.serve)
                    async with anyio.create_task_group() as load:
                        load.start_soon(killer)
                        for k, (((_, token), _), lb) in enumerate(zip(clients, balancers)):
                            load.start_soon(work, k, lb, token)
                    tg.cancel_scope.cancel()
                await anyio.to_thread.run_sync(lambda: hook.wait_for(len(acked["followup"]), 90))
                await anyio.sleep(3)  # anything delivered twice would have arrived by now
        finally:
            for srv in servers:
                srv.stop()
        print(f"calls failed: {len(failed)} ({state['after_kill_failures']} after the kill): {failed[:5]}")
        # Calls cut by the kill may fail; once the balancer moved them, none may.
        assert state["after_kill_failures"] == 0, failed
        assert len(acked["followup"]) >= total  # (two clients may both take the last one)
        # Every acknowledged write is there.
        for name in acked["file"]:
            k, i = name[1:-4].split("-")
            assert (ws / name).read_text() == f"{k}/{i}\n", name
        exported = subprocess.run(
            [str(_binary()), "--data-dir", str(tmp_path / "reader"), "memory", "export",
             "--no-embeddings"], capture_output=True, text=True,
            env={"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), **store_env()},
            timeout=60)
        assert exported.returncode == 0, exported.stderr
        stored = {json.loads(line)["content"] for line in exported.stdout.splitlines()}
        lost = [f for f in acked["memory"] if f not in stored]
        assert not lost, lost[:5]
        # Each acknowledged follow-up delivered, once.
        got = hook.requests
        contexts = [r["doc"]["context"] for r in got]
        assert set(acked["followup"]) <= set(contexts), sorted(set(acked["followup"]) - set(contexts))[:5]
        twice = {c for c in contexts if contexts.count(c) > 1}
        assert not twice, sorted(twice)[:5]
