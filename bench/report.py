#!/usr/bin/python3
"""Merges shaped's Google Benchmark results and bench/torch_reference.py's into one table, checks
the performance targets, and writes both as JSON.

    bench/report.py --shaped shaped.json --torch torch.json --threads 1 --out results.json

A row is a case: shaped's time, the hand-written baseline's, PyTorch eager's, how many times
faster shaped is than PyTorch, shaped's time over the baseline's; where the case counts its
flops, shaped's GFLOP/s and their share of the sgemm ceiling (the baseline sgemm's GFLOP/s);
where it counts the bytes it reads, its GB/s and their share of the bandwidth ceiling (the
faster STREAM-like case's); where it counts tokens, its tokens/s and PyTorch's, and below the
table what a token costs each implementation (us per token) or, for a training step, its ms a
step, steps/s and tokens/s of training.
Each time is the fastest of the repetitions (other work on the machine only ever adds time).
Single-threaded runs compare process CPU time, which another process on the machine disturbs
less than wall time; multi-threaded runs compare wall time.
"""

import argparse
import json
import re
import shlex
import sys

UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
SUFFIXES = ("/process_time", "/real_time", "/manual_time")

# Targets: (description, check(rows) -> (met, measured text)).
CEILING = "sgemm/N1024"
BANDWIDTH_CASES = "stream/"
GENERATE = "generate/gpt2_124m_P16_N128"
# stories260K's greedy decoding (llama_bench.cpp): the C loops of llama2.c's run.c, built as its
# README builds run.c (-Ofast -march=native), are its baseline. Its benchmarks name the
# implementation inside the case's last part; they are one row.
STORIES = "llama/stories260k_N256"
# stories110M's shape (llama_bench.cpp): generation, bound by bandwidth; and decoding at a long
# context with all 12 key/value heads and with 4.
STORIES110M = "llama/stories110m_P16_N128"
LONG_CONTEXT = "llama/stories110m_ctx960_N64_kv"
# Training steps (train_bench.cpp) and the fused attention backward (attention_backward_bench.cpp).
TRAINING = "train/"
CHAR_GPT = "train/char_gpt_B16_T64"
CHAR_GPT_ONE_ROW = "train/char_gpt_B1_T64"
# A user's attention variant (QK-norm) in the same GPT: measured against the GPT's own step.
QK_NORM_CHAR_GPT = "train/qk_norm_char_gpt_B16_T64"
GPT2_LAYERS = "train/gpt2_2layers_B1_T256_C768"
ATTENTION_BACKWARD = "attention_backward/B1_NH12_T1024_HS64"
# Score and mask modifiers in the fused kernel (attention_variants_bench.cpp), by variant.
ATTENTION_VARIANT = "attention_variant/{}_B1_NH12_T1024_HS64"
# einsum's attention contraction against the matmul it lowers to (einsum_bench.cpp).
EINSUM_SCORES = "einsum/B2_NH12_T256_S256_HS64"
NAMED = {
    "llama/stories260k_c_loops_N256": (STORIES, "baseline"),
    "llama/stories260k_shaped_N256": (STORIES, "shaped"),
}


def load_shaped(path, clock):
    """Each case's fastest repetition (and its flops per call)."""
    with open(path) as f:
        data = json.load(f)
    times, counters, failed = {}, {}, set()
    for b in data["benchmarks"]:
        if b.get("run_type") == "aggregate":
            continue
        name = strip(b.get("run_name", b["name"]))
        if b.get("error_occurred"):
            failed.add(name)
            print(f"report: {name} failed: {b.get('error_message')}", file=sys.stderr)
            continue
        seconds = b["cpu_time" if clock == "cpu" else "real_time"] * UNITS[b["time_unit"]]
        times[name] = min(seconds, times.get(name, seconds))
        counters[name] = {k: b[k] for k in ("flops", "bytes", "tokens", "cache_bytes") if k in b}
    for name in failed:
        times[name] = None
    return data.get("context", {}), times, counters


