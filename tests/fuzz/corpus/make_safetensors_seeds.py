#!/usr/bin/python3
"""Writes the safetensors seed files of tests/fuzz/corpus/safetensors/, with the standard library
only (no torch): small valid files of every dtype shaped loads and of ranks 0 to 4, plus edge
cases the reader must accept (no tensors, zero extents, data out of name order, a dtype it reads
but does not load).

    python3 tests/fuzz/corpus/make_safetensors_seeds.py
"""

import json
import pathlib
import struct

OUT = pathlib.Path(__file__).resolve().parent / "safetensors"

# struct codes and element counts are enough to make the data; the values are only there to be
# bytes that differ from one element to the next.
STRUCT_CODES = {"F32": "f", "F64": "d", "I32": "i", "I64": "q", "U8": "B", "BOOL": "?",
                "BF16": "H", "I16": "h"}


def product(shape):
    count = 1
    for extent in shape:
        count *= extent
    return count


def elements(dtype, count):
    if dtype == "BOOL":
        return struct.pack("<%d?" % count, *[i % 3 == 0 for i in range(count)])
    if dtype in ("F32", "F64"):
        return struct.pack("<%d%s" % (count, STRUCT_CODES[dtype]), *[i * 0.5 - 1 for i in range(count)])
    return struct.pack("<%d%s" % (count, STRUCT_CODES[dtype]), *[(i * 7) % 100 for i in range(count)])


def safetensors(tensors, metadata=None, order=None):
    """tensors: [(name, dtype, shape)]; the data is laid out in `order` (names), else as given."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    data = b""
    by_name = {name: (dtype, shape) for name, dtype, shape in tensors}
    for name in order or [name for name, _, _ in tensors]:
        dtype, shape = by_name[name]
        payload = elements(dtype, product(shape))
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(payload)]}
        data += payload
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # writers pad the header to a multiple of 8 bytes
    return struct.pack("<Q", len(text)) + text + data


SEEDS = {
    "f32_2d.safetensors": safetensors([("weight", "F32", [2, 3])], metadata={"format": "pt"}),
    "f64_3d.safetensors": safetensors([("x", "F64", [2, 2, 2])]),
    "i32_1d.safetensors": safetensors([("ids", "I32", [5])]),
    "i64_0d.safetensors": safetensors([("step", "I64", [])]),
    "u8_2d.safetensors": safetensors([("pixels", "U8", [2, 3])]),
    "bool_1d.safetensors": safetensors([("mask", "BOOL", [4])]),
    "f32_4d.safetensors": safetensors([("conv.weight", "F32", [1, 2, 1, 2])]),
    "all_dtypes.safetensors": safetensors(
        [("a.f32", "F32", [2]), ("b.f64", "F64", [1, 2]), ("c.i32", "I32", [3]), ("d.i64", "I64", []),
         ("e.u8", "U8", [2, 2]), ("f.bool", "BOOL", [1, 1, 3])],
        metadata={"format": "pt", "source": "make_safetensors_seeds.py"}),
    "data_out_of_name_order.safetensors": safetensors(
        [("first", "F32", [2]), ("second", "I64", [1])], order=["second", "first"]),
    "zero_extent.safetensors": safetensors([("empty", "F32", [0, 3]), ("full", "F32", [1])]),
    "only_empty.safetensors": safetensors([("nothing", "I32", [3, 0, 2])]),
    # Empty, but its strides are near the limit: a few mutations away from overflowing them.
    "zero_extent_huge.safetensors": safetensors([("vast", "U8", [0, 2, 2**61])]),
    "no_tensors.safetensors": safetensors([]),
    "metadata_only.safetensors": safetensors([], metadata={"format": "pt"}),
    "bf16_not_loadable.safetensors": safetensors([("half", "BF16", [3]), ("i16", "I16", [2])]),
    "prefixed_names.safetensors": safetensors(
        [("transformer.h.0.attn.c_attn.weight", "F32", [2, 2]), ("transformer.h.0.attn.c_attn.bias", "F32", [2])]),
}


def main():
    OUT.mkdir(exist_ok=True)
    for name, content in SEEDS.items():
        assert len(content) < 4096, name
        (OUT / name).write_bytes(content)


if __name__ == "__main__":
    main()
