"""The user documentation, kept true by the real binary.

- Every ```toml block in README.md and docs/ loads with the real configuration loader
  (`ringfence --config FILE tools`, a fresh HOME, no RINGFENCE_* variables; the variables a
  snippet names in a `*_env` key are set to a dummy value, as a person would set them).
- Every key the loader takes is in the configuration reference (docs/configuration.md), in
  the section of its table, and the reference lists no key the loader refuses. The keys are
  discovered from the loader itself: a table given a bogus key is refused with the list of
  keys it takes ("unknown key `zz_bogus`; this table takes: a, b, c"; at the top level
  "unknown key `zz_bogus` (the file takes: a, b, c)"), and each key is tried as a table in
  turn to find the tables inside tables.
- Every RINGFENCE_* variable the reference names is one the binary knows.
- The README stays short, and its test command is the one CI runs.
- Links between the pages lead to a file and, with `#anchor`, to a heading there.

The reference's convention: one heading per table, the table's name in backticks
(### `[memory.search]`, ### `[[followups.channels]]` for an array of tables,
### `[calendar.users.<name>]` for a table per name, "### Top-level keys" for the top level),
and below it one table row per key, starting with the key in backticks (| `lexical_weight` |).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from test_sdk_client import REPO_ROOT, _binary
from test_sdk_client import ringfence_bin  # noqa: F401 (fixture)

README = REPO_ROOT / "README.md"
DOCS_DIR = REPO_ROOT / "docs"
REFERENCE = DOCS_DIR / "configuration.md"
DOC_FILES = [README, *sorted(DOCS_DIR.rglob("*.md"))]

# A fence may be indented (inside a list item); TOML does not mind the indentation.
FENCE = re.compile(r"^[ \t]*```toml[^\n]*\n(.*?)^[ \t]*```[ \t]*$", re.M | re.S)
# `password_env = "NAME"`, inline tables included.
NAMED_VAR = re.compile(r"\b\w+_env\s*=\s*\"([A-Za-z_][A-Za-z0-9_]*)\"")
TAKES = re.compile(r"this table takes: ([a-z0-9_, ]+)")
TOP_TAKES = re.compile(r"\(the file takes: ([a-z0-9_, ]+)\)")
BOGUS = "zz_bogus"
# A name for a table keyed by name (`[calendar.users.<name>]`).
NAME = "somebody"


# --- running the loader ---------------------------------------------------------------


def _env(home: Path, **extra: str) -> dict[str, str]:
    """A fresh person's environment: a HOME of their own, nothing of ringfence's, no
    provider keys."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8"}
    env.update(extra)
    return env


def _load(tmp: Path, text: str, **extra: str) -> subprocess.CompletedProcess[str]:
    """`ringfence --config FILE tools` on `text`, in a fresh HOME under `tmp`."""
    tmp.mkdir(parents=True, exist_ok=True)
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    config = tmp / "config.toml"
    config.write_text(text)
    return subprocess.run(
        [str(_binary()), "--config", str(config), "tools"],
        env=_env(home, **extra), cwd=tmp, capture_output=True, text=True, timeout=120,
    )


# --- a: every snippet loads -------------------------------------------------------------


def _snippets() -> list[tuple[str, str]]:
    out = []
    for path in DOC_FILES:
        text = path.read_text()
        for m in FENCE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            out.append((f"{path.relative_to(REPO_ROOT)}:{line}", m.group(1)))
    return out


SNIPPETS = _snippets()


def test_the_docs_have_toml_snippets():
    # The parametrised test below would pass on none; the reference alone has one.
    assert any(where.startswith("docs/configuration.md") for where, _ in SNIPPETS), SNIPPETS


@pytest.mark.parametrize(("where", "snippet"), SNIPPETS, ids=[w for w, _ in SNIPPETS])
def test_every_toml_snippet_loads(where, snippet, tmp_path, ringfence_bin):
    named = {name: "dummy-value-for-the-docs-test" for name in NAMED_VAR.findall(snippet)}
    r = _load(tmp_path, snippet, **named)
    assert r.returncode == 0, f"{where}: the snippet does not load:\n{r.stderr}\n---\n{snippet}"


# --- b: every key the loader takes is in the reference ------------------------------------


def _takes(tmp: Path, header: str) -> tuple[list[str] | None, str]:
    """The keys the table `header` (`[limits]`, `[[followups.channels]]`, or "" for the top
    level) takes, from the loader's refusal of a bogus key; None if it is not such a table,
    with the message."""
    r = _load(tmp, f"{header}\n{BOGUS} = 1\n")
    assert r.returncode != 0, f"{header}: a bogus key was accepted"
    m = TAKES.search(r.stderr) or TOP_TAKES.search(r.stderr)
    keys = [k.strip() for k in m.group(1).split(",") if k.strip()] if m else None
    return keys, r.stderr


