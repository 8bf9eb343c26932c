// Case 2: multi-head causal self-attention over a whole prompt (prefill): the qkv projection,
// attention per head, the output projection, as nanoGPT's CausalSelfAttention. shaped runs
// nn::MultiHeadAttention; the baseline is the same layer by hand with cblas and a T x T score
// matrix per head, as one writes it without a fused kernel.
//
// The attention core alone (q @ k^T, mask, softmax, @ v over (B, NH, T, HS)) is measured too:
// its GFLOP/s, counting the keys each query sees, is compared with the sgemm ceiling.
#include "baseline.hpp"
#include "bench_support.hpp"

#include <shaped/shaped.hpp>

#include <cmath>
#include <string>

namespace {

using bench::baseline_attention;
using bench::minus_infinity;

template <std::size_t Batch, std::size_t Time, std::size_t Channels, std::size_t Heads>
struct prefill {
    using B = shaped::dim<"B", Batch>;
    using T = shaped::dim<"T", Time>;
    using C = shaped::dim<"C", Channels>;
    using NH = shaped::dim<"NH", Heads>;
    using HS = shaped::dim<"HS", Channels / Heads>;
    static constexpr std::size_t hs = Channels / Heads;

    static std::string name() {
        return "B" + std::to_string(Batch) + "_T" + std::to_string(Time) + "_C" + std::to_string(Channels) + "_NH" +
               std::to_string(Heads);
    }
    static double layer_flops() {
        const double rows = Batch * Time;
        return 2 * rows * Channels * 3 * Channels + 2 * rows * Channels * Channels +
               Batch * Heads * bench::causal_attention_flops(Time, hs);
    }
    static double core_flops() { return Batch * Heads * bench::causal_attention_flops(Time, hs); }

    shaped::Generator gen{42};
    shaped::nn::MultiHeadAttention<C, NH, HS> layer{gen};
    shaped::Tensor<float, B, T, C> x = shaped::randn<float, B, T, C>(gen);

    // The layer by hand, writing (B, T, C) into out.
    struct baseline_layer {
        bench::baseline_self_attention layer;
        void operator()(const prefill& p, float* out) {
            layer.attn_weight = p.layer.c_attn.weight.data();
            layer.attn_bias = p.layer.c_attn.bias.data();
            layer.proj_weight = p.layer.c_proj.weight.data();
            layer.proj_bias = p.layer.c_proj.bias.data();
            layer.c = Channels;
            layer.heads = Heads;
            layer(p.x.data(), Batch, Time, out);
        }
    };
};

template <class Case>
void prefill_shaped(benchmark::State& state) {
    Case p;
    typename Case::baseline_layer baseline;
    std::vector<float> want(p.x.size());
    baseline(p, want.data());
    shaped::Tensor<float, typename Case::B, typename Case::T, typename Case::C> out = p.layer(p.x);
    if (!bench::same_numbers(state, out.data(), want.data(), want.size())) return;
    for (auto _ : state) {
        out = p.layer(p.x);
        benchmark::DoNotOptimize(out.data());
        benchmark::ClobberMemory();
    }
    bench::count_flops(state, Case::layer_flops());
}

template <class Case>
void prefill_baseline(benchmark::State& state) {
    Case p;
    typename Case::baseline_layer baseline;
    std::vector<float> out(p.x.size());
    const shaped::Tensor<float, typename Case::B, typename Case::T, typename Case::C> want = p.layer(p.x);
    baseline(p, out.data());
    if (!bench::same_numbers(state, out.data(), want.data(), want.size())) return;
    for (auto _ : state) {
        baseline(p, out.data());
        benchmark::DoNotOptimize(out.data());
        benchmark::ClobberMemory();
    }
    bench::count_flops(state, Case::layer_flops());
}

// The attention core over contiguous (B, NH, T, HS) queries, keys and values.
template <class Case>
struct core {
    using Q = shaped::Tensor<float, typename Case::B, typename Case::NH, typename Case::T, typename Case::HS>;
    shaped::Generator gen{7};
    Q q = shaped::randn<float, typename Case::B, typename Case::NH, typename Case::T, typename Case::HS>(gen);
    Q k = shaped::randn<float, typename Case::B, typename Case::NH, typename Case::T, typename Case::HS>(gen);
    Q v = shaped::randn<float, typename Case::B, typename Case::NH, typename Case::T, typename Case::HS>(gen);
    const float scale = 1.0f / std::sqrt(static_cast<float>(Case::hs));
    const shaped::Tensor<float, typename Case::T, typename Case::T> ones =
        shaped::ones<float, typename Case::T, typename Case::T>();

