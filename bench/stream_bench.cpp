// The machine's single-thread memory bandwidth, the ceiling bandwidth-bound cases (decoding) are
// measured against, as STREAM measures it: arrays eight times the last-level cache, each byte
// counted once per pass. "read" sums one array (what a matrix-vector product does to its
// matrix); "triad" is STREAM's a = b + s * c (two arrays read, one written). report.py takes the
// faster of the two as the ceiling.
#include "bench_support.hpp"

#include <benchmark/benchmark.h>

#include <cstddef>
#include <vector>

namespace {

constexpr std::size_t elements = std::size_t{64} << 20;  // 256 MiB of floats an array

// Sixty-four independent sums, so that the compiler keeps them in several vector registers and
// the loop is bound by loads, not by one chain of additions.
float sum(const std::vector<float>& a) {
    constexpr std::size_t lanes = 64;
    float partial[lanes] = {};
    for (std::size_t i = 0; i < a.size(); i += lanes)
        for (std::size_t j = 0; j < lanes; ++j) partial[j] += a[i + j];
    float total = 0;
    for (float p : partial) total += p;
    return total;
}

void read(benchmark::State& state) {
    const std::vector<float> a(elements, 1.0f);
    for (auto _ : state) {
        float s = sum(a);
        benchmark::DoNotOptimize(s);
    }
    bench::count_bytes(state, static_cast<double>(elements * sizeof(float)));
}

void triad(benchmark::State& state) {
    std::vector<float> a(elements), b(elements, 1.0f), c(elements, 2.0f);
    const float scale = 3.0f;
    for (auto _ : state) {
        for (std::size_t i = 0; i < elements; ++i) a[i] = b[i] + scale * c[i];
        benchmark::DoNotOptimize(a.data());
        benchmark::ClobberMemory();
    }
    if (a[elements / 2] != 7.0f) state.SkipWithError("triad computed the wrong sums");
    bench::count_bytes(state, 3.0 * static_cast<double>(elements * sizeof(float)));
}

}  // namespace

BENCHMARK(read)->Name("stream/read_256MiB/baseline")->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK(triad)->Name("stream/triad_3x256MiB/baseline")->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