def strip(name):
    """The case and implementation alone: without the clock's suffix, nor a case's own
    iterations and repetitions ('.../shaped/iterations:1/repeats:3/process_time')."""
    for suffix in SUFFIXES:
        name = name.replace(suffix, "")
    return re.sub(r"/(iterations|repeats):\d+", "", name)


def split_name(name):
    """'prefill/B1_T256_C384_NH6/shaped' -> ('prefill/B1_T256_C384_NH6', 'shaped'); the cases of
    NAMED, to their row and implementation."""
    if name in NAMED:
        return NAMED[name]
    case, _, impl = name.rpartition("/")
    return case, impl




def build_rows(times, counters, torch_cases, clock):
    rows = {}
    for name, seconds in times.items():
        case, impl = split_name(name)
        row = rows.setdefault(case, {"case": case})
        row[impl] = seconds
        for counter, value in counters.get(name, {}).items():
            if impl == "shaped" or counter not in row:
                row[counter] = value
    key = "cpu_seconds" if clock == "cpu" else "wall_seconds"
    for name, entry in torch_cases.items():
        rows.setdefault(name, {"case": name})["pytorch"] = entry[key]
    ceiling = None
    if CEILING in rows and rows[CEILING].get("baseline") and rows[CEILING].get("flops"):
        ceiling = rows[CEILING]["flops"] / rows[CEILING]["baseline"] / 1e9
    bandwidth = max((r["bytes"] / r["baseline"] / 1e9 for case, r in rows.items()
                     if case.startswith(BANDWIDTH_CASES) and r.get("baseline") and r.get("bytes")), default=None)
    for row in rows.values():
        s, b, t = row.get("shaped"), row.get("baseline"), row.get("pytorch")
        if s and t:
            row["speedup_vs_pytorch"] = t / s
        if s and b:
            row["shaped_over_baseline"] = s / b
        fastest = s or b
        if row.get("flops") and fastest:
            row["gflops"] = row["flops"] / fastest / 1e9
            if ceiling:
                row["share_of_ceiling"] = row["gflops"] / ceiling
        if row.get("bytes") and fastest:
            row["gbytes_per_second"] = row["bytes"] / fastest / 1e9
            if bandwidth:
                row["share_of_bandwidth"] = row["gbytes_per_second"] / bandwidth
        if row.get("tokens"):
            for impl, seconds, prefix in (("shaped", s, ""), ("baseline", b, "baseline_"), ("pytorch", t, "pytorch_")):
                if seconds:
                    row[prefix + "tokens_per_second"] = row["tokens"] / seconds
                    row[prefix + "us_per_token"] = seconds / row["tokens"] * 1e6
    return sorted(rows.values(), key=order), ceiling, bandwidth


def order(row):
    kinds = ["head", "prefill", "attention_core", "attention_backward", "attention_variant", "decode", "recompute",
             "generate", "llama", "train", "einsum", "sgemm", "stream"]
    kind = row["case"].split("/")[0]
    rank = kinds.index(kind) if kind in kinds else len(kinds)
    numbers = [int(n) for n in re.findall(r"\d+", row["case"])]
    if kind == "prefill" or kind == "attention_core":
        numbers = numbers[1:2] + numbers
    elif kind == "train":
        numbers = []  # by name: the small model first
    return (rank, numbers, row["case"])


def duration(seconds):
    if seconds is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}" if seconds / scale < 100 else f"{seconds / scale:.0f} {unit}"
    return f"{seconds / 1e-9:.0f} ns"


