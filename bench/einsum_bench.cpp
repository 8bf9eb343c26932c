// einsum against the matmul it lowers to, in the same run: each row's baseline is that matmul,
// so shaped/base is einsum's cost over it (the aim: within 1.05x).
//   einsum/B2_NH12_T256_S256_HS64   attention's scores, (B, NH, T, HS) x (B, NH, S, HS) -> (B, NH, T, S),
//                                   against matmul(q, k.mT())
//   einsum/B2_T256_NH12_HS64_C768   the heads' outputs through a projection, two names contracted,
//                                   (B, T, NH, HS) x (NH, HS, C) -> (B, T, C), against matmul of
//                                   the same elements seen as (B, T, NH x HS) x (NH x HS, C)
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

using C = shaped::dim<"C", 768>;
using M = shaped::dim<"M", 768>;  // NH x HS
constexpr double projection_flops = 2.0 * 2 * 256 * 768 * 768;

struct projection_operands {
    shaped::Tensor<float, B, T, NH, HS> y;
    shaped::Tensor<float, NH, HS, C> w;
};
projection_operands make_projection_operands() {
    shaped::Generator gen(6);
    return {shaped::randn<float, B, T, NH, HS>(gen), shaped::randn<float, NH, HS, C>(gen)};
}

void projection_matmul(benchmark::State& state) {
    const auto [y, w] = make_projection_operands();
    shaped::Tensor<float, B, T, C> out;
    for (auto _ : state) {
        out = shaped::matmul(shaped::merge<NH, HS, M>(y), shaped::merge<NH, HS, M>(w));
        benchmark::DoNotOptimize(out.data());
        benchmark::ClobberMemory();
    }
    bench::count_flops(state, projection_flops);
}

void projection_shaped(benchmark::State& state) {
    const auto [y, w] = make_projection_operands();
    shaped::Tensor<float, B, T, C> out;
    const shaped::Tensor<float, B, T, C> want = shaped::matmul(shaped::merge<NH, HS, M>(y), shaped::merge<NH, HS, M>(w));
    out = shaped::einsum<"B T NH HS, NH HS C -> B T C">(y, w);
    if (!bench::same_numbers(state, out.data(), want.data(), want.size())) return;
    for (auto _ : state) {
        out = shaped::einsum<"B T NH HS, NH HS C -> B T C">(y, w);
        benchmark::DoNotOptimize(out.data());
        benchmark::ClobberMemory();
    }
    bench::count_flops(state, projection_flops);
}

}  // namespace

BENCHMARK(einsum_matmul)->Name("einsum/B2_NH12_T256_S256_HS64/baseline")->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK(einsum_shaped)->Name("einsum/B2_NH12_T256_S256_HS64/shaped")->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK(projection_matmul)->Name("einsum/B2_T256_NH12_HS64_C768/baseline")->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK(projection_shaped)->Name("einsum/B2_T256_NH12_HS64_C768/shaped")->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
