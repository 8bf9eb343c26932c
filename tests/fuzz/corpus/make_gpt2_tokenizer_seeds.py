#!/usr/bin/python3
"""Writes the seeds of tests/fuzz/corpus/gpt2_tokenizer/, with the standard library only. Each
seed is one byte that says what follows (as tests/fuzz/gpt2_tokenizer_fuzz.cpp reads it), then:
  't' text for GPT-2's real vocabulary;
  'f' a vocabulary, the line "=== merges.txt ===", and a merges file: small ones spelled here,
      and GPT-2's own first 300 merges with the tokens they need (from ../shared/tokenizers/gpt2).

    python3 tests/fuzz/corpus/make_gpt2_tokenizer_seeds.py
"""

import json
import pathlib

HERE = pathlib.Path(__file__).resolve().parent
OUT = HERE / "gpt2_tokenizer"
GPT2 = HERE.parents[3] / "shared" / "tokenizers" / "gpt2"
SEPARATOR = "\n=== merges.txt ===\n"


def bytes_to_unicode():
    """GPT-2's byte-level alphabet, as encoder.py defines it."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    symbols = {b: chr(b) for b in printable}
    n = 0
    for b in range(256):
        if b not in symbols:
            symbols[b] = chr(256 + n)
            n += 1
    return symbols


SPELL = bytes_to_unicode()


def spell(token: bytes) -> str:
    return "".join(SPELL[b] for b in token)


def files(merges, extra_tokens=()):
    """A vocabulary of the 256 bytes, the merges' results and `extra_tokens`, with its merges."""
    tokens = [bytes([b]) for b in range(256)] + [t.encode() for t in extra_tokens]
    for left, right in merges:
        merged = (left + right).encode()
        if merged not in tokens:
            tokens.append(merged)
    vocab = json.dumps({spell(t): i for i, t in enumerate(tokens)}, ensure_ascii=False)
    lines = ["#version: 0.2"] + [spell(l.encode()) + " " + spell(r.encode()) for l, r in merges]
    return "f" + vocab + SEPARATOR + "\n".join(lines) + "\n"


def gpt2_prefix(merge_count):
    """GPT-2's first merges, with every token they name or make."""
    encoder = json.loads((GPT2 / "encoder.json").read_text(encoding="utf-8"))
    lines = (GPT2 / "vocab.bpe").read_text(encoding="utf-8").split("\n")[: merge_count + 1]
    needed = set(SPELL.values())
    for line in lines[1:]:
        left, right = line.split(" ")
        needed.update((left, right, left + right))
    kept = sorted((encoder[t], t) for t in needed)
    vocab = json.dumps({t: i for i, (_, t) in enumerate(kept)}, ensure_ascii=False)
    return "f" + vocab + SEPARATOR + "\n".join(lines) + "\n"


SEEDS = {
    "text_sentence.txt": "tHello world, it's a test: 1,000.5 apples.\n",
    "text_contractions.txt": "tI'm sure they'll say we've DON'T 'S 'LL '''s",
    "text_white_space.txt": "t  \n  \ttabs\t\t and trailing   \r\n\u00a0\u3000\ufeff",
    "text_unicode.txt": "tcaf\u00e9 e\u0301 \u65e5\u672c\u8a9e \U0001F917\U0001F469\u200d\U0001F469 \u0661\u0662 \u2167",
    "text_empty.txt": "t",
    "files_hello.txt": files([("h", "e"), ("l", "l"), ("he", "ll"), ("hell", "o"), (" ", "w")]),
    "files_ranks_reversed.txt": files([("ab", "a"), ("a", "b"), ("b", "c")], extra_tokens=["ab"]),
    "files_bytes_only.txt": files([]),
    "files_gpt2_prefix.txt": gpt2_prefix(300),
}


def main():
    OUT.mkdir(exist_ok=True)
    for name, text in SEEDS.items():
        (OUT / name).write_bytes(text.encode("utf-8"))
    # Damaged on purpose: a merge whose result is no token, and bytes that are not UTF-8.
    (OUT / "files_bad_result.txt").write_bytes(files([("h", "e")]).replace("h e", "e h").encode("utf-8"))
    (OUT / "text_not_utf8.txt").write_bytes(b"tok \xff \xed\xa0\x80 \xc0\xaf \xe2\x82")


if __name__ == "__main__":
    main()
