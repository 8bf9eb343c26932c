#!/usr/bin/python3
"""Writes the seeds of tests/fuzz/corpus/llama_checkpoint/, with the standard library only: tiny
llama2.c version-0 files of the fuzz target's configs (tied, and with a classifier of its own),
one cut short, one with a non-finite weight, a header alone, and a Hugging Face config.json.

    python3 tests/fuzz/corpus/make_llama_checkpoint_seeds.py
"""

import json
import pathlib
import struct

OUT = pathlib.Path(__file__).resolve().parent / "llama_checkpoint"
DIM, HIDDEN, LAYERS, HEADS, KV_HEADS, VOCAB, SEQ = 4, 6, 1, 2, 1, 5, 3


def weights(tied):
    """llama2.c's arrays in its order, as many floats as each holds."""
    head = DIM // HEADS
    kv = head * KV_HEADS
    counts = [VOCAB * DIM, LAYERS * DIM, LAYERS * DIM * DIM, 2 * LAYERS * kv * DIM, LAYERS * DIM * DIM,
              LAYERS * DIM, 3 * LAYERS * HIDDEN * DIM, DIM, SEQ * head]
    if not tied:
        counts.append(VOCAB * DIM)
    total = sum(counts)
    return [((i * 37) % 17 - 8) / 16 for i in range(total)]


def checkpoint(tied, values=None):
    header = struct.pack("<7i", DIM, HIDDEN, LAYERS, HEADS, KV_HEADS, VOCAB if tied else -VOCAB, SEQ)
    values = weights(tied) if values is None else values
    return header + struct.pack(f"<{len(values)}f", *values)


def main():
    OUT.mkdir(exist_ok=True)
    (OUT / "tied.bin").write_bytes(checkpoint(True))
    (OUT / "untied.bin").write_bytes(checkpoint(False))
    (OUT / "truncated.bin").write_bytes(checkpoint(True)[:-7])
    nan = weights(True)
    nan[3] = float("nan")
    (OUT / "not_finite.bin").write_bytes(checkpoint(True, nan))
    (OUT / "header_only.bin").write_bytes(checkpoint(True)[:28])
    config = {"model_type": "llama", "hidden_act": "silu", "hidden_size": DIM, "intermediate_size": HIDDEN,
              "num_hidden_layers": LAYERS, "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS,
              "vocab_size": VOCAB, "max_position_embeddings": SEQ, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
              "tie_word_embeddings": False}
    (OUT / "config.json").write_text(json.dumps(config, indent=2))


if __name__ == "__main__":
    main()
