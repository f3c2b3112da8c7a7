"""A new user's first hour, through the real binary with a fresh HOME: paths written with `~`
and `$HOME`, what the server says when it starts, configuration mistakes said in words, and
the variables a configuration file names never reported as unknown."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from store import store_env
from test_sdk_client import ringfence_bin  # noqa: F401 (fixture)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


def env_for(home: Path, **extra: str) -> dict[str, str]:
    """A person's environment: their HOME, nothing of ringfence's set."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("RINGFENCE_", "XDG_", "IRIS_", "LLM_CHAT_", "DBUS_"))}
    env.update(store_env())
    env["HOME"] = str(home)
    env.update(extra)
    return env


def run(bin_path: Path, home: Path, *args: str, stdin: str = "", **extra: str,
        ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(bin_path), *args], input=stdin, capture_output=True, text=True,
                          env=env_for(home, **extra), timeout=120)


def handshake() -> str:
    """An MCP client's first words on stdio, then end of input."""
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "first-hour", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    return "".join(json.dumps(line) + "\n" for line in lines)


def test_a_root_written_with_a_tilde_or_home_is_the_home_directory(ringfence_bin, home):
    (home / "notes").mkdir()
    (home / "notes" / "todo.txt").write_text("milk\n")
    for root in ("~/notes", "$HOME/notes", "${HOME}/notes"):
        out = run(ringfence_bin, home, "call", "read_file", '{"path": "todo.txt"}',
                  "--root", root)
        assert out.returncode == 0, (root, out.stderr)
        assert "milk" in out.stdout, (root, out.stdout)
    # In the configuration file too.
    cfg = home / "ringfence.toml"
    cfg.write_text('roots = ["~/notes:ro"]\n')
    out = run(ringfence_bin, home, "--config", str(cfg), "call", "read_file",
              '{"path": "todo.txt"}')
    assert out.returncode == 0 and "milk" in out.stdout, out.stderr
    out = run(ringfence_bin, home, "--config", str(cfg), "call", "write_file",
              '{"path": "new.txt", "content": "x"}')
    assert out.returncode != 0 and "read-only" in (out.stdout + out.stderr), out
    # Another account's home is not looked up: the error says what to write.
    out = run(ringfence_bin, home, "call", "list_directory", '{"path": "."}',
              "--root", "~bob/notes")
    assert out.returncode == 2 and "~bob/notes" in out.stderr and "full path" in out.stderr


def test_the_start_says_where_everything_is_and_keeps_library_noise_down(ringfence_bin, home):
    (home / "notes").mkdir()
    (home / "code").mkdir()
    out = run(ringfence_bin, home, "serve", "~/notes", f"{home}/code:ro", stdin=handshake())
    log = out.stderr
    assert out.returncode == 0, log
    # The answer to tools/list arrived: the server served.
    assert '"id":2' in out.stdout, out.stdout
    assert "config=none (embedded defaults" in log, log
    assert f"data_dir={home}/.local/share/ringfence" in log, log
    assert f'root root={home}/notes access="read-write"' in log, log
    assert f'root root={home}/code access="read-only"' in log, log
    assert 'family on family="files"' in log, log
    assert 'family off family="shell" why=shell commands are off' in log, log
    # Whether memory search has its model, and how to get it.
    assert "memory search: by words only" in log and "ringfence model install" in log, log
    # The client's whole initialize request is the library's business, at DEBUG.
    assert "peer_info" not in log and "InitializeRequestParams" not in log, log
    out = run(ringfence_bin, home, "--log", "debug", "serve", "~/notes", stdin=handshake())
    assert "InitializeRequestParams" in out.stderr or "peer_info" in out.stderr, out.stderr


@pytest.mark.parametrize(("toml", "said", "not_said"), [
    ('[limits]\nmax_read_lines = "7"\n',
     'must be a whole number (0 or more), not the text "7" (write it without quotes)', "usize"),
    ("[memory.search]\nlexical_weight = \"0.5\"\n", 'must be a number, not the text "0.5"',
     "f32"),
    ("[shell]\nenabled = \"yes\"\n", 'must be true or false, not the text "yes"', "boolean"),
    ("[limits]\nmax_read_line = 7\n", "unknown key `max_read_line`; this table takes:",
     "unknown field"),
])
def test_configuration_mistakes_are_said_in_words(ringfence_bin, home, toml, said, not_said):
    cfg = home / "ringfence.toml"
    cfg.write_text(toml)
    out = run(ringfence_bin, home, "--config", str(cfg), "tools")
    assert out.returncode == 2, out
    assert said in out.stderr, out.stderr
    assert not_said not in out.stderr, out.stderr
    assert "line " in out.stderr, out.stderr


