#!/usr/bin/python3
"""Writes the PyTorch reference values that shaped's parity tests compare against.

The computations are the self-attention chapter's, line for line, run by PyTorch on the CPU in
float32. Every output is a .npy file in tests/parity/fixtures/, so the C++ tests read them with
shaped::io and never need Python or torch. Regenerate with `make fixtures`, or run this file
with a Python that has torch and numpy (on the project's machines: /usr/bin/python3).

Random draws, all from torch.manual_seed(1337) and in this order: x, then the key, query and
value projections' weights (nn.Linear's default init), then var_input, then x_long.
"""

import pathlib

import numpy as np
import torch
import torch.nn as nn
from torch.nn import functional as F

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"

SEED = 1337
B, T, C = 2, 4, 6  # batch, time, channels
HEAD_SIZE = 16
T_LONG = 37  # a time extent no kernel tiles evenly, for the dynamic-T case
LOGITS = [0.1, -0.2, 0.3, -0.2, 0.5]
SHARPEN = 6  # section 2 multiplies the logits by this to show softmax saturating


def causal_attention(q, k, v, scale):
    """Section 1's masked attention; `scale` multiplies the scores before the mask."""
    t = q.shape[-2]
    wei = q @ k.transpose(-2, -1) * scale
    tril = torch.tril(torch.ones(t, t))
    wei = wei.masked_fill(tril == 0, float("-inf"))
    wei = F.softmax(wei, dim=-1)
    return wei, wei @ v


def compute():
    torch.manual_seed(SEED)
    x = torch.randn(B, T, C)
    key = nn.Linear(C, HEAD_SIZE, bias=False)
    query = nn.Linear(C, HEAD_SIZE, bias=False)
    value = nn.Linear(C, HEAD_SIZE, bias=False)
    var_input = torch.randn(B, T, HEAD_SIZE)
    x_long = torch.randn(1, T_LONG, C)

    k, q, v = key(x), query(x), value(x)
    wei, out = causal_attention(q, k, v, scale=1.0)
    wei_scaled, out_scaled = causal_attention(q, k, v, scale=HEAD_SIZE**-0.5)
    wei_long, out_long = causal_attention(query(x_long), key(x_long), value(x_long),
                                          scale=HEAD_SIZE**-0.5)

    logits = torch.tensor(LOGITS)
    return {
        # Section 1: one self-attention head, unscaled as the chapter first writes it.
        "x": x,
        "key_weight": key.weight,  # (out, in), PyTorch's Linear layout
        "query_weight": query.weight,
        "value_weight": value.weight,
        "wei": wei,
        "out": out,
        # Section 2's scaling by head_size**-0.5, applied before the mask.
        "wei_scaled": wei_scaled,
        "out_scaled": out_scaled,
        # Section 2: softmax of plain and sharpened logits.
        "logits": logits,
        "prob1": torch.softmax(logits, dim=-1),
        "prob2": torch.softmax(logits * SHARPEN, dim=-1),
        # Section 2's variance measurement (unbiased, as torch.var defaults to).
        "var_input": var_input,
        "var_value": var_input.var(),
        # A longer sequence through the same weights, causal and scaled.
        "x_long": x_long,
        "wei_long": wei_long,
        "out_long": out_long,
    }


def main():
    FIXTURES.mkdir(parents=True, exist_ok=True)
    with torch.no_grad():
        fixtures = compute()
    print(f"torch {torch.__version__}, numpy {np.__version__}, seed {SEED} -> {FIXTURES}")
    for name, tensor in fixtures.items():
        array = tensor.detach().numpy().astype(np.float32)
        np.save(FIXTURES / f"{name}.npy", array)
        print(f"  {name + '.npy':18} {str(tuple(array.shape)):13} first {array.ravel()[:3]}")
    torch.set_printoptions(precision=4)
    print("wei[0] =")
    print(fixtures["wei"][0])
    print("prob1 =", fixtures["prob1"])
    print("prob2 =", fixtures["prob2"])
    print("var =", fixtures["var_value"])


if __name__ == "__main__":
    main()
