#!/usr/bin/env python3
"""Generates the synthetic benchmark files (skipping any that already exist and are right).

  big/big.txt     ~1 GiB: 10,737,418 lines of exactly 100 bytes; line N starts with N as
                  10 zero-padded digits (so a read can be checked). big.txt.lines holds the
                  line count.
  edit/edit.txt   ~10 MB: 100,000 lines of 100 bytes with one unique marker line mid-file.
  small/small.txt 100 lines of Rust-like text (~4 KB).
  tree/           1,000,010 entries: 10 × 100 directories holding 999 empty files each;
                  one file in 1,000 is named `*.rare` (999 of them) for name searches.
                  tree.complete marks a finished tree.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

FILLER = "the quick brown fox jumps over the lazy dog 0123456789 ABCDEFGHIJKLMNOPQRSTUVWXYZ abcdefghijklmnop"


def line(i: int) -> str:
    head = f"{i:010d} "
    body = FILLER[(i % 7):] + FILLER
    return head + body[: 100 - len(head) - 1] + "\n"


def gen_big(path: Path, target_bytes: int = 1 << 30) -> None:
    lines = target_bytes // 100
    want = lines * 100
    count_file = Path(str(path) + ".lines")
    if path.exists() and path.stat().st_size == want and count_file.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", buffering=1 << 20) as f:
        chunk = 100_000
        for start in range(1, lines + 1, chunk):
            f.write("".join(line(i) for i in range(start, min(start + chunk, lines + 1))))
    tmp.rename(path)
    count_file.write_text(f"{lines}\n")
    assert path.stat().st_size == want


def gen_edit(path: Path) -> None:
    lines = 100_000
    if path.exists() and path.stat().st_size == lines * 100:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(1, lines + 1):
        if i == lines // 2:
            marker = "let x = EDIT_MARKER_ALPHA_0001;"
            out.append(marker + " " * (99 - len(marker)) + "\n")
        else:
            out.append(line(i))
    path.write_text("".join(out))
    assert path.stat().st_size == lines * 100


def gen_small(path: Path) -> None:
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    out = ["// small benchmark file: first line\n"]
    for i in range(2, 100):
        out.append(f"    let value_{i:03d} = compute(input, {i}); // line {i}\n")
    out.append("// small benchmark file: last line\n")
    path.write_text("".join(out))


TREE_EXTS = ["rs", "txt", "md", "json", "py", "toml", "c"]


def gen_tree(base: Path) -> None:
    """1,000,010 entries (1,010 directories, 999,000 files), every name unique."""
    marker = base.parent / "tree.complete"
    if marker.exists():
        return
    import shutil
    if base.exists():
        shutil.rmtree(base)
    n = 0
    for top in range(10):
        for mid in range(100):
            d = base / f"d{top}" / f"s{mid:02d}"
            d.mkdir(parents=True)
            for _ in range(999):
                ext = "rare" if n % 1000 == 0 else TREE_EXTS[n % len(TREE_EXTS)]
                fd = os.open(d / f"f{n:07d}.{ext}", os.O_CREAT | os.O_WRONLY, 0o644)
                os.close(fd)
                n += 1
    marker.write_text(f"{n} files\n")


def main() -> None:
    base = Path(sys.argv[1])
    gen_small(base / "small" / "small.txt")
    gen_edit(base / "edit" / "edit.txt")
    gen_big(base / "big" / "big.txt")
    if os.environ.get("TREE", "1") != "0":
        gen_tree(base / "tree")


if __name__ == "__main__":
    main()
