"""Reading the three seed documents ringfence implements (seed 000: Iris's file tools, 002:
llm-chat-file's thirteen, 003: Iris's built-in tools): their parameter tables and the
result and error strings they quote. The documents live beside the project, not in it
(`../shared/seeds/`, or RINGFENCE_SEEDS_DIR); tests that need them skip when they are absent,
and `seed_facts.json` keeps what the tests compare against from them (names, types, which
are required, ranges, allowed values) so the schema checks run everywhere.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def seeds_dir() -> Path | None:
    configured = os.environ.get("RINGFENCE_SEEDS_DIR")
    for d in ([Path(configured)] if configured else []) + [ROOT.parent / "shared" / "seeds"]:
        if d.is_dir() and any(d.glob("00[023]_*.txt")):
            return d
    return None


def seed_text(number: str) -> str:
    d = seeds_dir()
    assert d is not None, "the seed documents are not found"
    [path] = list(d.glob(f"{number}_*.txt"))
    return path.read_text()


TOOL_LINE = [
    re.compile(r"^\)?`?([a-z][a-z_]+)`?$"),  # 000: `read_file`; 003: store_truth (or after ")")
    re.compile(r"\(`([a-z][a-z_]+)`\)\s*$"),  # 002: ReadFileTool (`read_file`)
]


def cells(line: str) -> list[str]:
    sep = "\t" if "\t" in line else "|"
    return [c.strip().strip("`").strip() for c in line.strip().strip("|").split(sep)]


def parameter_tables(number: str) -> dict[str, dict[str, dict[str, object]]]:
    """Tool -> parameter -> {type, required, description}, from one seed's tables whose
    header is `Parameter | Type | Required | Description`."""
    tools: dict[str, dict[str, dict[str, object]]] = {}
    tool = None
    in_table = False
    for line in seed_text(number).splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        head = cells(stripped)
        if head[:3] == ["Parameter", "Type", "Required"]:
            in_table = tool is not None
            continue
        if in_table:
            if set(stripped) <= set("|-: "):
                continue  # the markdown separator row
            row = cells(stripped)
            if len(row) >= 4 and row[2].lower() in ("yes", "no"):
                assert tool is not None
                tools.setdefault(tool, {})[row[0]] = {
                    "type": row[1], "required": row[2].lower() == "yes",
                    "description": row[3]}
                continue
            in_table = False
        for pattern in TOOL_LINE:
            m = pattern.search(stripped)
            if m:
                tool = m.group(1)
                break
    return tools


def quoted_strings(number: str) -> list[str]:
    """The result and error strings a seed quotes: `// "…"` lines of its examples, and
    `- "…" - meaning` lines of its error lists."""
    found = []
    for line in seed_text(number).splitlines():
        m = re.match(r'^\s*//\s*(?:results\[\d\]\S*:\s*|result:\s*)?"(.*)"\s*$', line)
        if m:
            found.append(m.group(1))
            continue
        m = re.match(r'^\s*-\s*"([^"]+)"\s*-', line)
        if m:
            found.append(m.group(1))
    return found