def test_variables_the_configuration_names_are_not_reported_as_unknown(ringfence_bin, home):
    cfg = home / "ringfence.toml"
    cfg.write_text('[calendar]\nprovider = "caldav"\nurl = "https://dav.example.com/cal/"\n'
                   'username = "me"\npassword_env = "RINGFENCE_CALDAV_PASSWORD"\n')
    out = run(ringfence_bin, home, "--config", str(cfg), "tools",
              RINGFENCE_CALDAV_PASSWORD="s3cret", RINGFENCE_TYPO_VARIABLE="1")
    assert out.returncode == 0, out.stderr
    assert "RINGFENCE_CALDAV_PASSWORD" not in out.stderr, out.stderr
    # A real typo is still reported.
    assert "unknown RINGFENCE_ variable" in out.stderr and "RINGFENCE_TYPO_VARIABLE" in out.stderr


def test_init_writes_a_commented_personal_configuration_and_never_replaces_it(
        ringfence_bin, home):
    out = run(ringfence_bin, home, "init")
    assert out.returncode == 0, out.stderr
    cfg = home / ".config" / "ringfence" / "config.toml"
    assert cfg.is_file(), out.stderr
    assert str(cfg) in out.stderr and "ringfence setup" in out.stderr, out.stderr
    assert cfg.stat().st_mode & 0o777 == 0o600
    text = cfg.read_text()
    for table in ("[shell]", "[web.search]", "[images]", "[calendar]", "[followups]",
                  "[llm]", "[memory]", "[delegate]"):
        assert f"\n# {table}\n" in text, table
    # The server starts on it as it is (found at its default place).
    listed = run(ringfence_bin, home, "tools", "--format", "mcp")
    assert listed.returncode == 0, listed.stderr
    # A second init changes nothing and says where the file is.
    cfg.write_text(text + "\n# mine\n")
    again = run(ringfence_bin, home, "init", "--shell")
    assert again.returncode == 1, again
    assert str(cfg) in again.stderr and "never replaces" in again.stderr, again.stderr
    assert cfg.read_text() == text + "\n# mine\n"


def test_init_flags_answer_the_common_questions(ringfence_bin, home, tmp_path):
    (home / "notes").mkdir()
    xdg = tmp_path / "xdg"
    out = run(ringfence_bin, home, "init", "--root", "~/notes", "--shell", "--search", "brave",
              "--llm", "openai", "--model", "qwen3:8b", "--base-url",
              "http://127.0.0.1:11434/v1", "--proactive", XDG_CONFIG_HOME=str(xdg))
    assert out.returncode == 0, out.stderr
    cfg = xdg / "ringfence" / "config.toml"
    text = cfg.read_text()
    assert 'roots = ["~/notes"]' in text and "\n[shell]\nenabled = true" in text, text
    # No search key in this environment: said, not hidden.
    assert "BRAVE_API_KEY" in out.stderr, out.stderr
    listed = run(ringfence_bin, home, "tools", "--format", "mcp", XDG_CONFIG_HOME=str(xdg),
                 BRAVE_API_KEY="k")
    assert listed.returncode == 0, listed.stderr
    names = [t["name"] for t in json.loads(listed.stdout)]
    assert "run_shell_command" in names and "web_search" in names, names
    # --print writes nothing.
    printed = run(ringfence_bin, home, "init", "--print", "--calendar", "google")
    assert printed.returncode == 0 and '\n[calendar]\nprovider = "google"' in printed.stdout
    assert not (home / ".config" / "ringfence" / "config.toml").exists()
    # A value the flag does not take is refused by the parser, naming the choices.
    bad = run(ringfence_bin, home, "init", "--search", "altavista")
    assert bad.returncode == 2 and "brave" in bad.stderr, bad.stderr


def test_completions_manual_and_help_come_from_the_command_line_itself(ringfence_bin, home):
    for shell, marker in (("bash", "_ringfence()"), ("zsh", "#compdef ringfence"),
                          ("fish", "complete -c ringfence"),
                          ("powershell", "Register-ArgumentCompleter")):
        out = run(ringfence_bin, home, "completions", shell)
        assert out.returncode == 0 and marker in out.stdout, (shell, out.stdout[:200])
        assert "init" in out.stdout and "serve" in out.stdout, shell
    man = run(ringfence_bin, home, "man")
    assert man.returncode == 0 and man.stdout.startswith(".ie"), man.stdout[:100]
    assert ".TH ringfence" in man.stdout and "RINGFENCE_CONFIG" in man.stdout
    assert '.SH "RINGFENCE SERVE"' in man.stdout, man.stdout[-2000:]
    # A broken configuration does not stop them.
    cfg = home / "broken.toml"
    cfg.write_text("this is not toml [\n")
    out = run(ringfence_bin, home, "--config", str(cfg), "completions", "bash")
    assert out.returncode == 0, out.stderr
    helped = run(ringfence_bin, home, "--help").stdout
    for var in ("RINGFENCE_CONFIG", "RINGFENCE_DATA_DIR", "RINGFENCE_DENYLIST",
                "RINGFENCE_PRESET", "RINGFENCE_TOOLS", "RINGFENCE_ADD_TOOLS",
                "RINGFENCE_DISABLE_TOOLS", "RINGFENCE_CLIENT_ROOTS", "RINGFENCE_LOG",
                "RINGFENCE_LOG_FORMAT"):
        assert f"[env: {var}" in helped, var
    assert "[env: RINGFENCE_ROOTS" in run(ringfence_bin, home, "serve", "--help").stdout


