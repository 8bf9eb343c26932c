// Case 4: a plain 1024 x 1024 x 1024 sgemm, the machine's compute ceiling that the attention
// kernels' GFLOP/s are measured against. The baseline is one cblas_sgemm call; shaped's matmul
// over static tensors of the same shape must cost nothing on top of it.
#include "bench_support.hpp"

#include <shaped/shaped.hpp>

#include <cblas.h>

namespace {

// Which of its kernels OpenBLAS runs (by CPU model, or as OPENBLAS_CORETYPE says) sets the
// ceiling: report.py prints it beside the GFLOP/s.
[[maybe_unused]] const bool core_named = (benchmark::AddCustomContext("openblas_core", openblas_get_corename()), true);

constexpr int n = 1024;
using M = shaped::dim<"M", n>;
using K = shaped::dim<"K", n>;
using N = shaped::dim<"N", n>;

void sgemm_baseline(benchmark::State& state) {
    const auto a = bench::random_floats(n * n, 1), b = bench::random_floats(n * n, 2);
    std::vector<float> c(n * n);
    for (auto _ : state) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(),
                    n);
        benchmark::DoNotOptimize(c.data());
        benchmark::ClobberMemory();
    }
    bench::count_flops(state, 2.0 * n * n * n);
}

void sgemm_shaped(benchmark::State& state) {
    shaped::Generator gen(3);
    const auto a = shaped::randn<float, M, K>(gen);
    const auto b = shaped::randn<float, K, N>(gen);
    shaped::Tensor<float, M, N> c;
    std::vector<float> want(n * n);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, want.data(), n);
    c = shaped::matmul(a, b);
    if (!bench::same_numbers(state, c.data(), want.data(), want.size())) return;
    for (auto _ : state) {
        c = shaped::matmul(a, b);
        benchmark::DoNotOptimize(c.data());
        benchmark::ClobberMemory();
    }
    bench::count_flops(state, 2.0 * n * n * n);
}

}  // namespace

BENCHMARK(sgemm_baseline)->Name("sgemm/N1024/baseline")->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK(sgemm_shaped)->Name("sgemm/N1024/shaped")->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
