"""The quality metric of bench/extract: 4-gram shingle F1 between two texts.

Definition (also in BENCHMARKS.md, "Web page extraction quality"):

1. Normalise: Unicode NFKC, then lowercase (``str.lower``).
2. Tokenise: a token is a maximal run of Unicode letters and digits (``[^\\W_]+``: anything
   else -- spaces, punctuation, symbols, underscores -- separates tokens and is dropped), except
   that each Han, Hiragana or Katakana character is a token of its own (those scripts do not
   separate words with spaces).
3. Shingles: every run of 4 consecutive tokens; a text with 1 to 3 tokens has one shingle, its
   whole token list; an empty text has none. Shingles are counted as a multiset (a repeated
   sentence counts as often as it occurs).
4. overlap = sum over shingles of min(count in extracted, count in reference);
   precision = overlap / |extracted shingles|, recall = overlap / |reference shingles|,
   F1 = 2PR / (P + R); F1 = 0 when either side is empty or the overlap is 0.

For the held-out set the reference is stored only as shingle hashes: the first 16 hex digits of
SHA-256 over the shingle's tokens joined by single spaces (UTF-8), so the metric is computed over
hashes on both sides; collisions are negligible at this size.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter
from html.parser import HTMLParser

_TOKEN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]|[^\W_]+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def tokens(text: str) -> list[str]:
    text = unicodedata.normalize("NFKC", text).lower()
    out: list[str] = []
    for m in _TOKEN.finditer(text):
        tok = m.group(0)
        # A run mixing letters and CJK characters is split so that each CJK character stands alone.
        if len(tok) > 1 and _CJK.search(tok):
            for part in re.findall(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]|[^\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+", tok):
                out.append(part)
        else:
            out.append(tok)
    return out


def shingles(text: str, n: int = 4) -> Counter:
    toks = tokens(text)
    if not toks:
        return Counter()
    if len(toks) < n:
        return Counter([" ".join(toks)])
    return Counter(" ".join(toks[i : i + n]) for i in range(len(toks) - n + 1))


def shingle_hash(shingle: str) -> str:
    return hashlib.sha256(shingle.encode("utf-8")).hexdigest()[:16]


def hashed(counter: Counter) -> Counter:
    out: Counter = Counter()
    for s, c in counter.items():
        out[shingle_hash(s)] += c
    return out


def prf(extracted: Counter, reference: Counter) -> tuple[float, float, float]:
    ne, nr = sum(extracted.values()), sum(reference.values())
    if ne == 0 or nr == 0:
        return 0.0, 0.0, 0.0
    overlap = sum(min(c, reference[s]) for s, c in extracted.items() if s in reference)
    if overlap == 0:
        return 0.0, 0.0, 0.0
    p, r = overlap / ne, overlap / nr
    return p, r, 2 * p * r / (p + r)


_BLOCK = {
    "address", "article", "aside", "blockquote", "br", "caption", "dd", "details", "div", "dl",
    "dt", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6",
    "header", "hr", "li", "main", "nav", "ol", "p", "pre", "section", "summary", "table",
    "tbody", "td", "tfoot", "th", "thead", "tr", "ul", "img", "body", "html",
}
_SKIP = {"script", "style", "noscript", "template", "head", "title"}


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skip = 0

    def handle_starttag(self, tag, attrs):
        if tag in _SKIP:
            self.skip += 1
        elif tag in _BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag):
        if tag in _SKIP:
            self.skip = max(0, self.skip - 1)
        elif tag in _BLOCK:
            self.parts.append("\n")

    def handle_data(self, data):
        if not self.skip:
            self.parts.append(data)


def html_text(html: str) -> str:
    """The text of an HTML fragment: text nodes, block elements separated by newlines."""
    p = _Text()
    p.feed(html)
    p.close()
    return "".join(p.parts)


_MD_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_MD_LINK = re.compile(r"\[([^\]]*)\]\((?:[^()\s]|\([^)]*\))*(?:\s+\"[^\"]*\")?\)")
_MD_AUTOLINK = re.compile(r"<(https?://[^>]+)>")


def markdown_text(md: str) -> str:
    """Markdown as text for scoring: link and image targets dropped (their text kept)."""
    md = _MD_IMAGE.sub(r"\1", md)
    md = _MD_LINK.sub(r"\1", md)
    return _MD_AUTOLINK.sub("", md)