# Each client's file, as a person who already uses it has it: another server, other settings.
CLIENT_FILES = {
    "claude-desktop": (".config/Claude/claude_desktop_config.json", "mcpServers", False),
    "claude-code": (".claude.json", "mcpServers", True),
    "cursor": (".cursor/mcp.json", "mcpServers", False),
    "vscode": (".config/Code/User/mcp.json", "servers", True),
    "windsurf": (".codeium/windsurf/mcp_config.json", "mcpServers", False),
    "zed": (".config/zed/settings.json", "context_servers", False),
    "gemini": (".gemini/settings.json", "mcpServers", False),
    "lm-studio": (".lmstudio/mcp.json", "mcpServers", False),
}


@pytest.mark.parametrize("client", sorted(CLIENT_FILES))
def test_setup_merges_into_the_clients_own_file_and_keeps_everything_else(
        ringfence_bin, home, client):
    rel, key, typed = CLIENT_FILES[client]
    path = home / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    before = {"theme": "dark", key: {"github": {"command": "gh-mcp", "args": ["--x"],
                                                "env": {"TOKEN": "t"}}},
              "zzz_last": [1, 2]}
    path.write_text(json.dumps(before, indent=4))
    (home / "notes").mkdir()
    out = run(ringfence_bin, home, "setup", client, "~/notes", f"{home}/code:ro")
    assert out.returncode == 0, out.stderr
    after = json.loads(path.read_text())
    # Everything else is there, in its order.
    assert list(after) == ["theme", key, "zzz_last"], after
    assert after["theme"] == "dark" and after["zzz_last"] == [1, 2]
    assert list(after[key]) == ["github", "ringfence"]
    assert after[key]["github"] == before[key]["github"]
    entry = after[key]["ringfence"]
    assert entry["command"] == str(ringfence_bin.resolve()) or \
        Path(entry["command"]).resolve() == ringfence_bin.resolve(), entry
    assert entry["args"] == ["serve", f"{home}/notes", f"{home}/code:ro"], entry
    assert (entry.get("type") == "stdio") == typed, entry
    # The previous file is kept.
    backup = path.with_name(path.name + ".ringfence-backup")
    assert json.loads(backup.read_text()) == before
    # A second run changes nothing (not even the backup).
    text, backup_text = path.read_text(), backup.read_text()
    again = run(ringfence_bin, home, "setup", client, "~/notes", f"{home}/code:ro")
    assert again.returncode == 0 and "nothing changed" in again.stderr, again.stderr
    assert path.read_text() == text and backup.read_text() == backup_text
    # The entry the client runs works: an MCP handshake through it.
    served = subprocess.run([entry["command"], *entry["args"]], input=handshake(),
                            capture_output=True, text=True, env=env_for(home), timeout=120)
    assert '"id":2' in served.stdout, served.stderr


def test_setup_without_a_file_creates_it_and_print_changes_nothing(ringfence_bin, home):
    out = run(ringfence_bin, home, "setup", "cursor", "--print")
    assert out.returncode == 0, out.stderr
    assert str(home / ".cursor/mcp.json") in out.stderr
    assert json.loads(out.stdout)["mcpServers"]["ringfence"]["args"] == ["serve"]
    assert not (home / ".cursor").exists()
    out = run(ringfence_bin, home, "setup", "cursor")
    assert out.returncode == 0, out.stderr
    made = json.loads((home / ".cursor/mcp.json").read_text())
    assert made["mcpServers"]["ringfence"]["args"] == ["serve"]
    assert not (home / ".cursor/mcp.json.ringfence-backup").exists()


def test_setup_keeps_a_codex_toml_files_comments(ringfence_bin, home):
    path = home / ".codex" / "config.toml"
    path.parent.mkdir()
    before = '# my settings\nmodel = "o3"\n\n[mcp_servers.other]\ncommand = "x"  # mine\n'
    path.write_text(before)
    out = run(ringfence_bin, home, "setup", "codex")
    assert out.returncode == 0, out.stderr
    text = path.read_text()
    assert text.startswith(before), text
    assert "[mcp_servers.ringfence]" in text and 'args = ["serve"]' in text, text


def test_setup_does_not_rewrite_a_file_with_comments_or_a_broken_one(ringfence_bin, home):
    path = home / ".config/Code/User/mcp.json"
    path.parent.mkdir(parents=True)
    jsonc = '{\n  // my servers\n  "servers": {"a": {"command": "a"}}\n}\n'
    path.write_text(jsonc)
    out = run(ringfence_bin, home, "setup", "vscode")
    assert out.returncode == 1, out
    assert "comments" in out.stderr and '"ringfence"' in out.stdout, out
    assert path.read_text() == jsonc
    path.write_text('{"servers": ')
    out = run(ringfence_bin, home, "setup", "vscode")
    assert out.returncode == 2 and "--print" in out.stderr, out.stderr
    assert path.read_text() == '{"servers": '


