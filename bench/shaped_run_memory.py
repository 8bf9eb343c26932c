#!/usr/bin/python3
"""Peak resident memory of shaped-run generating from a GPT-2-124M-shaped checkpoint, against
the bytes the model needs: its weights and its KV caches (shaped-run's caches hold the whole
context). The checkpoint is a Hugging Face GPT-2 directory of random weights, written once
into --workdir (about 500 MB) and kept for the next run. With --shaped-quantize and --llama2c,
also shaped-run decoding from a Q4_0 GGUF of the quantized benchmarks' stories110M-shaped model,
against the file's bytes and its caches'.

A child's peak resident memory (ru_maxrss) counts what it inherited from this process before it
ran shaped-run, so this process stays small: the checkpoint is written by another one, and
torch is imported only there.

    bench/shaped_run_memory.py --shaped-run build/gcc/apps/shaped-run --workdir build/gcc/bench \\
        --out build/gcc/bench/memory.json
"""

import argparse
import json
import math
import os
import pathlib
import subprocess
import sys
import tempfile

CONFIG = {"model_type": "gpt2", "activation_function": "gelu_new", "vocab_size": 50257, "n_positions": 1024,
          "n_ctx": 1024, "n_layer": 12, "n_head": 12, "n_embd": 768, "layer_norm_epsilon": 1e-05}
FLOAT_BYTES = 4


def gpt2_shapes(config):
    """Hugging Face's names and shapes of GPT-2's parameters (Conv1D weights are (in, out))."""
    c = config["n_embd"]
    shapes = {"wte.weight": (config["vocab_size"], c), "wpe.weight": (config["n_positions"], c),
              "ln_f.weight": (c,), "ln_f.bias": (c,)}
    block = {"ln_1.weight": (c,), "ln_1.bias": (c,), "ln_2.weight": (c,), "ln_2.bias": (c,),
             "attn.c_attn.weight": (c, 3 * c), "attn.c_attn.bias": (3 * c,),
             "attn.c_proj.weight": (c, c), "attn.c_proj.bias": (c,),
             "mlp.c_fc.weight": (c, 4 * c), "mlp.c_fc.bias": (4 * c,),
             "mlp.c_proj.weight": (4 * c, c), "mlp.c_proj.bias": (c,)}
    for i in range(config["n_layer"]):
        shapes.update({f"h.{i}.{name}": shape for name, shape in block.items()})
    return shapes


def write_checkpoint(directory):
    import torch
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests" / "parity"))
    from make_fixtures import save_safetensors

    directory.mkdir(parents=True, exist_ok=True)
    generator = torch.Generator().manual_seed(124)
    tensors = {name: torch.randn(shape, generator=generator) * 0.02 for name, shape in gpt2_shapes(CONFIG).items()}
    save_safetensors(directory / "model.safetensors", tensors, {"format": "pt"})
    (directory / "config.json").write_text(json.dumps(CONFIG, indent=2))


def checkpoint(workdir):
    """The directory, written (by another process) unless it is there with this config."""
    directory = workdir / "gpt2_124m_random"
    config_path = directory / "config.json"
    if not (config_path.exists() and json.loads(config_path.read_text()) == CONFIG
            and (directory / "model.safetensors").exists()):
        subprocess.run([sys.executable, __file__, "--write-checkpoint", str(directory)], check=True)
    return directory


