"""Turns the hand-written held-out specs (heldout/specs.json) into scoring labels.

For each page the spec names, in reading order, the elements that hold the article as judged by
a person reading the page's source (`include`: CSS selectors; a `first:` prefix keeps only the
first match) and the elements inside them that are not article (`exclude`). The label text is
the text of those elements (bench/extract/score.py's html_text), and heldout/labels.json keeps
only what scoring needs: the page's file, URL and sha256, and the multiset of the label's
4-gram shingle hashes. No page text is written.

    label.py PAGES_DIR              # writes heldout/labels.json
    label.py PAGES_DIR --show ID    # prints one label's text, to review it against the page
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from bs4 import BeautifulSoup

import score

HERE = Path(__file__).resolve().parent


def label_text(html: str, spec: dict) -> str:
    soup = BeautifulSoup(html, "lxml")
    for sel in spec.get("exclude", []):
        for el in soup.select(sel):
            el.decompose()
    parts = []
    for sel in spec["include"]:
        first = sel.startswith("first:")
        found = soup.select(sel.removeprefix("first:"))
        if not found:
            raise SystemExit(f"{spec['id']}: selector {sel!r} matches nothing")
        for el in found[:1] if first else found:
            parts.append(score.html_text(str(el)))
    return "\n\n".join(parts)


def main() -> None:
    pages = Path(sys.argv[1])
    specs = json.loads((HERE / "heldout" / "specs.json").read_text())
    show = sys.argv[3] if len(sys.argv) > 3 and sys.argv[2] == "--show" else None
    out = []
    for spec in specs["pages"]:
        raw = (pages / spec["file"]).read_bytes()
        text = label_text(raw.decode("utf-8", errors="replace"), spec)
        if show == spec["id"]:
            print(text)
            return
        hashes = score.hashed(score.shingles(text))
        out.append({
            "id": spec["id"],
            "file": spec["file"],
            "url": spec["url"],
            "sha256": hashlib.sha256(raw).hexdigest(),
            "tokens": len(score.tokens(text)),
            "shingles": sorted(hashes.elements()),
        })
    (HERE / "heldout" / "labels.json").write_text(json.dumps({"pages": out}, indent=0) + "\n")
    print(f"{len(out)} labels written", file=sys.stderr)


if __name__ == "__main__":
    main()