def doctor(bin_path: Path, home: Path, *args: str, offline: bool = False,
           **extra: str) -> tuple[int, list[dict]]:
    """`ringfence [args] doctor --json`: its exit status and findings."""
    flags = ("--offline",) if offline else ()
    out = run(bin_path, home, *args, "doctor", "--json", *flags, **extra)
    return out.returncode, json.loads(out.stdout)


def finding(findings: list[dict], section: str, subject_part: str = "") -> dict:
    for f in findings:
        if f["section"] == section and subject_part in f["subject"]:
            return f
    raise AssertionError(f"no {section}/{subject_part} in {findings}")


def test_doctor_on_the_defaults_finds_no_problem_and_says_what_would_help(ringfence_bin, home):
    code, findings = doctor(ringfence_bin, home)
    assert code == 0, findings
    assert finding(findings, "configuration")["detail"].startswith("none: the embedded defaults")
    model = finding(findings, "memory", "memory search")
    assert model["outcome"] == "note" and "ringfence model install" in model["fix"]
    assert finding(findings, "shell", "off")["outcome"] == "ok"
    # The sandbox this kernel gives, though the shell is off.
    sandbox = finding(findings, "shell", "sandbox")
    assert "Landlock" in sandbox["detail"] or sandbox["outcome"] == "note", sandbox
    text = run(ringfence_bin, home, "doctor")
    assert text.returncode == 0 and "No problems" in text.stdout, text.stdout


def test_doctor_names_each_problem_with_its_fix_and_exits_1(ringfence_bin, home, tmp_path):
    cfg = home / "ringfence.toml"
    cfg.write_text("[limits]\nmax_read_lines = \"7\"\n")
    code, findings = doctor(ringfence_bin, home, "--config", str(cfg))
    assert code == 1
    bad = finding(findings, "configuration")
    assert bad["outcome"] == "problem" and "whole number" in bad["detail"] and bad["fix"]
    # A missing root and a search provider nobody answers at.
    ro = tmp_path / "ro"
    ro.mkdir()
    cfg.write_text(f'roots = ["~/missing", "{ro}:ro"]\n[web.search]\nprovider = "searxng"\n'
                   'url = "http://127.0.0.1:9/"\n')
    code, findings = doctor(ringfence_bin, home, "--config", str(cfg))
    assert code == 1, findings
    root = finding(findings, "roots", "missing")
    assert root["outcome"] == "problem" and "create it" in root["fix"]
    assert finding(findings, "roots", str(ro))["detail"] == "read-only"
    search = finding(findings, "web", "web search (searxng)")
    assert search["outcome"] == "problem" and "searxng" in search["detail"], search
    # --offline reaches nothing: the search is not tried, the root still is a problem.
    code, findings = doctor(ringfence_bin, home, "--config", str(cfg), offline=True)
    assert code == 1
    assert not [f for f in findings if f["section"] == "web"], findings


