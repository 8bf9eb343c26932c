#pragma once
// The hand-written baseline for Llama decoding: one token's forward pass in plain C loops, as
// llama2.c's run.c writes it (a loop nest per matmul, no BLAS, no threads), over llama2.c's
// version-0 checkpoint. Its loops (llama_baseline.cpp) are compiled as run.c's README tells its
// users to compile run.c, -Ofast -march=native. Nothing of shaped is used here, so that
// llama_bench.cpp can time shaped's Llama against what a reader of run.c would write by hand.
//
// The file (/work/shared/models/README.md has the format): seven little-endian int32s (dim,
// hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len; a negative vocab_size means a
// separate classifier follows the weights), then float32 arrays, all layers of one kind
// together: token embedding (vocab, dim); attention RMSNorm (layers, dim); wq (layers, dim, dim);
// wk, wv (layers, kv_dim, dim); wo (layers, dim, dim); FFN RMSNorm (layers, dim); w1 (layers,
// hidden, dim); w2 (layers, dim, hidden); w3 (layers, hidden, dim); final RMSNorm (dim); two
// legacy rotary tables (seq_len, head_size / 2), skipped; the classifier (vocab, dim) if separate.
// Matrices are (out, in). Every byte of the file is untrusted: the header's numbers must be
// positive and consistent, and the file exactly as long as they say.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace bench::llama {

// The checkpoint's header, with vocab_size made positive.
struct Config {
    std::size_t dim;         // the residual stream's width
    std::size_t hidden_dim;  // the FFN's
    std::size_t n_layers;
    std::size_t n_heads;     // query heads
    std::size_t n_kv_heads;  // key/value heads: n_heads / n_kv_heads query heads share each
    std::size_t vocab_size;
    std::size_t seq_len;     // the KV cache's capacity
    bool shared_classifier;  // logits = x @ token_embedding^T

    std::size_t head_size() const { return dim / n_heads; }
    std::size_t kv_dim() const { return head_size() * n_kv_heads; }
};

// Pointers into the checkpoint's floats.
struct Weights {
    const float* token_embedding;  // (vocab_size, dim)
    const float* rms_att;          // (n_layers, dim)
    const float* wq;               // (n_layers, dim, dim)
    const float* wk;               // (n_layers, kv_dim, dim)
    const float* wv;               // (n_layers, kv_dim, dim)
    const float* wo;               // (n_layers, dim, dim)
    const float* rms_ffn;          // (n_layers, dim)
    const float* w1;               // (n_layers, hidden_dim, dim)
    const float* w2;               // (n_layers, dim, hidden_dim)
    const float* w3;               // (n_layers, hidden_dim, dim)
    const float* rms_final;        // (dim,)
    const float* classifier;       // (vocab_size, dim)
};

// The activations of the token in flight, and the KV cache.
struct RunState {
    std::vector<float> x;            // (dim,) the residual stream
    std::vector<float> xb, xb2;      // (dim,) inside a residual branch
    std::vector<float> hb, hb2;      // (hidden_dim,) the FFN's
    std::vector<float> q;            // (dim,)
    std::vector<float> att;          // (n_heads, seq_len) scores, then attention weights
    std::vector<float> logits;       // (vocab_size,)
    std::vector<float> key_cache;    // (n_layers, seq_len, kv_dim)
    std::vector<float> value_cache;  // (n_layers, seq_len, kv_dim)
};

namespace detail {

[[noreturn]] inline void fail(const std::filesystem::path& path, const std::string& what) {
    throw std::runtime_error("bench::llama: " + path.string() + ": " + what);
}

// a * b, a + b, or a failure when the result does not fit a size_t.
inline std::size_t mul(const std::filesystem::path& path, std::size_t a, std::size_t b) {
    if (b != 0 && a > std::numeric_limits<std::size_t>::max() / b) fail(path, "the header's sizes overflow");
    return a * b;
}
inline std::size_t add(const std::filesystem::path& path, std::size_t a, std::size_t b) {
    if (a > std::numeric_limits<std::size_t>::max() - b) fail(path, "the header's sizes overflow");
    return a + b;
}

}  // namespace detail

// A model read from a checkpoint, with its run state. Weights point into `data`, so it is neither
// copied nor moved.
struct Transformer {
    Config config{};
    Weights weights{};
    RunState state;
    std::vector<float> data;  // every float of the file after the header

    explicit Transformer(const std::filesystem::path& checkpoint);
    Transformer(const Transformer&) = delete;
    Transformer& operator=(const Transformer&) = delete;
};

// The floats are read as the host's; the format is little-endian.
static_assert(std::endian::native == std::endian::little, "bench::llama reads little-endian floats as they are");

