#!/usr/bin/env python3
"""Reference sentence vectors for the embedding tests, computed independently of candle.

A plain NumPy BERT forward pass (uncased WordPiece tokenisation from vocab.txt, mean
pooling, L2 normalisation — the all-MiniLM-L6-v2 pipeline) over the model directory given
on the command line. The Rust test compares its vectors with these.

    python3 tests/tools/minilm_reference.py MODEL_DIR > crates/ringfence-embed/tests/data/minilm_reference.json

Needs numpy only.
"""
import json
import math
import struct
import sys
import unicodedata

import numpy as np

SENTENCES = [
    "User is allergic to shellfish",
    "TJ is a software engineer based in New York City",
    "Which seafood makes them sick?",
    "The quick brown fox jumps over the lazy dog.",
    "Café owners in Zürich don't open before 9am!",
]


def load_weights(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        if info["dtype"] != "F32":  # position_ids (I64) is not a weight
            continue
        out[name] = np.frombuffer(data[start:end], dtype=np.float32).reshape(info["shape"])
    return out


def basic_tokens(text):
    text = unicodedata.normalize("NFD", text.lower())
    text = "".join(c for c in text if unicodedata.category(c) != "Mn")
    words, cur = [], ""
    for c in text:
        cat = unicodedata.category(c)
        if c.isspace():
            if cur:
                words.append(cur)
            cur = ""
        elif cat.startswith("P") or (c.isascii() and not c.isalnum()):
            if cur:
                words.append(cur)
            words.append(c)
            cur = ""
        else:
            cur += c
    if cur:
        words.append(cur)
    return words


def wordpiece(word, vocab):
    pieces, start = [], 0
    while start < len(word):
        end, found = len(word), None
        while start < end:
            sub = word[start:end] if start == 0 else "##" + word[start:end]
            if sub in vocab:
                found = sub
                break
            end -= 1
        if found is None:
            return ["[UNK]"]
        pieces.append(found)
        start = end
    return pieces


def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def gelu(x):
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def encode(ids, W, cfg):
    eps = cfg["layer_norm_eps"]
    heads = cfg["num_attention_heads"]
    h = cfg["hidden_size"]
    d = h // heads
    s = len(ids)
    x = W["embeddings.word_embeddings.weight"][ids] + W["embeddings.position_embeddings.weight"][:s] + W["embeddings.token_type_embeddings.weight"][0]
    x = layer_norm(x, W["embeddings.LayerNorm.weight"], W["embeddings.LayerNorm.bias"], eps)
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        lin = lambda t, n: t @ W[p + n + ".weight"].T + W[p + n + ".bias"]
        q = lin(x, "attention.self.query").reshape(s, heads, d).transpose(1, 0, 2)
        k = lin(x, "attention.self.key").reshape(s, heads, d).transpose(1, 0, 2)
        v = lin(x, "attention.self.value").reshape(s, heads, d).transpose(1, 0, 2)
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(d)
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        probs = scores / scores.sum(-1, keepdims=True)
        ctx = (probs @ v).transpose(1, 0, 2).reshape(s, h)
        a = layer_norm(lin(ctx, "attention.output.dense") + x, W[p + "attention.output.LayerNorm.weight"], W[p + "attention.output.LayerNorm.bias"], eps)
        inner = gelu(lin(a, "intermediate.dense"))
        x = layer_norm(lin(inner, "output.dense") + a, W[p + "output.LayerNorm.weight"], W[p + "output.LayerNorm.bias"], eps)
    v = x.mean(0)
    return v / np.linalg.norm(v)


def main():
    model = sys.argv[1]
    cfg = json.load(open(f"{model}/config.json"))
    W = load_weights(f"{model}/model.safetensors")
    vocab_list = json.load(open(f"{model}/tokenizer.json"))["model"]["vocab"]
    vocab = set(vocab_list)
    out = []
    for sentence in SENTENCES:
        tokens = ["[CLS]"] + [p for w in basic_tokens(sentence) for p in wordpiece(w, vocab)] + ["[SEP]"]
        ids = [vocab_list[t] for t in tokens]
        vec = encode(np.array(ids), W, cfg)
        out.append({"text": sentence, "tokens": tokens, "vector": [round(float(x), 6) for x in vec]})
    json.dump({"model": "all-MiniLM-L6-v2", "generator": "tests/tools/minilm_reference.py", "sentences": out}, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
