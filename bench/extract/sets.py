"""The labelled pages of bench/extract, split into a development part and an evaluation part.

    sets.py SOURCES_DIR HELDOUT_DIR MOZILLA_DIR OUT.json

SOURCES_DIR holds the registry archives unpacked by `sources/fetch.sh` (with its
`manifest.jsonl`), `rules.json` from `sources/mercury_rules.js` and `mercury.jsonl` from
`sources/mercury_parse.js`; HELDOUT_DIR holds
newspaper4k's pages (run.sh fetches them); MOZILLA_DIR is Readability.js's test pages, used here
only to know their sites. OUT.json gets one record per page: id, source, site, part, html path,
URL, and the reference as shingle hashes (full labels) or as with/without snippets.

Where the labels come from (README.md, "The larger labelled set"):

- `mercury`: pages of @postlight/parser 2.2.2's tests, labelled by Mercury itself
  (`sources/mercury_parse.js`) running only that project's hand-written rules for the site
  (`fallback: false`) and its standard cleaning: headline, standfirst and article text. As a
  check, the same rules are also applied without Mercury (`rules_label`: the element the
  `content.selectors` name, less what `content.clean`, the author and date selectors and
  non-text elements name); a page where the two disagree (F1 below 0.6) is left out, since
  there the rules do not say clearly what the article is.
- `article-extractor`: the curated `expected.html` of article-extractor 0.5.9's fixtures.
- `newspaper4k`: this project's own labels (heldout/labels.json).
- `trafilatura`: trafilatura 1.1.0's test pages with the with/without snippets of its evaluation
  (trafilatura crate 0.6.0, comparison-data/entries.json): no full text, scored apart.

The split is by site (registrable domain), so no site is on both sides: a site that has pages in
Readability's test pages or in the newspaper4k set is development; every other site is
evaluation when the first byte of SHA-256("ringfence-extract-split-1:" + site) is even, else
development. Nothing about the extractor may be decided by looking at evaluation pages.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import urllib.parse
from collections import Counter
from pathlib import Path

import warnings

from bs4 import BeautifulSoup, XMLParsedAsHTMLWarning

import score

# A few test pages are XHTML; they are read as HTML, as a browser reads them.
warnings.filterwarnings("ignore", category=XMLParsedAsHTMLWarning)

HERE = Path(__file__).resolve().parent
SPLIT_SALT = "ringfence-extract-split-1:"
MIN_TOKENS = 60
MIN_AGREEMENT = 0.6  # Mercury's output against its rules applied directly  # a label shorter than this is a video or gallery page, not an article
# Never article text, whatever a site's rules say.
NON_TEXT = "script, style, noscript, template, svg, iframe, form, button, select, textarea, input, object, embed"
# Suffixes under which every name is a site of its own.
PRIVATE_SUFFIXES = ("github.io", "blogspot.com", "wordpress.com", "tumblr.com", "substack.com")
SECOND_LEVEL = {"co", "com", "org", "net", "ac", "ad", "ed", "gr", "lg", "gov", "go", "ne", "or", "edu", "gob", "gv"}


def site_of(url: str) -> str:
    """The registrable domain of `url`'s host (a short suffix list, enough for these pages)."""
    host = (urllib.parse.urlsplit(url).hostname or "").lower().strip(".")
    parts = host.split(".")
    for suffix in PRIVATE_SUFFIXES:
        if host.endswith("." + suffix):
            return ".".join(parts[-(suffix.count(".") + 2):])
    if len(parts) >= 3 and len(parts[-1]) == 2 and parts[-2] in SECOND_LEVEL:
        return ".".join(parts[-3:])
    return ".".join(parts[-2:])


def part_of(site: str, forced_dev: set[str]) -> str:
    if site in forced_dev:
        return "dev"
    return "eval" if hashlib.sha256((SPLIT_SALT + site).encode()).digest()[0] % 2 == 0 else "dev"


def read_html(path: Path) -> str:
    return path.read_bytes().decode("utf-8", errors="replace")


def mozilla_sites(root: Path) -> tuple[set[str], set[str]]:
    """Sites of Readability's test pages: by canonical/og:url, and the names in folder names."""
    sites, names = set(), set()
    for d in root.iterdir():
        if not (d / "source.html").is_file():
            continue
        names.update(t for t in re.split(r"[-_]", d.name) if t.isalpha())
        head = read_html(d / "source.html")[:200_000]
        for m in re.finditer(r"<(?:link|meta)\b[^>]*>", head, re.I):
            tag = m.group(0)
            if re.search(r"rel=[\"']?canonical|property=[\"']?og:url", tag, re.I):
                href = re.search(r"(?:href|content)=[\"']([^\"']+)", tag, re.I)
                if href and href.group(1).startswith("http"):
                    sites.add(site_of(href.group(1)))
    return sites, names