inline Transformer::Transformer(const std::filesystem::path& path) {
    using detail::add;
    using detail::fail;
    using detail::mul;
    std::ifstream file(path, std::ios::binary | std::ios::ate);
    if (!file) fail(path, "cannot be opened");
    const auto end = file.tellg();
    if (end < 0) fail(path, "cannot be read");
    const auto file_size = static_cast<std::uintmax_t>(end);
    constexpr std::size_t header_bytes = 7 * sizeof(std::int32_t);
    if (file_size < header_bytes) fail(path, "is shorter than the 28 bytes of a header");
    file.seekg(0);
    std::int32_t header[7];
    if (!file.read(reinterpret_cast<char*>(header), header_bytes)) fail(path, "cannot be read");

    // Every field positive but vocab_size, whose sign says whether the classifier is separate.
    const char* names[7] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"};
    for (int i = 0; i < 7; i++) {
        const std::int32_t value = header[i];
        if (i == 5 ? (value == 0 || value == std::numeric_limits<std::int32_t>::min()) : value <= 0)
            fail(path, std::string("the header's ") + names[i] + " is " + std::to_string(value));
    }
    Config& p = config;
    p.dim = static_cast<std::size_t>(header[0]);
    p.hidden_dim = static_cast<std::size_t>(header[1]);
    p.n_layers = static_cast<std::size_t>(header[2]);
    p.n_heads = static_cast<std::size_t>(header[3]);
    p.n_kv_heads = static_cast<std::size_t>(header[4]);
    p.shared_classifier = header[5] > 0;
    p.vocab_size = static_cast<std::size_t>(header[5] > 0 ? header[5] : -header[5]);
    p.seq_len = static_cast<std::size_t>(header[6]);
    if (p.dim % p.n_heads != 0) fail(path, "dim is not a multiple of n_heads");
    if (p.n_heads % p.n_kv_heads != 0) fail(path, "n_heads is not a multiple of n_kv_heads");
    if (p.head_size() % 2 != 0) fail(path, "the head size is odd: rotary embedding rotates pairs");

    // The floats each array takes, in the file's order.
    const std::size_t dim = p.dim, kv_dim = p.kv_dim(), hidden = p.hidden_dim, layers = p.n_layers;
    const std::size_t sizes[] = {
        mul(path, p.vocab_size, dim),                            // token embedding
        mul(path, layers, dim),                                  // attention RMSNorm
        mul(path, layers, mul(path, dim, dim)),                  // wq
        mul(path, layers, mul(path, kv_dim, dim)),               // wk
        mul(path, layers, mul(path, kv_dim, dim)),               // wv
        mul(path, layers, mul(path, dim, dim)),                  // wo
        mul(path, layers, dim),                                  // FFN RMSNorm
        mul(path, layers, mul(path, hidden, dim)),               // w1
        mul(path, layers, mul(path, dim, hidden)),               // w2
        mul(path, layers, mul(path, hidden, dim)),               // w3
        dim,                                                     // final RMSNorm
        mul(path, p.seq_len, p.head_size()),                     // the two legacy rotary tables
        p.shared_classifier ? 0 : mul(path, p.vocab_size, dim),  // the classifier
    };
    std::size_t floats = 0;
    for (std::size_t n : sizes) floats = add(path, floats, n);
    const std::size_t want = add(path, header_bytes, mul(path, floats, sizeof(float)));
    if (file_size != want)
        fail(path, std::to_string(file_size) + " bytes, where its header says " + std::to_string(want));

    data.resize(floats);
    if (!file.read(reinterpret_cast<char*>(data.data()), static_cast<std::streamsize>(floats * sizeof(float))))
        fail(path, "cannot be read");
    const float* ptr = data.data();
    const float* at[std::size(sizes)];
    for (std::size_t i = 0; i < std::size(sizes); i++) {
        at[i] = ptr;
        ptr += sizes[i];
    }
    weights = {at[0], at[1], at[2], at[3], at[4], at[5], at[6], at[7], at[8], at[9], at[10],
               p.shared_classifier ? at[0] : at[12]};

    // The cache's size is bounded by no array of the file: its multiplications are checked too.
    const std::size_t cache = mul(path, layers, mul(path, p.seq_len, kv_dim));
    RunState& s = state;
    s.x.resize(dim);
    s.xb.resize(dim);
    s.xb2.resize(dim);
    s.hb.resize(hidden);
    s.hb2.resize(hidden);
    s.q.resize(dim);
    s.att.resize(mul(path, p.n_heads, p.seq_len));
    s.logits.resize(p.vocab_size);
    s.key_cache.resize(cache);
    s.value_cache.resize(cache);
}

// ---- the forward pass, in llama_baseline.cpp ------------------------------------------------
// That file alone is built -Ofast -march=native, as run.c is built by its users; shaped's code
// beside it in the bench is built without fast-math, as the library is.

// The logits (vocab_size,) of `token` at position `pos`, the keys and values of positions
// 0 .. pos - 1 being in the cache already (this call writes pos's). They live in t.state until
// the next call.
const float* forward(Transformer& t, int token, int pos);

// The first index of the largest of v[0, n), as run.c's sample_argmax.
int argmax(const float* v, std::size_t n);

// Greedy decoding from `first`: ids[s] is the argmax of the logits at position s, where the
// token fed is `first` at position 0 and ids[s - 1] after. With `logits`, each step's logits are
// appended to it (steps x vocab_size).
std::vector<int> greedy(Transformer& t, int first, std::size_t steps, std::vector<float>* logits = nullptr);

}  // namespace bench::llama