def test_doctor_reaches_the_configured_search_and_mail_servers(ringfence_bin, home):
    import http.server
    import socketserver
    import threading

    class Searx(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the library's name)
            body = json.dumps({"results": [{"url": "https://example.org/", "title": "t",
                                            "content": "c"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    class Smtp(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            self.wfile.write(b"220 test ESMTP\r\n")
            for line in self.rfile:
                word = line.decode().strip().upper()
                if word.startswith(("EHLO", "HELO")):
                    self.wfile.write(b"250-test\r\n250 OK\r\n")
                elif word.startswith("QUIT"):
                    self.wfile.write(b"221 bye\r\n")
                    return
                else:
                    self.wfile.write(b"250 OK\r\n")

    web = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Searx)
    mail = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Smtp)
    for server in (web, mail):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        cfg = home / "ringfence.toml"
        cfg.write_text(
            f'[web]\nallow_private = ["127.0.0.1"]\n[web.search]\nprovider = "searxng"\n'
            f'url = "http://127.0.0.1:{web.server_address[1]}"\n'
            f'[followups]\nproactive = true\n[[followups.channels]]\nkind = "email"\n'
            f'smtp_host = "127.0.0.1"\nsmtp_port = {mail.server_address[1]}\n'
            f'starttls = false\nfrom = "me@example.org"\nto = "me@example.org"\n')
        code, findings = doctor(ringfence_bin, home, "--config", str(cfg))
        assert code == 0, findings
        assert finding(findings, "web", "web search (searxng)")["outcome"] == "ok"
        smtp = finding(findings, "followups", "follow-up e-mail")
        assert smtp["outcome"] == "ok", smtp
        assert finding(findings, "followups", "delivery")["detail"].startswith("on, through")
    finally:
        web.shutdown()
        mail.shutdown()


def test_config_show_says_where_each_value_came_from_and_never_shows_a_secret(
        ringfence_bin, home):
    cfg = home / "ringfence.toml"
    cfg.write_text('log = "warn"\n[limits]\nmax_read_lines = 100\n'
                   '[calendar]\nprovider = "caldav"\nurl = "https://dav.example.org/a/"\n'
                   'username = "a"\npassword = "hunter2-inline"\n'
                   '[web.search]\nprovider = "brave"\napi_key = "brave-inline-key"\n'
                   '[followups]\n[[followups.channels]]\nkind = "webhook"\n'
                   'url = "https://hooks.example.org/T0/B0/hook-path-secret"\nsecret = "s-inline"\n'
                   '[llm]\nprovider = "openai"\nmodel = "m"\n')
    out = run(ringfence_bin, home, "--config", str(cfg), "--preset", "iris", "config", "show",
              LLM_CHAT_FS_MAX_SEARCH_RESULTS="7", OPENAI_API_KEY="sk-very-secret",
              RINGFENCE_SHELL_ENABLED="true")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    lines = {line.split(" = ")[0]: line for line in text.splitlines() if " = " in line}
    assert lines["log"].endswith("# file"), text
    assert lines["log_format"].endswith("# default"), text
    assert lines["preset"].endswith("# flag"), text
    assert lines["max_read_lines"] == "max_read_lines = 100   # file", text
    assert lines["max_search_results"] == "max_search_results = 7   # environment", text
    assert lines["max_read_chars"] == "max_read_chars = 30000   # default", text
    assert "# RINGFENCE_SHELL_ENABLED = true   # environment" in text, text
    assert "the key: set" in lines["api_key_env"], text
    for secret in ("hunter2-inline", "brave-inline-key", "sk-very-secret", "hook-path-secret",
                   "s-inline"):
        assert secret not in text, secret
    assert "password = (set)   # file" in text and "api_key = (set)   # file" in text, text
    assert '[[followups.channels]]\nkind = "webhook"' in text, text
    assert 'url = "https://hooks.example.org/…"' in text, text
    assert str(cfg) in text


def call(bin_path: Path, home: Path, tool: str, args: dict, *flags: str,
         **extra: str) -> subprocess.CompletedProcess[str]:
    return run(bin_path, home, "call", tool, json.dumps(args), *flags, **extra)


def test_memory_from_the_shell_for_one_user(ringfence_bin, home):
    for fact in ("Alice is vegetarian", "Alice's sister is called Jo"):
        out = call(ringfence_bin, home, "store_truth", {"truthContent": fact}, "--user", "alice")
        assert out.returncode == 0, out.stderr
    out = call(ringfence_bin, home, "store_memory",
               {"memoryContent": "Alice visited Lisbon in May", "memoryType": "event"},
               "--user", "alice")
    assert out.returncode == 0, out.stderr
    # Someone else's rows stay theirs.
    assert call(ringfence_bin, home, "store_truth", {"truthContent": "Bob is a runner"},
                "--user", "bob").returncode == 0
    listed = run(ringfence_bin, home, "memory", "list", "--user", "alice")
    assert listed.returncode == 0 and len(listed.stdout.splitlines()) == 3, listed.stdout
    assert "Bob" not in listed.stdout
    found = run(ringfence_bin, home, "memory", "search", "Lisbon", "--user", "alice")
    assert found.returncode == 0 and "memory #1" in found.stdout, found.stdout
    assert run(ringfence_bin, home, "memory", "search", "Lisbon", "--user", "bob").stdout.strip() == ""
    shown = run(ringfence_bin, home, "memory", "show", "memory", "1", "--user", "alice")
    assert "type: event" in shown.stdout and "created: " in shown.stdout, shown.stdout
    edited = run(ringfence_bin, home, "memory", "edit", "truth", "1", "Alice is vegan",
                 "--user", "alice")
    assert edited.returncode == 0 and "Alice is vegan" in edited.stdout, edited.stderr
    assert "was: Alice is vegetarian" in edited.stderr
    pinned = run(ringfence_bin, home, "memory", "pin", "1", "--user", "alice")
    assert pinned.returncode == 0 and "pinned" in pinned.stdout, pinned.stderr
    unpinned = run(ringfence_bin, home, "memory", "unpin", "1", "--user", "alice")
    assert unpinned.returncode == 0 and "pinned" not in unpinned.stdout
    missing = run(ringfence_bin, home, "memory", "pin", "1", "--user", "carol")
    assert missing.returncode == 2 and "carol has no truth #1" in missing.stderr
    deleted = run(ringfence_bin, home, "memory", "delete", "truth", "2", "--user", "alice")
    assert deleted.returncode == 0 and "sister" in deleted.stdout
    refused = run(ringfence_bin, home, "memory", "clear", "--user", "alice")
    assert refused.returncode == 2 and "--yes" in refused.stderr and "2 rows" in refused.stderr
    cleared = run(ringfence_bin, home, "memory", "clear", "--user", "alice", "--yes")
    assert cleared.returncode == 0 and "deleted 2 rows" in cleared.stderr, cleared.stderr
    left = run(ringfence_bin, home, "memory", "list")
    assert left.stdout.splitlines() == [l for l in left.stdout.splitlines() if "bob" in l]
    assert "Bob is a runner" in left.stdout


def test_followups_from_the_shell_cancel_and_reschedule(ringfence_bin, home):
    for n in (1, 2):
        out = call(ringfence_bin, home, "schedule_followup",
                   {"context": f"check on task {n}", "minutes_from_now": 60}, "--user", "alice")
        assert out.returncode == 0, out.stderr
    moved = run(ringfence_bin, home, "followups", "reschedule", "1", "--user", "alice",
                "--in", "3d")
    assert moved.returncode == 0 and "rescheduled" in moved.stderr, moved.stderr
    at = run(ringfence_bin, home, "followups", "reschedule", "2", "--user", "alice",
             "--at", "2099-01-01T09:00:00+01:00")
    assert at.returncode == 2 and "366 days" in at.stderr, at.stderr
    gone = run(ringfence_bin, home, "followups", "cancel", "2", "--user", "alice",
               "--reason", "done already")
    assert gone.returncode == 0 and "cancelled" in gone.stdout, gone.stderr
    again = run(ringfence_bin, home, "followups", "cancel", "2", "--user", "alice")
    assert again.returncode == 2 and "no longer pending" in again.stderr
    other = run(ringfence_bin, home, "followups", "cancel", "1", "--user", "bob")
    assert other.returncode == 2 and "bob has no follow-up #1" in other.stderr
    listed = run(ringfence_bin, home, "followups", "list", "--user", "alice")
    rows = {l.split("\t")[1]: l for l in listed.stdout.splitlines()}
    assert "\tpending\t" in rows["#1"] and "cancelled: done already" in rows["#2"], rows


def test_call_as_a_user_and_over_an_existing_file(ringfence_bin, home):
    (home / "notes").mkdir()
    (home / "notes" / "todo.txt").write_text("old\n")
    args = {"path": "todo.txt", "content": "new\n"}
    gated = call(ringfence_bin, home, "write_file", args, "--root", "~/notes")
    assert gated.returncode == 1 and "--overwrite" in gated.stderr, gated
    assert (home / "notes" / "todo.txt").read_text() == "old\n"
    written = call(ringfence_bin, home, "write_file", args, "--root", "~/notes", "--overwrite")
    assert written.returncode == 0, written.stdout
    assert (home / "notes" / "todo.txt").read_text() == "new\n"


def serve_calls(bin_path: Path, home: Path, *tools: str) -> None:
    """A stdio session that makes `tools` calls (audited as `serve` audits them)."""
    lines = handshake().splitlines()[:2]
    for i, tool in enumerate(tools):
        lines.append(json.dumps({"jsonrpc": "2.0", "id": 10 + i, "method": "tools/call",
                                 "params": {"name": tool, "arguments": {"path": "."}}}))
    out = run(bin_path, home, "serve", stdin="\n".join(lines) + "\n")
    assert out.returncode == 0, out.stderr


def test_audit_compares_instants_and_refuses_what_it_cannot_read(ringfence_bin, home):
    serve_calls(ringfence_bin, home, "list_directory", "directory_tree")
    every = run(ringfence_bin, home, "audit")
    lines = [json.loads(l) for l in every.stdout.splitlines()]
    # The two calls run at once: either may finish (and be written) first.
    assert sorted(l["tool"] for l in lines) == ["directory_tree", "list_directory"], every.stdout
    assert [l["time"] for l in lines] == sorted(l["time"] for l in lines), "oldest first"
    first = lines[0]["time"]
    # The same instant with an offset finds the same calls; a relative time too.
    import datetime as dt
    t = dt.datetime.fromisoformat(first.replace("Z", "+00:00")) - dt.timedelta(seconds=1)
    with_offset = t.astimezone(dt.timezone(dt.timedelta(hours=5, minutes=30))).isoformat()
    assert len(run(ringfence_bin, home, "audit", "--since", with_offset).stdout.splitlines()) == 2
    assert len(run(ringfence_bin, home, "audit", "--since", "1h").stdout.splitlines()) == 2
    assert run(ringfence_bin, home, "audit", "--until", with_offset).stdout.strip() == ""
    assert len(run(ringfence_bin, home, "audit", "--since", "yesterday").stdout.splitlines()) == 2
    bad = run(ringfence_bin, home, "audit", "--since", "garbage")
    assert bad.returncode == 2 and "RFC 3339" in bad.stderr and "2h" in bad.stderr


def test_audit_is_a_table_on_a_terminal_and_follows(ringfence_bin, home):
    import os as _os
    import pty
    import select
    import time
    serve_calls(ringfence_bin, home, "list_directory")
    leader, follower = pty.openpty()
    proc = subprocess.Popen([str(ringfence_bin), "audit", "--follow"], stdout=follower,
                            stderr=subprocess.PIPE, env=env_for(home))
    _os.close(follower)
    seen = b""
    try:
        def read_until(needle: bytes, deadline_s: float) -> bytes:
            nonlocal seen
            end = time.monotonic() + deadline_s
            while needle not in seen and time.monotonic() < end:
                ready, _, _ = select.select([leader], [], [], 0.5)
                if ready:
                    seen += _os.read(leader, 4096)
            return seen
        read_until(b"list_directory", 60)
        assert b"list_directory" in seen and b"local" in seen and b" ms" in seen, seen
        assert b"{" not in seen, seen  # a table, not JSON
        serve_calls(ringfence_bin, home, "directory_tree")
        read_until(b"directory_tree", 60)
        assert b"directory_tree" in seen, seen
        assert seen.count(b"list_directory") == 1, seen
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        _os.close(leader)


@pytest.fixture
def session_bus(tmp_path: Path):
    """A private session bus (dbus-daemon) with a stand-in notification service on it;
    yields (address, the file each Notify call is written to)."""
    import shutil
    import time
    daemon = shutil.which("dbus-daemon")
    assert daemon, "dbus-daemon is needed (scripts/test.sh installs it)"
    socket = tmp_path / "bus"
    conf = tmp_path / "bus.conf"
    conf.write_text(f"""<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig><type>session</type><listen>unix:path={socket}</listen><auth>EXTERNAL</auth>
<policy context="default"><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/>
<allow own="*"/></policy></busconfig>""")
    bus = subprocess.Popen([daemon, f"--config-file={conf}", "--nofork", "--print-address"],
                           stdout=subprocess.PIPE, text=True)
    address = bus.stdout.readline().strip()
    assert address.startswith("unix:"), address
    shown = tmp_path / "notifications.jsonl"
    standin = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("notification_standin.py")), str(shown)],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "DBUS_SESSION_BUS_ADDRESS": address})
    assert standin.stdout.readline().strip() == "ready"
    try:
        yield address, shown
    finally:
        for p in (standin, bus):
            p.terminate()
            p.wait(timeout=30)