def rules_label(html: str, rules: dict) -> str | None:
    soup = BeautifulSoup(html, "lxml")
    nodes = None
    for sel in rules["content"]:
        try:
            if isinstance(sel, list):
                if all(soup.select(s) for s in sel):
                    nodes = soup.select(", ".join(sel))
            else:
                found = soup.select(sel)
                if len(found) == 1 and found[0].get_text().strip():
                    nodes = found
        except Exception:  # noqa: BLE001 - a selector soupsieve does not know (jQuery-only)
            continue
        if nodes:
            break
    if not nodes:
        return None
    nodes = [n for n in nodes if not any(p in nodes for p in n.parents)]
    drop = [NON_TEXT] + [s for s in rules["clean"] + rules["author"] + rules["date"] if isinstance(s, str)]

    def inside(el) -> bool:
        return any(el is n or n in el.parents for n in nodes)

    head = []
    for field in ("title", "dek"):
        sels = [s for s in rules[field] if isinstance(s, str)] or (["h1"] if field == "title" else [])
        for sel in sels:
            try:
                found = [el for el in soup.select(sel) if el.get_text().strip()]
            except Exception:  # noqa: BLE001
                continue
            if found:
                if not inside(found[0]):
                    head.append(found[0].get_text(" ").strip())
                break
    for node in nodes:
        for sel in drop:
            try:
                for el in node.select(sel):
                    el.decompose()
            except Exception:  # noqa: BLE001
                continue
    return "\n\n".join(head + [score.html_text(str(n)) for n in nodes])


def hashes(text: str) -> list[str]:
    return sorted(score.hashed(score.shingles(text)).elements())


def main() -> None:
    src, heldout, mozilla, out_path = (Path(a) for a in sys.argv[1:5])
    moz_sites, moz_names = mozilla_sites(mozilla)
    held = json.loads((HERE / "heldout" / "labels.json").read_text())["pages"]
    forced = set(moz_sites) | {site_of(p["url"]) for p in held if "example.invalid" not in p["url"]}
    rules = json.loads((src / "rules.json").read_text())
    manifest = [json.loads(line) for line in (src / "manifest.jsonl").read_text().splitlines()]
    mercury = {}
    for line in (src / "mercury.jsonl").read_text().splitlines():
        row = json.loads(line)
        if not row.get("error"):
            mercury[row["id"]] = row

    def forced_dev(site: str) -> bool:
        return site in forced or site.split(".")[0] in moz_names

    pages, dropped = [], []

    def add(rec: dict) -> None:
        rec["part"] = "dev" if forced_dev(rec["site"]) else part_of(rec["site"], set())
        pages.append(rec)

    for p in held:
        add({"id": f"newspaper4k/{p['id']}", "source": "newspaper4k", "site": site_of(p["url"]) if "example.invalid" not in p["url"] else "newspaper4k-unknown",
             "html": str(heldout / p["file"]), "url": p["url"], "sha256": p["sha256"], "kind": "full", "ref": p["shingles"]})
    for r in manifest:
        html = Path(r["html"])
        if r["source"].startswith("npm:@postlight"):
            ex = r.get("extractor", "").rsplit("/", 1)[-1]
            if ex not in rules:
                dropped.append((r["id"], "no site rules"))
                continue
            direct = rules_label(read_html(html), rules[ex])
            m = mercury.get(r["id"]) or {}
            text = "\n\n".join(x for x in (m.get("title"), m.get("dek"), m.get("text")) if x) or None
            source = "mercury"
            if text is not None and direct is not None:
                agree = score.prf(score.shingles(text), score.shingles(direct))[2]
                if agree < MIN_AGREEMENT:
                    dropped.append((r["id"], f"Mercury and its rules disagree (F1 {agree:.2f})"))
                    continue
        elif r["source"].startswith("pypi:article-extractor"):
            text = score.html_text(read_html(Path(r["expected_html"])))
            source = "article-extractor"
        elif r["source"].startswith("pypi:trafilatura") and r.get("with"):
            add({"id": f"trafilatura/{r['id']}", "source": "trafilatura", "site": site_of(r["url"]), "html": str(html),
                 "url": r["url"], "kind": "snippets", "with": r["with"], "without": r["without"]})
            continue
        else:
            continue
        if text is None:
            dropped.append((r["id"], "the rules' content selector matches nothing"))
            continue
        if len(score.tokens(text)) < MIN_TOKENS:
            dropped.append((r["id"], f"label of {len(score.tokens(text))} tokens"))
            continue
        add({"id": f"{source}/{r['id']}", "source": source, "site": site_of(r["url"]), "html": str(html),
             "url": r["url"], "kind": "full", "ref": hashes(text), "ref_text": text})

    out_path.write_text(json.dumps({"pages": pages, "dropped": dropped}, ensure_ascii=False))
    c = Counter((p["source"], p["part"]) for p in pages)
    sites = Counter((p["source"], p["part"]) for p in {(p["source"], p["part"], p["site"]): p for p in pages}.values())
    for k in sorted(c):
        print(f"{k[0]:18} {k[1]:5} pages {c[k]:4}  sites {sites[k]:4}", file=sys.stderr)
    print(f"dropped {len(dropped)}: " + "; ".join(f"{i} ({why})" for i, why in dropped), file=sys.stderr)


if __name__ == "__main__":
    main()
