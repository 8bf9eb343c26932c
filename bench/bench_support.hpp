#pragma once
// What every benchmark shares: case names, the check that two implementations give the same
// numbers, and the counters bench/report.py reads.
//
// A benchmark is named "<case>/<implementation>": "prefill/B1_T1024_C768_NH12/shaped". The same
// <case> in bench/torch_reference.py is the PyTorch side of that row of the report.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

namespace bench {

// Whether got and want agree to a relative tolerance; the benchmark is marked failed (and runs
// no timing loop) when they do not, so that a fast wrong answer never reaches the report.
inline bool same_numbers(benchmark::State& state, const float* got, const float* want, std::size_t n,
                         double tolerance = 1e-4) {
    double worst = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const double err = std::abs(static_cast<double>(got[i]) - want[i]) / (1 + std::abs(static_cast<double>(want[i])));
        if (!(err <= worst)) worst = err;
    }
    if (worst <= tolerance) return true;
    state.SkipWithError(("results differ from the other implementation's: worst relative error " +
                         std::to_string(worst))
                            .c_str());
    return false;
}

// Floating-point operations per iteration: report.py divides by the time for GFLOP/s.
inline void count_flops(benchmark::State& state, double flops) { state.counters["flops"] = flops; }

// Bytes read or written from memory per iteration: report.py divides by the time for GB/s.
inline void count_bytes(benchmark::State& state, double bytes) { state.counters["bytes"] = bytes; }

// Tokens generated per iteration: report.py divides by the time for tokens/s.
inline void count_tokens(benchmark::State& state, double tokens) { state.counters["tokens"] = tokens; }

// Multiply-adds of causal attention over T positions with head size hs, per head: q @ k^T and
// weights @ v over the lower triangle (the keys each query sees), at 2 flops each.
inline double causal_attention_flops(double t, double hs) { return 2.0 * 2.0 * hs * t * (t + 1) / 2; }

inline std::vector<float> random_floats(std::size_t n, unsigned seed, float scale = 1.0f) {
    std::vector<float> v(n);
    unsigned state = seed * 2654435761u + 1;
    for (auto& x : v) {
        state = state * 1664525u + 1013904223u;
        x = scale * (static_cast<float>(state >> 8) / static_cast<float>(1u << 24) * 2.0f - 1.0f);
    }
    return v;
}

}  // namespace bench
