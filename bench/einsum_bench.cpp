// einsum's attention contraction, (B, NH, T, HS) x (B, NH, S, HS) -> (B, NH, T, S), against the
// matmul it lowers to, matmul(q, k.mT()), in the same run: the row's baseline is that matmul,
// so shaped/base is einsum's cost over it (the aim: within 1.05x).
#include "bench_support.hpp"

#include <shaped/shaped.hpp>

namespace {

using B = shaped::dim<"B", 2>;
using NH = shaped::dim<"NH", 12>;
using T = shaped::dim<"T", 256>;
using S = shaped::dim<"S", 256>;
using HS = shaped::dim<"HS", 64>;

constexpr double scores_flops = 2.0 * 2 * 12 * 256 * 256 * 64;

struct operands {
    shaped::Tensor<float, B, NH, T, HS> q;
    shaped::Tensor<float, B, NH, S, HS> k;
};
operands make_operands() {
    shaped::Generator gen(5);
    return {shaped::randn<float, B, NH, T, HS>(gen), shaped::randn<float, B, NH, S, HS>(gen)};
}

void einsum_matmul(benchmark::State& state) {
    const auto [q, k] = make_operands();
    shaped::Tensor<float, B, NH, T, S> scores;
    for (auto _ : state) {
        scores = shaped::matmul(q, k.mT());
        benchmark::DoNotOptimize(scores.data());
        benchmark::ClobberMemory();
    }
    bench::count_flops(state, scores_flops);
}

void einsum_shaped(benchmark::State& state) {
    const auto [q, k] = make_operands();
    shaped::Tensor<float, B, NH, T, S> scores;
    const shaped::Tensor<float, B, NH, T, S> want = shaped::matmul(q, k.mT());
    scores = shaped::einsum<"B NH T HS, B NH S HS -> B NH T S">(q, k);
    if (!bench::same_numbers(state, scores.data(), want.data(), want.size())) return;
    for (auto _ : state) {
        scores = shaped::einsum<"B NH T HS, B NH S HS -> B NH T S">(q, k);
        benchmark::DoNotOptimize(scores.data());
        benchmark::ClobberMemory();
    }
    bench::count_flops(state, scores_flops);
}

}  // namespace

BENCHMARK(einsum_matmul)->Name("einsum/B2_NH12_T256_S256_HS64/baseline")->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK(einsum_shaped)->Name("einsum/B2_NH12_T256_S256_HS64/shaped")->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