    // The chapter's expression, which shaped runs as its fused kernel.
    void shaped_core(Q& out) const {
        out = shaped::matmul(shaped::softmax<-1>(shaped::masked_fill(shaped::matmul(q, k.mT()) * scale,
                                                                     shaped::tril(ones) == 0.0f, minus_infinity)),
                             v);
    }

    void baseline_core(float* out, std::vector<float>& scores) const {
        constexpr std::size_t t = Case::T::extent, hs = Case::hs;
        for (std::size_t m = 0; m < Case::B::extent * Case::NH::extent; ++m)
            baseline_attention(t, hs, scale, q.data() + m * t * hs, k.data() + m * t * hs, v.data() + m * t * hs, hs,
                               out + m * t * hs, hs, scores.data());
    }
};

template <class Case>
void core_shaped(benchmark::State& state) {
    const core<Case> c;
    std::vector<float> scores(Case::T::extent * Case::T::extent), want(c.q.size());
    c.baseline_core(want.data(), scores);
    typename core<Case>::Q out;
    c.shaped_core(out);
    if (!bench::same_numbers(state, out.data(), want.data(), want.size())) return;
    for (auto _ : state) {
        c.shaped_core(out);
        benchmark::DoNotOptimize(out.data());
        benchmark::ClobberMemory();
    }
    bench::count_flops(state, Case::core_flops());
}

template <class Case>
void core_baseline(benchmark::State& state) {
    const core<Case> c;
    std::vector<float> scores(Case::T::extent * Case::T::extent), out(c.q.size());
    typename core<Case>::Q want;
    c.shaped_core(want);
    c.baseline_core(out.data(), scores);
    if (!bench::same_numbers(state, out.data(), want.data(), want.size())) return;
    for (auto _ : state) {
        c.baseline_core(out.data(), scores);
        benchmark::DoNotOptimize(out.data());
        benchmark::ClobberMemory();
    }
    bench::count_flops(state, Case::core_flops());
}

template <class Case>
void register_case() {
    const std::string name = Case::name();
    benchmark::RegisterBenchmark(("prefill/" + name + "/shaped").c_str(), prefill_shaped<Case>)
        ->Unit(benchmark::kMillisecond)
        ->MeasureProcessCPUTime();
    benchmark::RegisterBenchmark(("prefill/" + name + "/baseline").c_str(), prefill_baseline<Case>)
        ->Unit(benchmark::kMillisecond)
        ->MeasureProcessCPUTime();
    benchmark::RegisterBenchmark(("attention_core/" + name + "/shaped").c_str(), core_shaped<Case>)
        ->Unit(benchmark::kMillisecond)
        ->MeasureProcessCPUTime();
    benchmark::RegisterBenchmark(("attention_core/" + name + "/baseline").c_str(), core_baseline<Case>)
        ->Unit(benchmark::kMillisecond)
        ->MeasureProcessCPUTime();
}

const bool registered = [] {
    register_case<prefill<1, 256, 384, 6>>();
    register_case<prefill<4, 256, 384, 6>>();
    register_case<prefill<1, 1024, 768, 12>>();
    return true;
}();

}  // namespace
