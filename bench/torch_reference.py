#!/usr/bin/python3
"""The PyTorch side of shaped's benchmarks in PyTorch eager, written the way the chapter,
nanoGPT and Hugging Face write them (matmul, masked_fill, softmax; torch.cat for the KV cache).

Each case has the name its shaped benchmark has (bench/*_bench.cpp), so that bench/report.py can
put them in one row. Times are per call, the fastest over repetitions of the mean over a batch
of calls, in the same clock as the C++ side (process CPU time when single-threaded, wall time
otherwise; both are written).

    /usr/bin/python3 bench/torch_reference.py --threads 1 --out torch.json
"""

import argparse
import inspect
import itertools
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


# ---- case 1: the chapter's head ------------------------------------------------------------

class Head(nn.Module):
    """The chapter's section 1 head, scaled as its section 2 (and nanoGPT's Head) does."""

    def __init__(self, n_embd, head_size):
        super().__init__()
        self.key = nn.Linear(n_embd, head_size, bias=False)
        self.query = nn.Linear(n_embd, head_size, bias=False)
        self.value = nn.Linear(n_embd, head_size, bias=False)

    def forward(self, x):
        B, T, C = x.shape
        k = self.key(x)    # (B, T, 16)
        q = self.query(x)  # (B, T, 16)
        wei = q @ k.transpose(-2, -1) * k.shape[-1] ** -0.5  # (B, T, 16) @ (B, 16, T) ---> (B, T, T)
        tril = torch.tril(torch.ones(T, T))
        wei = wei.masked_fill(tril == 0, float('-inf'))
        wei = F.softmax(wei, dim=-1)
        v = self.value(x)
        return wei @ v


# ---- case 2 and 3: nanoGPT's CausalSelfAttention, with a torch.cat KV cache ----------------

class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        assert n_embd % n_head == 0
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head = n_head
        self.n_embd = n_embd
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size))

    def heads(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        return q, k, v

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.heads(x)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float('-inf'))
        att = F.softmax(att, dim=-1)
        y = att @ v  # (B, nh, T, T) x (B, nh, T, hs) -> (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)

    def decode(self, x, cache):
        """x (B, T, C) are the next T positions; cache is (k, v), each (B, nh, t, hs), or None.
        Returns the output and the grown cache. Each position sees the cached ones, itself and
        the new ones before it, as Hugging Face's GPT-2 masks with its past_key_values."""
        B, T, C = x.size()
        q, k, v = self.heads(x)
        if cache is not None:
            k = torch.cat([cache[0], k], dim=2)
            v = torch.cat([cache[1], v], dim=2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        if T > 1:
            seen = k.size(2)
            att = att.masked_fill(self.bias[:, :, seen - T:seen, :seen] == 0, float('-inf'))
        att = F.softmax(att, dim=-1)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y), (k, v)


# ---- case 5: generation with GPT-2 124M's shape ------------------------------------------

class Block(nn.Module):
    """nanoGPT's Block (no dropout), with GPT-2's tanh GELU (gelu='tanh') or nanoGPT's exact one
    (gelu='none'); forward for training, decode through its attention's cache."""

    def __init__(self, n_embd, n_head, block_size, gelu='tanh'):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, block_size)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.c_proj = nn.Linear(4 * n_embd, n_embd)
        self.gelu = gelu

    def mlp(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate=self.gelu))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))

    def decode(self, x, cache):
        y, cache = self.attn.decode(self.ln_1(x), cache)
        x = x + y
        return x + self.mlp(self.ln_2(x)), cache