def test_follow_ups_reach_the_desktop_as_notifications(ringfence_bin, home, session_bus):
    import time
    address, shown = session_bus
    cfg = home / "ringfence.toml"
    cfg.write_text('[followups]\nproactive = true\n[[followups.channels]]\nkind = "desktop"\n')
    env = {"DBUS_SESSION_BUS_ADDRESS": address}
    # doctor finds the service without showing anything.
    code, findings = doctor(ringfence_bin, home, "--config", str(cfg), **env)
    desktop = finding(findings, "followups", "desktop")
    assert desktop["outcome"] == "ok" and "standin" in desktop["detail"], desktop
    assert not shown.exists() or shown.read_text() == ""
    out = call(ringfence_bin, home, "schedule_followup",
               {"context": "Ask how the dentist appointment went", "minutes_from_now": 0.02},
               "--config", str(cfg), **env)
    assert out.returncode == 0, out.stderr
    scheduler = subprocess.Popen([str(ringfence_bin), "--config", str(cfg), "scheduler"],
                                 stderr=subprocess.PIPE, text=True, env=env_for(home, **env))
    try:
        end = time.monotonic() + 90
        while time.monotonic() < end and not (shown.exists() and shown.read_text()):
            time.sleep(0.2)
    finally:
        scheduler.terminate()
        _, err = scheduler.communicate(timeout=60)
    lines = [json.loads(l) for l in shown.read_text().splitlines()] if shown.exists() else []
    assert len(lines) == 1, err
    note = lines[0]
    assert note["app_name"] == "ringfence"
    assert note["summary"] == "Ask how the dentist appointment went"
    assert note["body"] == "Ask how the dentist appointment went"
    listed = run(ringfence_bin, home, "--config", str(cfg), "followups", "list", **env)
    assert "completed" in listed.stdout and "via desktop" in listed.stdout, listed.stdout


