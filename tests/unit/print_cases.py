#!/usr/bin/python3
"""Regenerates print_cases.inc: tensors and the text PyTorch 1.13 prints for them.

print_test.cpp compares shaped's printing against this table, so the tests need no torch.
Run with an interpreter that has torch 1.13 (on Debian, /usr/bin/python3):

    /usr/bin/python3 tests/unit/print_cases.py > tests/unit/print_cases.inc
"""

import math

import torch

inf = math.inf
nan = math.nan


def causal_softmax():
    # Attention weights under a causal mask: exact ones on the first row and exact zeros above
    # the diagonal.
    torch.manual_seed(7)
    scores = torch.randn(2, 4, 4)
    mask = torch.triu(torch.ones(4, 4, dtype=torch.bool), diagonal=1)
    return torch.softmax(scores.masked_fill(mask, -inf), dim=-1)


def summarized_matrix():
    # A huge value in the elided middle must not change the notation of the printed edges.
    t = torch.arange(2000, dtype=torch.float32).reshape(2, 1000) * 0.25 + 1
    t[0, 500] = 1.0e10
    return t


def seeded(seed, *shape, dtype=torch.float32):
    torch.manual_seed(seed)
    return torch.randn(*shape, dtype=dtype)


FLOAT32_CASES = [
    ("0-d", torch.tensor(0.9317)),
    ("0-d integral", torch.tensor(3.0)),
    ("0-d negative zero", torch.tensor(-0.0)),
    ("0-d nan", torch.tensor(nan)),
    ("1-d short", torch.tensor([0.1, -0.25, 3.5])),
    ("1-d long wraps at the line width", seeded(1, 30)),
    ("1-d positive wraps", torch.linspace(0, 3, 30)),
    ("2-d", seeded(2, 3, 4)),
    ("2-d rows wrap", seeded(3, 2, 20)),
    ("3-d causal softmax", causal_softmax()),
    ("5-d blank lines between blocks", torch.arange(8.0).reshape(1, 2, 1, 2, 2) / 8),
    ("integral values", torch.tensor([1.0, 0.0, 1.0])),
    ("integral negative values", torch.tensor([[-3.0, 12.0], [0.0, 7.0]])),
    ("integral wide range is scientific", torch.tensor([1.0, 2000.0, -5.0])),
    ("integral above 1e8 is scientific", torch.tensor([3.0e8, 1.0])),
    ("all zeros", torch.zeros(2, 3)),
    ("negative values", torch.tensor([-1.5, -0.0625, 2.25, -100.125])),
    ("negative zero", torch.tensor([-0.0, 1.5])),
    ("rounding ties to even", torch.tensor([0.03125, 0.15625, 0.5, 1.5])),
    ("inf -inf nan", torch.tensor([1.5, inf, -inf, nan])),
    ("inf -inf nan integral", torch.tensor([2.0, inf, -inf, nan])),
    ("only non-finite", torch.tensor([inf, nan, -inf])),
    ("inf in scientific", torch.tensor([1.0e-6, inf, 0.5])),
    ("scientific tiny", torch.tensor([1.0e-5, 0.5, -0.25])),
    ("scientific huge", torch.tensor([1.5e9, -2.0, 0.125])),
    ("scientific wide range", torch.tensor([0.01, 123.456])),
    ("scientific wraps", seeded(4, 20) * 1.0e-6),
    ("summarized 2x1000", summarized_matrix()),
    ("summarized 1-d 2000", torch.arange(2000, dtype=torch.float32)),
    ("summarized integral", torch.arange(1001, dtype=torch.float32) + 100),
    ("summarized 1-d fractions", torch.arange(1001, dtype=torch.float32) / 64 - 3),
    ("summarized 3-d", torch.arange(1029, dtype=torch.float32).reshape(7, 7, 21) / 16),
    ("summarized short leading axis", torch.arange(1203, dtype=torch.float32).reshape(3, 401) / 4),
    ("summarized long leading axis", torch.arange(1001, dtype=torch.float32).reshape(1001, 1)),
    ("summarized 32x32", (torch.arange(1024, dtype=torch.float32).reshape(32, 32) - 512) / 32),
    ("empty 1-d", torch.zeros(0)),
    ("empty 2-d", torch.zeros(0, 3)),
    ("empty 3-d", torch.zeros(2, 0, 4)),
]

