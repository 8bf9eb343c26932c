#!/bin/bash
# The llama.cpp column of the quantized benchmarks (issue 28): the same stories110M-shaped Llama
# (dim 768, 12 layers, 12 heads, hidden 2048, vocab 32000, random weights) decoded and prefilled
# by llama.cpp and by shaped, in F32, Q8_0 and Q4_0, one thread each, side by side.
#
#   tools/llama_cpp_bench.sh [SHAPED_BENCH]
#
# 1. shaped's side: SHAPED_BENCH (build/gcc/bench/shaped_bench) runs the quantized/stories110m
#    cases, which write the random model as a llama2.c file into the temporary directory
#    (${TMPDIR:-/tmp}/shaped_stories110m_random.bin) and load it quantized as llama-quantize
#    quantizes it (the same bytes: tests/parity/llama_cpp_parity_test.cpp).
# 2. llama.cpp's side: that file converted by llama-convert-llama2c-to-ggml (with a 32000-token
#    stand-in vocabulary, as tools/llama_cpp_peer.sh writes one of 512), quantized by
#    llama-quantize to Q8_0 and Q4_0, each timed by `llama-bench -t 1 -p 512 -n 128` (tg128:
#    128 tokens decoded from an empty cache; pp512: a prompt of 512 in one batch), five
#    repetitions. llama.cpp's tools come from LLAMA_CPP_BIN (build/llama.cpp/cmake/bin, which
#    tools/llama_cpp_peer.sh builds: minutes, so not part of `make bench`).
# 3. One table: tokens/s of each side and their ratio, from the fastest repetition of each.
#
# Environment: LLAMA_CPP_BIN, WORK (the GGUFs and logs; build/llama_cpp_bench), PYTHON (python3).
set -euo pipefail

source_dir=$(cd "$(dirname "$0")/.." && pwd)
shaped_bench=${1:-$source_dir/build/gcc/bench/shaped_bench}
bin=${LLAMA_CPP_BIN:-$source_dir/build/llama.cpp/cmake/bin}
work=${WORK:-$source_dir/build/llama_cpp_bench}
python=${PYTHON:-python3}
checkpoint=${TMPDIR:-/tmp}/shaped_stories110m_random.bin

for tool in llama-convert-llama2c-to-ggml llama-quantize llama-bench; do
    if [ ! -x "$bin/$tool" ]; then
        echo "llama_cpp_bench.sh: no $bin/$tool (run tools/llama_cpp_peer.sh, or set LLAMA_CPP_BIN)" >&2
        exit 1
    fi
done
if [ ! -x "$shaped_bench" ]; then
    echo "llama_cpp_bench.sh: no $shaped_bench (make bench builds it)" >&2
    exit 1
fi
mkdir -p "$work"

echo "llama_cpp_bench.sh: shaped's side ($shaped_bench)" >&2
OPENBLAS_NUM_THREADS=1 "$shaped_bench" --benchmark_filter='quantized/stories110m' \
    --benchmark_out="$work/shaped.json" --benchmark_out_format=json >"$work/shaped.log" 2>&1

echo "llama_cpp_bench.sh: llama.cpp's side ($bin)" >&2
"$python" "$source_dir/tools/stand_in_vocab.py" "$work/tokenizer.bin" 32000
"$bin/llama-convert-llama2c-to-ggml" --copy-vocab-from-model "$work/tokenizer.bin" \
    --llama2c-model "$checkpoint" --llama2c-output-model "$work/stories110m.f32.gguf" >"$work/convert.log" 2>&1
for type in q8_0 q4_0; do
    "$bin/llama-quantize" "$work/stories110m.f32.gguf" "$work/stories110m.$type.gguf" "${type^^}" 1 \
        >"$work/quantize.$type.log" 2>&1
done
for type in f32 q8_0 q4_0; do
    "$bin/llama-bench" -m "$work/stories110m.$type.gguf" -t 1 -p 512 -n 128 -r 5 -o json \
        >"$work/llama_bench.$type.json" 2>"$work/llama_bench.$type.log"
done

"$python" - "$work" <<'PY'
import json, sys
work = sys.argv[1]
shaped = {}
results = json.load(open(f"{work}/shaped.json"))
# Prefill's GEMMs are OpenBLAS's: which kernels it ran (by CPU, or as OPENBLAS_CORETYPE says).
print(f"shaped's GEMM: OpenBLAS's {results['context'].get('openblas_core', '?')} kernels")
for b in results["benchmarks"]:
    if b.get("run_type") != "iteration":
        continue
    # quantized/stories110m_q8_0_N128/shaped/...: the fastest repetition's tokens/s, by CPU time
    name = b["name"].split("/")[1]
    fmt, case = name[len("stories110m_"):].rsplit("_", 1)
    seconds = b["cpu_time"] / 1e3  # milliseconds
    rate = b["tokens"] / seconds
    key = (fmt, "tg128" if case == "N128" else "pp512")
    shaped[key] = max(shaped.get(key, 0), rate)
print(f"{'model':<18} {'case':<6} {'llama.cpp tok/s':>16} {'shaped tok/s':>13} {'shaped/llama.cpp':>17}")
for fmt in ["f32", "q8_0", "q4_0"]:
    for run in json.load(open(f"{work}/llama_bench.{fmt}.json")):
        case = "pp512" if run["n_prompt"] else "tg128"
        # llama-bench's samples are tokens/s; the fastest, as shaped's
        theirs = max(run["samples_ts"])
        ours = shaped.get((fmt, case), float("nan"))
        print(f"stories110m {fmt:<6} {case:<6} {theirs:16.1f} {ours:13.1f} {ours / theirs:16.2f}x")
PY
