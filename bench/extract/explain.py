"""Where one page's extraction differs from its label, line by line (for development pages).

    explain.py SETS_JSON EXTRACT_PAGES ID_SUBSTRING [--all]

Runs ringfence's extractor (the extract_pages example) on the development pages whose id holds
ID_SUBSTRING and prints, for each, the output lines that are mostly not in the label (kept but
not article: precision lost) and, when the label's text is at hand, the label lines mostly not
in the output (article missed: recall lost). It refuses evaluation pages: the split in sets.py
is only worth something if nobody tunes on them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import score


def unmatched(lines: list[str], other: Counter) -> list[tuple[float, str]]:
    out = []
    for line in lines:
        sh = score.hashed(score.shingles(line))
        n = sum(sh.values())
        if n == 0:
            continue
        hit = sum(min(c, other[s]) for s, c in sh.items())
        if hit / n < 0.5:
            out.append((hit / n, line.strip()))
    return out


def main() -> None:
    sets, binary, needle = sys.argv[1], sys.argv[2], sys.argv[3]
    pages = [p for p in json.load(open(sets))["pages"] if needle in p["id"] and p["kind"] == "full"]
    for p in pages:
        if p["part"] != "dev":
            print(f"{p['id']}: an evaluation page; not shown", file=sys.stderr)
            continue
        proc = subprocess.run([binary], input=f"{p['id']}\t{p['html']}\t{p['url']}\n", capture_output=True, text=True, check=True)
        text = json.loads(proc.stdout)["text"]
        ref = Counter(p["ref"])
        got = score.hashed(score.shingles(text))
        pr, rc, f1 = score.prf(got, ref)
        print(f"=== {p['id']} ({p['site']}): P {pr:.3f} R {rc:.3f} F1 {f1:.3f}")
        for share, line in unmatched(text.splitlines(), ref):
            print(f"  + {share:.2f} {line[:160]}")
        if p.get("ref_text"):
            for share, line in unmatched(p["ref_text"].splitlines(), got):
                print(f"  - {share:.2f} {line[:160]}")


if __name__ == "__main__":
    main()
