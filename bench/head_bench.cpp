// Case 1: the chapter's attention head at the chapter's size, B=2, T=4, C=6, head size 16,
// forward. Every extent is static: the projections are unrolled loops, the tensors live inline,
// and nothing is allocated; PyTorch eager spends more on each of its ten ops' dispatch than
// this whole head costs.
#include "bench_support.hpp"

#include <shaped/shaped.hpp>

#include <cblas.h>
#include <xtensor/xfixed.hpp>

#include <cmath>
#include <limits>

namespace {

using B = shaped::dim<"B", 2>;   // batch
using T = shaped::dim<"T", 4>;   // time
using C = shaped::dim<"C", 6>;   // channels
using H = shaped::dim<"H", 16>;  // head size

constexpr std::size_t b_ = B::extent, t_ = T::extent, c_ = C::extent, h_ = H::extent;
const float scale = 1.0f / std::sqrt(static_cast<float>(h_));
constexpr float minus_infinity = -std::numeric_limits<float>::infinity();

// The chapter's section 1, with section 2's scale (as nanoGPT's Head).
struct chapter_head {
    shaped::nn::Linear<C, H, false> key, query, value;

    explicit chapter_head(shaped::Generator& gen) : key(gen), query(gen), value(gen) {}

    shaped::Tensor<float, B, T, H> operator()(const shaped::Tensor<float, B, T, C>& x) const {
        const shaped::Tensor<float, B, T, H> k = key(x);    // (B, T, 16)
        const shaped::Tensor<float, B, T, H> q = query(x);  // (B, T, 16)
        const shaped::Tensor<float, B, T, H> v = value(x);
        const auto tril = shaped::tril(shaped::ones<float, T, T>());
        return shaped::matmul(
            shaped::softmax<-1>(shaped::masked_fill(shaped::matmul(q, k.mT()) * scale, tril == 0.0f, minus_infinity)), v);
    }
};

// The same head by hand: cblas for the products, fixed-size xtensor storage, loops for the
// mask and the softmax.
struct baseline_head {
    using weight = xt::xtensor_fixed<float, xt::xshape<h_, c_>>;
    using rows = xt::xtensor_fixed<float, xt::xshape<b_ * t_, h_>>;
    weight key, query, value;

    void operator()(const float* x, float* out) const {
        rows k, q, v;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, b_ * t_, h_, c_, 1.0f, x, c_, key.data(), c_, 0.0f, k.data(), h_);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, b_ * t_, h_, c_, 1.0f, x, c_, query.data(), c_, 0.0f, q.data(), h_);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, b_ * t_, h_, c_, 1.0f, x, c_, value.data(), c_, 0.0f, v.data(), h_);
        xt::xtensor_fixed<float, xt::xshape<t_, t_>> wei;
        for (std::size_t b = 0; b < b_; ++b) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, t_, t_, h_, scale, q.data() + b * t_ * h_, h_,
                        k.data() + b * t_ * h_, h_, 0.0f, wei.data(), t_);
            for (std::size_t i = 0; i < t_; ++i) {
                for (std::size_t j = i + 1; j < t_; ++j) wei(i, j) = minus_infinity;
                float max = minus_infinity, sum = 0;
                for (std::size_t j = 0; j < t_; ++j) max = std::max(max, wei(i, j));
                for (std::size_t j = 0; j < t_; ++j) sum += wei(i, j) = std::exp(wei(i, j) - max);
                for (std::size_t j = 0; j < t_; ++j) wei(i, j) /= sum;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, t_, h_, t_, 1.0f, wei.data(), t_,
                        v.data() + b * t_ * h_, h_, 0.0f, out + b * t_ * h_, h_);
        }
    }
};

struct fixture {
    shaped::Generator gen{1337};
    shaped::Tensor<float, B, T, C> x = shaped::randn<float, B, T, C>(gen);
    chapter_head head{gen};
    baseline_head baseline;

    fixture() {
        std::copy(head.key.weight.data(), head.key.weight.data() + h_ * c_, baseline.key.data());
        std::copy(head.query.weight.data(), head.query.weight.data() + h_ * c_, baseline.query.data());
        std::copy(head.value.weight.data(), head.value.weight.data() + h_ * c_, baseline.value.data());
    }

    bool agree(benchmark::State& state) const {
        const auto shaped_out = head(x);
        xt::xtensor_fixed<float, xt::xshape<b_ * t_ * h_>> baseline_out;
        baseline(x.data(), baseline_out.data());
        return bench::same_numbers(state, shaped_out.data(), baseline_out.data(), baseline_out.size(), 1e-5);
    }
};

void head_shaped(benchmark::State& state) {
    const fixture f;
    if (!f.agree(state)) return;
    for (auto _ : state) {
        auto out = f.head(f.x);
        benchmark::DoNotOptimize(out.data());
        benchmark::ClobberMemory();
    }
}

void head_baseline(benchmark::State& state) {
    const fixture f;
    if (!f.agree(state)) return;
    xt::xtensor_fixed<float, xt::xshape<b_ * t_ * h_>> out;
    for (auto _ : state) {
        f.baseline(f.x.data(), out.data());
        benchmark::DoNotOptimize(out.data());
        benchmark::ClobberMemory();
    }
}

}  // namespace

BENCHMARK(head_shaped)->Name("head/B2_T4_C6_H16/shaped")->Unit(benchmark::kMicrosecond)->MeasureProcessCPUTime();
BENCHMARK(head_baseline)->Name("head/B2_T4_C6_H16/baseline")->Unit(benchmark::kMicrosecond)->MeasureProcessCPUTime();
