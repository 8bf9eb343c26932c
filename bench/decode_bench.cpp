// One decoding step of multi-head attention (C=384, 6 heads of 64, batch 1) at a context of
// 64, 256 and 1024 positions: with a KV cache (the new token's projections, its attention over
// the cached keys and values, the output projection) against recomputing the whole prefix
// without one. The cached step costs the new token's projections, whatever the context, plus
// attention over the cache, linear in the context; the recompute costs every position's
// projections, linear in the context, plus causal attention, quadratic in it.
#include "decode_setting.hpp"

#include <shaped/shaped.hpp>

#include <benchmark/benchmark.h>

#include <cmath>
#include <string>

namespace {

using namespace bench::decode;

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

void cached_step(benchmark::State& state, std::size_t context) {
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
}

void full_recompute(benchmark::State& state, std::size_t context) {
    decoding d(context);
    if (!same_output(state, d)) return;
    for (auto _ : state) {
        auto out = d.attention(d.x);
        benchmark::DoNotOptimize(out.data());
    }
}

const bool registered = [] {
    for (std::size_t context : {64, 256, 1024}) {
        const std::string name = "ctx" + std::to_string(context) + "_C384_NH6";
        // The thread's CPU time: each step pauses the clock to put the cache back.
        benchmark::RegisterBenchmark(("decode/" + name + "/shaped").c_str(), cached_step, context)
            ->Unit(benchmark::kMicrosecond);
        benchmark::RegisterBenchmark(("recompute/" + name + "/shaped").c_str(), full_recompute, context)
            ->Unit(benchmark::kMicrosecond)
            ->MeasureProcessCPUTime();
    }
    return true;
}();

}  // namespace
