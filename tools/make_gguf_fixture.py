#!/usr/bin/python3
"""Writes tests/unit/data/gguf_py_every_type.gguf with llama.cpp's own GGUF writer (gguf-py), so
that shaped's reader is checked against a file it did not write: every metadata value type,
typed arrays (of strings, of arrays), a custom alignment, and tensors of four ggml types. The
same file seeds the fuzz corpus (tests/fuzz/corpus/gguf/). tests/unit/gguf_test.cpp expects
exactly these values.

    PYTHONPATH=../peer/llama.cpp/gguf-py python3 tools/make_gguf_fixture.py

With --dump FILE, prints what gguf-py's reader reads from FILE instead (a check that a file
shaped wrote is one llama.cpp's tools read).
"""

import pathlib
import shutil
import sys

import numpy as np
import gguf

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "unit" / "data" / "gguf_py_every_type.gguf"
SEED = ROOT / "tests" / "fuzz" / "corpus" / "gguf" / "gguf_py_every_type.gguf"

T = gguf.GGUFValueType


def write_fixture(path):
    writer = gguf.GGUFWriter(str(path), "llama")  # writes general.architecture = "llama"
    writer.add_custom_alignment(64)
    writer.add_uint8("test.uint8", 200)
    writer.add_int8("test.int8", -100)
    writer.add_uint16("test.uint16", 60000)
    writer.add_int16("test.int16", -30000)
    writer.add_uint32("test.uint32", 4000000000)
    writer.add_int32("test.int32", -2000000000)
    writer.add_float32("test.float32", 1.5)
    writer.add_bool("test.bool", True)
    writer.add_string("test.string", "h\u00e9llo \u2581world")
    writer.add_uint64("test.uint64", 2**63 + 5)
    writer.add_int64("test.int64", -(2**62))
    writer.add_float64("test.float64", -0.125)
    writer.add_uint32("llama.block_count", 2)
    # As a llama vocabulary is stored: tokens, scores and token types.
    writer.add_array("tokenizer.ggml.tokens", ["<unk>", "<s>", "</s>", "\u2581the", ""])
    writer.add_array("tokenizer.ggml.scores", [0.0, -1.5, -2.25, 3.0, -0.5])
    writer.add_array("tokenizer.ggml.token_type", [2, 3, 3, 1, 1])
    writer.add_key_value("test.array.uint16", [1, 65535], T.ARRAY, sub_type=T.UINT16)
    writer.add_key_value("test.array.int64", [-(2**40), 7], T.ARRAY, sub_type=T.INT64)
    writer.add_key_value("test.array.float64", [0.25, -8.0], T.ARRAY, sub_type=T.FLOAT64)
    writer.add_array("test.array.bool", [True, False, True])
    writer.add_array("test.array.nested", [[1, 2], [3], [4, 5, 6]])

    # numpy's row-major shapes; the file holds them reversed as ggml's ne.
    writer.add_tensor("token_embd.weight", (np.arange(12, dtype=np.float32) * 0.5 - 1).reshape(3, 4))
    writer.add_tensor("output_norm.weight", np.array([1, -2, 0.5, 4, 8], dtype=np.float16))
    # Two Q8_0 blocks: a float16 scale, then 32 int8 quants each (raw bytes, as quantized).
    block = np.concatenate([np.frombuffer(np.float16(0.5).tobytes(), dtype=np.uint8),
                            np.arange(-16, 16, dtype=np.int8).view(np.uint8)])
    writer.add_tensor("blk.0.attn_q.weight", np.stack([block, block[::-1].copy()]), raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    writer.add_tensor("blk.0.ids", np.array([[7, -3, 2**31 - 1]], dtype=np.int32))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def dump(path):
    reader = gguf.GGUFReader(str(path))
    for field in reader.fields.values():
        types = "/".join(t.name for t in field.types)
        print(f"{field.name} [{types}] = {field.contents()!r}")
    for tensor in reader.tensors:
        print(f"tensor {tensor.name} {tensor.tensor_type.name} ne={list(tensor.shape)} offset={tensor.data_offset} "
              f"bytes={tensor.n_bytes} data={tensor.data.reshape(-1)[:8].tolist()}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--dump":
        dump(sys.argv[2])
    else:
        write_fixture(FIXTURE)
        SEED.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(FIXTURE, SEED)
        print(f"wrote {FIXTURE.relative_to(ROOT)} ({FIXTURE.stat().st_size} bytes) and {SEED.relative_to(ROOT)}")