def test_without_a_session_bus_the_desktop_channel_says_so(ringfence_bin, home):
    cfg = home / "ringfence.toml"
    cfg.write_text('[followups]\nproactive = true\n[[followups.channels]]\nkind = "desktop"\n')
    code, findings = doctor(ringfence_bin, home, "--config", str(cfg))
    desktop = finding(findings, "followups", "desktop")
    assert code == 1 and desktop["outcome"] == "problem", findings
    assert "DBUS_SESSION_BUS_ADDRESS" in desktop["detail"], desktop


def test_init_on_a_desktop_sends_follow_ups_to_notifications(ringfence_bin, home):
    out = run(ringfence_bin, home, "init", "--print",
              DBUS_SESSION_BUS_ADDRESS="unix:path=/nonexistent/bus")
    assert '\n[[followups.channels]]\nkind = "desktop"' in out.stdout, out.stdout
    assert '\n[[followups.channels]]\nkind = "mcp"' in out.stdout, out.stdout
    plain = run(ringfence_bin, home, "init", "--print")
    assert '\n# [[followups.channels]]\n# kind = "desktop"' in plain.stdout


def test_setup_keeps_the_first_backup_and_writes_through_a_link(ringfence_bin, home, tmp_path):
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    real = dotfiles / "mcp.json"
    original = '{"mcpServers": {"other": {"command": "x"}}}'
    real.write_text(original)
    (home / ".cursor").mkdir()
    link = home / ".cursor" / "mcp.json"
    link.symlink_to(real)
    assert run(ringfence_bin, home, "setup", "cursor").returncode == 0
    assert link.is_symlink(), "the link stays a link"
    assert "ringfence" in json.loads(real.read_text())["mcpServers"]
    # A second change (new roots) keeps the backup from before ringfence.
    (home / "notes").mkdir()
    assert run(ringfence_bin, home, "setup", "cursor", "~/notes").returncode == 0
    backup = real.with_name("mcp.json.ringfence-backup")
    assert backup.read_text() == original
    assert json.loads(real.read_text())["mcpServers"]["ringfence"]["args"] == [
        "serve", f"{home}/notes"]