def table(rows):
    header = ["case", "shaped", "baseline", "PyTorch", "vs PyTorch", "shaped/base", "GFLOP/s", "of sgemm", "GB/s",
              "of STREAM"]
    lines = []
    for r in rows:
        lines.append([
            r["case"],
            duration(r.get("shaped")),
            duration(r.get("baseline")),
            duration(r.get("pytorch")),
            f"{r['speedup_vs_pytorch']:.1f}x" if "speedup_vs_pytorch" in r else "-",
            f"{r['shaped_over_baseline']:.2f}" if "shaped_over_baseline" in r else "-",
            f"{r['gflops']:.1f}" if "gflops" in r else "-",
            f"{100 * r['share_of_ceiling']:.0f}%" if "share_of_ceiling" in r and not r["case"].startswith("sgemm") else "-",
            f"{r['gbytes_per_second']:.1f}" if "gbytes_per_second" in r else "-",
            f"{100 * r['share_of_bandwidth']:.0f}%" if "share_of_bandwidth" in r and not r["case"].startswith(BANDWIDTH_CASES) else "-",
        ])
    widths = [max(len(str(x)) for x in column) for column in zip(header, *lines)]
    out = []
    fmt = lambda cells: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))
    out.append(fmt(header))
    out.append("  ".join("-" * w for w in widths))
    out.extend(fmt(line) for line in lines)
    return "\n".join(out)


def per_token(rows):
    """What a token costs each implementation of the cases that count tokens (but training's)."""
    lines = []
    for r in rows:
        if not r.get("tokens") or r["case"].startswith(TRAINING):
            continue
        costs = [] if r.get("us_per_token") else ["shaped missing"]
        for impl, prefix in (("shaped", ""), ("baseline", "baseline_"), ("PyTorch", "pytorch_")):
            us = r.get(prefix + "us_per_token")
            if us:
                costs.append(f"{impl} {us:.1f} us ({r[prefix + 'tokens_per_second']:.0f} tokens/s)")
        lines.append(f"  {r['case']}: " + ", ".join(costs))
    return "\n".join(lines)


def training(rows):
    """What a training step costs each implementation: ms a step, steps/s, tokens/s of training."""
    lines = []
    for r in rows:
        if not r["case"].startswith(TRAINING):
            continue
        costs = [] if r.get("shaped") else ["shaped missing"]
        for impl, key in (("shaped", "shaped"), ("PyTorch", "pytorch")):
            seconds = r.get(key)
            if seconds:
                steps = f"{impl} {seconds * 1e3:.1f} ms a step ({1 / seconds:.2f} steps/s"
                tokens = r.get(("" if key == "shaped" else key + "_") + "tokens_per_second")
                costs.append(steps + (f", {tokens:.0f} tokens/s)" if tokens else ")"))
        lines.append(f"  {r['case']}: " + ", ".join(costs))
    return "\n".join(lines)


def step_target(row, ceiling):
    """A training row's measured text: each side's ms a step and tokens/s, the ratio, and its
    products' GFLOP/s against the ceiling."""
    s, t = row.get("shaped"), row.get("pytorch")
    if not (s and t):
        return "missing"
    text = (f"{s * 1e3:.1f} vs {t * 1e3:.1f} ms a step, {row['tokens_per_second']:.0f} vs "
            f"{row['pytorch_tokens_per_second']:.0f} tokens/s = {t / s:.2f}x")
    if row.get("gflops") and ceiling:
        text += f"; its products at {row['gflops']:.1f} GFLOP/s = {100 * row['share_of_ceiling']:.0f}% of sgemm's {ceiling:.1f}"
    return text


