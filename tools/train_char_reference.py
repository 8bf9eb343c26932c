#!/usr/bin/python3
"""Trains the character-level GPT of shaped-train's gpt-char preset in PyTorch, as nanoGPT's
train.py does, with shaped-train's defaults, and prints its validation loss: the number a
shaped-train run of the same config, data and steps is compared with.

    /usr/bin/python3 tools/train_char_reference.py data/genesis-kjv.txt --steps 2000
    build/gcc/apps/shaped-train data/genesis-kjv.txt -o build/char --steps 2000

Same model (nanoGPT's GPT over bytes: context 64, 4 layers, 4 heads, 128 channels, exact GELU,
its initialisation), same optimizer (AdamW, betas 0.9 and 0.99, weight decay 0.1 on the matrices,
clipping at norm 1), same schedule (warmup, cosine to lr / 10 at the last step), same split (the
last 10% validates), same batches' shape (16 x 64) and evaluation (the mean loss over 20 random
batches of each split). The batches are drawn by torch's generator, not shaped's: the two runs
see the same text in different random windows, as two seeds of one run would.
"""

import argparse
import math
import pathlib
import sys
import time

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "bench"))
from torch_reference import GPT, configure_optimizer  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("text")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--eval-batches", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1337)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)

    data = torch.tensor(list(pathlib.Path(args.text).read_bytes()), dtype=torch.long)
    val_size = int(len(data) * 0.1)
    splits = {"train": data[:len(data) - val_size], "val": data[len(data) - val_size:]}
    batch, time_steps = 16, 64

    def get_batch(split):
        tokens = splits[split]
        starts = torch.randint(len(tokens) - time_steps, (batch,))
        x = torch.stack([tokens[s:s + time_steps] for s in starts])
        y = torch.stack([tokens[s + 1:s + 1 + time_steps] for s in starts])
        return x, y

    def lr_at(step):
        min_lr = args.lr / 10
        if step < args.warmup:
            return args.lr * (step + 1) / (args.warmup + 1)
        if step > args.steps:
            return min_lr
        ratio = (step - args.warmup) / (args.steps - args.warmup)
        return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (args.lr - min_lr)

    @torch.no_grad()
    def evaluate(split):
        return sum(model(*get_batch(split))[1].item() for _ in range(args.eval_batches)) / args.eval_batches

    model = GPT(256, time_steps, 4, 4, 128, gelu="none")
    optimizer = configure_optimizer(model, args.lr, betas=(0.9, 0.99))
    start = time.time()
    for step in range(args.steps):
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step)
        _, loss = model(*get_batch("train"))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if (step + 1) % 250 == 0:
            print(f"step {step + 1}: loss {loss.item():.4f}, {time.time() - start:.0f} s", flush=True)
    print(f"step {args.steps}: train loss {evaluate('train'):.4f}, val loss {evaluate('val'):.4f}")


if __name__ == "__main__":
    main()
