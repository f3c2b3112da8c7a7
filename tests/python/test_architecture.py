"""ARCHITECTURE.md's crate map and layers against `cargo metadata`, and the rules the layers
keep: every workspace crate is in the map with exactly the ringfence crates it depends on
(normal dependencies); mechanism crates depend on no family and not on the core; the core
on mechanisms only; a family crate's Cargo.toml (dev-dependencies too) names no other
family; the transport knows no family; and the binary lists its families one line each."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def architecture_block(marker: str) -> str:
    text = (ROOT / "ARCHITECTURE.md").read_text()
    return text.split(f"<!-- {marker} -->", 1)[1].split(f"<!-- /{marker} -->", 1)[0]


def documented() -> dict[str, set[str]]:
    crates: dict[str, set[str]] = {}
    for line in architecture_block("crate-map").splitlines():
        m = re.match(r"^(ringfence[-a-z]*)\s+(?:\(none\)|→\s+(.+))\s*$", line)
        if m:
            deps = {d.strip() for d in (m.group(2) or "").split(",") if d.strip()}
            crates[m.group(1)] = deps
    return crates


def layers() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for line in architecture_block("layers").splitlines():
        m = re.match(r"^- \*\*([a-z]+)\*\*:\s+(.+)$", line)
        if m:
            found[m.group(1)] = {c.strip(" `.") for c in m.group(2).split(",") if c.strip()}
    return found


def metadata() -> dict:
    cargo = shutil.which("cargo")
    if cargo is None:
        pytest.skip("cargo is not on PATH")
    out = subprocess.run([cargo, "metadata", "--no-deps", "--format-version", "1"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120, check=True)
    return json.loads(out.stdout)


def ringfence_deps(meta: dict, kinds: set) -> dict[str, set[str]]:
    return {p["name"]: {d["name"] for d in p["dependencies"]
                        if d["name"].startswith("ringfence") and d.get("kind") in kinds}
            for p in meta["packages"]}


def test_the_crate_map_is_what_cargo_builds():
    doc, real = documented(), ringfence_deps(metadata(), {None})
    assert doc, "no crate map between the <!-- crate-map --> markers"
    assert set(doc) == set(real), (
        f"in the map only: {sorted(set(doc) - set(real))}; "
        f"in the workspace only: {sorted(set(real) - set(doc))}")
    wrong = {name: {"map": sorted(doc[name]), "cargo": sorted(real[name])}
             for name in real if doc[name] != real[name]}
    assert not wrong, f"dependencies differ: {wrong}"


def test_the_layers_hold():
    meta = metadata()
    normal = ringfence_deps(meta, {None})
    every_kind = ringfence_deps(meta, {None, "dev", "build"})
    lay = layers()
    assert set(lay) == {"mechanisms", "core", "families", "transport", "binary"}, lay
    placed = [c for crates in lay.values() for c in crates]
    assert sorted(placed) == sorted(normal), "every crate in exactly one layer"
    mechanisms, families = lay["mechanisms"], lay["families"]
    for crate in mechanisms:
        assert normal[crate] <= mechanisms, f"{crate} depends on {normal[crate] - mechanisms}"
    for crate in lay["core"]:
        assert normal[crate] <= mechanisms, f"the core depends on {normal[crate] - mechanisms}"
    for crate in families:
        others = every_kind[crate] & (families - {crate})
        assert not others, f"the family crate {crate} names the families {sorted(others)}"
        assert normal[crate] <= mechanisms | lay["core"], crate
    for crate in lay["transport"]:
        assert not normal[crate] & families, f"{crate} knows {normal[crate] & families}"


def test_the_binary_lists_each_family_on_one_line():
    text = (ROOT / "crates/ringfence/src/families/mod.rs").read_text()
    block = text.split("pub const FAMILIES: &[&dyn Plug] = &[", 1)[1].split("];", 1)[0]
    lines = [line.strip() for line in block.strip().splitlines()]
    listed = []
    for line in lines:
        m = re.fullmatch(r"&(ringfence_[a-z]+)::[A-Z][A-Za-z]*Plug,", line)
        assert m, f"not one plug per line: {line!r}"
        listed.append(m.group(1).replace("_", "-"))
    assert sorted(listed) == sorted(layers()["families"])