class GPT(nn.Module):
    """nanoGPT's GPT (lm_head tied to wte, no dropout): forward(idx, targets) for training, and
    decoding with one torch.cat cache per block, as Hugging Face's GPT2LMHeadModel does with
    past_key_values."""

    def __init__(self, vocab_size, block_size, n_layer, n_head, n_embd, gelu='tanh'):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.h = nn.ModuleList([Block(n_embd, n_head, block_size, gelu) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * n_layer) if name.endswith('c_proj.weight') else 0.02
                nn.init.normal_(p, std=std)
            elif name.endswith('bias'):
                nn.init.zeros_(p)

    def forward(self, idx, targets):
        """The logits (B, T, V) and F.cross_entropy's mean loss, as nanoGPT's forward."""
        x = self.wte(idx) + self.wpe(torch.arange(idx.size(1)))
        for block in self.h:
            x = block(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss

    def decode(self, idx, caches):
        """idx (B, T) after the positions the caches hold: the logits (B, T, V), the caches grown."""
        start = 0 if caches[0] is None else caches[0][0].size(2)
        x = self.wte(idx) + self.wpe(torch.arange(start, start + idx.size(1)))
        grown = []
        for block, cache in zip(self.h, caches):
            x, cache = block.decode(x, cache)
            grown.append(cache)
        return F.linear(self.ln_f(x), self.wte.weight), grown


def generate_greedy(model, prompt, new_tokens):
    """The prompt in one pass, then each new id fed alone; argmax of the last logits each time."""
    logits, caches = model.decode(prompt, [None] * len(model.h))
    ids = []
    for step in range(new_tokens):
        ids.append(logits[:, -1].argmax(dim=-1, keepdim=True))
        if step + 1 < new_tokens:
            logits, caches = model.decode(ids[-1], caches)
    return torch.cat(ids, dim=1)


# ---- training: nanoGPT's step, and the attention's backward ---------------------------------

def configure_optimizer(model, lr, weight_decay=0.1, betas=(0.9, 0.95)):
    """nanoGPT's configure_optimizers: weight decay on the parameters of two or more dims, the
    single-tensor AdamW (foreach=False; fused=False where this torch has the option)."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    extra = {"fused": False} if "fused" in inspect.signature(torch.optim.AdamW).parameters else {}
    return torch.optim.AdamW(groups, lr=lr, betas=betas, foreach=False, **extra)


def training_step(model, optimizer, idx, targets):
    """One step of nanoGPT's train.py (one micro-batch, no scaler): forward, backward, the
    gradients clipped to norm 1, the update, the gradients freed. Returns the loss."""
    with torch.enable_grad():
        _, loss = model(idx, targets)
        loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss


def causal_attention(q, k, v):
    """The attention core as nanoGPT's fallback writes it: (B, nh, T, hs) -> (B, nh, T, hs)."""
    T = q.size(-2)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
    att = att.masked_fill(torch.tril(torch.ones(T, T)).view(1, 1, T, T) == 0, float('-inf'))
    return F.softmax(att, dim=-1) @ v


# ---- timing --------------------------------------------------------------------------------

def measure(call, min_time, repetitions):
    """Seconds per call: (process CPU, wall), each the fastest over repetitions of the mean over
    enough calls to last min_time. A call of seconds is repeated three times at most."""
    call()
    calls = 1
    while True:
        start = time.perf_counter()
        for _ in range(calls):
            call()
        elapsed = time.perf_counter() - start
        if elapsed >= min_time / 4 or calls >= 1 << 24:
            break
        calls *= 4
    if elapsed >= 4 * min_time:
        repetitions = min(repetitions, 3)
    calls = max(1, int(calls * min_time / max(elapsed, 1e-9)))
    cpu, wall = [], []
    for _ in range(repetitions):
        c0, w0 = time.process_time(), time.perf_counter()
        for _ in range(calls):
            call()
        cpu.append((time.process_time() - c0) / calls)
        wall.append((time.perf_counter() - w0) / calls)
    return min(cpu), min(wall)


def cases(only):
    """(name, call) for every case whose name contains `only`."""
    torch.manual_seed(1337)

    x = torch.randn(2, 4, 6)
    head = Head(6, 16)
    yield "head/B2_T4_C6_H16", lambda: head(x)

    for B, T, C, nh in [(1, 256, 384, 6), (4, 256, 384, 6), (1, 1024, 768, 12)]:
        name = f"B{B}_T{T}_C{C}_NH{nh}"
        if only and only not in "prefill/" + name and only not in "attention_core/" + name:
            continue
        layer = CausalSelfAttention(C, nh, T)
        xs = torch.randn(B, T, C)
        yield f"prefill/{name}", lambda layer=layer, xs=xs: layer(xs)
        q, k, v = (torch.randn(B, nh, T, C // nh) for _ in range(3))
        mask = torch.tril(torch.ones(T, T)).view(1, 1, T, T)

        def core(q=q, k=k, v=v, mask=mask):
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(mask == 0, float('-inf'))
            return F.softmax(att, dim=-1) @ v
        yield f"attention_core/{name}", core

    C, nh = 384, 6
    layer = CausalSelfAttention(C, nh, 1024)
    for context in [64, 256, 1024]:
        # The cache holds context - 1 positions; the step appends the context-th and attends
        # over all context positions (torch.cat copies the whole cache to do so).
        prefix = torch.randn(1, context - 1, C)
        _, (keys, values) = layer.decode(prefix, None)
        x = torch.randn(1, 1, C)
        yield f"decode/ctx{context}_C{C}_NH{nh}", lambda keys=keys, values=values, x=x: layer.decode(x, (keys, values))
        # Without a cache: the whole prefix again, through the full causal forward.
        whole = torch.randn(1, context, C)
        yield f"recompute/ctx{context}_C{C}_NH{nh}", lambda whole=whole: layer(whole)

    # The same prompt and count as generate_bench.cpp; random weights, so the ids differ, but
    # not the work: every one of the 128 ids is generated, none ends the text.
    prompt_length, new_tokens = 16, 128
    name = f"generate/gpt2_124m_P{prompt_length}_N{new_tokens}"
    if not only or only in name:
        model = GPT(vocab_size=50257, block_size=1024, n_layer=12, n_head=12, n_embd=768)
        prompt = (torch.arange(prompt_length) * 7919 % 50257).view(1, prompt_length)
        yield name, lambda: generate_greedy(model, prompt, new_tokens)


    # The training steps of train_bench.cpp: the same configs, batches and optimizer settings;
    # random ids (the work does not depend on them).
    for name, (vocab, block, layers, heads, channels, gelu), (B, T) in [
            ("train/char_gpt_B16_T64", (256, 64, 4, 4, 128, 'none'), (16, 64)),
            ("train/char_gpt_B1_T64", (256, 64, 4, 4, 128, 'none'), (1, 64)),
            ("train/gpt2_2layers_B1_T256_C768", (50257, 256, 2, 12, 768, 'tanh'), (1, 256))]:
        if only and only not in name:
            continue
        model = GPT(vocab, block, layers, heads, channels, gelu)
        optimizer = configure_optimizer(model, lr=6e-4)
        idx, targets = torch.randint(vocab, (B, T)), torch.randint(vocab, (B, T))
        yield name, lambda model=model, optimizer=optimizer, idx=idx, targets=targets: training_step(
            model, optimizer, idx, targets)

    # attention_backward_bench.cpp: autograd's backward of the attention core, the forward
    # (and the probabilities autograd keeps from it) outside the timing.
    B, nh, T, hs = 1, 12, 1024, 64
    name = f"attention_backward/B{B}_NH{nh}_T{T}_HS{hs}"
    if not only or only in name:
        with torch.enable_grad():
            q, k, v = (torch.randn(B, nh, T, hs, requires_grad=True) for _ in range(3))
            out = causal_attention(q, k, v)
        dout = torch.randn(B, nh, T, hs)

        def backward(out=out, inputs=(q, k, v), dout=dout):
            with torch.enable_grad():
                return torch.autograd.grad(out, inputs, dout, retain_graph=True)
        yield name, backward


def attention_variant(q, k, v, variant):
    """Dense attention with a score modifier and a mask, as one writes it without a fused kernel
    (FlexAttention's reference): the scores, the modifier, the mask, softmax, the values."""
    B, nh, T, hs = q.shape
    scores = q @ k.transpose(-2, -1) * hs ** -0.5
    i = torch.arange(T).view(T, 1)
    j = torch.arange(T).view(1, T)
    keep = j <= i
    if variant == "alibi":
        slopes = torch.tensor([2.0 ** (-8.0 * (h + 1) / nh) for h in range(nh)]).view(1, nh, 1, 1)
        scores = scores - slopes * (i - j)
    elif variant == "softcap":
        scores = 2.0 * torch.tanh(scores / 2.0)
    elif variant == "documents4":
        keep = keep & (i // (T // 4) == j // (T // 4))
    scores = scores.masked_fill(~keep, float('-inf'))
    return F.softmax(scores, dim=-1) @ v


def variant_cases(only):
    """attention_variants_bench.cpp's cases: forward, and autograd's backward of the same graph
    (its forward outside the timing)."""
    B, nh, T, hs = 1, 12, 1024, 64
    for variant in ("causal", "alibi", "softcap", "documents4"):
        name = f"attention_variant/{variant}_B{B}_NH{nh}_T{T}_HS{hs}"
        q, k, v = (torch.randn(B, nh, T, hs) for _ in range(3))
        if not only or only in name + "_forward":
            yield name + "_forward", lambda q=q, k=k, v=v, variant=variant: attention_variant(q, k, v, variant)
        if not only or only in name + "_backward":
            with torch.enable_grad():
                inputs = tuple(x.clone().requires_grad_(True) for x in (q, k, v))
                out = attention_variant(*inputs, variant)
            dout = torch.randn(B, nh, T, hs)

            def backward(out=out, inputs=inputs, dout=dout):
                with torch.enable_grad():
                    return torch.autograd.grad(out, inputs, dout, retain_graph=True)
            yield name + "_backward", backward


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    parser.add_argument("--out", help="write the results here as JSON")
    parser.add_argument("--min-time", type=float, default=0.5, help="seconds per repetition")
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--filter", default="", help="run only the cases whose name contains this")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    results = {}
    with torch.no_grad():
        for name, call in itertools.chain(cases(args.filter), variant_cases(args.filter)):
            if args.filter and args.filter not in name:
                continue
            cpu, wall = measure(call, args.min_time, args.repetitions)
            results[name] = {"cpu_seconds": cpu, "wall_seconds": wall}
            print(f"{name:45s} {cpu * 1e6:12.1f} us cpu {wall * 1e6:12.1f} us wall", file=sys.stderr, flush=True)

    report = {
        "torch_version": torch.__version__,
        "threads": torch.get_num_threads(),
        "openblas_num_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
        "cases": results,
    }
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=2)
    else:
        json.dump(report, sys.stdout, indent=2)


if __name__ == "__main__":
    main()
