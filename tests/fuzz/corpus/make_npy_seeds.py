#!/usr/bin/python3
"""Writes the edge_*.npy seeds of tests/fuzz/corpus/npy/, with the standard library only (no
numpy): the cases tests/unit/data/ (whose files the other seeds are copies of) does not cover.

    python3 tests/fuzz/corpus/make_npy_seeds.py
"""

import pathlib
import struct

OUT = pathlib.Path(__file__).resolve().parent / "npy"


def npy(descr, shape, data, fortran_order=False, version=1, shape_text=None):
    """A .npy image as numpy.save lays it out: the header padded so the data starts at 64 bytes."""
    if shape_text is None:
        shape_text = "(" + ", ".join(str(extent) for extent in shape) + ("," if len(shape) == 1 else "") + ")"
    header = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, fortran_order, shape_text)
    length_size = 2 if version == 1 else 4
    preamble = 6 + 2 + length_size
    header += " " * (-(preamble + len(header) + 1) % 64) + "\n"
    length = struct.pack("<H" if version == 1 else "<I", len(header))
    return b"\x93NUMPY" + bytes([version, 0]) + length + header.encode("latin-1") + data


SEEDS = {
    "edge_b1_0d.npy": npy("|b1", (), b"\x01"),
    "edge_b1_nonzero_bytes.npy": npy("|b1", (4,), b"\x00\x02\xff\x01"),
    "edge_u8_fortran_3d.npy": npy("|u1", (2, 2, 3), bytes(range(12)), fortran_order=True),
    "edge_f32_zero_extent_3d.npy": npy("<f4", (2, 0, 3), b""),
    # Empty, but its strides are near the limit: a few mutations away from overflowing them.
    "edge_u8_zero_extent_huge.npy": npy("|u1", (0, 2, 2**61), b""),
    "edge_i64_rank4.npy": npy("<i8", (1, 2, 1, 2), struct.pack("<4q", -1, 0, 1, 2**62)),
    "edge_f64_be_0d_v2.npy": npy(">f8", (), struct.pack(">d", 2.5), version=2),
    "edge_i32_python2_long.npy": npy("<i4", (3,), struct.pack("<3i", 7, 8, 9), shape_text="(3L,)"),
    "edge_f32_native_order.npy": npy("=f4", (2,), struct.pack("<2f", 1.0, -1.0)),
    "edge_f32_static_3.npy": npy("<f4", (3,), struct.pack("<3f", 1.0, 2.0, 3.0)),
    "edge_f64_a_by_2.npy": npy("<f8", (3, 2), struct.pack("<6d", *range(6))),
}


def main():
    OUT.mkdir(exist_ok=True)
    for name, content in SEEDS.items():
        assert len(content) < 4096, name
        (OUT / name).write_bytes(content)


if __name__ == "__main__":
    main()
