// One decoding step of multi-head attention (C=384, 6 heads of 64, batch 1) at a context of
// 64, 256 and 1024 positions: with a KV cache (the new token's projections, its attention over
// the cached keys and values, the output projection) against recomputing the whole prefix
// without one. The cached step costs the new token's projections, whatever the context, plus
// attention over the cache, linear in the context; the recompute costs every position's
// projections, linear in the context, plus causal attention, quadratic in it.
#include <shaped/shaped.hpp>

#include <benchmark/benchmark.h>

#include <cmath>
#include <string>

namespace {

using B = shaped::dim<"B", 1>;
using T = shaped::dim<"T">;
using C = shaped::dim<"C", 384>;
using NH = shaped::dim<"NH", 6>;
using HS = shaped::dim<"HS", 64>;
using S = shaped::dim<"S", 1024>;

using Attention = shaped::nn::MultiHeadAttention<C, NH, HS>;
using Cache = Attention::cache_type<B, S>;

// The layer, a sequence of `context` tokens, and a cache holding all but the last of them.
struct decoding {
    shaped::Generator gen{2024};
    Attention attention{gen};
    shaped::Tensor<float, B, T, C> x;
    Cache prefilled;

    explicit decoding(std::size_t context) : x(shaped::randn<float, B, T, C>(gen, T{context})) {
        attention(shaped::slice<T>(x, 0, context - 1), prefilled);
    }

    auto last_token() const { return shaped::slice<T>(x, x.extents()[1] - 1, x.extents()[1]); }
};

// The cached step and the recompute give the same output for the new token.
bool same_output(benchmark::State& state, decoding& d) {
    Cache cache = d.prefilled;
    const auto step = d.attention(d.last_token(), cache);
    const auto full = d.attention(d.x);
    const std::size_t last = d.x.extents()[1] - 1;
    double worst = 0;
    for (std::size_t c = 0; c < C::extent; ++c)
        worst = std::max(worst, static_cast<double>(std::abs(step(0, 0, c) - full(0, last, c))));
    if (worst <= 1e-4) return true;
    state.SkipWithError(("the cached step differs from the recompute by " + std::to_string(worst)).c_str());
    return false;
}

void cached_step(benchmark::State& state) {
    const auto context = static_cast<std::size_t>(state.range(0));
    decoding d(context);
    if (!same_output(state, d)) return;
    Cache cache = d.prefilled;
    const auto token = d.last_token();
    for (auto _ : state) {
        // Back to context - 1 positions, untimed: each timed step appends the same token.
        state.PauseTiming();
        cache = d.prefilled;
        state.ResumeTiming();
        auto out = d.attention(token, cache);
        benchmark::DoNotOptimize(out.data());
    }
    state.counters["context"] = static_cast<double>(context);
}

void full_recompute(benchmark::State& state) {
    const auto context = static_cast<std::size_t>(state.range(0));
    decoding d(context);
    if (!same_output(state, d)) return;
    for (auto _ : state) {
        auto out = d.attention(d.x);
        benchmark::DoNotOptimize(out.data());
    }
    state.counters["context"] = static_cast<double>(context);
}

}  // namespace

BENCHMARK(cached_step)->Name("decode_step/C384_NH6/kv_cache")->Arg(64)->Arg(256)->Arg(1024)->Unit(benchmark::kMicrosecond);
BENCHMARK(full_recompute)
    ->Name("decode_step/C384_NH6/full_recompute")
    ->Arg(64)
    ->Arg(256)
    ->Arg(1024)
    ->Unit(benchmark::kMicrosecond);