FLOAT64_CASES = [
    ("0-d", torch.tensor(0.1, dtype=torch.float64)),
    ("1-d", seeded(6, 5, dtype=torch.float64)),
    ("integral", torch.tensor([1.0, 0.0, 1.0], dtype=torch.float64)),
    ("wraps and suffix on its own line", torch.linspace(0, 10, 30, dtype=torch.float64)),
    ("2-d scientific", torch.tensor([[1.0e-300, 1.0], [2.5e300, -3.0]], dtype=torch.float64)),
    ("empty", torch.zeros(0, dtype=torch.float64)),
    ("empty 2-d", torch.zeros(3, 0, dtype=torch.float64)),
]

BOOL_CASES = [
    ("0-d", torch.tensor(True)),
    ("1-d", torch.tensor([True, False, True])),
    ("all true", torch.tensor([True, True])),
    ("2-d causal mask", torch.tril(torch.ones(4, 4, dtype=torch.bool))),
    ("summarized", torch.arange(1050).reshape(21, 50) % 3 == 0),
    ("empty", torch.zeros(0, dtype=torch.bool)),
]

INT64_CASES = [
    ("0-d", torch.tensor(42)),
    ("1-d", torch.tensor([1, 2])),
    ("negative", torch.tensor([[1, -300], [25, 0]])),
    ("wraps", torch.arange(40) * 1000),
    ("summarized", torch.arange(1001) - 500),
    ("empty", torch.zeros(0, dtype=torch.int64)),
]

INT32_CASES = [
    ("1-d", torch.tensor([1, 2], dtype=torch.int32)),
    ("2-d", torch.tensor([[7, -8], [9, 10]], dtype=torch.int32)),
    ("empty 2-d", torch.zeros(0, 2, dtype=torch.int32)),
]


def float_literal(value):
    """An exact C++ double literal: the shorter of Python's round-tripping repr and hex."""
    if math.isnan(value):
        return "std::numeric_limits<double>::quiet_NaN()"
    if math.isinf(value):
        return ("-" if value < 0 else "") + "std::numeric_limits<double>::infinity()"
    mantissa, exponent = value.hex().split("p")
    hex_literal = mantissa.rstrip("0").rstrip(".") + "p" + exponent
    return min(repr(value), hex_literal, key=len)


def literal(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return float_literal(value)


def wrapped(items, indent, width=100):
    lines, line = [], ""
    for item in items:
        piece = item + ","
        if line and len(indent) + len(line) + 1 + len(piece) > width:
            lines.append(line)
            line = piece
        else:
            line = line + " " + piece if line else piece
    if line:
        lines.append(line)
    return "\n".join(indent + l for l in lines)


def case_entry(name, tensor):
    # .tolist() of a float32 tensor gives the exact values as doubles.
    values = tensor.reshape(-1).tolist()
    shape = ", ".join(str(extent) for extent in tensor.shape)
    data = wrapped([literal(v) for v in values], " " * 7)
    data_block = "{\n" + data + "\n     }" if values else "{}"
    return (
        f'    {{"{name}",\n'
        f"     {{{shape}}},\n"
        f"     {data_block},\n"
        f'     R"torch({str(tensor)})torch"}},\n'
    )


def table(cpp_type, variable, cases):
    entries = "".join(case_entry(name, tensor) for name, tensor in cases)
    return f"const std::vector<print_case<{cpp_type}>> {variable} = {{\n{entries}}};\n"


def main():
    version = torch.__version__
    print(f"// Generated by tests/unit/print_cases.py with PyTorch {version}; do not edit.")
    print("// Each case: name, shape, row-major data, and str(tensor) as torch prints it.")
    print("// float32 data is listed as doubles, which hold every float value exactly.")
    print()
    print(table("double", "float32_cases", FLOAT32_CASES))
    print(table("double", "float64_cases", FLOAT64_CASES))
    print(table("bool", "bool_cases", BOOL_CASES))
    print(table("std::int64_t", "int64_cases", INT64_CASES))
    print(table("std::int32_t", "int32_cases", INT32_CASES), end="")


if __name__ == "__main__":
    main()