def _discover(tmp: Path) -> dict[str, set[str]]:
    """Table path → its keys. Paths: "" (top level), "limits", "followups.channels[]" (an
    array of tables), "calendar.users.<name>" (a table per name)."""
    tables: dict[str, set[str]] = {}
    counter = iter(range(1_000_000))

    def probe(header: str) -> tuple[list[str] | None, str]:
        return _takes(tmp / f"probe{next(counter)}", header)

    def walk(path: str, header_path: str, keys: list[str]) -> None:
        tables[path] = set(keys)
        for key in keys:
            sub_path = f"{path}.{key}" if path else key
            sub_header = f"{header_path}.{key}" if header_path else key
            sub, err = probe(f"[{sub_header}]")
            if sub is not None:
                walk(sub_path, sub_header, sub)
            elif "must be a list in [ ], not a table" in err:
                # An array: of tables if `[[…]]` names its keys, else of values.
                # (No array of tables holds tables today, so its keys are not probed further.)
                sub, _ = probe(f"[[{sub_header}]]")
                if sub is not None:
                    tables[f"{sub_path}[]"] = set(sub)
            elif "must be a table, not" in err and "<name>" not in sub_path:
                # A table of tables keyed by name.
                sub, _ = probe(f"[{sub_header}.{NAME}]")
                if sub is not None:
                    walk(f"{sub_path}.<name>", f"{sub_header}.{NAME}", sub)

    top, err = probe("")
    assert top, f"the top level did not say what it takes:\n{err}"
    walk("", "", top)
    return tables


@pytest.fixture(scope="module")
def discovered(tmp_path_factory, ringfence_bin) -> dict[str, set[str]]:
    return _discover(tmp_path_factory.mktemp("discover"))


# Keys the parser takes but the loader refuses by hand, each checked below to stay refused:
# a user's calendar table has the same shape as [calendar], less these three.
REFUSED = {
    "calendar.users.<name>": {"timeout_secs": "5", "users": "{}",
                              "user_allow_private": '["127.0.0.1"]'},
}
# Keys no refusal lists (the roots' table form is one of two shapes of an entry), each
# checked below to load.
UNLISTED = {
    "roots[]": {"path": '"/srv/ringfence-docs-test"', "access": '"read"'},
}


def _accepted_tables(discovered: dict[str, set[str]]) -> dict[str, set[str]]:
    tables = {k: set(v) for k, v in discovered.items()}
    for path, keys in REFUSED.items():
        tables[path] -= set(keys)
    for path, keys in UNLISTED.items():
        tables.setdefault(path, set()).update(keys)
    return tables


def _header_of(path: str) -> str:
    """The TOML header that opens the table at `path`, with a name for `<name>`."""
    name = path.replace("<name>", NAME)
    return f"[[{name[:-2]}]]" if name.endswith("[]") else f"[{name}]"


def _reference() -> dict[str, set[str]]:
    """Table path → the keys docs/configuration.md lists in that table's section."""
    sections: dict[str, set[str]] = {}
    current = None
    heading = re.compile(r"^#{2,4} (.*)$")
    table = re.compile(r"`(\[\[?)([a-z_.<>]+)\]\]?`")
    row = re.compile(r"^\| `([a-z_]+)` \|")
    for line in REFERENCE.read_text().splitlines():
        if m := heading.match(line):
            title = m.group(1)
            if title.strip() == "Top-level keys":
                current = ""
            elif t := table.match(title):
                current = t.group(2) + ("[]" if t.group(1) == "[[" else "")
            else:
                current = None
                continue
            assert current not in sections, f"{REFERENCE.name}: `{title}` has two sections"
            sections[current] = set()
        elif current is not None and (m := row.match(line)):
            sections[current].add(m.group(1))
    return sections


def test_discovery_finds_the_tables_it_should(discovered):
    # A guard on the discovery itself: if the loader's messages change, it must not pass by
    # finding nothing.
    tables = discovered
    for path, key in [("", "data_dir"), ("limits", "max_read_lines"),
                      ("memory.search", "lexical_weight"), ("followups.channels[]", "smtp_host"),
                      ("http.tokens[]", "hash"), ("http.oauth", "jwks_url"),
                      ("calendar.users.<name>", "password_env"),
                      ("followups.users.<name>", "email"), ("web.search", "provider")]:
        assert key in tables.get(path, set()), (path, key, sorted(tables))


