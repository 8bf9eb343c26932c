// Case 3's hand-written baselines, beside decode_bench.cpp's shaped cases: one decoding step of
// multi-head attention (C=384, 6 heads of 64, batch 1) at a context of 64, 256 and 1024, with a
// preallocated KV cache and cblas GEMVs over its filled prefix; and the same output recomputed
// from the whole prefix with a T x T score matrix per head. The layer, the tokens and the
// prefilled cache are decode_setting.hpp's (the same seed), and each baseline is checked against
// what nn::MultiHeadAttention computes from them.
#include "baseline.hpp"
#include "bench_support.hpp"
#include "decode_setting.hpp"

#include <shaped/shaped.hpp>

#include <cmath>
#include <string>
#include <vector>

namespace {

using namespace bench::decode;

constexpr std::size_t c = C::extent, heads = NH::extent, hs = HS::extent, capacity = S::extent;

// A decoder by hand: keys and values (heads, capacity, hs), preallocated; a step projects the
// token, writes its key and value after the filled prefix, and attends over the prefix with two
// GEMVs per head.
struct baseline_decoder {
    const Attention& layer;
    std::vector<float> keys = std::vector<float>(heads * capacity * hs);
    std::vector<float> values = std::vector<float>(heads * capacity * hs);
    std::vector<float> qkv = std::vector<float>(3 * c), y = std::vector<float>(c), scores = std::vector<float>(capacity);
    std::size_t length = 0;

    void append(const float* token_qkv) {
        for (std::size_t h = 0; h < heads; ++h) {
            std::copy_n(token_qkv + c + h * hs, hs, keys.data() + (h * capacity + length) * hs);
            std::copy_n(token_qkv + 2 * c + h * hs, hs, values.data() + (h * capacity + length) * hs);
        }
        ++length;
    }

    void prefill(const float* x, std::size_t n) {
        std::vector<float> rows(n * 3 * c);
        bench::baseline_linear(n, 3 * c, c, x, layer.c_attn.weight.data(), layer.c_attn.bias.data(), rows.data());
        for (std::size_t i = 0; i < n; ++i) append(rows.data() + i * 3 * c);
    }

    void step(const float* token, float* out) {
        const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
        bench::baseline_linear(1, 3 * c, c, token, layer.c_attn.weight.data(), layer.c_attn.bias.data(), qkv.data());
        append(qkv.data());
        for (std::size_t h = 0; h < heads; ++h) {
            const float* k = keys.data() + h * capacity * hs;
            const float* v = values.data() + h * capacity * hs;
            cblas_sgemv(CblasRowMajor, CblasNoTrans, length, hs, scale, k, hs, qkv.data() + h * hs, 1, 0.0f,
                        scores.data(), 1);
            bench::softmax_row(scores.data(), length);
            cblas_sgemv(CblasRowMajor, CblasTrans, length, hs, 1.0f, v, hs, scores.data(), 1, 0.0f, y.data() + h * hs, 1);
        }
        bench::baseline_linear(1, c, c, y.data(), layer.c_proj.weight.data(), layer.c_proj.bias.data(), out);
    }
};

bench::baseline_self_attention baseline_layer(const Attention& layer) {
    return {layer.c_attn.weight.data(), layer.c_attn.bias.data(), layer.c_proj.weight.data(), layer.c_proj.bias.data(),
            c, heads, {}, {}, {}};
}

void decode_baseline(benchmark::State& state, std::size_t context) {
    decoding d(context);
    baseline_decoder decoder{d.attention};
    decoder.prefill(d.x.data(), context - 1);
    const float* token = d.x.data() + (context - 1) * c;
    std::vector<float> out(c);
    decoder.step(token, out.data());
    Cache cache = d.prefilled;
    const auto want = d.attention(shaped::slice<T>(d.x, context - 1, context), cache);
    if (!bench::same_numbers(state, out.data(), want.data(), c)) return;
    // Back to the prefix before each step, untimed, as decode_bench.cpp does: the whole cache
    // is copied back (which also leaves the weights as cold in the caches as they are there).
    decoder.length = context - 1;
    const baseline_decoder prefilled = decoder;
    for (auto _ : state) {
        state.PauseTiming();
        decoder.keys = prefilled.keys;
        decoder.values = prefilled.values;
        decoder.length = prefilled.length;
        state.ResumeTiming();
        decoder.step(token, out.data());
        benchmark::DoNotOptimize(out.data());
        benchmark::ClobberMemory();
    }
}

void recompute_baseline(benchmark::State& state, std::size_t context) {
    decoding d(context);
    auto layer = baseline_layer(d.attention);
    std::vector<float> out(context * c);
    layer(d.x.data(), 1, context, out.data());
    const auto want = d.attention(d.x);
    if (!bench::same_numbers(state, out.data(), want.data(), want.size())) return;
    for (auto _ : state) {
        layer(d.x.data(), 1, context, out.data());
        benchmark::DoNotOptimize(out.data());
        benchmark::ClobberMemory();
    }
}

const bool registered = [] {
    for (std::size_t context : {64, 256, 1024}) {
        const std::string name = "ctx" + std::to_string(context) + "_C384_NH6";
        // Timed as decode_bench.cpp times the shaped step.
        benchmark::RegisterBenchmark(("decode/" + name + "/baseline").c_str(), decode_baseline, context)
            ->Unit(benchmark::kMicrosecond);
        benchmark::RegisterBenchmark(("recompute/" + name + "/baseline").c_str(), recompute_baseline, context)
            ->Unit(benchmark::kMicrosecond)
            ->MeasureProcessCPUTime();
    }
    return true;
}();

}  // namespace
