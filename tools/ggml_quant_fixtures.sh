#!/bin/sh
# The fixtures of tests/unit/quantized_test.cpp, made with ggml's own code: compiles ggml-quants.c
# (its reference quantizers and dequantizers) and tools/ggml_quant_fixtures/make_fixtures.c (which
# uses ggml-impl.h's half and bfloat16 conversions) against a llama.cpp source tree, and writes
# tests/unit/data/ggml_quants/. Nothing else of llama.cpp is built; the test suite needs none of it.
#
#   tools/ggml_quant_fixtures.sh [LLAMA_CPP_DIR] [OUT_DIR]
#
# LLAMA_CPP_DIR defaults to $LLAMA_CPP_DIR, else ../peer/llama.cpp beside this checkout; OUT_DIR
# to tests/unit/data/ggml_quants. CC picks the C compiler (cc: GCC, see below).
#
# ggml-base, where these functions live, is compiled without -march flags, so that on x86-64 no
# multiply-add is ever fused; -ffp-contract=off says the same on every machine (on AArch64, GCC
# would otherwise fuse them), so the bytes are those of one IEEE operation at a time. -DNDEBUG as
# in llama.cpp's release builds: a block of float subnormals makes make_qkx2_quants' scale
# infinite, which nearest_int's assert would stop at and a release build quantizes (to 0).
# Make them with GCC: the same block has Q8_0 and Q4_0 convert an infinity to int8_t, undefined,
# which GCC's code makes 0 and Clang's -128 (src/quantized.cpp defines it as GCC's).
# CC=clang-14 gives different bytes in that one block of each.
set -eu

source_dir=$(cd "$(dirname "$0")/.." && pwd)
llama=${1:-${LLAMA_CPP_DIR:-$source_dir/../peer/llama.cpp}}
out=${2:-$source_dir/tests/unit/data/ggml_quants}
cc=${CC:-cc}
ggml=$llama/ggml

if [ ! -f "$ggml/src/ggml-quants.c" ]; then
    echo "ggml_quant_fixtures.sh: no ggml/src/ggml-quants.c under $llama" >&2
    exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
flags="-O2 -DNDEBUG -std=gnu11 -ffp-contract=off -fno-fast-math -I$ggml/include -I$ggml/src"

$cc $flags -c "$ggml/src/ggml-quants.c" -o "$work/ggml-quants.o"
$cc $flags -c "$source_dir/tools/ggml_quant_fixtures/make_fixtures.c" -o "$work/make_fixtures.o"
$cc "$work/make_fixtures.o" "$work/ggml-quants.o" -lm -o "$work/make_fixtures"

mkdir -p "$out"
"$work/make_fixtures" "$out"

commit=$(git -C "$llama" rev-parse --short HEAD 2>/dev/null || echo unknown)
echo "ggml_quant_fixtures.sh: wrote $out from llama.cpp $commit ($(du -sk "$out" | cut -f1) KB)"
