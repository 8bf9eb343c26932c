#!/usr/bin/python3
"""Writes the seeds of tests/fuzz/corpus/llama_tokenizer/, with the standard library only. Each
seed is one byte that says what follows (as tests/fuzz/llama_tokenizer_fuzz.cpp reads it), then:
  'f' the model's vocab_size (uint16, little-endian) and a tokenizer.bin, as llama2.c's
      tokenizer.py exports one: valid ones, and one of each kind of damage;
  't' text for the fuzzer's fixed vocabulary.

    python3 tests/fuzz/corpus/make_llama_tokenizer_seeds.py
"""

import pathlib
import struct

OUT = pathlib.Path(__file__).resolve().parent / "llama_tokenizer"


def llama2c_base():
    """<unk>, BOS and EOS as tokenizer.py spells them, then the byte tokens <0x00> to <0xFF>."""
    return [(b"<unk>", 0.0), (b"\n<s>\n", 0.0), (b"\n</s>\n", 0.0)] + [(b"<0x%02X>" % b, 0.0) for b in range(256)]


def tokenizer_bin(tokens, max_token_length=None):
    if max_token_length is None:
        max_token_length = max(len(t) for t, _ in tokens)
    out = struct.pack("<i", max_token_length)
    for token, score in tokens:
        out += struct.pack("<fi", score, len(token)) + token
    return out


def file_seed(tokens, vocab_size=None, **kwargs):
    return b"f" + struct.pack("<H", len(tokens) if vocab_size is None else vocab_size) + tokenizer_bin(tokens, **kwargs)


SMALL = llama2c_base() + [(b" ", 0.0), (b"a", 0.0), (b"b", 0.0), (b"ab", -1.0), (b" a", -2.0), (b" ab", -2.0)]
ENGLISH = (llama2c_base() + [(bytes([c]), 0.0) for c in range(0x20, 0x7F)]
           + [(t.encode(), s) for t, s in [("th", -1), ("he", -2), ("the", -3), (" t", -1), (" the", -4),
                                            ("in", -2), ("ng", -2), ("ing", -5), ("\u00e9", 0), ("\u2603", 0)]])


def damaged(change):
    data = bytearray(tokenizer_bin(SMALL))
    change(data)
    return b"f" + struct.pack("<H", len(SMALL)) + bytes(data)


LAST = len(tokenizer_bin(SMALL)) - (8 + 3)  # where the last token, " ab", begins

SEEDS = {
    "file_small.bin": file_seed(SMALL),
    "file_english.bin": file_seed(ENGLISH),
    "file_long_max_token_length.bin": file_seed(SMALL, max_token_length=64),
    "file_vocab_size_larger.bin": file_seed(SMALL, vocab_size=len(SMALL) + 2),
    "file_vocab_size_smaller.bin": file_seed(SMALL, vocab_size=len(SMALL) - 1),
    "file_too_small_for_bytes.bin": file_seed(llama2c_base()[:200]),
    "file_cut_short.bin": file_seed(SMALL)[:-2],
    "file_trailing_bytes.bin": file_seed(SMALL) + b"xyz",
    "file_negative_length.bin": damaged(lambda d: d.__setitem__(slice(LAST + 4, LAST + 8), struct.pack("<i", -1))),
    "file_nan_score.bin": damaged(lambda d: d.__setitem__(slice(LAST, LAST + 4), b"\x00\x00\xc0\x7f")),
    "file_nul_byte.bin": damaged(lambda d: d.__setitem__(LAST + 9, 0)),
    "file_duplicate.bin": file_seed(SMALL[:-1] + [(b" a", -3.0)]),
    "file_byte_token_lower_case.bin": file_seed(SMALL[:3 + 0xAB] + [(b"<0xab>", 0.0)] + SMALL[3 + 0xAB + 1:]),
    "file_byte_token_out_of_place.bin": file_seed(SMALL[:3 + 0x41] + [(b"<0xZZ>", 0.0)] + SMALL[3 + 0x41 + 1:]),
    "text_empty.txt": b"t",
    "text_sentence.txt": b"tOnce upon a time, there was a little girl named Lily. She loved to play outside in the park.",
    "text_unicode.txt": "tcaf\u00e9 \u2603 \U0001F917 \u00e9t\u00e9 na\u00efve".encode(),
    "text_not_utf8.txt": b"ta\x80 \xff\xfe \xe2\x98 \xed\xa0\x80 \xf8\x88\x80\x80\x80 \xc0\xaf",
    "text_byte_token_spelled.txt": b"t<0x41> <0xZZ> \n<s>\n x",
    "text_nul.txt": b"ta\x00b\x00",
    "text_spaces.txt": b"t    the  thing  \n\tin  ",
}


def main():
    OUT.mkdir(exist_ok=True)
    for name, data in SEEDS.items():
        (OUT / name).write_bytes(data)


if __name__ == "__main__":
    main()
