"""A minimal MCP client over stdio: newline-delimited JSON-RPC 2.0, no SDK.

The server is spawned as a child process; requests go to its stdin, responses are read
line by line from its stdout. Server-to-client requests (e.g. roots/list) are answered with
a JSON-RPC error so they never block a call; notifications are skipped.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import time
from typing import Any

PROTOCOL_VERSION = "2025-06-18"


class McpError(RuntimeError):
    pass


class McpClient:
    def __init__(self, argv: list[str], *, cwd: str | None = None,
                 env: dict[str, str] | None = None, stderr_path: str | None = None):
        self.argv = argv
        self._stderr = open(stderr_path, "ab") if stderr_path else subprocess.DEVNULL
        self.t_spawn = time.perf_counter()
        self.proc = subprocess.Popen(
            argv, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self._stderr, bufsize=0,
        )
        # Buffered reads: readline() on the raw pipe would read one byte per syscall.
        self._out = io.BufferedReader(self.proc.stdout, buffer_size=1 << 20)
        self._next_id = 0
        self.server_info: dict[str, Any] = {}
        self.startup_s: float | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    # -- wire ------------------------------------------------------------------------------
    def _send(self, msg: dict[str, Any]) -> None:
        data = (json.dumps(msg, separators=(",", ":")) + "\n").encode()
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def _read_msg(self) -> dict[str, Any]:
        while True:
            line = self._out.readline()
            if not line:
                raise McpError(f"server closed stdout (exit={self.proc.poll()}) argv={self.argv}")
            line = line.strip()
            if not line:
                continue
            try:
                return json.loads(line)
            except json.JSONDecodeError as e:
                raise McpError(f"non-JSON line from server: {line[:200]!r}") from e

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self._next_id += 1
        rid = self._next_id
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self._send(msg)
        while True:
            m = self._read_msg()
            if "method" in m:
                if "id" in m:  # a request from the server: refuse it politely
                    self._send({"jsonrpc": "2.0", "id": m["id"],
                                "error": {"code": -32601, "message": "not supported by bench client"}})
                continue  # notification (progress, logging, list_changed)
            if m.get("id") == rid:
                if "error" in m:
                    raise McpError(f"{method}: {m['error']}")
                return m["result"]

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self._send(msg)

    # -- MCP -------------------------------------------------------------------------------
    def initialize(self) -> float:
        """initialize + notifications/initialized; returns spawn -> initialize response (s)."""
        res = self.request("initialize", {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "ringfence-bench", "version": "0.1"},
        })
        self.startup_s = time.perf_counter() - self.t_spawn
        self.server_info = res
        self.notify("notifications/initialized")
        return self.startup_s

    def tools(self) -> list[dict[str, Any]]:
        return self.request("tools/list", {}).get("tools", [])

    def call(self, name: str, arguments: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        """One tools/call round trip: (seconds, result)."""
        t0 = time.perf_counter()
        res = self.request("tools/call", {"name": name, "arguments": arguments})
        return time.perf_counter() - t0, res

    # -- process ---------------------------------------------------------------------------
    def status(self) -> dict[str, int]:
        """VmHWM / VmRSS of the server process, in KiB."""
        out: dict[str, int] = {}
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith(("VmHWM:", "VmRSS:")):
                    k, v = line.split(":", 1)
                    out[k] = int(v.split()[0])
        return out

    def cpu_seconds(self) -> float:
        """User + system CPU time of the server process so far (all threads)."""
        with open(f"/proc/{self.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        return (int(fields[11]) + int(fields[12])) / ticks

    def close(self) -> None:
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self._stderr not in (None, subprocess.DEVNULL):
            self._stderr.close()

    def __enter__(self) -> "McpClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def result_text(res: dict[str, Any]) -> str:
    return "".join(c.get("text", "") for c in res.get("content", []) if c.get("type") == "text")
