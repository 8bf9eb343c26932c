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

The Llama family is a reference written from llama2.c's model.py: RMSNorm, rotary embedding on
q and k, causal grouped-query attention, a SwiGLU FFN, pre-norm blocks. The rotary pairing is
adjacent (elements 2i, 2i+1: Meta's and llama2.c's) or halves (i, i + head_size/2: Hugging
Face's rotate_half, whose checkpoints permute q and k so that both give the same model, which
is asserted here). llama2.c's stories260K.bin is read from ../shared/models beside the clone,
never copied: its greedy ids from BOS (STORIES_STEPS of them, with a KV cache, asserted equal
to full recompute) and the logits each was chosen from as stories260k_greedy.npy and
stories260k_logits.npy. A tiny Llama with grouped heads in Hugging Face's layout and pairing is
drawn from torch.manual_seed(HF_LLAMA_SEED): hf_llama/ (config.json, model.safetensors with
LlamaForCausalLM's names), its ids and logits as hf_llama_idx.npy, hf_llama_logits.npy.

The training fixtures are folders, each run with one torch thread so that a rerun is bitwise the
same (which is asserted). train_gpt/ is GPT_CONFIG's GPT drawn from torch.manual_seed(
TRAIN_GPT_SEED) and perturbed as gpt.safetensors' is, then a Markov-chain id sequence and the
batches drawn from it, then trained TRAIN_GPT["steps"] steps in float32 as nanoGPT's train.py
trains (configure_optimizers' two AdamW groups, get_lr, gradient accumulation with each
micro-batch's loss divided by their number, clip_grad_norm_ before each step): the parameters
before and after (named_parameters(), so the tied lm_head once, as transformer.wte.weight), the
batches, each step's loss, lr and unclipped gradient norm, and step 0's gradients.
train_gpt_f64/ is the same run in float64 from the same (widened) weights and batches, which
clip_and_step_by_hand (the optimizer written out, not torch.optim) must reproduce.
train_qknorm_f64/ is a user's variant, GPT_CONFIG's GPT with QK-norm attention (QKNormAttention:
each head's q and k RMS-normalised over the head size, with learned weights q_norm and k_norm),
drawn in float32 from torch.manual_seed(TRAIN_QKNORM_SEED) and perturbed as train_gpt's is, then
trained as train_gpt_f64 is, in float64 on train_gpt's batches: its initial parameters (float32),
each step's loss and unclipped gradient norm, step 0's gradients and the final parameters.
train_llama/ is a tiny Llama (the Llama reference, llama2.c's names, an untied output.weight)
drawn from torch.manual_seed(TRAIN_LLAMA_SEED): its weights, ids and targets, and one forward and
backward of the mean cross-entropy by autograd (logits, loss, every weight's gradient). The
float32 gradients are asserted to agree with float64 ones, and those with central differences.
`--only train_gpt train_gpt_f64 train_qknorm_f64 train_llama` writes just those folders.

derivation/ is for train::value_and_grad's derived gradients (derivation_parity_test.cpp), in
float64 on one torch thread. From torch.manual_seed(DERIVATION_SEED), in this order, the
parameters of the test's struct (B, T, C, H = 2, 3, 4, 5): w (C), gate (T, 1), pos (T, C),
s (T, T), m (C, H), fc.weight (H, C) and fc.bias (H), proj.weight (C, H), ln.weight, ln.bias and
rms.weight (C; the weights drawn around 1), as parameters.safetensors (F64, named as shaped's
for_each_parameter names them); then the inputs x.npy and y.npy (B, T, C) and x_dynamic.npy
(B, 6, C). Each loss of DERIVATION_LOSSES is written as the test writes it with shaped's ops,
line for line: broadcast_unary, activations, matmul, attention, reductions, layer_norm,
rms_norm, mlp, permute and dynamic. <case>.safetensors holds its value as "loss" (0-d) and
autograd's gradient of every parameter by the same names, zeros for those it does not read.
Each is asserted equal to a rerun to the bit, and to central differences at each parameter's
largest gradient element to 1e-7. dynamic is the causal head on x_dynamic, whose T shaped takes
from the file. `--only derivation` writes just this folder.
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
# llama2.c's stories260K checkpoint, beside the clone as tests/CMakeLists.txt finds ../shared.
STORIES_BIN = pathlib.Path(__file__).resolve().parents[2].parent / "shared" / "models" / "stories260K.bin"
STORIES_BOS = 1  # llama2.c's BOS token id
STORIES_STEPS = 256  # greedy steps from BOS, each one id and its logits
STORIES_CHECK_STEPS = 20  # steps decoded again by full recompute, which the cache must equal
RMS_EPS = 1e-5
ROPE_THETA = 10000.0
HF_LLAMA_SEED = 7373
HF_LLAMA_CONFIG = dict(vocab_size=67, dim=24, hidden_dim=40, n_layers=2, n_heads=6, n_kv_heads=2,
                       seq_len=32)
HF_LLAMA_B, HF_LLAMA_T = 2, 7
# nanoGPT's train.py on GPT_CONFIG's model: its optimizer, lr schedule, gradient accumulation and
# clipping, with these settings (learning_rate .. min_lr as get_lr's names).
TRAIN_GPT_SEED = 8181
TRAIN_GPT = dict(steps=50, accumulation=2, batch_size=4, data_length=2000, weight_decay=0.1,
                 betas=(0.9, 0.95), eps=1e-8, grad_clip=1.0, learning_rate=1e-2, warmup_iters=5,
                 lr_decay_iters=40, min_lr=1e-3)
# The QK-norm GPT (QKNormAttention): TRAIN_GPT's run on train_gpt's batches, in float64.
TRAIN_QKNORM_SEED = 8282
TRAIN_LLAMA_SEED = 9292
TRAIN_LLAMA_CONFIG = dict(vocab_size=67, dim=24, hidden_dim=40, n_layers=2, n_heads=4, n_kv_heads=2,
                          seq_len=16)
TRAIN_LLAMA_B = 2
# The derived gradients' parity (train::value_and_grad): the sizes of its parameters and inputs.
DERIVATION_SEED = 1212
# einsum/: torch.einsum's results over float64 operands drawn from this seed.
EINSUM_SEED = 1313
DERIVATION_B, DERIVATION_T, DERIVATION_C, DERIVATION_H = 2, 3, 4, 5
DERIVATION_T_DYNAMIC = 6  # the dynamic case's T, which shaped takes from the file


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
        q, k = self.encode(q, k)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v  # (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)

    def encode(self, q, k):
        """q and k before their scores: as projected (a variant's hook)."""
        return q, k


class RMSNorm(nn.Module):
    """rms_norm with a learned weight, ones at first (torch 1.13 has no nn.RMSNorm)."""

    def __init__(self, ndim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))

    def forward(self, x):
        return rms_norm(x, self.weight)


class QKNormAttention(CausalSelfAttention):
    """A user's variant: each head's q and k RMS-normalised over the head size, each with a
    learned weight (q_norm, k_norm), before their scores."""

    def __init__(self, n_embd, n_head, block_size, bias=True):
        super().__init__(n_embd, n_head, block_size, bias)
        self.q_norm = RMSNorm(n_embd // n_head)
        self.k_norm = RMSNorm(n_embd // n_head)

    def encode(self, q, k):
        return self.q_norm(q), self.k_norm(k)


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

    def __init__(self, n_embd, n_head, block_size, bias=True, gelu="none", attention=CausalSelfAttention):
        super().__init__()
        self.ln_1 = LayerNorm(n_embd, bias=bias)
        self.attn = attention(n_embd, n_head, block_size, bias=bias)
        self.ln_2 = LayerNorm(n_embd, bias=bias)
        self.mlp = MLP(n_embd, bias=bias, gelu=gelu)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):
    """nanoGPT's GPT (model.py) without dropout: the transformer ModuleDict, lm_head tied to wte,
    and nanoGPT's initialisation. `attention` is the blocks' attention class."""

    def __init__(self, vocab_size, block_size, n_layer, n_head, n_embd, bias=True, gelu="none",
                 attention=CausalSelfAttention):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab_size, n_embd),
            wpe=nn.Embedding(block_size, n_embd),
            h=nn.ModuleList([Block(n_embd, n_head, block_size, bias, gelu, attention) for _ in range(n_layer)]),
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


def rms_norm(x, weight, eps=RMS_EPS):
    """llama2.c's RMSNorm: x * rsqrt(mean(x^2) + eps), taken in float32 (or float64, never
    narrower), times the gain."""
    wide = x.to(torch.promote_types(x.dtype, torch.float32))
    return (wide * torch.rsqrt(wide.pow(2).mean(-1, keepdim=True) + eps)).type_as(x) * weight


def rotary_cos_sin(head_size, positions, theta=ROPE_THETA):
    """cos and sin (T, head_size/2) of position * theta^(-2i/head_size), in float32 as llama2.c's
    model.py and run.c compute them, whatever the forward's dtype: the tables are part of the
    model's definition (in float64 they differ by 1e-6, which moves stories260K's logits by 4e-5)."""
    freqs = 1.0 / theta ** (torch.arange(0, head_size, 2).float() / head_size)
    angles = torch.outer(positions.float(), freqs)
    return angles.cos(), angles.sin()


def rotate_adjacent(x, cos, sin):
    """Rotary embedding of x (B, T, heads, head_size) with adjacent pairs (Meta's, llama2.c's):
    pair i is elements 2i and 2i+1."""
    a, b = x[..., 0::2], x[..., 1::2]
    cos, sin = cos[:, None, :], sin[:, None, :]  # broadcast over batch and heads
    return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)


def rotate_halves(x, cos, sin):
    """Rotary embedding with Hugging Face's rotate_half pairing: pair i is elements i and
    i + head_size/2."""
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    cos, sin = cos[:, None, :], sin[:, None, :]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)


ROTARY = {"adjacent": rotate_adjacent, "halves": rotate_halves}


def llama_attention(x, w, prefix, config, cos, sin, rotate, cache):
    """Causal grouped-query attention: query head h reads key/value head h // (n_heads /
    n_kv_heads). `cache` (a dict, or None for no cache) holds this layer's earlier keys and
    values, so x's first token sits at absolute position len(cache keys)."""
    b, t, dim = x.shape
    n_heads, n_kv_heads = config["n_heads"], config["n_kv_heads"]
    head_size = dim // n_heads
    q = F.linear(x, w[prefix + "attention.wq.weight"]).view(b, t, n_heads, head_size)
    k = F.linear(x, w[prefix + "attention.wk.weight"]).view(b, t, n_kv_heads, head_size)
    v = F.linear(x, w[prefix + "attention.wv.weight"]).view(b, t, n_kv_heads, head_size)
    q, k = rotate(q, cos, sin), rotate(k, cos, sin)
    start = 0
    if cache is not None:
        if "k" in cache:
            start = cache["k"].shape[1]
            k, v = torch.cat([cache["k"], k], dim=1), torch.cat([cache["v"], v], dim=1)
        cache["k"], cache["v"] = k, v
    # repeat_interleave puts kv head j at query heads j*n_rep .. j*n_rep + n_rep - 1.
    n_rep = n_heads // n_kv_heads
    k, v = k.repeat_interleave(n_rep, dim=2), v.repeat_interleave(n_rep, dim=2)
    q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (B, heads, T, hs)
    scores = q @ k.transpose(-2, -1) / math.sqrt(head_size)
    # Query i is at position start + i and sees keys 0 .. start + i.
    visible = torch.ones(t, start + t, dtype=torch.bool).tril(diagonal=start)
    scores = scores.masked_fill(~visible, float("-inf"))
    y = F.softmax(scores, dim=-1) @ v
    return F.linear(y.transpose(1, 2).reshape(b, t, dim), w[prefix + "attention.wo.weight"])


def llama_forward(w, config, tokens, pairing="adjacent", caches=None):
    """A Llama as llama2.c's model.py defines it, over a dict of its tensors named as model.py's
    state_dict: pre-norm blocks of attention and a SwiGLU FFN w2(silu(w1 x) * w3 x), the final
    RMSNorm, logits = x @ output.weight^T. tokens (B, T) -> logits (B, T, vocab). With `caches`
    (one dict a layer) the tokens continue the cached ones, at the positions after them."""
    start = caches[0]["k"].shape[1] if caches and "k" in caches[0] else 0
    head_size = config["dim"] // config["n_heads"]
    x = w["tok_embeddings.weight"][tokens]
    # Tables for every position, then the rows of these tokens' positions, as model.py slices its
    # precomputed ones: the cached and the full forward then use the same values to the bit.
    cos, sin = (table[start:start + tokens.shape[1]].to(x.dtype)
                for table in rotary_cos_sin(head_size, torch.arange(config["seq_len"])))
    for layer in range(config["n_layers"]):
        p = f"layers.{layer}."
        cache = caches[layer] if caches is not None else None
        x = x + llama_attention(rms_norm(x, w[p + "attention_norm.weight"]), w, p, config, cos, sin,
                                ROTARY[pairing], cache)
        h = rms_norm(x, w[p + "ffn_norm.weight"])
        x = x + F.linear(F.silu(F.linear(h, w[p + "feed_forward.w1.weight"]))
                         * F.linear(h, w[p + "feed_forward.w3.weight"]), w[p + "feed_forward.w2.weight"])
    return F.linear(rms_norm(x, w["norm.weight"]), w["output.weight"])


def read_llama2c(path):
    """llama2.c's version-0 checkpoint: seven little-endian int32 (dim, hidden_dim, n_layers,
    n_heads, n_kv_heads, vocab_size, seq_len; a negative vocab_size means a separate classifier),
    then float32 arrays, all layers of one kind together. Returns the config and model.py's
    state_dict names; the file's size must be exactly what the header implies."""
    if not path.is_file():
        raise SystemExit(f"make_fixtures.py: {path} not found (llama2.c's stories260K.bin, read from "
                         "../shared/models beside the clone)")
    data = path.read_bytes()
    names = ("dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len")
    config = dict(zip(names, struct.unpack_from("<7i", data)))
    shared_classifier = config["vocab_size"] > 0
    config["vocab_size"] = abs(config["vocab_size"])
    dim, hidden, n_layers = config["dim"], config["hidden_dim"], config["n_layers"]
    head_size = dim // config["n_heads"]
    kv_dim = head_size * config["n_kv_heads"]
    vocab, seq_len = config["vocab_size"], config["seq_len"]
    layout = [("tok_embeddings.weight", (vocab, dim)), ("attention_norm", (n_layers, dim)),
              ("attention.wq", (n_layers, dim, dim)), ("attention.wk", (n_layers, kv_dim, dim)),
              ("attention.wv", (n_layers, kv_dim, dim)), ("attention.wo", (n_layers, dim, dim)),
              ("ffn_norm", (n_layers, dim)), ("feed_forward.w1", (n_layers, hidden, dim)),
              ("feed_forward.w2", (n_layers, dim, hidden)), ("feed_forward.w3", (n_layers, hidden, dim)),
              ("norm.weight", (dim,)),
              # The legacy rotary tables (cos, then sin), which the model recomputes.
              ("freq_cis_real", (seq_len, head_size // 2)), ("freq_cis_imag", (seq_len, head_size // 2))]
    if not shared_classifier:
        layout.append(("output.weight", (vocab, dim)))
    offset = struct.calcsize("<7i")
    expected = offset + 4 * sum(math.prod(shape) for _, shape in layout)
    if len(data) != expected:
        raise SystemExit(f"make_fixtures.py: {path} is {len(data)} bytes, but its header "
                         f"{config} (classifier {'tied' if shared_classifier else 'separate'}) "
                         f"implies {expected}")
    w = {}
    for name, shape in layout:
        count = math.prod(shape)
        array = np.frombuffer(data, dtype="<f4", count=count, offset=offset).reshape(shape)
        offset += 4 * count
        tensor = torch.from_numpy(array.astype(np.float32))  # a copy, writable and native-endian
        if name.endswith(".weight") or name.startswith("freq_cis"):
            w[name] = tensor
        else:  # one array for all layers, (n_layers, ...)
            for layer in range(n_layers):
                w[f"layers.{layer}.{name}.weight"] = tensor[layer]
    if shared_classifier:
        w["output.weight"] = w["tok_embeddings.weight"]
    return config, w


def greedy_llama(w, config, first, steps, cached):
    """Greedy decoding from the id `first`: feed it at position 0, take the argmax of the logits,
    feed that at the next position, ... Returns the `steps` chosen ids and, row s, the logits id
    s was chosen from. `cached` keeps each layer's keys and values; otherwise every step is a
    full forward of all the ids fed so far."""
    caches = [{} for _ in range(config["n_layers"])] if cached else None
    fed, ids, rows = [first], [], []
    for _ in range(steps):
        tokens = torch.tensor([fed[-1:] if cached else fed])
        logits = llama_forward(w, config, tokens, caches=caches)[0, -1]
        rows.append(logits)
        ids.append(int(logits.argmax()))
        fed.append(ids[-1])
    return torch.tensor(ids), torch.stack(rows)


def permute_for_hf(weight, n_heads):
    """convert_llama_weights_to_hf.py's permute of q and k: within each head, element 2i + j
    moves to j * head_size/2 + i, so halves pairing on the result is adjacent pairing on Meta's."""
    rows, cols = weight.shape
    return weight.view(n_heads, rows // n_heads // 2, 2, cols).transpose(1, 2).reshape(rows, cols)


def unpermute_from_hf(weight, n_heads):
    """The inverse of permute_for_hf: a Hugging Face q or k weight back in Meta's layout."""
    rows, cols = weight.shape
    return weight.view(n_heads, 2, rows // n_heads // 2, cols).transpose(1, 2).reshape(rows, cols)


def check_hf_permutation(meta, config, tokens):
    """Halves pairing on permuted q and k must be adjacent pairing on the original weights: exactly
    for one rotation, to rounding for the model (the permutation reorders the sums of q.k)."""
    head_size = config["dim"] // config["n_heads"]
    x = torch.randn(2, 5, 3, head_size, generator=torch.Generator().manual_seed(0))
    cos, sin = rotary_cos_sin(head_size, torch.arange(5))
    per_head = lambda t: t.unflatten(-1, (head_size // 2, 2)).transpose(-1, -2).flatten(-2)
    assert torch.equal(rotate_halves(per_head(x), cos, sin), per_head(rotate_adjacent(x, cos, sin)))
    hf = dict(meta)
    for layer in range(config["n_layers"]):
        for name, heads in (("wq", config["n_heads"]), ("wk", config["n_kv_heads"])):
            key = f"layers.{layer}.attention.{name}.weight"
            hf[key] = permute_for_hf(meta[key], heads)
            assert torch.equal(unpermute_from_hf(hf[key], heads), meta[key])
    adjacent = llama_forward(meta, config, tokens, pairing="adjacent")
    halves = llama_forward(hf, config, tokens, pairing="halves")
    difference = (adjacent - halves).abs().max().item()
    assert difference <= 1e-5 * max(1.0, adjacent.abs().max().item()), difference
    return difference


# Hugging Face's LlamaForCausalLM names of model.py's tensors, a layer's with "N" for its index.
HF_LLAMA_NAMES = {
    "tok_embeddings.weight": "model.embed_tokens.weight",
    "layers.N.attention_norm.weight": "model.layers.N.input_layernorm.weight",
    "layers.N.attention.wq.weight": "model.layers.N.self_attn.q_proj.weight",
    "layers.N.attention.wk.weight": "model.layers.N.self_attn.k_proj.weight",
    "layers.N.attention.wv.weight": "model.layers.N.self_attn.v_proj.weight",
    "layers.N.attention.wo.weight": "model.layers.N.self_attn.o_proj.weight",
    "layers.N.ffn_norm.weight": "model.layers.N.post_attention_layernorm.weight",
    "layers.N.feed_forward.w1.weight": "model.layers.N.mlp.gate_proj.weight",
    "layers.N.feed_forward.w3.weight": "model.layers.N.mlp.up_proj.weight",
    "layers.N.feed_forward.w2.weight": "model.layers.N.mlp.down_proj.weight",
    "norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}


def decode_stories260k(w, config):
    """stories260K's greedy decoding from BOS with a KV cache, checked against full recompute:
    each of the first steps decoded again, then one forward of every id fed (the mask is causal,
    so row s of it is step s's full recompute). Returns the ids, logits, and the largest
    difference between the cached and recomputed logits."""
    ids, logits = greedy_llama(w, config, STORIES_BOS, STORIES_STEPS, cached=True)
    check_ids, check_logits = greedy_llama(w, config, STORIES_BOS, STORIES_CHECK_STEPS, cached=False)
    assert torch.equal(check_ids, ids[:STORIES_CHECK_STEPS])
    fed = torch.cat([torch.tensor([STORIES_BOS]), ids[:-1]])[None]
    whole = llama_forward(w, config, fed)[0]
    assert torch.equal(whole.argmax(dim=-1), ids)
    difference = max((check_logits - logits[:STORIES_CHECK_STEPS]).abs().max().item(),
                     (whole - logits).abs().max().item())
    assert difference <= 1e-4, difference
    return ids, logits, difference


def hf_llama_name(name):
    """The Hugging Face name of one of model.py's tensors."""
    parts = name.split(".")
    if parts[0] != "layers":
        return HF_LLAMA_NAMES[name]
    return HF_LLAMA_NAMES[".".join(["layers", "N"] + parts[2:])].replace(".N.", f".{parts[1]}.")


def compute_stories260k():
    """stories260K's greedy ids from BOS and the logits of each step. The fixture's logits are
    a float64 forward's (with float32 rotary tables, rounded to float32 at the end): a float32
    forward's own rounding, about 6e-5 at these logits' size (|logit| up to 22), would otherwise
    add to the C++ side's and take most of the 1e-4 it is given. The float32 forward must choose
    the same ids and agree to 1e-4."""
    config, w = read_llama2c(STORIES_BIN)
    head_size = config["dim"] // config["n_heads"]
    # The legacy tables should be the cos and sin the model recomputes: a check on the reader.
    cos, sin = rotary_cos_sin(head_size, torch.arange(config["seq_len"]))
    assert torch.allclose(w.pop("freq_cis_real"), cos, atol=1e-4)
    assert torch.allclose(w.pop("freq_cis_imag"), sin, atol=1e-4)
    ids32, logits32, cache_difference32 = decode_stories260k(w, config)
    ids, logits, cache_difference = decode_stories260k({k: v.double() for k, v in w.items()}, config)
    assert torch.equal(ids, ids32)
    float32_difference = (logits - logits32).abs().max().item()
    assert float32_difference <= 1e-4, float32_difference
    fed = torch.cat([torch.tensor([STORIES_BOS]), ids[:-1]])[None]
    permutation_difference = check_hf_permutation(w, config, fed[:, :32])
    top2 = logits.topk(2, dim=-1).values
    runs = torch.unique_consecutive(ids, return_counts=True)[1]
    summary = {"first ids": ids[:20].tolist(), "distinct ids": len(set(ids.tolist())),
               "longest run of one id": runs.max().item(),
               "cache vs recompute max |diff| (float32, float64)": (cache_difference32, cache_difference),
               "float32 vs float64 max |diff|": float32_difference,
               "smallest top-2 margin": (top2[:, 0] - top2[:, 1]).min().item(),
               "mean top-1 probability": F.softmax(logits, dim=-1).max(dim=-1).values.mean().item(),
               "HF permutation max |diff|": permutation_difference}
    return {"stories260k_logits": logits}, {"stories260k_greedy": ids}, summary


def llama_layer_shapes(config):
    """The shapes of a layer's matrices, by model.py's name without "layers.N." and ".weight", in
    the order the random Llamas here draw them."""
    dim, hidden = config["dim"], config["hidden_dim"]
    kv_dim = dim // config["n_heads"] * config["n_kv_heads"]
    return {"attention.wq": (dim, dim), "attention.wk": (kv_dim, dim), "attention.wv": (kv_dim, dim),
            "attention.wo": (dim, dim), "feed_forward.w1": (hidden, dim),
            "feed_forward.w2": (dim, hidden), "feed_forward.w3": (hidden, dim)}


def compute_hf_llama():
    """A tiny Llama with grouped heads and random weights, in Hugging Face's layout and pairing:
    its tensors and config.json, ids and logits."""
    torch.manual_seed(HF_LLAMA_SEED)
    c = HF_LLAMA_CONFIG
    dim, hidden = c["dim"], c["hidden_dim"]
    shapes = llama_layer_shapes(c)
    w = {"tok_embeddings.weight": torch.randn(c["vocab_size"], dim)}
    for layer in range(c["n_layers"]):
        p = f"layers.{layer}."
        # Gains drawn around 1 rather than ones, which would not show a swapped name.
        w[p + "attention_norm.weight"] = 1 + 0.5 * torch.randn(dim)
        for name, shape in shapes.items():  # std 1/sqrt(fan_in), so every layer matters
            w[p + name + ".weight"] = torch.randn(shape) / math.sqrt(shape[1])
        w[p + "ffn_norm.weight"] = 1 + 0.5 * torch.randn(dim)
    w["norm.weight"] = 1 + 0.5 * torch.randn(dim)
    w["output.weight"] = torch.randn(c["vocab_size"], dim) / math.sqrt(dim)  # untied
    idx = torch.randint(0, c["vocab_size"], (HF_LLAMA_B, HF_LLAMA_T))
    logits = llama_forward(w, c, idx, pairing="halves")
    # The same model in Meta's layout, with adjacent pairing, must give the same logits.
    meta = dict(w)
    for layer in range(c["n_layers"]):
        for name, heads in (("wq", c["n_heads"]), ("wk", c["n_kv_heads"])):
            key = f"layers.{layer}.attention.{name}.weight"
            meta[key] = unpermute_from_hf(w[key], heads)
    check_hf_permutation(meta, c, idx)
    tensors = {hf_llama_name(name): tensor for name, tensor in w.items()}
    config = {"architectures": ["LlamaForCausalLM"], "hidden_act": "silu", "hidden_size": dim,
              "intermediate_size": hidden, "max_position_embeddings": c["seq_len"], "model_type": "llama",
              "num_attention_heads": c["n_heads"], "num_hidden_layers": c["n_layers"],
              "num_key_value_heads": c["n_kv_heads"], "rms_norm_eps": RMS_EPS, "rope_theta": ROPE_THETA,
              "tie_word_embeddings": False, "torch_dtype": "float32", "vocab_size": c["vocab_size"]}
    return tensors, config, {"hf_llama_logits": logits}, {"hf_llama_idx": idx}


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


def perturb_biases_and_norms(model):
    """Adds 0.3 * N(0, 1) to every bias and LayerNorm parameter of a GPT, in named_parameters()
    order: nanoGPT's zeros and ones would not show a swapped name."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".bias") or p.dim() == 1:
                p.add_(0.3 * torch.randn_like(p))


def compute_gpt():
    """A small nanoGPT GPT's state_dict, ids and targets, and torch's logits and loss."""
    torch.manual_seed(GPT_SEED)
    model = GPT(**GPT_CONFIG).eval()
    perturb_biases_and_norms(model)
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
    perturb_biases_and_norms(model)
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


def get_lr(it, learning_rate, warmup_iters, lr_decay_iters, min_lr):
    """nanoGPT's train.py get_lr: linear warmup, cosine decay to min_lr, then min_lr."""
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    if it > lr_decay_iters:
        return min_lr
    decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    assert 0 <= decay_ratio <= 1
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return min_lr + coeff * (learning_rate - min_lr)


def configure_optimizers(model, weight_decay, learning_rate, betas, eps):
    """nanoGPT's GPT.configure_optimizers on the CPU: AdamW over two groups, the parameters with
    two or more dims decayed, the rest (biases, LayerNorms) not; the plain per-parameter loop."""
    param_dict = {pn: p for pn, p in model.named_parameters() if p.requires_grad}
    optim_groups = [
        {"params": [p for p in param_dict.values() if p.dim() >= 2], "weight_decay": weight_decay},
        {"params": [p for p in param_dict.values() if p.dim() < 2], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(optim_groups, lr=learning_rate, betas=betas, eps=eps, foreach=False)


def markov_ids(length, vocab_size):
    """A random id sequence from a random first-order Markov chain, each id's successors drawn
    from softmax(8 N(0, 1)) (about 0.6 nats a step, against log(67) = 4.2 for uniform ids): random,
    but with something that 50 steps of train.py's settings can learn."""
    transitions = F.softmax(8.0 * torch.randn(vocab_size, vocab_size), dim=-1)
    ids = [int(torch.randint(0, vocab_size, ()))]
    for _ in range(length - 1):
        ids.append(int(torch.multinomial(transitions[ids[-1]], 1)))
    return torch.tensor(ids)


def clip_and_step_by_hand(params, moments, step, lr):
    """clip_grad_norm_ and one AdamW step written out as the README states them, for a C++ reader
    to follow: the clipping factor min(1, grad_clip / (norm + 1e-6)); then for each parameter
    p *= 1 - lr * weight_decay (decayed if two or more dims), m = b1 m + (1 - b1) g,
    v = b2 v + (1 - b2) g^2, p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)."""
    c = TRAIN_GPT
    (beta1, beta2), t = c["betas"], step + 1
    norm = math.sqrt(sum((p.grad ** 2).sum().item() for p in params.values()))
    factor = min(1.0, c["grad_clip"] / (norm + 1e-6))
    with torch.no_grad():
        for name, p in params.items():
            g, (m, v) = p.grad * factor, moments.setdefault(name, (torch.zeros_like(p), torch.zeros_like(p)))
            p.mul_(1 - lr * (c["weight_decay"] if p.dim() >= 2 else 0.0))
            m.mul_(beta1).add_((1 - beta1) * g)
            v.mul_(beta2).add_((1 - beta2) * g * g)
            p.sub_(lr / (1 - beta1 ** t) * m / (v.sqrt() / math.sqrt(1 - beta2 ** t) + c["eps"]))
    return norm


def train_gpt(initial, dtype, batches_idx, batches_targets, by_hand=False, attention=CausalSelfAttention):
    """nanoGPT's training loop (train.py, without evaluation or checkpoints) on a GPT_CONFIG GPT
    started from `initial` (named_parameters()) in `dtype`: each step sets get_lr(step) on both
    groups, runs its micro-batches' forwards and backwards (each loss divided by their number),
    clips the gradients' total norm to grad_clip, and steps AdamW (torch's, or with `by_hand`
    clip_and_step_by_hand). Returns each step's loss (the mean of its micro-batches'), lr and
    unclipped norm, step 0's gradients, the final parameters. `attention` is the blocks'."""
    c = TRAIN_GPT
    model = GPT(**GPT_CONFIG, attention=attention).to(dtype)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(initial[name])
    optimizer = configure_optimizers(model, c["weight_decay"], c["learning_rate"], c["betas"], c["eps"])
    schedule = {k: c[k] for k in ("learning_rate", "warmup_iters", "lr_decay_iters", "min_lr")}
    losses, lrs, norms, gradients_step0, moments = [], [], [], None, {}
    with torch.enable_grad():
        for step in range(c["steps"]):
            lr = get_lr(step, **schedule)
            for param_group in optimizer.param_groups:
                param_group["lr"] = lr
            micro_losses = []
            for micro in range(c["accumulation"]):
                _, loss = model(batches_idx[step, micro], batches_targets[step, micro])
                micro_losses.append(loss.item())
                (loss / c["accumulation"]).backward()
            if step == 0:
                gradients_step0 = {name: p.grad.detach().clone() for name, p in model.named_parameters()}
            if by_hand:
                norms.append(clip_and_step_by_hand(dict(model.named_parameters()), moments, step, lr))
            else:
                norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), c["grad_clip"]).item())
                optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            losses.append(sum(micro_losses) / len(micro_losses))
            lrs.append(lr)
    final = {name: p.detach().clone() for name, p in model.named_parameters()}
    return np.array(losses), np.array(lrs), np.array(norms), gradients_step0, final


def single_threaded(compute):
    """compute() with one torch thread, so that every sum has one order and a rerun is bitwise
    the same; the thread count is restored after."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return compute()
    finally:
        torch.set_num_threads(threads)


def train_gpt_start():
    """train_gpt/'s initial parameters and batches, drawn in that order from
    torch.manual_seed(TRAIN_GPT_SEED)."""
    c = TRAIN_GPT
    torch.manual_seed(TRAIN_GPT_SEED)
    model = GPT(**GPT_CONFIG)
    perturb_biases_and_norms(model)
    initial = {name: p.detach().clone() for name, p in model.named_parameters()}
    data = markov_ids(c["data_length"], GPT_CONFIG["vocab_size"])
    # train.py's get_batch: batch_size random windows of block_size ids, the targets one later.
    t = GPT_CONFIG["block_size"]
    starts = torch.randint(len(data) - t, (c["steps"], c["accumulation"], c["batch_size"]))
    window = starts[..., None] + torch.arange(t)
    return initial, data[window], data[window + 1]


def train_twice(initial, dtype, batches_idx, batches_targets, attention=CausalSelfAttention):
    """train_gpt's results, from two runs that must agree to the bit."""
    first, again = (single_threaded(lambda: train_gpt(initial, dtype, batches_idx, batches_targets,
                                                      attention=attention))
                    for _ in range(2))
    for a, b in zip(first, again):
        assert np.array_equal(a, b) if isinstance(a, np.ndarray) else all(torch.equal(a[n], b[n]) for n in a)
    return first


def compute_train_gpt():
    """nanoGPT's GPT trained TRAIN_GPT["steps"] steps as train.py trains it, in float32 and in
    float64 from the same weights and batches: the folders train_gpt/ and train_gpt_f64/."""
    c = TRAIN_GPT
    initial, batches_idx, batches_targets = train_gpt_start()
    losses, lrs, norms, gradients, final = train_twice(initial, torch.float32, batches_idx, batches_targets)
    losses64, lrs64, norms64, gradients64, final64 = train_twice(initial, torch.float64, batches_idx,
                                                                 batches_targets)
    assert np.array_equal(lrs, lrs64)
    loss_difference = np.abs(losses - losses64).max()
    assert loss_difference <= 1e-4, loss_difference
    gradient_difference = max((gradients[n].double() - gradients64[n]).abs().max().item() for n in gradients)
    assert gradient_difference <= 1e-5, gradient_difference
    final_difference = max((final[n].double() - final64[n]).abs().max().item() for n in final)
    # The README's rules, written out, must be torch's: float64 leaves only the sums' order.
    hand = single_threaded(lambda: train_gpt(initial, torch.float64, batches_idx, batches_targets, by_hand=True))
    hand_differences = (np.abs(hand[0] - losses64).max(), np.abs(hand[2] - norms64).max(),
                        max((hand[4][n] - final64[n]).abs().max().item() for n in final64))
    assert max(hand_differences) <= 1e-11, hand_differences
    assert losses[-10:].mean() < losses[:5].mean() - 0.5, losses  # it learns
    metadata = {"format": "pt", "n_head": str(GPT_CONFIG["n_head"])}
    folders = {
        "train_gpt": {
            "initial.safetensors": (initial, metadata),
            "batches_idx.npy": batches_idx.numpy().astype(np.int64),
            "batches_targets.npy": batches_targets.numpy().astype(np.int64),
            "losses.npy": losses, "lrs.npy": lrs, "grad_norms.npy": norms,
            "gradients_step0.safetensors": (gradients, metadata),
            "final.safetensors": (final, metadata),
        },
        "train_gpt_f64": {
            "losses.npy": losses64, "grad_norms.npy": norms64,
            "gradients_step0.safetensors": (gradients64, metadata),
            "final.safetensors": (final64, metadata),
        },
    }
    summary = {"parameters": sum(p.numel() for p in initial.values()),
               "loss, first and last (float32)": (losses[0], losses[-1]),
               "loss, first and last (float64)": (losses64[0], losses64[-1]),
               "lr, first, at warmup's end, last": (lrs[0], lrs[c["warmup_iters"]], lrs[-1]),
               "grad norm, first and last": (norms[0], norms[-1]),
               "steps clipped": int((norms > c["grad_clip"]).sum()),
               "float32 vs float64: losses, step 0 gradients, final parameters max |diff|":
                   (loss_difference, gradient_difference, final_difference),
               "float64 by hand vs torch.optim: losses, norms, final parameters max |diff|": hand_differences}
    return folders, summary


def compute_train_qknorm():
    """The QK-norm GPT (GPT_CONFIG's sizes, QKNormAttention in its blocks) drawn from
    torch.manual_seed(TRAIN_QKNORM_SEED) in float32 and perturbed as train_gpt's is, then trained
    as train_gpt_f64 is, in float64 on train_gpt's batches: the folder train_qknorm_f64/."""
    _, batches_idx, batches_targets = train_gpt_start()
    torch.manual_seed(TRAIN_QKNORM_SEED)
    model = GPT(**GPT_CONFIG, attention=QKNormAttention)
    perturb_biases_and_norms(model)
    initial = {name: p.detach().clone() for name, p in model.named_parameters()}
    assert any(name.endswith("attn.q_norm.weight") for name in initial)
    losses, lrs, norms, gradients, final = train_twice(initial, torch.float64, batches_idx, batches_targets,
                                                       attention=QKNormAttention)
    assert losses[-10:].mean() < losses[:5].mean() - 0.5, losses  # it learns
    metadata = {"format": "pt", "n_head": str(GPT_CONFIG["n_head"])}
    folders = {"train_qknorm_f64": {
        "initial.safetensors": (initial, metadata),
        "losses.npy": losses, "grad_norms.npy": norms,
        "gradients_step0.safetensors": (gradients, metadata),
        "final.safetensors": (final, metadata),
    }}
    summary = {"parameters": sum(p.numel() for p in initial.values()),
               "loss, first and last": (losses[0], losses[-1]),
               "grad norm, first and last": (norms[0], norms[-1]),
               "largest |q_norm, k_norm gradient| at step 0":
                   max(g.abs().max().item() for n, g in gradients.items() if "_norm." in n)}
    return folders, summary


def compute_train_llama():
    """A tiny Llama's one forward and backward (mean cross-entropy, autograd on leaf weights):
    the folder train_llama/. The float32 gradients are checked against a float64 backward, and
    the float64 one against central differences at each weight's largest gradient."""
    torch.manual_seed(TRAIN_LLAMA_SEED)
    c = TRAIN_LLAMA_CONFIG
    dim, vocab = c["dim"], c["vocab_size"]
    w = {"tok_embeddings.weight": 0.02 * torch.randn(vocab, dim)}
    for layer in range(c["n_layers"]):
        p = f"layers.{layer}."
        w[p + "attention_norm.weight"] = 1 + 0.5 * torch.randn(dim)  # around 1, as hf_llama's
        for name, shape in llama_layer_shapes(c).items():
            w[p + name + ".weight"] = 0.02 * torch.randn(shape)
        w[p + "ffn_norm.weight"] = 1 + 0.5 * torch.randn(dim)
    w["norm.weight"] = 1 + 0.5 * torch.randn(dim)
    w["output.weight"] = 0.02 * torch.randn(vocab, dim)  # untied
    ids = torch.randint(0, vocab, (TRAIN_LLAMA_B, c["seq_len"] + 1))
    idx, targets = ids[:, :-1], ids[:, 1:]  # targets: the next ids

    def loss_of(weights):
        logits = llama_forward(weights, c, idx)
        return logits, F.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1))

    def backward(dtype):
        leaves = {name: t.to(dtype, copy=True).requires_grad_() for name, t in w.items()}
        with torch.enable_grad():
            logits, loss = loss_of(leaves)
            loss.backward()
        return logits.detach(), loss.detach(), {name: t.grad for name, t in leaves.items()}

    logits, loss, gradients = single_threaded(lambda: backward(torch.float32))
    _, loss64, gradients64 = single_threaded(lambda: backward(torch.float64))
    assert abs(loss.item() - loss64.item()) <= 1e-5
    scale = max(g.abs().max().item() for g in gradients64.values())
    gradient_difference = max((gradients[n].double() - gradients64[n]).abs().max().item() for n in w)
    assert gradient_difference <= 1e-4 * scale, (gradient_difference, scale)
    h, fd_difference = 1e-6, 0.0
    for name, g in gradients64.items():
        at = int(g.abs().argmax())
        moved = []
        for sign in (1, -1):
            weights = {n: t.double() for n, t in w.items()}
            weights[name] = weights[name].clone()
            weights[name].view(-1)[at] += sign * h
            moved.append(loss_of(weights)[1].item())
        fd = (moved[0] - moved[1]) / (2 * h)
        fd_difference = max(fd_difference, abs(fd - g.view(-1)[at].item()))
    assert fd_difference <= 1e-7, fd_difference
    kind_of = lambda name: name.split(".", 2)[2] if name.startswith("layers.") else name  # no "layers.N."
    folders = {"train_llama": {
        "initial.safetensors": (w, {"format": "pt"}),
        "idx.npy": idx.numpy().astype(np.int64), "targets.npy": targets.numpy().astype(np.int64),
        "logits.npy": logits.numpy().astype(np.float32),
        "loss.npy": np.array(loss.item(), dtype=np.float64),
        "gradients.safetensors": (gradients, {"format": "pt"}),
    }}
    summary = {"loss (float32, float64)": (loss.item(), loss64.item()),
               "largest |gradient| by kind": {
                   kind: max(g.abs().max().item() for n, g in gradients.items() if kind_of(n) == kind)
                   for kind in dict.fromkeys(map(kind_of, w))},
               "float32 vs float64 gradients max |diff|": gradient_difference,
               "float64 vs central differences max |diff|": fd_difference}
    return folders, summary


def derivation_draws():
    """derivation/'s parameters, by the names shaped's for_each_parameter gives the test's struct,
    and its inputs, drawn in this order from torch.manual_seed(DERIVATION_SEED) in float64."""
    torch.manual_seed(DERIVATION_SEED)
    b, t, c, h = DERIVATION_B, DERIVATION_T, DERIVATION_C, DERIVATION_H
    draw = lambda *shape, scale=1.0: scale * torch.randn(*shape, dtype=torch.float64)
    parameters = {
        "w": draw(c),
        "gate": draw(t, 1),  # (T, 1): broadcast along C
        "pos": draw(t, c),
        "s": draw(t, t),
        "m": draw(c, h, scale=c**-0.5),
        "fc.weight": draw(h, c, scale=c**-0.5),  # nn.Linear's layout, (out, in)
        "fc.bias": draw(h, scale=0.5),
        "proj.weight": draw(c, h, scale=h**-0.5),  # a Linear without bias
        "ln.weight": 1 + draw(c, scale=0.5),
        "ln.bias": draw(c, scale=0.5),
        "rms.weight": 1 + draw(c, scale=0.5),
    }
    inputs = {"x": draw(b, t, c), "y": draw(b, t, c), "x_dynamic": draw(b, DERIVATION_T_DYNAMIC, c)}
    return parameters, inputs


# derivation/'s losses, each as derivation_parity_test.cpp writes it with shaped's ops, line for
# line: p the parameters by name, then the inputs.

def loss_broadcast_unary(p, x, y):
    """Broadcasting ((B,T,C) * (C), (T,1) * (T,C)), division and the unary ops."""
    h = x * p["w"] + p["gate"] * p["pos"]
    return (torch.tanh(h) * torch.exp(p["w"] * 0.5) + torch.sigmoid(h) / torch.sqrt(torch.square(p["w"]) + 1.0)
            - torch.log(torch.square(h) + 1.0) + torch.rsqrt(torch.abs(p["pos"]) + 1.0) * torch.relu(h)
            - torch.abs(h - y) * 0.25 + y / (torch.square(h) + 1.0) - (-h) * p["gate"]).mean()


def loss_activations(p, x, y):
    """gelu (exact and tanh), silu, maximum and minimum (one broadcast), where; Linear layers."""
    h = F.linear(x, p["fc.weight"], p["fc.bias"])  # (B, T, H)
    a = (F.gelu(h) + F.gelu(h, approximate="tanh") * 0.5 - F.silu(h) * 0.25 + torch.maximum(h, h * 0.1)
         - torch.minimum(h, p["fc.bias"]) * 0.5 + torch.where(h > 0.0, h, torch.exp(h) - 1.0))
    return torch.square(F.linear(a, p["proj.weight"]) - y).mean()


def loss_matmul(p, x, y):
    """(B,T,C) @ (C,H); (B,T,C) @ (B,C,T), one value on both sides; (T,T) @ (B,T,C) over B."""
    h = x * p["w"] + p["pos"]
    up = h @ p["m"]
    gram = h @ h.transpose(-2, -1)
    mixed = p["s"] @ h
    return torch.square(up).mean() * 0.1 + (gram * p["s"]).mean() + (mixed * y).mean()


def causal_head(p, x):
    """One causal attention head written out: its scores masked with tril, softmax, @ v."""
    t = x.shape[1]
    q = F.linear(x, p["fc.weight"], p["fc.bias"])  # (B, T, H)
    k = x @ p["m"]  # (B, T, H)
    scores = q @ k.transpose(-2, -1) * (1.0 / math.sqrt(DERIVATION_H))
    wei = F.softmax(scores.masked_fill(torch.tril(torch.ones(t, t)) == 0, float("-inf")), dim=-1)
    return wei @ (x * p["w"])


def loss_attention(p, x, y):
    return torch.square(causal_head(p, x) - y).mean()


def loss_reductions(p, x, y):
    """sum, mean, var (unbiased), amax, amin along a dim; log_softmax and softmax."""
    h = x * p["w"] + p["pos"]
    logp = F.log_softmax(h, dim=-1)
    return (-(logp * F.softmax(y, dim=-1)).sum(-1).mean() + h.var(1).mean() + h.amax(-1).mean()
            - h.amin(1).mean() * 0.5 + torch.square(h.mean(-1)).mean() + (h.sum(0) * p["pos"]).mean())


def loss_layer_norm(p, x, y):
    """nn.LayerNorm's weight and bias (eps 1e-5), and layer_norm with a weight only."""
    h = x * p["w"] + p["pos"]
    normed = F.layer_norm(h, (DERIVATION_C,), p["ln.weight"], p["ln.bias"], 1e-5)
    return (torch.square(normed - y).mean()
            + (F.layer_norm(h * 2.0 + x, (DERIVATION_C,), p["rms.weight"], None, 1e-5) * y).mean())


def loss_rms_norm(p, x, y):
    """RMSNorm as shaped's rms_norm defines it, x * rsqrt(mean(x^2) + eps) * weight: eps 1e-5
    (nn::RMSNorm's) and 1e-2 on a small input, where eps matters."""
    h = x * p["w"] + p["pos"]
    return (torch.square(rms_norm(h, p["rms.weight"], 1e-5) - y).mean()
            + (rms_norm(h * 0.1, p["ln.weight"], 1e-2) * y).mean())


def loss_mlp(p, x, y):
    """A pre-norm residual MLP of Linear layers written inline, then an RMSNorm."""
    ln = F.layer_norm(x, (DERIVATION_C,), p["ln.weight"], p["ln.bias"], 1e-5)
    h = x + F.linear(F.gelu(F.linear(ln, p["fc.weight"], p["fc.bias"])), p["proj.weight"])
    return torch.square(rms_norm(h, p["rms.weight"], 1e-5) - y).mean()


def loss_permute(p, x, y):
    """permute and transpose, and a transposed operand of a matmul."""
    h = x * p["w"] + p["pos"]
    q = h.permute(2, 0, 1) * 2.0  # (C, B, T)
    gram = h.transpose(1, 2) @ h  # (B, C, C)
    return ((q.permute(1, 2, 0) * y).mean() + torch.square(gram).mean() * 0.01
            + (h.transpose(-2, -1) * y.transpose(1, 2)).mean())


def loss_dynamic(p, x):
    """The causal head on x_dynamic, whose T shaped takes from the file, then a LayerNorm."""
    out = F.layer_norm(causal_head(p, x) + x, (DERIVATION_C,), p["ln.weight"], p["ln.bias"], 1e-5)
    return torch.square(out).mean() + out.var(1).mean()


DERIVATION_LOSSES = {
    "broadcast_unary": (loss_broadcast_unary, ("x", "y")),
    "activations": (loss_activations, ("x", "y")),
    "matmul": (loss_matmul, ("x", "y")),
    "attention": (loss_attention, ("x", "y")),
    "reductions": (loss_reductions, ("x", "y")),
    "layer_norm": (loss_layer_norm, ("x", "y")),
    "rms_norm": (loss_rms_norm, ("x", "y")),
    "mlp": (loss_mlp, ("x", "y")),
    "permute": (loss_permute, ("x", "y")),
    "dynamic": (loss_dynamic, ("x_dynamic",)),
}


def compute_derivation():
    """derivation/: the parameters and inputs, and for each loss of DERIVATION_LOSSES its value
    and every parameter's gradient by autograd (zeros for those it does not read), in float64 on
    one torch thread. Each gradient is checked against central differences at its largest
    element, and every loss must reach some parameter."""
    parameters, inputs = derivation_draws()
    files = {"parameters.safetensors": (parameters, {"format": "pt"})}
    files.update({f"{name}.npy": t.numpy() for name, t in inputs.items()})
    summary = {}
    for case, (loss_of, input_names) in DERIVATION_LOSSES.items():
        args = [inputs[name] for name in input_names]

        def backward():
            leaves = {name: t.clone().requires_grad_() for name, t in parameters.items()}
            with torch.enable_grad():
                loss = loss_of(leaves, *args)
                loss.backward()
            return loss.detach(), {name: (t.grad if t.grad is not None else torch.zeros_like(t))
                                   for name, t in leaves.items()}

        loss, gradients = single_threaded(backward)
        again, gradients_again = single_threaded(backward)
        assert loss.item() == again.item() and all(torch.equal(gradients[n], gradients_again[n]) for n in gradients)
        largest = max(g.abs().max().item() for g in gradients.values())
        assert largest > 1e-2, (case, largest)
        h, fd_difference = 1e-6, 0.0
        for name, g in gradients.items():
            at = int(g.abs().argmax())
            moved = []
            for sign in (1, -1):
                shifted = {n: t.clone() for n, t in parameters.items()}
                shifted[name].view(-1)[at] += sign * h
                moved.append(loss_of(shifted, *args).item())
            fd_difference = max(fd_difference, abs((moved[0] - moved[1]) / (2 * h) - g.view(-1)[at].item()))
        assert fd_difference <= 1e-7, (case, fd_difference)
        tensors = dict(gradients)
        tensors["loss"] = loss
        files[f"{case}.safetensors"] = (tensors, {"format": "pt"})
        summary[case] = (loss.item(), largest, fd_difference)
    return {"derivation": files}, {f"{case}: loss, largest |gradient|, vs central differences":
                                   value for case, value in summary.items()}


# attention_variants/: a layer's score and mask modifiers (attention_variants_parity_test.cpp): nanoGPT's
# attention whose scores take a learned relative bias (a table (NH, 5) at the head and q - kv clamped to
# [0, 4]), then ALiBi (slope 2^(-8 (h + 1) / NH)) and soft-capping (1.5 tanh(s / 1.5)), with documents
# of three positions masked on top of causality; its output, loss and every parameter's gradient in
# float64. prefix_out.npy and prefix_gradients.safetensors: the same with a prefix-LM of 4 positions
# (they see one another whole, the rest each its past) in place of causality and documents.
VARIANT_SEED = 2718
VARIANT_B, VARIANT_T, VARIANT_C, VARIANT_NH = 2, 7, 8, 2


VARIANT_PREFIX = 4


def variant_attention(p, x, keys="documents"):
    b, t, c = x.shape
    nh, hs = VARIANT_NH, VARIANT_C // VARIANT_NH
    q, k, v = F.linear(x, p["c_attn.weight"], p["c_attn.bias"]).split(c, dim=2)
    q, k, v = (z.view(b, t, nh, hs).transpose(1, 2) for z in (q, k, v))  # (B, NH, T, HS)
    i = torch.arange(t).view(t, 1)
    j = torch.arange(t).view(1, t)
    scores = q @ k.transpose(-2, -1) * hs ** -0.5
    scores = scores + p["relative"][:, torch.clamp(i - j, max=4).clamp(min=0)]  # (NH, T, T), broadcast over B
    slopes = torch.tensor([2.0 ** (-8.0 * (h + 1) / nh) for h in range(nh)], dtype=torch.float64).view(nh, 1, 1)
    scores = 1.5 * torch.tanh((scores - slopes * (i - j)) / 1.5)
    keep = (j <= i) & (i // 3 == j // 3) if keys == "documents" else (j <= i) | (j < VARIANT_PREFIX)
    wei = F.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)
    y = (wei @ v).transpose(1, 2).contiguous().view(b, t, c)
    return F.linear(y, p["c_proj.weight"], p["c_proj.bias"])


def compute_attention_variants():
    torch.manual_seed(VARIANT_SEED)
    b, t, c, nh = VARIANT_B, VARIANT_T, VARIANT_C, VARIANT_NH
    draw = lambda *shape, scale=1.0: scale * torch.randn(*shape, dtype=torch.float64)
    parameters = {"c_attn.weight": draw(3 * c, c, scale=c ** -0.5), "c_attn.bias": draw(3 * c, scale=0.5),
                  "c_proj.weight": draw(c, c, scale=c ** -0.5), "c_proj.bias": draw(c, scale=0.5),
                  "relative": draw(nh, 5)}
    x, y = draw(b, t, c), draw(b, t, c)

    def backward(keys):
        leaves = {name: t.clone().requires_grad_() for name, t in parameters.items()}
        with torch.enable_grad():
            out = variant_attention(leaves, x, keys)
            loss = torch.square(out - y).mean()
            loss.backward()
        return out.detach(), loss.detach(), {name: t.grad for name, t in leaves.items()}

    files = {"parameters.safetensors": (parameters, {"format": "pt"}), "x.npy": x.numpy(), "y.npy": y.numpy()}
    summary = {}
    for keys, prefix in (("documents", ""), ("prefix", "prefix_")):
        out, loss, gradients = single_threaded(lambda: backward(keys))
        assert all(g.abs().max().item() > 1e-3 for g in gradients.values())
        tensors = dict(gradients)
        tensors["loss"] = loss
        files[f"{prefix}gradients.safetensors"] = (tensors, {"format": "pt"})
        files[f"{prefix}out.npy"] = out.numpy()
        summary[f"{keys}: loss, largest |gradient| of the table"] = (loss.item(), gradients["relative"].abs().max().item())
    return {"attention_variants": files}, summary


# Each case: torch's pattern, by letter, and its operands' names (shapes in EINSUM_OPERANDS);
# einsum_parity_test.cpp writes each in shaped's names, one name a letter.
EINSUM_OPERANDS = {"q": (2, 3, 4, 6), "k": (2, 3, 5, 6), "x": (2, 4, 7), "w": (7, 3), "a": (3, 5), "b": (5, 4),
                   "y": (2, 4, 2, 3), "wh": (2, 3, 7), "apart": (3, 2, 2, 4), "u": (3,), "v": (4,), "bi": (2, 3),
                   "jb": (4, 2)}
EINSUM_CASES = {
    "scores": ("bhtd,bhsd->bhts", "q", "k"),       # a batched contraction: q @ k^T
    "linear": ("btc,cn->btn", "x", "w"),           # a contraction broadcast over batch dims
    "transposed": ("ik,kj->ji", "a", "b"),         # a transposed result
    "heads_merged": ("bthd,hdc->btc", "y", "wh"),  # two names contracted, side by side
    "heads_apart": ("dbht,hdc->tcb", "apart", "wh"),  # two names contracted, apart
    "outer": ("i,j->ij", "u", "v"),                # an outer product
    "batch_outer": ("bi,jb->jbi", "bi", "jb"),     # a batched outer product
    "summed_first": ("btc,cn->n", "x", "w"),       # names of one operand summed
    "column_sums": ("btc->c", "x"),                # reductions
    "total": ("btc->", "x"),
    "permuted": ("btc->cbt", "x"),                 # a transpose
    "dot": ("i,i->", "u", "u"),
}


def compute_einsum():
    """einsum/: the operands (<name>.npy) and torch.einsum's result of each case (<case>.npy)."""
    torch.manual_seed(EINSUM_SEED)
    operands = {name: torch.randn(*shape, dtype=torch.float64) for name, shape in EINSUM_OPERANDS.items()}
    files = {f"{name}.npy": tensor.numpy() for name, tensor in operands.items()}
    for case, (pattern, *names) in EINSUM_CASES.items():
        files[f"{case}.npy"] = torch.einsum(pattern, *(operands[name] for name in names)).numpy()
    return {"einsum": files}


def write_folder(folder, files):
    """Writes one fixture folder: .npy files from numpy arrays, .safetensors files from
    (tensors, metadata)."""
    (FIXTURES / folder).mkdir(exist_ok=True)
    for filename, content in files.items():
        path = FIXTURES / folder / filename
        if filename.endswith(".safetensors"):
            tensors, metadata = content
            save_safetensors(path, tensors, metadata)
            dtypes = sorted({SAFETENSORS_DTYPES[t.dtype] for t in tensors.values()})
            print(f"  {folder}/{filename:28} {len(tensors)} tensors, {'/'.join(dtypes)}")
        else:
            np.save(path, content)
            print(f"  {folder}/{filename:28} {str(content.shape):15} {content.dtype}")


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
                        help="write only these fixture files or folders (e.g. mha_x.npy hf_gpt2 train_gpt)")
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
        llama_tensors, llama_config, llama_fixtures, llama_ids = compute_hf_llama()
        # Only what is asked for needs the checkpoint beside the clone.
        stories = any(wanted(f"stories260k_{name}.npy") for name in ("greedy", "logits"))
        if stories:
            stories_fixtures, stories_ids, stories_summary = compute_stories260k()
            fixtures.update(stories_fixtures)
            gpt_ids.update(stories_ids)
    fixtures.update(attention_fixtures)
    fixtures.update(block_fixtures)
    fixtures.update(gpt_fixtures)
    fixtures.update(hf_fixtures)
    fixtures.update(llama_fixtures)
    gpt_ids.update(hf_ids)
    gpt_ids.update(llama_ids)
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
    if wanted("hf_llama"):
        (FIXTURES / "hf_llama").mkdir(exist_ok=True)
        save_safetensors(FIXTURES / "hf_llama" / "model.safetensors", llama_tensors, {"format": "pt"})
        (FIXTURES / "hf_llama" / "config.json").write_text(json.dumps(llama_config, indent=2) + "\n")
        print(f"  hf_llama/          {len(llama_tensors)} tensors, config.json")
    if stories:
        for key, value in stories_summary.items():
            print(f"  stories260K {key}: {value}")
    if wanted("gpt2_124m_parameters.txt"):
        (FIXTURES / "gpt2_124m_parameters.txt").write_text(gpt2_124m_parameters())
        print("  gpt2_124m_parameters.txt")
    training = {}  # model -> ({folder: {file: content}}, summary)
    if wanted("train_gpt") or wanted("train_gpt_f64"):
        training["GPT"] = compute_train_gpt()
    if wanted("train_qknorm_f64"):
        training["QK-norm GPT"] = compute_train_qknorm()
    if wanted("train_llama"):
        training["Llama"] = compute_train_llama()
    for model, (folders, summary) in training.items():
        for folder, files in folders.items():
            if wanted(folder):
                write_folder(folder, files)
        for key, value in summary.items():
            print(f"  training {model}: {key}: {value}")
    if wanted("derivation"):
        folders, summary = compute_derivation()
        for folder, files in folders.items():
            write_folder(folder, files)
        for key, value in summary.items():
            print(f"  derivation {key}: {value}")
    if wanted("attention_variants"):
        folders, summary = compute_attention_variants()
        for folder, files in folders.items():
            write_folder(folder, files)
        for key, value in summary.items():
            print(f"  attention_variants {key}: {value}")
    if wanted("einsum"):
        for folder, files in compute_einsum().items():
            write_folder(folder, files)
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
