// Llama decoding at the smallest size: llama2.c's stories260K (dim 64, 5 layers, 8 query heads
// sharing 4 key/value heads, vocab 512), greedy, 256 ids from BOS, one token a forward pass.
// Here, the hand-written baseline (llama_baseline.hpp: run.c's plain C loops, no BLAS, one
// thread), as llama/stories260k_c_loops_N256; shaped's Llama is to be timed on the same decoding
// as llama/stories260k_shaped_N256, which report.py sets against it.
//
// The model is about 1 MB: it sits in the caches, so a token costs what its loops and calls
// cost, not what its bytes cost to read. The case counts the flops and the bytes its forward
// passes do and read, and the tokens, for report.py's GFLOP/s, GB/s, tokens/s and us per token.
//
// Before timing, the 256 ids must be the PyTorch reference's (tests/parity/fixtures/
// stories260k_greedy.npy, from tests/parity/make_fixtures.py) and each step's logits must agree
// with stories260k_logits.npy; a case that differs is reported failed, not timed.
#include "bench_support.hpp"
#include "llama_baseline.hpp"

#include <shaped/io/npy_format.hpp>

#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

namespace {

constexpr int bos = 1;  // llama2.c's BOS id
constexpr std::size_t new_tokens = 256;
const char* const checkpoint = SHAPED_BENCH_MODELS_DIR "/stories260K.bin";
const char* const greedy_fixture = SHAPED_BENCH_FIXTURE_DIR "/stories260k_greedy.npy";
const char* const logits_fixture = SHAPED_BENCH_FIXTURE_DIR "/stories260k_logits.npy";

// What one decoding's forward passes do: every matmul once a pass, and each layer's attention
// over the positions so far (q @ k and the weighted sum of v, for every query head), at 2 flops a
// multiply-add.
double flops(const bench::llama::Config& p) {
    const double per_layer = 2.0 * p.dim * p.dim + 2.0 * p.kv_dim() * p.dim + 3.0 * p.hidden_dim * p.dim;
    const double matmuls = 2.0 * (per_layer * p.n_layers + static_cast<double>(p.vocab_size) * p.dim);
    double total = 0;
    for (std::size_t pos = 0; pos < new_tokens; pos++) total += matmuls + 4.0 * p.dim * (pos + 1) * p.n_layers;
    return total;
}

// What they read: every weight but the embedding once a pass (of the embedding, one row, unless
// it is also the classifier), and each layer's cached keys and values up to the position.
double bytes_read(const bench::llama::Config& p) {
    const double per_layer = 2.0 * p.dim + 2.0 * p.dim * p.dim + 2.0 * p.kv_dim() * p.dim + 3.0 * p.hidden_dim * p.dim;
    const double classifier = static_cast<double>(p.vocab_size) * p.dim;
    const double weights = per_layer * p.n_layers + p.dim + classifier + (p.shared_classifier ? 0 : p.dim);
    double total = 0;
    for (std::size_t pos = 0; pos < new_tokens; pos++) total += weights + 2.0 * p.n_layers * p.kv_dim() * (pos + 1);
    return total * sizeof(float);
}

// The reference's ids and logits, or a failed benchmark.
bool same_as_reference(benchmark::State& state, const std::vector<int>& ids, const std::vector<float>& logits,
                       std::size_t vocab_size) {
    const auto want_ids = shaped::io::read_npy(greedy_fixture);
    if (want_ids.type != shaped::io::dtype::i64 || want_ids.shape != std::vector<std::size_t>{new_tokens}) {
        state.SkipWithError((std::string(greedy_fixture) + " is not 256 int64 ids").c_str());
        return false;
    }
    for (std::size_t i = 0; i < new_tokens; i++) {
        std::int64_t want = 0;
        std::memcpy(&want, want_ids.data.data() + i * sizeof want, sizeof want);
        if (ids[i] != want) {
            state.SkipWithError(("greedy id " + std::to_string(i) + " is " + std::to_string(ids[i]) +
                                 ", the PyTorch reference's " + std::to_string(want))
                                    .c_str());
            return false;
        }
    }
    const auto want_logits = shaped::io::read_npy(logits_fixture);
    if (want_logits.type != shaped::io::dtype::f32 ||
        want_logits.shape != std::vector<std::size_t>{new_tokens, vocab_size}) {
        state.SkipWithError((std::string(logits_fixture) + " is not 256 float32 rows of the vocabulary").c_str());
        return false;
    }
    std::vector<float> want(new_tokens * vocab_size);
    std::memcpy(want.data(), want_logits.data.data(), want.size() * sizeof(float));
    return bench::same_numbers(state, logits.data(), want.data(), want.size());
}

void c_loops(benchmark::State& state) {
    std::unique_ptr<bench::llama::Transformer> model;
    try {
        model = std::make_unique<bench::llama::Transformer>(checkpoint);
        std::vector<float> logits;
        const auto ids = bench::llama::greedy(*model, bos, new_tokens, &logits);
        if (!same_as_reference(state, ids, logits, model->config.vocab_size)) return;
    } catch (const std::exception& e) {
        state.SkipWithError(e.what());
        return;
    }
    for (auto _ : state) {
        auto ids = bench::llama::greedy(*model, bos, new_tokens);
        benchmark::DoNotOptimize(ids.data());
        benchmark::ClobberMemory();
    }
    bench::count_flops(state, flops(model->config));
    bench::count_bytes(state, bytes_read(model->config));
    bench::count_tokens(state, new_tokens);
}

const bool registered = [] {
    benchmark::RegisterBenchmark(("llama/stories260k_c_loops_N" + std::to_string(new_tokens)).c_str(), c_loops)
        ->Unit(benchmark::kMillisecond)
        ->MeasureProcessCPUTime();
    return true;
}();

}  // namespace
