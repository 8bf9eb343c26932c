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

nanoGPT's GPT (model.py's, without dropout: wte, wpe, the blocks, ln_f, lm_head tied to wte,
its _init_weights) in a small config is drawn from torch.manual_seed(GPT_SEED), every bias and
LayerNorm parameter then perturbed (zeros and ones would not show a swapped name): its whole
state_dict (the tied lm_head.weight and the attn.bias mask buffers included, as nanoGPT's
checkpoints hold them) as gpt.safetensors; ids, targets (one of them -1, ignored), torch's
logits and loss as gpt_idx.npy, gpt_targets.npy, gpt_logits.npy, gpt_loss.npy. GPT-2 124M's
named_parameters() (names and shapes) and sum(p.numel()) as gpt2_124m_parameters.txt.

A tiny GPT-2 in Hugging Face's layout is drawn from torch.manual_seed(HF_SEED): the same model
with GPT-2's tanh GELU ("gelu_new"), written as a Hugging Face GPT-2 directory, hf_gpt2/
(config.json, and model.safetensors named as the hub's gpt2 is, without "transformer.", Conv1D
weights stored (in, out), the attn.bias and attn.masked_bias buffers present); its ids, logits
and greedy continuation (HF_NEW_TOKENS ids, each the argmax of a full forward) as
hf_gpt2_idx.npy, hf_gpt2_logits.npy, hf_gpt2_greedy.npy.
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
GPT_SEED = 5151
GPT_CONFIG = dict(vocab_size=67, block_size=16, n_layer=2, n_head=3, n_embd=24)
GPT_B, GPT_T = 2, 11
HF_SEED = 6262
HF_CONFIG = dict(vocab_size=67, block_size=64, n_layer=2, n_head=3, n_embd=24)
HF_B, HF_T, HF_NEW_TOKENS = 2, 5, 32
GPT2_124M = dict(vocab_size=50257, block_size=1024, n_layer=12, n_head=12, n_embd=768)


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
    """nanoGPT's MLP without dropout; GPT-2's has the tanh GELU ("gelu_new")."""

    def __init__(self, n_embd, bias=True, gelu="none"):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd, bias=bias)
        self.gelu = nn.GELU(approximate=gelu)
        self.c_proj = nn.Linear(4 * n_embd, n_embd, bias=bias)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    """nanoGPT's Block: pre-LN attention, then the MLP, each added to the residual stream."""

    def __init__(self, n_embd, n_head, block_size, bias=True, gelu="none"):
        super().__init__()
        self.ln_1 = LayerNorm(n_embd, bias=bias)
        self.attn = CausalSelfAttention(n_embd, n_head, block_size, bias=bias)
        self.ln_2 = LayerNorm(n_embd, bias=bias)
        self.mlp = MLP(n_embd, bias=bias, gelu=gelu)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):
    """nanoGPT's GPT (model.py) without dropout: the transformer ModuleDict, lm_head tied to wte,
    and nanoGPT's initialisation."""

    def __init__(self, vocab_size, block_size, n_layer, n_head, n_embd, bias=True, gelu="none"):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab_size, n_embd),
            wpe=nn.Embedding(block_size, n_embd),
            h=nn.ModuleList([Block(n_embd, n_head, block_size, bias, gelu) for _ in range(n_layer)]),
            ln_f=LayerNorm(n_embd, bias=bias),
        ))
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():
            if pn.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n_layer))

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        logits = self.lm_head(x)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss


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


def compute_gpt():
    """A small nanoGPT GPT's state_dict, ids and targets, and torch's logits and loss."""
    torch.manual_seed(GPT_SEED)
    model = GPT(**GPT_CONFIG).eval()
    for name, p in model.named_parameters():
        if name.endswith(".bias") or p.dim() == 1:
            p.add_(0.3 * torch.randn_like(p))
    idx = torch.randint(0, GPT_CONFIG["vocab_size"], (GPT_B, GPT_T))
    targets = torch.randint(0, GPT_CONFIG["vocab_size"], (GPT_B, GPT_T))
    targets[1, 3] = -1
    logits, loss = model(idx, targets)
    return model.state_dict(), {"gpt_logits": logits, "gpt_loss": loss}, {"gpt_idx": idx, "gpt_targets": targets}


