// Llama decoding.
//
// At the smallest size, llama2.c's stories260K (dim 64, 5 layers, 8 query heads sharing 4
// key/value heads, vocab 512), greedy, 256 ids from BOS, one token a forward pass: the
// hand-written baseline (llama_baseline.hpp: run.c's plain C loops, no BLAS, one thread, built
// -Ofast -march=native as run.c's README builds run.c) as llama/stories260k_c_loops_N256, and
// shaped's Llama through models::generate as llama/stories260k_shaped_N256, which report.py sets
// against it.
//
// At stories110M's shape (dim 768, 12 layers, 12 heads, vocab 32000, random fp32 weights),
// generation as generate_bench.cpp's GPT-2 case, bound by memory bandwidth; and decoding at a
// long context with 12 and with 4 key/value heads, whose caches differ by 3x.
//
// The model is about 1 MB: it sits in the caches, so a token costs what its loops and calls
// cost, not what its bytes cost to read. The case counts the flops and the bytes its forward
// passes do and read, and the tokens, for report.py's GFLOP/s, GB/s, tokens/s and us per token.
//
// Before timing, the 256 ids must be the PyTorch reference's (tests/parity/fixtures/
// stories260k_greedy.npy, from tests/parity/make_fixtures.py) and each step's logits must agree
// with stories260k_logits.npy (the baseline's too: fast-math moves its logits in the last bits
// only); a case that differs is reported failed, not timed.
#include "bench_support.hpp"
#include "generation.hpp"
#include "llama_baseline.hpp"

#include <shaped/io/npy_format.hpp>
#include <shaped/shaped.hpp>

#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