def targets(rows, ceiling, bandwidth, memory):
    by_case = {r["case"]: r for r in rows}
    results = []

    def add(name, met, measured):
        results.append({"target": name, "met": met, "measured": measured})

    head = by_case.get("head/B2_T4_C6_H16", {})
    x = head.get("speedup_vs_pytorch")
    add("seed head: >= 50x faster than PyTorch eager", x is not None and x >= 50, f"{x:.1f}x" if x else "missing")

    prefill = by_case.get("prefill/B1_T1024_C768_NH12", {})
    x = prefill.get("speedup_vs_pytorch")
    add("prefill (1, 1024, 768, 12 heads): >= 3x faster than PyTorch eager", x is not None and x >= 3,
        f"{x:.1f}x" if x else "missing")

    core = by_case.get("attention_core/B1_T1024_C768_NH12", {})
    share = core.get("share_of_ceiling")
    add("attention core (1, 1024, 768, 12 heads): >= 50% of the sgemm ceiling's GFLOP/s (causal flops)",
        share is not None and share >= 0.5,
        f"{core['gflops']:.1f} GFLOP/s = {100 * share:.0f}% of {ceiling:.1f}" if share else "missing")

    x = by_case.get("decode/ctx1024_C384_NH6", {}).get("speedup_vs_pytorch")
    add("decode step at context 1024: >= 5x faster than PyTorch eager (torch.cat cache)", x is not None and x >= 5,
        f"{x:.1f}x" if x else "missing")

    generate = by_case.get(GENERATE, {})
    x = generate.get("speedup_vs_pytorch")
    add("generation, GPT-2 124M's shape (prompt 16, 128 new ids, greedy): >= 1.5x PyTorch eager's tokens/s "
        "(torch.cat caches)", x is not None and x >= 1.5,
        f"{generate['tokens_per_second']:.1f} vs {generate['pytorch_tokens_per_second']:.1f} tokens/s = {x:.1f}x" if x
        else "missing")
    share = generate.get("share_of_bandwidth")
    add("that generation: the bytes its tokens read (weights + caches) at >= 80% of the STREAM bandwidth",
        share is not None and share >= 0.8,
        f"{generate['gbytes_per_second']:.1f} GB/s = {100 * share:.0f}% of {bandwidth:.1f}" if share else "missing")

    if memory:
        budget = memory["weights_bytes"] + memory["cache_bytes"]
        x = memory["peak_rss_bytes"] / budget
        add("shaped-run on that model: peak resident memory <= 1.2x its weights' and caches' bytes", x <= 1.2,
            f"{memory['peak_rss_bytes'] / 2**20:.0f} MiB over {budget / 2**20:.0f} MiB = {x:.2f}x")
    else:
        add("shaped-run on that model: peak resident memory <= 1.2x its weights' and caches' bytes", False, "missing")
    q4 = (memory or {}).get("q4_0")
    what = "shaped-run on the Q4_0 GGUF of stories110M's shape: peak resident memory <= 1.1x the file's and caches' bytes"
    if q4:
        budget = q4["file_bytes"] + q4["cache_bytes"]
        x = q4["peak_rss_bytes"] / budget
        add(what, x <= 1.1, f"{q4['peak_rss_bytes'] / 2**20:.0f} MiB over {budget / 2**20:.0f} MiB = {x:.2f}x")
    else:
        add(what, False, "missing")

    stories = by_case.get(STORIES, {})
    s, b = stories.get("tokens_per_second"), stories.get("baseline_tokens_per_second")
    if s and b:
        measured = f"{s:.0f} vs {b:.0f} tokens/s = {s / b:.2f}x"
    else:
        measured = "missing (" + "; ".join(
            [f"C loops {b:.0f} tokens/s" if b else "no result for llama/stories260k_c_loops_N256"] +
            ([] if s else ["no result for llama/stories260k_shaped_N256"])) + ")"
    add("stories260K decode (greedy, 256 ids from BOS): shaped >= 1.5x the C loops' tokens/s (llama2.c's run.c "
        "built as its README builds it, -Ofast -march=native; no BLAS)", bool(s and b and s / b >= 1.5), measured)

    llama = by_case.get(STORIES110M, {})
    share = llama.get("share_of_bandwidth")
    add("generation, a Llama of stories110M's shape (prompt 16, 128 new ids, greedy): the bytes its tokens read "
        "at >= 80% of the STREAM bandwidth", share is not None and share >= 0.8,
        f"{llama['gbytes_per_second']:.1f} GB/s = {100 * share:.0f}% of {bandwidth:.1f}, "
        f"{llama['tokens_per_second']:.1f} tokens/s" if share else "missing")

    all_heads, four = by_case.get(LONG_CONTEXT + "12", {}), by_case.get(LONG_CONTEXT + "4", {})
    if all_heads.get("us_per_token") and four.get("us_per_token"):
        shrink = all_heads["cache_bytes"] / four["cache_bytes"]
        add("that shape with 4 key/value heads, decoding at context 960: the cache's bytes and a token's time shrink",
            shrink == 3 and four["us_per_token"] < all_heads["us_per_token"],
            f"caches {all_heads['cache_bytes'] / 2**20:.0f} -> {four['cache_bytes'] / 2**20:.0f} MiB ({shrink:.0f}x), "
            f"{all_heads['us_per_token'] / 1e3:.1f} -> {four['us_per_token'] / 1e3:.1f} ms a token")
    else:
        add("that shape with 4 key/value heads, decoding at context 960: the cache's bytes and a token's time shrink",
            False, "missing")

    # Training's targets are shares of the machine (its products' GFLOP/s over the sgemm ceiling
    # of the same run), which hold from host to host; the ratio to PyTorch, which moves with the
    # host, is said beside them.
    char_gpt = by_case.get(CHAR_GPT, {})
    share = char_gpt.get("share_of_ceiling")
    add("training step, nanoGPT's character GPT (vocab 256, context 64, 4 layers, 4 heads, 128 channels; B 16, T 64; "
        "forward, derived backward, clip 1.0, AdamW): >= 80% of the sgemm ceiling", share is not None and share >= 0.8,
        step_target(char_gpt, ceiling))

    plain, variant = char_gpt.get("shaped"), by_case.get(QK_NORM_CHAR_GPT, {}).get("shaped")
    add("training step, a user's QK-norm GPT at the character GPT's size: within 1.15x of the GPT's step",
        bool(plain and variant and variant <= 1.15 * plain),
        f"{variant * 1e3:.1f} ms a step, the GPT's {plain * 1e3:.1f} ({variant / plain:.2f}x)" if plain and variant
        else "missing")

    gpt2_layers = by_case.get(GPT2_LAYERS, {})
    share = gpt2_layers.get("share_of_ceiling")
    add("training step, two GPT-2 layers (C 768, 12 heads, vocab 50257, tied classifier; B 1, T 256): >= 85% of the "
        "sgemm ceiling", share is not None and share >= 0.85, step_target(gpt2_layers, ceiling))

    one_row = by_case.get(CHAR_GPT_ONE_ROW, {})
    x = one_row.get("speedup_vs_pytorch")
    add("training step, the character GPT at B 1, T 64 (small ops: what each costs beside its arithmetic): >= 2x "
        "PyTorch eager's steps/s", x is not None and x >= 2, step_target(one_row, ceiling))

    backward = by_case.get(ATTENTION_BACKWARD, {})
    share = backward.get("share_of_ceiling")
    x = backward.get("speedup_vs_pytorch")
    add("attention backward (1, 12 heads, T 1024, HS 64), fused: >= 50% of the sgemm ceiling's GFLOP/s (5 products "
        "over the causal half)", share is not None and share >= 0.5,
        f"{backward['gflops']:.1f} GFLOP/s = {100 * share:.0f}% of {ceiling:.1f}" +
        (f"; {x:.1f}x PyTorch's autograd" if x else "") if share else "missing")

    # Attention variants (attention_variants_bench.cpp): each against plain causal attention's time in the same run.
    def variant_time(variant, direction):
        return by_case.get(f"{ATTENTION_VARIANT.format(variant)}_{direction}", {}).get("shaped")

    for direction in ("forward", "backward"):
        plain = variant_time("causal", direction)
        for variant, what in (("alibi", "ALiBi"), ("softcap", "soft-capped")):
            time = variant_time(variant, direction)
            add(f"{what} attention (1, 12 heads, T 1024, HS 64), {direction}: within 1.1x of plain causal attention's",
                bool(plain and time and time <= 1.1 * plain),
                f"{time * 1e3:.1f} ms, causal {plain * 1e3:.1f} ({time / plain:.2f}x)" if plain and time else "missing")
    plain, documents = variant_time("causal", "forward"), variant_time("documents4", "forward")
    add("a document mask of 4 documents (T 1024, 12 heads, HS 64), forward: at most 0.4x of causal attention's time",
        bool(plain and documents and documents <= 0.4 * plain),
        f"{documents * 1e3:.1f} ms, causal {plain * 1e3:.1f} ({documents / plain:.2f}x)" if plain and documents
        else "missing")

    ratio = by_case.get(EINSUM_SCORES, {}).get("shaped_over_baseline")
    add("einsum of a (B, NH, T, HS) x (B, NH, S, HS) contraction: within 1.05x of the equivalent matmul in the same run",
        ratio is not None and ratio <= 1.05, f"{ratio:.3f}x matmul(q, k.mT())'s time" if ratio else "missing")

    ratios = [(r["case"], r["shaped_over_baseline"]) for r in rows if "shaped_over_baseline" in r]
    worst = max(ratios, key=lambda cr: cr[1]) if ratios else None
    add("shaped vs hand-written baseline: no slower than 1.1x in any case", worst is not None and worst[1] <= 1.1,
        f"worst {worst[1]:.2f} ({worst[0]})" if worst else "missing")
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shaped", required=True, help="Google Benchmark JSON (--benchmark_out)")
    parser.add_argument("--torch", required=True, help="bench/torch_reference.py's JSON")
    parser.add_argument("--threads", type=int, required=True, help="the thread count both ran with")
    parser.add_argument("--memory", help="bench/shaped_run_memory.py's JSON")
    parser.add_argument("--out", help="write the table and targets here as JSON")
    args = parser.parse_args()

    clock = "cpu" if args.threads == 1 else "wall"
    context, times, counters = load_shaped(args.shaped, clock)
    with open(args.torch) as f:
        torch_data = json.load(f)
    memory = None
    if args.memory:
        with open(args.memory) as f:
            memory = json.load(f)
    rows, ceiling, bandwidth = build_rows(times, counters, torch_data["cases"], clock)
    checks = targets(rows, ceiling, bandwidth, memory)

    clock_text = "process CPU time" if clock == "cpu" else "wall time"
    print(f"\nshaped vs hand-written baseline vs PyTorch {torch_data.get('torch_version')} eager; "
          f"{args.threads} thread(s) each; fastest of the repetitions, {clock_text} per call")
    core = f" (OpenBLAS's {context['openblas_core']} kernels)" if "openblas_core" in context else ""
    print(f"sgemm ceiling: {ceiling:.1f} GFLOP/s{core}" if ceiling else "sgemm ceiling: missing")
    print(f"memory bandwidth (STREAM-like): {bandwidth:.1f} GB/s\n" if bandwidth else "memory bandwidth: missing\n")
    print(table(rows))
    costs = per_token(rows)
    if costs:
        print("\nper token:")
        print(costs)
    steps = training(rows)
    if steps:
        print("\ntraining:")
        print(steps)
    if memory:
        print(f"\nshaped-run {shlex.join(memory['arguments'])}: peak resident {memory['peak_rss_bytes'] / 2**20:.0f} MiB; "
              f"weights {memory['weights_bytes'] / 2**20:.0f} MiB, caches {memory['cache_bytes'] / 2**20:.0f} MiB")
    print()
    for c in checks:
        print(f"[{'met' if c['met'] else 'NOT MET'}] {c['target']}: {c['measured']}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"threads": args.threads, "clock": clock_text, "torch_version": torch_data.get("torch_version"),
                       "machine": {k: context.get(k) for k in ("host_name", "num_cpus", "mhz_per_cpu", "caches", "load_avg", "openblas_core")},
                       "sgemm_ceiling_gflops": ceiling, "bandwidth_gbytes_per_second": bandwidth,
                       "shaped_run_memory": memory, "rows": rows, "targets": checks}, f, indent=2)
        print(f"\nwritten to {args.out}")


if __name__ == "__main__":
    main()
