// Attention variants in the one fused kernel, against its plain causal attention at the same
// size (1, 12 heads, T 1024, HS 64): ALiBi and soft-capping (score modifiers), and a document
// mask of 4 documents of 256 positions (key blocks outside a query's document are skipped, so
// its work is about a quarter of causal attention's). Forward (kernels::attention) and backward
// (kernels::attention_backward, from the forward's out and log-sum-exp, outside the timing).
// The modifiers are nn/attention_modifiers.hpp's, run as a layer runs them, and ALiBi once more as
// a user writes it, score by score (alibi_scalar: how far a modifier without a row() falls behind).
//
// Before timing, each variant's forward output is checked against a dense reference (scores,
// modifier, mask, softmax, values: one head, in double). bench/torch_reference.py's cases of the
// same names are PyTorch eager's dense reference, forward and autograd's backward.
#include "bench_support.hpp"

#include <shaped/shaped.hpp>

#include <array>
#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

namespace {

constexpr std::size_t heads = 12, t = 1024, hs = 64, n = heads * t * hs, documents = 4;
using NH = shaped::dim<"NH", heads>;

struct by_document_ids {
    int operator()(std::size_t, std::size_t position) const { return static_cast<int>(position / (t / documents)); }
};

// ALiBi as a user writes it from the guide, over any score type (its derivative over dual
// numbers) and without a row(): the kernel runs it score by score, a scalar loop.
struct users_alibi {
    std::array<double, heads> slopes = [] {
        std::array<double, heads> s{};
        for (std::size_t h = 0; h < heads; ++h) s[h] = std::exp2(-8.0 * static_cast<double>(h + 1) / heads);
        return s;
    }();
    template <class S>
    S operator()(S s, shaped::batch_index, shaped::head_index h, shaped::query_position q, shaped::key_position kv) const {
        return s - slopes[h.value] * static_cast<double>(q - kv);
    }
};

using plain = shaped::attention_modifiers<>;
using scalar_alibi = shaped::attention_modifiers<users_alibi>;
using alibi = shaped::attention_modifiers<shaped::nn::alibi<NH>>;
using soft_capped = shaped::attention_modifiers<shaped::nn::soft_cap>;
const by_document_ids document_ids{};
using documented = shaped::attention_modifiers<shaped::unmodified_scores, shaped::nn::same_document<by_document_ids>>;

template <class Mods>
Mods modifiers() {
    if constexpr (std::is_same_v<Mods, soft_capped>) return {{2.0}, {}, heads};
    else if constexpr (std::is_same_v<Mods, documented>) return {{}, {&document_ids}, heads};
    else return {{}, {}, heads};
}

// One variant's problem over contiguous (1, 12, T, HS) operands, its out and lse filled once.
template <class Mods>
struct variant {
    const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
    const std::vector<float> q = bench::random_floats(n, 21, 2.0f), k = bench::random_floats(n, 22, 2.0f),
                             v = bench::random_floats(n, 23), dout = bench::random_floats(n, 24);
    std::vector<float> out = std::vector<float>(n), lse = std::vector<float>(heads * t);
    const Mods mods = modifiers<Mods>();
    const shaped::kernels::modifier_frame<Mods> frame{&mods, heads, 0};

    template <class P>
    static shaped::kernels::batched_matrices<P> heads_of(P* data) {
        constexpr auto time = static_cast<std::ptrdiff_t>(t), size = static_cast<std::ptrdiff_t>(hs);
        return shaped::kernels::grouped_heads(data, {static_cast<std::ptrdiff_t>(heads) * time * size, time * size, size},
                                              t, hs, 1, false);
    }
    shaped::kernels::attention_problem<float> problem() {
        shaped::kernels::attention_problem<float> p{.q = heads_of(q.data()),
                                                    .k = heads_of(k.data()),
                                                    .v = heads_of(v.data()),
                                                    .out = heads_of(out.data()),
                                                    .lse = lse.data(),
                                                    .scale = scale,
                                                    .sees = {true, 0},
                                                    .batch_rank = 3,
                                                    .batch_extents = {1, heads, 1}};
        if constexpr (!std::is_same_v<Mods, plain>) p.modifiers = shaped::kernels::differentiated_modifiers_over<float>(frame);
        return p;
    }

    // Head h's output, densely, in double: what the fused forward must give.
    std::vector<double> dense_head(std::size_t h) const {
        std::vector<double> result(t * hs), w(t);
        for (std::size_t i = 0; i < t; ++i) {
            double max = -std::numeric_limits<double>::infinity();
            for (std::size_t j = 0; j < t; ++j) {
                double s = 0;
                for (std::size_t c = 0; c < hs; ++c) s += double(q[(h * t + i) * hs + c]) * k[(h * t + j) * hs + c];
                s = mods.score(s * scale, {0}, {h}, {i}, {j});
                w[j] = j <= i && mods.keeps({0}, {h}, {i}, {j}) ? s : -std::numeric_limits<double>::infinity();
                max = std::max(max, w[j]);
            }
            double sum = 0;
            for (double& e : w) sum += e = std::exp(e - max);
            for (std::size_t c = 0; c < hs; ++c) {
                double acc = 0;
                for (std::size_t j = 0; j < t; ++j) acc += w[j] * v[(h * t + j) * hs + c];
                result[i * hs + c] = acc / sum;
            }
        }
        return result;
    }
};

template <class Mods>
bool checked_forward(benchmark::State& state, variant<Mods>& c) {
    shaped::kernels::attention(c.problem());
    for (const std::size_t h : {std::size_t{0}, heads - 1}) {
        const auto want = c.dense_head(h);
        const std::vector<float> wanted(want.begin(), want.end());
        if (!bench::same_numbers(state, c.out.data() + h * t * hs, wanted.data(), t * hs)) return false;
    }
    return true;
}

template <class Mods>
void forward(benchmark::State& state) {
    variant<Mods> c;
    if (!checked_forward(state, c)) return;
    const auto p = c.problem();
    for (auto _ : state) {
        shaped::kernels::attention(p);
        benchmark::DoNotOptimize(c.out.data());
        benchmark::ClobberMemory();
    }
}

template <class Mods>
void backward(benchmark::State& state) {
    variant<Mods> c;
    if (!checked_forward(state, c)) return;
    std::vector<float> dq(n), dk(n), dv(n);
    const auto p = c.problem();
    for (auto _ : state) {
        shaped::kernels::attention_backward(p, c.dout.data(),
                                            {c.heads_of(dq.data()), c.heads_of(dk.data()), c.heads_of(dv.data())});
        benchmark::DoNotOptimize(dq.data());
        benchmark::ClobberMemory();
    }
}

template <class Mods>
void register_variant(const std::string& name) {
    const std::string prefix = "attention_variant/" + name + "_B1_NH12_T1024_HS64";
    benchmark::RegisterBenchmark((prefix + "_forward/shaped").c_str(), forward<Mods>)
        ->Unit(benchmark::kMillisecond)
        ->MeasureProcessCPUTime();
    benchmark::RegisterBenchmark((prefix + "_backward/shaped").c_str(), backward<Mods>)
        ->Unit(benchmark::kMillisecond)
        ->MeasureProcessCPUTime();
}

const bool registered = [] {
    register_variant<plain>("causal");
    register_variant<alibi>("alibi");
    register_variant<scalar_alibi>("alibi_scalar");
    register_variant<soft_capped>("softcap");
    register_variant<documented>("documents4");
    return true;
}();

}  // namespace
