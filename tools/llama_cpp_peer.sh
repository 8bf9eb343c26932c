#!/bin/bash
# The llama.cpp peer (issue 28): builds just the llama.cpp targets the GGUF work compares with,
# and makes tests/parity/fixtures/llama_cpp/, the fixtures of the GGUF Llama loader, with llama.cpp's
# own tools, so that `make test` needs no llama.cpp:
#
#   - tokenizer.bin: a 512-token stand-in vocabulary in llama2.c's format (stories260K's own is
#     not available): "<unk>", "<s>", "</s>", the 256 byte tokens "<0x00>" ... "<0xFF>", then
#     " w259" ... " w511", every score -1 (the one tests/apps/shaped_run_test.cpp writes).
#   - stories260K.f32.gguf: llama2.c's stories260K.bin as llama-convert-llama2c-to-ggml writes
#     it with that vocabulary; stories260K.q8_0.gguf and .q4_0.gguf: llama-quantize's Q8_0 and
#     Q4_0 of it (with its per-tensor fallbacks, listed in the README this writes).
#   - for each of the three, NAME.greedy.txt: the 256 ids llama.cpp decodes greedily from BOS, one
#     a line; and NAME.logits.f32: raw float32 (256, 512), the logits of a teacher-forced pass
#     over the F32 model's 256 greedy ids (inputs BOS and its first 255; row i predicts id i), so
#     that the three are over the same positions. tools/llama_cpp_peer/dump_logits.cpp makes
#     both, with an F32 KV cache and flash attention off. The quantized files' logits are kept
#     in OUT for the types QUANTIZED_LOGITS names (by default both, 512 KB each: 3.4 MB in all);
#     the others are left in the build dir, their figures and sha256 still in the README.
#   - README.md: the commands, the commit, each file's type per tensor and llama-quantize's
#     fallback warnings, the quantized models' KL divergence from F32 and top-1 agreement in
#     llama.cpp, the F32 ids checked against tests/parity's (and shaped-run's, with SHAPED_RUN),
#     and every file's sha256.
#
#   tools/llama_cpp_peer.sh [LLAMA_CPP_SRC]
#
# LLAMA_CPP_SRC (the argument, else $LLAMA_CPP_SRC) is a llama.cpp source tree; without one, the
# one issue 28 names is fetched into the build dir: `npm pack node-llama-cpp@3.22.1`, untarred,
# and its package/llama/gitRelease.bundle cloned (llama.cpp de3ff81). Environment:
#   LLAMA_CPP_BUILD  the build dir (build/llama.cpp, which .gitignore's /build*/ covers)
#   OUT              the fixture dir (tests/parity/fixtures/llama_cpp)
#   STORIES260K      llama2.c's stories260K.bin (../shared/models/stories260K.bin beside the clone)
#   JOBS             parallel compile jobs (2); every compile runs under `nice -n 19`
#   QUANTIZED_LOGITS the quantized types whose logits go into OUT ("q8_0 q4_0", 512 KB each)
#   SHAPED_RUN       a built shaped-run, whose greedy ids of stories260K.bin the F32 ids are checked
#                    against (not by default: this script builds nothing of shaped)
#   CXX, PYTHON      the C++ compiler for dump_logits (c++) and python3 (stdlib only)
#
# Only these targets are built, Release, -DGGML_NATIVE=ON (-march=native, as the benchmark's
# peer column wants): llama-convert-llama2c-to-ggml, llama-quantize, llama-bench, llama-simple;
# tests, the server, the unified binary, curl and OpenSSL are configured off. dump_logits is
# compiled against the built shared libllama, found through its rpath.
set -euo pipefail

source_dir=$(cd "$(dirname "$0")/.." && pwd)
build=${LLAMA_CPP_BUILD:-$source_dir/build/llama.cpp}
out=${OUT:-$source_dir/tests/parity/fixtures/llama_cpp}
stories=${STORIES260K:-$source_dir/../shared/models/stories260K.bin}
jobs=${JOBS:-2}
quantized_logits=${QUANTIZED_LOGITS:-q8_0 q4_0}
cxx=${CXX:-c++}
python=${PYTHON:-python3}
llama=${1:-${LLAMA_CPP_SRC:-}}
npm_package=node-llama-cpp@3.22.1
steps=256

# logged <log> <command...>: runs the command, its output in the log; on failure, its tail.
logged() {
    local log=$1
    shift
    if ! "$@" >"$log" 2>&1; then
        tail -n 30 "$log" >&2
        echo "llama_cpp_peer.sh: failed: $* (the log: $log)" >&2
        exit 1
    fi
}