def compute_hf_gpt2():
    """A tiny GPT-2 as a Hugging Face directory's tensors and config, its ids, logits and greedy
    continuation."""
    torch.manual_seed(HF_SEED)
    model = GPT(**HF_CONFIG, gelu="tanh").eval()
    for name, p in model.named_parameters():
        if name.endswith(".bias") or p.dim() == 1:
            p.add_(0.3 * torch.randn_like(p))
    idx = torch.randint(0, HF_CONFIG["vocab_size"], (HF_B, HF_T))
    logits, _ = model(idx)
    tokens = idx
    for _ in range(HF_NEW_TOKENS):
        step_logits, _ = model(tokens)
        tokens = torch.cat([tokens, step_logits[:, -1, :].argmax(dim=-1, keepdim=True)], dim=1)
    # The hub's gpt2/model.safetensors: GPT2Model's names, Conv1D weights (in, out), the buffers.
    tensors = {}
    n = HF_CONFIG["block_size"]
    for name, p in model.transformer.state_dict().items():
        if name.endswith(".attn.bias"):  # the causal mask buffer, not c_attn.bias
            tensors[name] = p
            tensors[name.replace(".attn.bias", ".attn.masked_bias")] = torch.tensor(-1e4)
        elif any(name.endswith(f"{conv}.weight") for conv in ("c_attn", "c_proj", "c_fc")):
            tensors[name] = p.t().contiguous()
        else:
            tensors[name] = p
    config = {"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"],
              "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": n,
              "n_embd": HF_CONFIG["n_embd"], "n_head": HF_CONFIG["n_head"], "n_layer": HF_CONFIG["n_layer"],
              "n_positions": n, "vocab_size": HF_CONFIG["vocab_size"]}
    return tensors, config, {"hf_gpt2_logits": logits}, {"hf_gpt2_idx": idx, "hf_gpt2_greedy": tokens[:, HF_T:]}


def gpt2_124m_parameters():
    """GPT-2 124M's named_parameters() as lines "name d0 d1 ...", then the total count."""
    model = GPT(**GPT2_124M)
    lines = [" ".join([name] + [str(d) for d in p.shape]) for name, p in model.named_parameters()]
    return "\n".join(lines + [f"total {sum(p.numel() for p in model.parameters())}"]) + "\n"


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
        gpt_state_dict, gpt_fixtures, gpt_ids = compute_gpt()
        hf_tensors, hf_config, hf_fixtures, hf_ids = compute_hf_gpt2()
    fixtures.update(attention_fixtures)
    fixtures.update(block_fixtures)
    fixtures.update(gpt_fixtures)
    fixtures.update(hf_fixtures)
    gpt_ids.update(hf_ids)
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
    if wanted("gpt.safetensors"):
        save_safetensors(FIXTURES / "gpt.safetensors", gpt_state_dict, {"format": "pt"})
        print(f"  gpt.safetensors    {len(gpt_state_dict)} tensors")
    for name, ids in gpt_ids.items():
        if wanted(f"{name}.npy"):
            np.save(FIXTURES / f"{name}.npy", ids.numpy().astype(np.int64))
            print(f"  {name + '.npy':18} {str(tuple(ids.shape)):13} int64")
    if wanted("hf_gpt2"):
        (FIXTURES / "hf_gpt2").mkdir(exist_ok=True)
        save_safetensors(FIXTURES / "hf_gpt2" / "model.safetensors", hf_tensors, {"format": "pt"})
        (FIXTURES / "hf_gpt2" / "config.json").write_text(json.dumps(hf_config, indent=2) + "\n")
        print(f"  hf_gpt2/           {len(hf_tensors)} tensors, config.json")
    if wanted("gpt2_124m_parameters.txt"):
        (FIXTURES / "gpt2_124m_parameters.txt").write_text(gpt2_124m_parameters())
        print("  gpt2_124m_parameters.txt")
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
