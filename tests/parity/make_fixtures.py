#!/usr/bin/python3
"""Writes the PyTorch reference values that shaped's parity tests compare against.

The computations are the self-attention chapter's, line for line, run by PyTorch on the CPU in
float32. Every output is a .npy file in tests/parity/fixtures/, so the C++ tests read them with
shaped::io and never need Python or torch. Regenerate with `make fixtures`, or run this file
with a Python that has torch and numpy (on the project's machines: /usr/bin/python3).

Random draws, all from torch.manual_seed(1337) and in this order: x, then the key, query and
value projections' weights (nn.Linear's default init), then var_input, then x_long.

A nanoGPT CausalSelfAttention (C=12, 3 heads, with bias) is drawn apart, from
torch.manual_seed(MHA_SEED): its state_dict is written as a .safetensors file (the format
written with struct and json, as the reference implementation lays it out), with an input and
torch's output as .npy files. `--only NAME...` writes just the named fixture files.

A nanoGPT Block (the same attention, LayerNorms, a 4C MLP with exact GELU) is drawn apart too,
from torch.manual_seed(BLOCK_SEED), its LayerNorms' weights and biases drawn after the default
init (ones and zeros would not show a swapped name): block.safetensors, block_x.npy, block_y.npy.
"""

import argparse
import json
import math
import pathlib
import struct

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
MHA_SEED = 2024
MHA_B, MHA_T, MHA_C, MHA_HEADS = 2, 5, 12, 3
MHA_BLOCK_SIZE = 8  # nanoGPT's block_size: the extent of its causal-mask buffer
BLOCK_SEED = 4242


def causal_attention(q, k, v, scale):
    """Section 1's masked attention; `scale` multiplies the scores before the mask."""
    t = q.shape[-2]
    wei = q @ k.transpose(-2, -1) * scale
    tril = torch.tril(torch.ones(t, t))
    wei = wei.masked_fill(tril == 0, float("-inf"))
    wei = F.softmax(wei, dim=-1)
    return wei, wei @ v


class CausalSelfAttention(nn.Module):
    """nanoGPT's CausalSelfAttention (model.py) without dropout, on its non-flash path (torch
    1.13 has no scaled_dot_product_attention): the causal mask is the buffer "bias", which is
    part of the state_dict as in nanoGPT's checkpoints."""

    def __init__(self, n_embd, n_head, block_size, bias=True):
        super().__init__()
        assert n_embd % n_head == 0
        self.c_attn = nn.Linear(n_embd, 3 * n_embd, bias=bias)
        self.c_proj = nn.Linear(n_embd, n_embd, bias=bias)
        self.n_head = n_head
        self.n_embd = n_embd
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size))
                             .view(1, 1, block_size, block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v  # (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class LayerNorm(nn.Module):
    """nanoGPT's LayerNorm: torch's, with an optional bias."""

    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, input):
        return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)


class MLP(nn.Module):
    """nanoGPT's MLP without dropout."""

    def __init__(self, n_embd, bias=True):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd, bias=bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * n_embd, n_embd, bias=bias)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    """nanoGPT's Block: pre-LN attention, then the MLP, each added to the residual stream."""

    def __init__(self, n_embd, n_head, block_size, bias=True):
        super().__init__()
        self.ln_1 = LayerNorm(n_embd, bias=bias)
        self.attn = CausalSelfAttention(n_embd, n_head, block_size, bias=bias)
        self.ln_2 = LayerNorm(n_embd, bias=bias)
        self.mlp = MLP(n_embd, bias=bias)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


SAFETENSORS_DTYPES = {torch.float32: "F32", torch.float64: "F64", torch.int64: "I64"}


def save_safetensors(path, tensors, metadata=None):
    """The safetensors format: u64 little-endian header length, the JSON header (compact,
    padded with spaces to a multiple of 8 bytes), then each tensor's bytes, little-endian and
    C order, in name order."""
    header = {}
    if metadata:
        header["__metadata__"] = metadata
    blobs, offset = [], 0
    for name in sorted(tensors):
        array = tensors[name].detach().contiguous().numpy()
        blob = array.astype(array.dtype.newbyteorder("<")).tobytes(order="C")
        header[name] = {"dtype": SAFETENSORS_DTYPES[tensors[name].dtype], "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def compute_attention():
    """The nanoGPT attention's state_dict, an input, and torch's output."""
    torch.manual_seed(MHA_SEED)
    attn = CausalSelfAttention(MHA_C, MHA_HEADS, MHA_BLOCK_SIZE).eval()
    x = torch.randn(MHA_B, MHA_T, MHA_C)
    return attn.state_dict(), {"mha_x": x, "mha_y": attn(x)}


def compute_block():
    """A nanoGPT Block's state_dict, an input, and torch's output."""
    torch.manual_seed(BLOCK_SEED)
    block = Block(MHA_C, MHA_HEADS, MHA_BLOCK_SIZE).eval()
    for ln in (block.ln_1, block.ln_2):
        ln.weight.copy_(1 + 0.5 * torch.randn(MHA_C))
        ln.bias.copy_(0.5 * torch.randn(MHA_C))
    x = torch.randn(MHA_B, MHA_T, MHA_C)
    return block.state_dict(), {"block_x": x, "block_y": block(x)}


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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", metavar="NAME",
                        help="write only these fixture files (e.g. mha_x.npy mha.safetensors)")
    args = parser.parse_args()

    def wanted(filename):
        return args.only is None or filename in args.only

    FIXTURES.mkdir(parents=True, exist_ok=True)
    with torch.no_grad():
        fixtures = compute()
        state_dict, attention_fixtures = compute_attention()
        block_state_dict, block_fixtures = compute_block()
    fixtures.update(attention_fixtures)
    fixtures.update(block_fixtures)
    print(f"torch {torch.__version__}, numpy {np.__version__}, seed {SEED} -> {FIXTURES}")
    for name, tensor in fixtures.items():
        if not wanted(f"{name}.npy"):
            continue
        array = tensor.detach().numpy().astype(np.float32)
        np.save(FIXTURES / f"{name}.npy", array)
        print(f"  {name + '.npy':18} {str(tuple(array.shape)):13} first {array.ravel()[:3]}")
    if wanted("mha.safetensors"):
        save_safetensors(FIXTURES / "mha.safetensors", state_dict, {"format": "pt"})
        print(f"  mha.safetensors    {', '.join(f'{k} {tuple(v.shape)}' for k, v in state_dict.items())}")
    if wanted("block.safetensors"):
        save_safetensors(FIXTURES / "block.safetensors", block_state_dict, {"format": "pt"})
        print(f"  block.safetensors  {', '.join(f'{k} {tuple(v.shape)}' for k, v in block_state_dict.items())}")
    if args.only is not None:
        return
    torch.set_printoptions(precision=4)
    print("wei[0] =")
    print(fixtures["wei"][0])
    print("prob1 =", fixtures["prob1"])
    print("prob2 =", fixtures["prob2"])
    print("var =", fixtures["var_value"])


if __name__ == "__main__":
    main()