def test_init_refuses_answers_that_make_a_file_that_cannot_load(ringfence_bin, home):
    out = run(ringfence_bin, home, "init", "--llm", "openai")
    assert out.returncode == 2 and "--model" in out.stderr, out.stderr
    out = run(ringfence_bin, home, "init", "--llm", "sampling", "--base-url", "http://x/v1")
    assert out.returncode == 2 and "sampling" in out.stderr, out.stderr
    assert not (home / ".config" / "ringfence" / "config.toml").exists()


def shown_tables(text: str) -> dict[str, dict[str, str]]:
    """`config show`'s output as {table: {key: "value   # source"}}."""
    tables: dict[str, dict[str, str]] = {"": {}}
    table = ""
    for line in text.splitlines():
        if line.startswith("[") and not line.startswith("[["):
            table = line.split("]")[0].strip("[")
            tables.setdefault(table, {})
        elif " = " in line and not line.startswith("#"):
            key, rest = line.split(" = ", 1)
            tables[table].setdefault(key, rest)
    return tables


def test_config_show_lists_every_family_value_with_its_source(ringfence_bin, home):
    cfg = home / "ringfence.toml"
    cfg.write_text('[web]\ntimeout_secs = 12\n[shell]\nmax_memory_mb = 2048\n'
                   '[memory.search]\nmin_relevance = 0.3\n')
    out = run(ringfence_bin, home, "--config", str(cfg), "config", "show",
              RINGFENCE_SHELL_ENABLED="true", RINGFENCE_EMBEDDINGS="none")
    assert out.returncode == 0, out.stderr
    t = shown_tables(out.stdout)
    # Set in the file, by a variable, or nowhere: each says so, family keys included.
    assert t["web"]["timeout_secs"] == "12   # file", out.stdout
    assert t["web"]["connect_timeout_secs"] == "10   # default", out.stdout
    assert t["shell"]["enabled"] == "true   # environment", out.stdout
    assert t["shell"]["max_memory_mb"] == "2048   # file", out.stdout
    assert t["shell"]["max_cpu_secs"] == "300   # default", out.stdout
    assert t["memory"]["search.min_relevance"] == "0.3   # file", out.stdout
    assert t["memory"]["embeddings.provider"] == '"none"   # environment', out.stdout
    assert t["followups"]["proactive"] == "false   # default", out.stdout
    assert t["calendar"]["provider"] == '"local"   # default', out.stdout
    assert t["images"]["api_key"] == "(unset)   # default", out.stdout
    # Counts of tokens are not secrets.
    assert t["delegate"]["max_tokens"].endswith("# default")
    assert t["delegate"]["max_tokens"].split()[0].isdigit(), out.stdout


def test_config_show_does_not_guess_when_the_file_needs_a_variable(ringfence_bin, home):
    cfg = home / "ringfence.toml"
    cfg.write_text('log = "warn"\n[web.search]\nprovider = "brave"\n')
    out = run(ringfence_bin, home, "--config", str(cfg), "config", "show",
              BRAVE_API_KEY="k-secret-value")
    assert out.returncode == 0, out.stderr
    lines = {l.split(" = ")[0]: l for l in out.stdout.splitlines() if " = " in l}
    # Without the variable the file does not load, so file and environment cannot be told
    # apart for what the file sets; what nobody set is still the default.
    assert lines["log"].endswith("# environment or file"), out.stdout
    assert lines["log_format"].endswith("# default"), out.stdout
    assert "k-secret-value" not in out.stdout