namespace {

using shaped::models::token_id;

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

// The reference's ids, or a failed benchmark.
bool same_ids_as_reference(benchmark::State& state, const std::vector<int>& ids) {
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
    return true;
}

// The reference's logits at every step, or a failed benchmark (shaped's are checked by the
// parity tests).
bool same_logits_as_reference(benchmark::State& state, const std::vector<float>& logits, std::size_t vocab_size) {
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
        if (!same_ids_as_reference(state, ids) || !same_logits_as_reference(state, logits, model->config.vocab_size))
            return;
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

// The same decoding by shaped's Llama, loaded by shaped from the same file.
void shaped_llama(benchmark::State& state) {
    std::unique_ptr<shaped::models::Llama<shaped::models::stories260k>> model;
    bench::llama::Config config{};
    try {
        model = shaped::models::load_llama<shaped::models::stories260k>(checkpoint);
        config = bench::llama::Transformer(checkpoint).config;
        const auto ids = bench::generate_greedy(*model, {bos}, new_tokens);
        if (!same_ids_as_reference(state, std::vector<int>(ids.begin(), ids.end()))) return;
    } catch (const std::exception& e) {
        state.SkipWithError(e.what());
        return;
    }
    for (auto _ : state) {
        auto ids = bench::generate_greedy(*model, {bos}, new_tokens);
        benchmark::DoNotOptimize(ids.data());
        benchmark::ClobberMemory();
    }
    bench::count_flops(state, flops(config));
    bench::count_bytes(state, bytes_read(config));
    bench::count_tokens(state, new_tokens);
}

// ---- stories110M's shape --------------------------------------------------------------------

using Stories110M = shaped::models::stories110m;
using Stories110MKV4 = shaped::models::llama_config<32000, 1024, 12, 12, 4, 768, 2048>;

template <class Config>
const shaped::models::Llama<Config>& random_llama() {
    static const auto built = [] {
        shaped::Generator gen(2024);
        return std::make_unique<shaped::models::Llama<Config>>(gen);
    }();
    return *built;
}

// Keys and values of every layer, for one position.
template <class Config>
constexpr double kv_bytes_per_position = 2.0 * Config::n_layers * Config::n_kv_heads * (Config::dim / Config::n_heads) * sizeof(float);

constexpr std::size_t prompt_length = 16, generated = 128;

// Generation: a prompt of 16 ids, then 128 new ids, greedy. Every parameter is read once a pass
// (the embedding is the classifier too).
void generation_110m(benchmark::State& state) {
    const auto& model = random_llama<Stories110M>();
    const auto prompt = bench::spread_prompt(prompt_length, Stories110M::vocab_size);
    if (!bench::same_as_recompute(state, model, prompt)) return;
    for (auto _ : state) {
        auto ids = bench::generate_greedy(model, prompt, generated);
        benchmark::DoNotOptimize(ids.data());
    }
    bench::count_bytes(state, bench::generation_bytes(shaped::nn::parameter_bytes<shaped::models::Llama<Stories110M>>,
                                                      kv_bytes_per_position<Stories110M>, prompt_length, generated));
    bench::count_tokens(state, generated);
}

// Decoding 64 ids after 960 positions the caches already hold (random keys and values, written
// outside the timing): the cache's share of a token's bytes and time, with all heads or 4.
constexpr std::size_t held = 960, decoded = 64;

template <class Config>
void long_context_decode(benchmark::State& state) {
    using Model = shaped::models::Llama<Config>;
    using B = shaped::dim<"B", 1>;
    using Time = shaped::dim<"T">;
    using KV = typename Model::kv_heads_dim;
    using HS = typename Model::head_size_dim;
    const auto& model = random_llama<Config>();
    auto caches = std::make_unique<typename Model::template cache_type<B>>();
    shaped::Generator gen(7);
    const auto filler = shaped::randn<float, B, KV, Time, HS>(gen, Time{held});
    shaped::Tensor<token_id, B, shaped::dim<"T", 1>> next;
    for (auto _ : state) {
        state.PauseTiming();
        for (auto& cache : *caches) {
            cache.reset();
            cache.append(filler, filler);
        }
        next(0, 0) = 1;
        state.ResumeTiming();
        for (std::size_t step = 0; step < decoded; ++step) {
            const auto logits = model.next_logits(next, *caches);
            next(0, 0) = static_cast<token_id>(std::max_element(logits.data(), logits.data() + Config::vocab_size) -
                                               logits.data());
        }
        benchmark::DoNotOptimize(next.data());
    }
    double bytes = 0;
    for (std::size_t fed = held + 1; fed <= held + decoded; ++fed)
        bytes += shaped::nn::parameter_bytes<Model> + kv_bytes_per_position<Config> * static_cast<double>(fed);
    bench::count_bytes(state, bytes);
    bench::count_tokens(state, decoded);
    state.counters["cache_bytes"] = static_cast<double>(Config::n_layers * Model::template cache_type<B>::value_type::bytes);
}

const bool registered = [] {
    const std::string n = "_N" + std::to_string(new_tokens);
    benchmark::RegisterBenchmark(("llama/stories260k_c_loops" + n).c_str(), c_loops)
        ->Unit(benchmark::kMillisecond)
        ->MeasureProcessCPUTime();
    benchmark::RegisterBenchmark(("llama/stories260k_shaped" + n).c_str(), shaped_llama)
        ->Unit(benchmark::kMillisecond)
        ->MeasureProcessCPUTime();
    // Seconds a call: three repetitions of one call are enough to take the fastest.
    const std::string p = "_P" + std::to_string(prompt_length) + "_N" + std::to_string(generated);
    benchmark::RegisterBenchmark(("llama/stories110m" + p + "/shaped").c_str(), generation_110m)
        ->Unit(benchmark::kMillisecond)
        ->Iterations(1)
        ->Repetitions(3)
        ->MeasureProcessCPUTime();
    const std::string ctx = "llama/stories110m_ctx" + std::to_string(held) + "_N" + std::to_string(decoded);
    benchmark::RegisterBenchmark((ctx + "_kv12/shaped").c_str(), long_context_decode<Stories110M>)
        ->Unit(benchmark::kMillisecond)
        ->Iterations(1)
        ->Repetitions(3)
        ->MeasureProcessCPUTime();
    benchmark::RegisterBenchmark((ctx + "_kv4/shaped").c_str(), long_context_decode<Stories110MKV4>)
        ->Unit(benchmark::kMillisecond)
        ->Iterations(1)
        ->Repetitions(3)
        ->MeasureProcessCPUTime();
    return true;
}();

}  // namespace
