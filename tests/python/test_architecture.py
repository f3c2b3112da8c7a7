"""ARCHITECTURE.md's crate map against `cargo metadata`: every workspace crate is in the map,
with exactly the ringfence crates it depends on (normal dependencies), and no crate the
workspace does not have."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def documented() -> dict[str, set[str]]:
    text = (ROOT / "ARCHITECTURE.md").read_text()
    block = text.split("<!-- crate-map -->", 1)[1].split("<!-- /crate-map -->", 1)[0]
    crates: dict[str, set[str]] = {}
    for line in block.splitlines():
        m = re.match(r"^(ringfence[-a-z]*)\s+(?:\(none\)|→\s+(.+))\s*$", line)
        if m:
            deps = {d.strip() for d in (m.group(2) or "").split(",") if d.strip()}
            crates[m.group(1)] = deps
    return crates


def actual() -> dict[str, set[str]]:
    cargo = shutil.which("cargo")
    if cargo is None:
        pytest.skip("cargo is not on PATH")
    out = subprocess.run([cargo, "metadata", "--no-deps", "--format-version", "1"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120, check=True)
    meta = json.loads(out.stdout)
    return {p["name"]: {d["name"] for d in p["dependencies"]
                        if d["name"].startswith("ringfence") and d.get("kind") is None}
            for p in meta["packages"]}


def test_the_crate_map_is_what_cargo_builds():
    doc, real = documented(), actual()
    assert doc, "no crate map between the <!-- crate-map --> markers"
    assert set(doc) == set(real), (
        f"in the map only: {sorted(set(doc) - set(real))}; "
        f"in the workspace only: {sorted(set(real) - set(doc))}")
    wrong = {name: {"map": sorted(doc[name]), "cargo": sorted(real[name])}
             for name in real if doc[name] != real[name]}
    assert not wrong, f"dependencies differ: {wrong}"
