#!/usr/bin/python3
"""Writes the .npy files that tests/unit/npy_test.cpp reads, using numpy's own writer.

Run with a Python that has numpy (on the project's machines: /usr/bin/python3):
    /usr/bin/python3 tests/unit/data/make_npy_cases.py
The values are fixed (no randomness), and npy_test.cpp spells the same values out, so the
files only need regenerating if this list of cases changes.
"""

import pathlib

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent

# One array per dtype, in C order and native (little-endian) byte order.
F32 = np.array([[-1.0, -0.5, 0.0], [0.5, 1.0, 1.5]], dtype=np.float32)
F64 = (np.arange(24, dtype=np.float64) / 4).reshape(2, 3, 4)
I32 = np.array([-(2**31), -1, 0, 1, 2**31 - 1], dtype=np.int32)
I64 = np.array([-(2**63), -1, 0, 1, 2**63 - 1, 2**40], dtype=np.int64)
U8 = np.array([[0, 1, 127], [128, 254, 255]], dtype=np.uint8)
B1 = np.array([[True, False, True], [False, False, True]])


def save(name, array):
    np.save(HERE / name, array)


def save_version(name, array, version):
    with open(HERE / name, "wb") as f:
        np.lib.format.write_array(f, array, version=version)


def main():
    cases = {
        "f32_c.npy": F32,
        "f64_c.npy": F64,
        "i32_c.npy": I32,
        "i64_c.npy": I64,
        "u8_c.npy": U8,
        "b1_c.npy": B1,
        "f64_0d.npy": np.array(3.25, dtype=np.float64),
        "f32_empty.npy": np.zeros((0, 3), dtype=np.float32),
        # Same values, stored big-endian: the reader byte-swaps them.
        "f32_be.npy": F32.astype(">f4"),
        "f64_be.npy": F64.astype(">f8"),
        "i32_be.npy": I32.astype(">i4"),
        "i64_be.npy": I64.astype(">i8"),
        # Fortran-order data: the reader transposes it into C order.
        "i32_fortran.npy": np.asfortranarray(np.arange(24, dtype=np.int32).reshape(2, 3, 4)),
        "f64_fortran_be.npy": np.asfortranarray(
            (np.arange(15, dtype=np.float64) / 2).reshape(3, 5).astype(">f8")),
        # A dtype shaped does not store.
        "f16_unsupported.npy": np.array([1.0, 2.0, 3.0], dtype=np.float16),
    }
    for name, array in cases.items():
        save(name, array)
    save_version("f32_v2.npy", F32, (2, 0))
    save_version("f32_v3.npy", F32, (3, 0))

    for path in sorted(HERE.glob("*.npy")):
        loaded = np.load(path)
        order = "F" if np.isfortran(loaded) else "C"
        print(f"{path.name:22} {loaded.dtype.str:5} {order} {loaded.shape}")


if __name__ == "__main__":
    main()