def test_the_hand_refused_keys_are_refused_and_the_unlisted_ones_load(tmp_path, ringfence_bin):
    for i, (path, keys) in enumerate(REFUSED.items()):
        for j, (key, value) in enumerate(keys.items()):
            r = _load(tmp_path / f"r{i}-{j}", f"{_header_of(path)}\n{key} = {value}\n")
            assert r.returncode == 2 and key in r.stderr, (path, key, r.stderr)
    for i, (path, keys) in enumerate(UNLISTED.items()):
        body = "".join(f"{k} = {v}\n" for k, v in keys.items())
        r = _load(tmp_path / f"u{i}", f"{_header_of(path)}\n{body}")
        assert r.returncode == 0, (path, r.stderr)
        r = _load(tmp_path / f"u{i}-bogus", f"{_header_of(path)}\n{body}{BOGUS} = 1\n")
        assert r.returncode == 2, (path, "a bogus key was accepted")


def test_every_key_the_loader_takes_is_in_the_reference(discovered):
    accepted = _accepted_tables(discovered)
    documented = _reference()
    missing = []
    for path, keys in sorted(accepted.items()):
        # A key whose value is a table is documented by that table's own section.
        leaves = {k for k in keys
                  if not any(p in accepted for p in (f"{path}.{k}".lstrip("."),
                                                      f"{path}.{k}[]".lstrip("."),
                                                      f"{path}.{k}.<name>".lstrip(".")))}
        for key in sorted(leaves - documented.get(path, set())):
            missing.append(f"{path}.{key}".lstrip(".") if path else key)
    assert not missing, (
        f"keys the loader takes that {REFERENCE.relative_to(REPO_ROOT)} does not list "
        f"(as a row `| \\`key\\` |` under the table's heading): {missing}")


def test_the_reference_lists_no_key_the_loader_refuses(discovered):
    accepted = _accepted_tables(discovered)
    documented = _reference()
    wrong = []
    for path, keys in sorted(documented.items()):
        if path not in accepted:
            wrong.append(f"the table {path!r}")
            continue
        wrong += [f"{path}.{k}".lstrip(".") for k in sorted(keys - accepted[path])]
    assert not wrong, f"{REFERENCE.relative_to(REPO_ROOT)} lists what the loader refuses: {wrong}"


def test_the_reference_names_only_variables_the_binary_knows(tmp_path, ringfence_bin):
    names = sorted(set(re.findall(r"\bRINGFENCE_[A-Z_]+\b", REFERENCE.read_text())))
    assert "RINGFENCE_DATA_DIR" in names, names
    home = tmp_path / "home"
    home.mkdir()
    # Set empty, each is as if unset; an unknown one is reported by name.
    r = subprocess.run([str(ringfence_bin), "tools"], env=_env(home, **{n: "" for n in names}),
                       cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    unknown = [n for n in names if re.search(rf"variable={n}\b", r.stderr)]
    assert not unknown, f"not variables of ringfence: {unknown}\n{r.stderr}"


# --- the README ------------------------------------------------------------------------


def test_the_readme_is_short_and_its_test_command_is_the_one_ci_runs():
    lines = README.read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; put the rest in docs/"
    text = "\n".join(lines)
    assert "bash scripts/test.sh" in text
    assert "cargo run --release -p ringfence -- serve" in text
    ci = (REPO_ROOT / ".ci" / "run").read_text()
    assert re.search(r"^bash scripts/test\.sh\b", ci, re.M), ci


# --- links -------------------------------------------------------------------------------

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
# Pages another change is writing; a link to one may wait for it, and is checked once it is
# there.
WRITTEN_ELSEWHERE = {DOCS_DIR / "install.md"}


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    in_fence = False
    for line in path.read_text().splitlines():
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        if in_fence or not (m := re.match(r"^#{1,6} (.*)$", line)):
            continue
        slug = _slug(m.group(1))
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def test_links_between_the_pages_lead_somewhere():
    others = ("ARCHITECTURE.md", "SECURITY.md", "BENCHMARKS.md")
    pages = [*DOC_FILES, *(REPO_ROOT / name for name in others)]
    broken = []
    for page in pages:
        text = re.sub(r"^[ \t]*```.*?^[ \t]*```", "", page.read_text(), flags=re.M | re.S)
        for target in LINK.findall(text):
            if re.match(r"^[a-z]+:", target):
                continue  # a web address
            file, _, anchor = target.partition("#")
            dest = (page.parent / file).resolve() if file else page
            if not dest.exists():
                if dest not in WRITTEN_ELSEWHERE:
                    broken.append(f"{page.relative_to(REPO_ROOT)}: {target}")
                continue
            if anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{page.relative_to(REPO_ROOT)}: {target} (no such heading)")
    assert not broken, broken