if [ ! -f "$stories" ]; then
    echo "llama_cpp_peer.sh: no stories260K.bin at $stories (set STORIES260K)" >&2
    exit 1
fi
mkdir -p "$build"
build=$(cd "$build" && pwd)

# The source: as given, or the npm package's git bundle, cloned once into the build dir.
if [ -z "$llama" ]; then
    llama=$build/source
    if [ ! -d "$llama/.git" ]; then
        rm -rf "$build/npm"
        mkdir -p "$build/npm"
        (cd "$build/npm" && npm pack --silent "$npm_package" >/dev/null && tar xzf ./*.tgz)
        git -c advice.detachedHead=false clone --quiet "$build/npm/package/llama/gitRelease.bundle" "$llama"
    fi
fi
if [ ! -f "$llama/include/llama.h" ]; then
    echo "llama_cpp_peer.sh: no include/llama.h under $llama" >&2
    exit 1
fi
llama=$(cd "$llama" && pwd)
commit=$(git -C "$llama" rev-parse --short HEAD 2>/dev/null || echo unknown)
echo "llama_cpp_peer.sh: llama.cpp $commit from $llama, building in $build/cmake"

# Configure (once; cmake keeps the cache) and build the four targets.
targets="llama-convert-llama2c-to-ggml llama-quantize llama-bench llama-simple"
# (LLAMA_CURL is deprecated at this commit, a warning; it is off either way.)
logged "$build/configure.log" nice -n 19 cmake -S "$llama" -B "$build/cmake" \
    -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_TOOLS=ON
# shellcheck disable=SC2086  # the targets are words
logged "$build/build.log" nice -n 19 cmake --build "$build/cmake" -j "$jobs" --target $targets
bin=$build/cmake/bin

logged "$build/dump_logits.log" nice -n 19 "$cxx" -std=c++17 -O2 -Wall -Wextra \
    -I"$llama/include" -I"$llama/ggml/include" "$source_dir/tools/llama_cpp_peer/dump_logits.cpp" \
    -o "$bin/dump_logits" -L"$bin" -lllama -lggml -lggml-base -Wl,-rpath,"$bin"

mkdir -p "$out"
out=$(cd "$out" && pwd)

# The stand-in vocabulary of 512 tokens (tools/stand_in_vocab.py says what llama.cpp needs of it).
"$python" "$source_dir/tools/stand_in_vocab.py" "$out/tokenizer.bin" 512

# The F32 GGUF, then the quantized ones; llama-quantize's per-tensor log is kept in the build dir.
logged "$build/convert.log" "$bin/llama-convert-llama2c-to-ggml" \
    --copy-vocab-from-model "$out/tokenizer.bin" --llama2c-model "$stories" \
    --llama2c-output-model "$out/stories260K.f32.gguf"
for type in q8_0 q4_0; do
    logged "$build/quantize.$type.log" "$bin/llama-quantize" \
        "$out/stories260K.f32.gguf" "$out/stories260K.$type.gguf" "${type^^}" 1
done

# Greedy ids of each, and the logits teacher-forced over the F32 model's greedy ids (stderr, the
# count of positions whose argmax is not the forced id, into the build dir).
"$bin/dump_logits" "$out/stories260K.f32.gguf" "$steps" "$out/stories260K.f32.logits.f32" \
    >"$out/stories260K.f32.greedy.txt" 2>"$build/dump.f32.log"
for type in q8_0 q4_0; do
    logits=$build/stories260K.$type.logits.f32
    case " $quantized_logits " in *" $type "*) logits=$out/stories260K.$type.logits.f32 ;; esac
    rm -f "$out/stories260K.$type.logits.f32" "$build/stories260K.$type.logits.f32"
    "$bin/dump_logits" "$out/stories260K.$type.gguf" "$steps" "$logits" \
        "$out/stories260K.f32.greedy.txt" >"$out/stories260K.$type.greedy.txt" 2>"$build/dump.$type.log"
done

# The README: commands, per-tensor types read back from each GGUF's tensor infos, the
# quantized logits' agreement with F32, and the sha256 of every file.
shaped_ids=""
if [ -n "${SHAPED_RUN:-}" ]; then
    shaped_ids=$build/shaped_run.greedy.txt
    "$SHAPED_RUN" "$stories" -t 0 -n "$steps" --ids >"$shaped_ids" 2>/dev/null
fi
"$python" - "$out" "$build" "$commit" "$steps" "$source_dir/tests/parity/fixtures/stories260k_greedy.npy" \
    "$shaped_ids" <<'PY'
import ast, hashlib, math, os, struct, sys

out, build, commit, steps, parity_npy, shaped_ids = sys.argv[1:4] + [int(sys.argv[4])] + sys.argv[5:7]
GGML_TYPES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0",
              10: "Q2_K", 11: "Q3_K", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 30: "BF16"}

def tensor_types(path):
    """(name, type, ggml dims) of every tensor info of a GGUF v2/v3 file."""
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    def take(fmt):
        nonlocal pos
        values = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return values
    def string():
        nonlocal pos
        (n,) = take("Q")
        pos += n
        return data[pos - n:pos].decode()
    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
    def skip(vtype):
        if vtype == 8:
            string()
        elif vtype == 9:
            (etype, n) = take("IQ")
            for _ in range(n):
                skip(etype)
        else:
            take(scalar[vtype])
    magic, version, n_tensors, n_kv = take("4sIQQ")
    assert magic == b"GGUF", path
    for _ in range(n_kv):
        string()
        skip(take("I")[0])
    infos = []
    for _ in range(n_tensors):
        name = string()
        (n_dims,) = take("I")
        dims = take("Q" * n_dims)
        (ggml_type, _offset) = take("IQ")
        infos.append((name, GGML_TYPES.get(ggml_type, str(ggml_type)), dims))
    return infos

def logits(path):
    with open(path, "rb") as f:
        data = f.read()
    n = len(data) // 4
    values = struct.unpack("<%df" % n, data)
    vocab = n // steps
    return [values[i * vocab:(i + 1) * vocab] for i in range(steps)]

def log_softmax(row):
    top = max(row)
    total = math.log(sum(math.exp(v - top) for v in row))
    return [v - top - total for v in row]

def agreement(reference, other):
    """Mean KL(reference || other) and top-1 agreement, over every position."""
    kl, same = 0.0, 0
    for p_row, q_row in zip(reference, other):
        lp, lq = log_softmax(p_row), log_softmax(q_row)
        kl += sum(math.exp(a) * (a - b) for a, b in zip(lp, lq))
        same += p_row.index(max(p_row)) == q_row.index(max(q_row))
    return kl / len(reference), same / len(reference)

def ids(path):
    with open(path) as f:
        return [int(line) for line in f]

def npy(path, descr):
    """The values, flat, of a C-order .npy file of dtype descr ("<i8", "<f4"), version 1 or 2."""
    with open(path, "rb") as f:
        data = f.read()
    major = data[6]
    (header_length,) = struct.unpack_from("<H" if major == 1 else "<I", data, 8)
    start = 10 if major == 1 else 12
    header = ast.literal_eval(data[start:start + header_length].decode())
    assert header["descr"] == descr and not header["fortran_order"], path
    n = math.prod(header["shape"])
    return list(struct.unpack_from("<%d%s" % (n, {"<i8": "q", "<f4": "f"}[descr]), data, start + header_length))

def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()

def logits_path(t):
    """A type's teacher-forced logits: in OUT when kept there, else in the build dir."""
    kept = os.path.join(out, "stories260K.%s.logits.f32" % t)
    return kept if os.path.exists(kept) else os.path.join(build, "stories260K.%s.logits.f32" % t)

def fallbacks(t):
    """llama-quantize's per-tensor fallback warnings and its count of them."""
    with open(os.path.join(build, "quantize.%s.log" % t)) as f:
        return [" ".join(line.split()) for line in f
                if line.startswith("warning: ") or "required fallback" in line]

f32 = logits(logits_path("f32"))
greedy = {t: ids(os.path.join(out, "stories260K.%s.greedy.txt" % t)) for t in ("f32", "q8_0", "q4_0")}
quantized_kept = [t for t in ("q8_0", "q4_0") if logits_path(t).startswith(out + os.sep)]
quantized_left = [t for t in ("q8_0", "q4_0") if t not in quantized_kept]
lines = [
    "# llama.cpp's stories260K: the fixtures of the GGUF Llama loader",
    "",
    "Written by `tools/llama_cpp_peer.sh` (read its header) with llama.cpp %s, the llama.cpp of npm's" % commit,
    "node-llama-cpp@3.22.1 (`npm pack node-llama-cpp@3.22.1`, untarred, `git clone",
    "package/llama/gitRelease.bundle`), built Release with `-DGGML_NATIVE=ON`, from llama2.c's",
    "stories260K.bin (`../shared/models/`, whose README has its format and config). The commands:",
    "",
    "```",
    "llama-convert-llama2c-to-ggml --copy-vocab-from-model tokenizer.bin \\",
    "    --llama2c-model stories260K.bin --llama2c-output-model stories260K.f32.gguf",
    "llama-quantize stories260K.f32.gguf stories260K.q8_0.gguf Q8_0 1",
    "llama-quantize stories260K.f32.gguf stories260K.q4_0.gguf Q4_0 1",
    "dump_logits stories260K.f32.gguf %d stories260K.f32.logits.f32 > stories260K.f32.greedy.txt" % steps,
    "dump_logits stories260K.q8_0.gguf %d stories260K.q8_0.logits.f32 stories260K.f32.greedy.txt \\" % steps,
    "    > stories260K.q8_0.greedy.txt",
    "dump_logits stories260K.q4_0.gguf %d stories260K.q4_0.logits.f32 stories260K.f32.greedy.txt \\" % steps,
    "    > stories260K.q4_0.greedy.txt",
    "```",
    "",
    "- `tokenizer.bin`: the stand-in vocabulary (stories260K's own tok512.bin is not available), in",
    "  llama2.c's format: `<unk>`, `\\n<s>\\n`, `\\n</s>\\n`, the byte tokens `<0x00>` ... `<0xFF>` (ids",
    "  3-258), then ` w259` ... ` w511`, every score -1 (tests/apps/shaped_run_test.cpp's). The",
    "  converter names ids 0-2 `<unk>`, `<s>`, `</s>`, and writes `tokenizer.ggml.token_type` 2",
    "  (unknown) for 0, 3 (control) for 1 and 2, 6 (byte) for the `<0xXX>` tokens, 1 (normal) for",
    "  the rest, whose spaces it writes as U+2581 (`\u2581w259`); `tokenizer.ggml.model` \"llama\",",
    "  bos/eos/unknown ids 1/2/0, separator and padding ids 4294967295 (-1 as a uint32).",
    "- The GGUFs: version 3, no `general.alignment` (so 32), llama.cpp's names: `token_embd.weight`,",
    "  `output.weight` (the converter writes the tied classifier as its own copy of the embedding),",
    "  `output_norm.weight`, `blk.N.{attn_norm,attn_q,attn_k,attn_v,attn_output,ffn_norm,ffn_gate,",
    "  ffn_down,ffn_up}.weight`. The converter copies llama2.c's q and k rows unpermuted (llama2.c",
    "  already pairs rotary dims adjacently, as llama.cpp's LLAMA rope does). The metadata:",
    "  `llama.context_length` 128 (the converter's fixed n_ctx, not the checkpoint's seq_len 512;",
    "  llama.cpp runs 256 positions with a warning), `llama.embedding_length` 64,",
    "  `llama.feed_forward_length` 172, `llama.attention.head_count` 8, `.head_count_kv` 4,",
    "  `llama.block_count` 5, `llama.rope.dimension_count` 8,",
    "  `llama.attention.layer_norm_rms_epsilon` 1e-5 (float32), no `llama.vocab_size` and no rope",
    "  theta (llama.cpp's default 10000); the quantized files add `general.quantization_version` 2",
    "  and `general.file_type` (7 Q8_0, 2 Q4_0), and order their tensors differently.",
    "- `NAME.greedy.txt`: the %d ids llama.cpp's greedy decoding from BOS (id 1) gives, one a line" % steps,
    "  (one token a step through the KV cache; the first of equal maxima).",
    "- `NAME.logits.f32`: raw little-endian float32, (%d, %d): one teacher-forced batch over the F32" % (steps, len(f32[0])),
    "  model's greedy ids, inputs BOS and ids 0-%d, row i the logits that predict F32 id i (for the" % (steps - 2),
    "  quantized files too, so that all are over the same positions). F32 KV cache, flash attention",
    "  off (its CPU flash attention rounds q and k to half precision), one thread.",
]
if quantized_left:
    lines.append("  Kept here for F32%s; %s's (512 KB each) are not, to keep the fixtures under 3 MB:"
                 % ("".join(", " + t.upper() for t in quantized_kept), " and ".join(t.upper() for t in quantized_left)))
    lines.append("  `QUANTIZED_LOGITS=\"q8_0 q4_0\" tools/llama_cpp_peer.sh` writes them (their sha256 below).")
lines += ["", "## Types per tensor", ""]
def kind_of(name):
    return name.split(".", 2)[-1] if name.startswith("blk.") else name
order = []  # the F32 file's (the converter's) order of tensor kinds
for name, _, _ in tensor_types(os.path.join(out, "stories260K.f32.gguf")):
    if kind_of(name) not in order:
        order.append(kind_of(name))
for t in ("f32", "q8_0", "q4_0"):
    infos = tensor_types(os.path.join(out, "stories260K.%s.gguf" % t))
    kinds = {}
    for name, ggml_type, dims in infos:
        kinds.setdefault(kind_of(name), set()).add((ggml_type, dims))
    lines.append("`stories260K.%s.gguf`, %d tensors (ggml dims, row length first; the same in all 5 layers):"
                 % (t, len(infos)))
    lines.append("")
    for kind in sorted(kinds, key=order.index):
        (ggml_type, dims), = kinds[kind]
        lines.append("- `%s` %s %s" % (kind, ggml_type, list(dims)))
    lines.append("")
    if t != "f32":
        lines.append("llama-quantize's fallbacks (a row must divide into the type's blocks):")
        lines.append("")
        lines += ["    " + line for line in fallbacks(t)]
        lines.append("")
lines += [
    "So `ffn_down` (rows of 172, the hidden dim, in no 32-block) is F16 in both; in Q4_0,",
    "`output.weight` is Q8_0 (llama.cpp gives the classifier Q6_K, whose 256-blocks a row of 64 does",
    "not fill); 1-D norms stay F32.",
    "",
    "## Checks and figures",
    "",
]
checks = [("tests/parity/fixtures/stories260k_greedy.npy\n  (llama2.c's model.py semantics, in PyTorch)",
           npy(parity_npy, "<i8")[:steps] if os.path.exists(parity_npy) else None)]
if shaped_ids:
    checks.append(("`shaped-run stories260K.bin -t 0 -n %d --ids`" % steps, ids(shaped_ids)))
for what, reference in checks:
    if reference is None:
        lines.append("- F32 greedy ids: %s not found, not compared." % what)
        continue
    same = sum(a == b for a, b in zip(greedy["f32"], reference))
    lines.append("- F32 greedy ids against %s: %s." % (what, "equal, all %d" % steps if reference == greedy["f32"]
                 else "%d of %d equal" % (same, steps)))
    if reference != greedy["f32"]:
        print("llama_cpp_peer.sh: llama.cpp's F32 greedy ids differ from %s" % what, file=sys.stderr)
parity_logits = parity_npy.replace("_greedy.npy", "_logits.npy")
if os.path.exists(parity_logits):
    reference = npy(parity_logits, "<f4")
    flat = [v for row in f32 for v in row]
    if len(reference) == len(flat):
        worst = max(range(len(flat)), key=lambda i: abs(flat[i] - reference[i]))
        lines.append("- F32 teacher-forced logits against tests/parity/fixtures/stories260k_logits.npy (the same")
        lines.append("  model's, row s the logits id s was chosen from): at most %.2g apart (position %d, token %d)."
                     % (abs(flat[worst] - reference[worst]), worst // len(f32[0]), worst % len(f32[0])))
f32_top1 = sum(row.index(max(row)) == id for row, id in zip(f32, greedy["f32"]))
margin = sorted(f32[37])[-2:]
lines.append("- F32 teacher-forced logits: argmax equals the greedy id at %d of %d positions (at step 37 the"
             % (f32_top1, steps))
lines.append("  top two are %.4f apart: with flash attention on, whose q and k are half precision, the" % (margin[1] - margin[0]))
lines.append("  logits move by 0.14 and greedy decoding takes the runner-up there).")
for t in ("q8_0", "q4_0"):
    kl, top1 = agreement(f32, logits(logits_path(t)))
    same = sum(a == b for a, b in zip(greedy[t], greedy["f32"]))
    first = next((i for i, (a, b) in enumerate(zip(greedy[t], greedy["f32"])) if a != b), None)
    lines.append("- %s, teacher-forced over the F32 ids: mean KL(F32 || %s) %.4f, top-1 agreement with F32"
                 % (t.upper(), t.upper(), kl))
    lines.append("  %.1f%% (%d of %d); its own greedy ids equal F32's at %d of %d steps (first differing at step %s)."
                 % (100 * top1, round(top1 * steps), steps, same, steps, first))
lines += ["", "## sha256", "", "```"]
files = sorted(name for name in os.listdir(out) if name != "README.md")
for path in [os.path.join(out, name) for name in files] + [logits_path(t) for t in quantized_left]:
    where = "" if path.startswith(out + os.sep) else "  (not kept here)"
    lines.append("%s  %s  %d bytes%s" % (sha256(path), os.path.basename(path), os.path.getsize(path), where))
lines += ["```", ""]
with open(os.path.join(out, "README.md"), "w") as f:
    f.write("\n".join(lines))
PY

echo "llama_cpp_peer.sh: wrote $out from llama.cpp $commit ($(du -sk "$out" | cut -f1) KB)"