def peak_of(command, expected_ids):
    """The peak resident bytes of this child alone (wait4), not of every child this process has
    waited for; and its stderr. SystemExit unless it prints expected_ids ids."""
    with tempfile.TemporaryFile(mode="w+") as out, tempfile.TemporaryFile(mode="w+") as err:
        process = subprocess.Popen(command, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read().strip()
    if process.returncode != 0 or len(stdout.split()) != expected_ids:
        raise SystemExit(f"{command[0]} failed (status {process.returncode}): {stderr}")
    return usage.ru_maxrss * 1024, stderr  # KiB on Linux


# The stories110M-shaped Llama of the quantized benchmarks (quantized_bench.cpp writes it as a
# llama2.c file), as a Q4_0 GGUF: its KV caches, over the whole context of 1024.
STORIES110M = {"dim": 768, "n_layers": 12, "seq_len": 1024}
Q4_0_IDS = 1000


def q4_0_peak(shaped_run, shaped_quantize, checkpoint, workdir):
    """shaped-run decoding Q4_0_IDS ids from the Q4_0 GGUF shaped-quantize writes of checkpoint
    (with tools/stand_in_vocab.py's 32000 tokens), against the file's bytes and its caches'."""
    tokenizer, gguf = workdir / "stand_in_vocab_32000.bin", workdir / "stories110m_random.q4_0.gguf"
    tools = pathlib.Path(__file__).resolve().parent.parent / "tools"
    subprocess.run([sys.executable, str(tools / "stand_in_vocab.py"), str(tokenizer), "32000"], check=True)
    subprocess.run([shaped_quantize, str(checkpoint), str(gguf), "--type", "q4_0", "--tokenizer", str(tokenizer)],
                   check=True, stdout=subprocess.DEVNULL)
    arguments = [str(gguf), "-i", "w5 w6 w7", "-n", str(Q4_0_IDS), "-t", "0", "--ids"]
    peak, stderr = peak_of([shaped_run] + arguments, Q4_0_IDS)
    caches = STORIES110M["n_layers"] * 2 * STORIES110M["seq_len"] * STORIES110M["dim"] * FLOAT_BYTES
    file_bytes = gguf.stat().st_size
    print(f"shaped-run on the Q4_0 file: peak resident {peak / 2**20:.0f} MiB, file {file_bytes / 2**20:.0f} MiB, "
          f"caches {caches / 2**20:.0f} MiB: {peak / (file_bytes + caches):.2f}x", file=sys.stderr)
    return {"arguments": ["GGUF"] + arguments[1:], "peak_rss_bytes": peak, "file_bytes": file_bytes,
            "cache_bytes": caches, "stderr": stderr}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shaped-run", help="the shaped-run executable")
    parser.add_argument("--workdir", type=pathlib.Path, help="where the checkpoint is kept")
    parser.add_argument("--out", help="write the measurement here as JSON")
    parser.add_argument("--shaped-quantize", help="the shaped-quantize executable (for the Q4_0 case)")
    parser.add_argument("--llama2c", type=pathlib.Path,
                        help="quantized_bench.cpp's random stories110M-shaped llama2.c file (for the Q4_0 case)")
    parser.add_argument("--write-checkpoint", type=pathlib.Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write_checkpoint:
        write_checkpoint(args.write_checkpoint)
        return
    if not args.shaped_run or not args.workdir:
        parser.error("--shaped-run and --workdir are required")

    directory = checkpoint(args.workdir)
    weights = sum(math.prod(shape) for shape in gpt2_shapes(CONFIG).values()) * FLOAT_BYTES
    caches = CONFIG["n_layer"] * 2 * CONFIG["n_positions"] * CONFIG["n_embd"] * FLOAT_BYTES
    prompt = " ".join(str(i * 7919 % CONFIG["vocab_size"]) for i in range(16))
    arguments = [str(directory), "-i", prompt, "-n", "128", "-t", "0", "--ids"]
    peak, stderr = peak_of([args.shaped_run] + arguments, 128)
    result = {"arguments": ["DIR"] + arguments[1:], "peak_rss_bytes": peak, "weights_bytes": weights,
              "cache_bytes": caches, "stderr": stderr}
    print(f"shaped-run: peak resident {peak / 2**20:.0f} MiB, weights {weights / 2**20:.0f} MiB, caches "
          f"{caches / 2**20:.0f} MiB: {peak / (weights + caches):.2f}x; {stderr}", file=sys.stderr)
    if args.shaped_quantize and args.llama2c and args.llama2c.exists():
        result["q4_0"] = q4_0_peak(args.shaped_run, args.shaped_quantize, args.llama2c, args.workdir)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
