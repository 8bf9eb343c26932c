// The Llama family's layers against naive loops in double: rms_norm and nn::RMSNorm, silu,
// rotary_encoding (both pairings, partial, ragged starts, and the relative-position property),
// GroupedQueryAttention (MHA, GQA and MQA, with and without rotary) against a reference that
// repeats each key/value head over its group, SwiGLU and LlamaBlock; and cached decoding of the
// attention and the block against their full causal forward.
#include "reference.hpp"

#include <shaped/shaped.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <type_traits>
#include <vector>

namespace {

using B = shaped::dim<"B", 2>;
using B1 = shaped::dim<"B", 1>;
using Td = shaped::dim<"T">;
using shaped::nn::rotary_pairing;

// ---- naive references, in double, from the definitions -------------------------------------

// Each row of n in x over the square root of its mean square plus eps, times w.
std::vector<double> naive_rms_norm(const std::vector<double>& x, std::size_t n, const std::vector<double>& w,
                                   double eps = 1e-5) {
    std::vector<double> y(x.size());
    for (std::size_t r = 0; r < x.size() / n; ++r) {
        double mean_square = 0;
        for (std::size_t i = 0; i < n; ++i) mean_square += x[r * n + i] * x[r * n + i];
        mean_square /= static_cast<double>(n);
        for (std::size_t i = 0; i < n; ++i) y[r * n + i] = x[r * n + i] / std::sqrt(mean_square + eps) * w[i];
    }
    return y;
}

double naive_silu(double x) { return x / (1.0 + std::exp(-x)); }

// x (rows x in) @ w^T (w: out x in), each row: a Linear without bias.
std::vector<double> naive_linear(const std::vector<double>& x, std::size_t in, const std::vector<double>& w,
                                 std::size_t out) {
    const std::size_t rows = x.size() / in;
    std::vector<double> y(rows * out);
    for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t o = 0; o < out; ++o) {
            double s = 0;
            for (std::size_t i = 0; i < in; ++i) s += x[r * in + i] * w[o * in + i];
            y[r * out + o] = s;
        }
    return y;
}

// A rotary encoding as the naive references apply it: none, or R rotated dims in one pairing.
struct naive_position {
    bool rotary = false;
    std::size_t rotated = 0;
    bool halves = false;
    double theta = 10000;
};
template <class Position>
naive_position naive_position_of(const Position& p) {
    if constexpr (std::is_same_v<Position, shaped::nn::no_position_encoding>) return {};
    else return {true, Position::rotated, Position::pairing == rotary_pairing::halves, p.theta};
}

// One head's vector of hs channels at position pos, rotated pair by pair: pair i turns by
// pos * theta^(-2i/R), its channels (2i, 2i + 1) adjacent or (i, i + R/2) halves.
void naive_rotate(double* v, std::size_t pos, const naive_position& p) {
    if (!p.rotary) return;
    const std::size_t half = p.rotated / 2;
    for (std::size_t i = 0; i < half; ++i) {
        const double angle = static_cast<double>(pos) * std::pow(p.theta, -2.0 * static_cast<double>(i) /
                                                                            static_cast<double>(p.rotated));
        const std::size_t first = p.halves ? i : 2 * i, second = p.halves ? i + half : 2 * i + 1;
        const double a = v[first], c = v[second];
        v[first] = a * std::cos(angle) - c * std::sin(angle);
        v[second] = a * std::sin(angle) + c * std::cos(angle);
    }
}

// x (batch, heads, t, hs) row-major, each (b, h, i) rotated at position starts[b] + i.
std::vector<double> naive_rotary(std::vector<double> x, std::size_t heads, std::size_t t, std::size_t hs,
                                 const std::vector<std::size_t>& starts, const naive_position& p) {
    for (std::size_t b = 0; b < starts.size(); ++b)
        for (std::size_t h = 0; h < heads; ++h)
            for (std::size_t i = 0; i < t; ++i) naive_rotate(&x[((b * heads + h) * t + i) * hs], starts[b] + i, p);
    return x;
}

// Meta's Attention over x (batch x t x C), with its keys and values repeated over each group as
// repeat_kv does: query head h reads key/value head h / G. Causal softmax attention per head.
template <class Layer>
std::vector<double> naive_grouped_attention(const Layer& layer, const std::vector<double>& x, std::size_t batch,
                                            std::size_t t) {
    constexpr std::size_t c = Layer::channel_dim::extent, nh = Layer::heads_dim::extent,
                          nkv = Layer::kv_heads_dim::extent, hs = Layer::head_size_dim::extent, group = nh / nkv;
    const naive_position position = naive_position_of(layer.position());
    auto q = naive_linear(x, c, ref::values(layer.wq.weight), nh * hs);
    auto k = naive_linear(x, c, ref::values(layer.wk.weight), nkv * hs);
    const auto v = naive_linear(x, c, ref::values(layer.wv.weight), nkv * hs);
    for (std::size_t r = 0; r < batch * t; ++r) {
        for (std::size_t h = 0; h < nh; ++h) naive_rotate(&q[(r * nh + h) * hs], r % t, position);
        for (std::size_t h = 0; h < nkv; ++h) naive_rotate(&k[(r * nkv + h) * hs], r % t, position);
    }
    // Every query head's own copy of its group's keys and values: (batch x t x NH x HS).
    std::vector<double> k_repeated(batch * t * nh * hs), v_repeated(batch * t * nh * hs);
    for (std::size_t r = 0; r < batch * t; ++r)
        for (std::size_t h = 0; h < nh; ++h)
            for (std::size_t d = 0; d < hs; ++d) {
                k_repeated[(r * nh + h) * hs + d] = k[(r * nkv + h / group) * hs + d];
                v_repeated[(r * nh + h) * hs + d] = v[(r * nkv + h / group) * hs + d];
            }
    std::vector<double> y(batch * t * nh * hs);
    const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
    for (std::size_t b = 0; b < batch; ++b)
        for (std::size_t h = 0; h < nh; ++h)
            for (std::size_t i = 0; i < t; ++i) {
                const auto at = [&](const std::vector<double>& a, std::size_t pos, std::size_t d) {
                    return a[((b * t + pos) * nh + h) * hs + d];
                };
                std::vector<double> w(i + 1);
                double max = -INFINITY, z = 0;
                for (std::size_t j = 0; j <= i; ++j) {
                    double s = 0;
                    for (std::size_t d = 0; d < hs; ++d) s += at(q, i, d) * at(k_repeated, j, d);
                    max = std::max(max, w[j] = s * scale);
                }
                for (double& e : w) z += (e = std::exp(e - max));
                for (std::size_t d = 0; d < hs; ++d) {
                    double s = 0;
                    for (std::size_t j = 0; j <= i; ++j) s += w[j] / z * at(v_repeated, j, d);
                    y[((b * t + i) * nh + h) * hs + d] = s;
                }
            }
    return naive_linear(y, nh * hs, ref::values(layer.wo.weight), c);
}

// Meta's FeedForward: w2(silu(w1 x) * w3 x).
template <class Layer>
std::vector<double> naive_swiglu(const Layer& layer, const std::vector<double>& x) {
    constexpr std::size_t c = Layer::channel_dim::extent, hidden = Layer::hidden_dim::extent;
    auto gate = naive_linear(x, c, ref::values(layer.w1.weight), hidden);
    const auto up = naive_linear(x, c, ref::values(layer.w3.weight), hidden);
    for (std::size_t i = 0; i < gate.size(); ++i) gate[i] = naive_silu(gate[i]) * up[i];
    return naive_linear(gate, hidden, ref::values(layer.w2.weight), c);
}

// Meta's TransformerBlock: x + attention(attention_norm(x)), then h + feed_forward(ffn_norm(h)).
template <class Block>
std::vector<double> naive_llama_block(const Block& block, std::vector<double> x, std::size_t batch, std::size_t t) {
    constexpr std::size_t c = Block::channel_dim::extent;
    const auto a = naive_grouped_attention(
        block.attention, naive_rms_norm(x, c, ref::values(block.attention_norm.weight), block.attention_norm.eps), batch,
        t);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += a[i];
    const auto f =
        naive_swiglu(block.feed_forward, naive_rms_norm(x, c, ref::values(block.ffn_norm.weight), block.ffn_norm.eps));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += f[i];
    return x;
}

// ---- the layers under test ------------------------------------------------------------------

using C = shaped::dim<"C", 16>;
using NH = shaped::dim<"NH", 4>;
using HS = shaped::dim<"HS", 4>;
using Hidden = shaped::dim<"Hidden", 40>;
using S = shaped::dim<"S", 24>;

using Rope = shaped::nn::rotary_encoding<HS, rotary_pairing::adjacent>;
using RopeHalvesPartial = shaped::nn::rotary_encoding<HS, rotary_pairing::halves, 2>;

template <std::size_t KV, class Position = shaped::nn::no_position_encoding>
using Gqa = shaped::nn::GroupedQueryAttention<C, NH, shaped::dim<"NKV", KV>, HS, Position>;

// Queries and keys drawn wider than PyTorch's initialisation, so that the softmax is far from
// uniform and a key read from the wrong head or position shows.
template <class Layer>
Layer random_attention(std::uint64_t seed, double theta = 10000) {
    shaped::Generator gen(seed);
    Layer layer(gen);
    ref::fill(layer.wq.weight, seed + 1);
    ref::fill(layer.wk.weight, seed + 2);
    layer.wq.weight = layer.wq.weight * 0.25f;
    layer.wk.weight = layer.wk.weight * 0.25f;
    if constexpr (!std::is_same_v<typename Layer::position_type, shaped::nn::no_position_encoding>)
        layer.position().theta = theta;
    return layer;
}

// Float angles (run.c's) and float sums: the rotary cases' bound, a little above plain attention's.
constexpr double tolerance = 2e-5;

// Cached decoding of x in random chunks (a prefill, then steps of one position or a few)
// against the full causal forward over each prefix.
template <class Layer, class Cache>
void decode_in_random_chunks(const Layer& layer, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    const std::size_t total = 1 + rng() % Cache::capacity;
    shaped::Generator gen(seed);
    const auto x = shaped::randn<float, B, Td, C>(gen, Td{total});
    Cache cache;
    std::size_t pos = 0;
    while (pos < total) {
        const std::size_t left = total - pos;
        const std::size_t n = pos == 0 ? 1 + rng() % left : (rng() % 2 ? 1 : 1 + rng() % std::min<std::size_t>(left, 5));
        const auto got = layer(shaped::slice<Td>(x, pos, pos + n), cache);
        REQUIRE(cache.length() == pos + n);
        const auto want = layer(shaped::slice<Td>(x, 0, pos + n));
        INFO("seed " << seed << ", " << pos << " positions held, " << n << " new");
        ref::require_rows_match(got, want, pos, tolerance);
        pos += n;
    }
}

// A ragged batch: each row takes its own number of positions per step, padding fills the rest;
// each row's outputs equal the full forward over its own prefix, its padding outputs are zero.
template <class Layer, class Cache>
void decode_ragged(const Layer& layer, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    shaped::Generator gen(seed);
    std::vector<shaped::Tensor<float, B1, Td, C>> rows;
    for (std::size_t b = 0; b < B::extent; ++b) rows.push_back(shaped::randn<float, B1, Td, C>(gen, Td{Cache::capacity}));
    Cache cache;
    for (int step = 0; step < 10; ++step) {
        const std::size_t n = 1 + rng() % 4;
        typename Cache::lengths_type counts{};
        for (std::size_t b = 0; b < B::extent; ++b)
            counts[b] = std::min<std::size_t>(rng() % (n + 1), Cache::capacity - cache.lengths()[b]);
        auto x = shaped::randn<float, B, Td, C>(gen, Td{n});
        const auto starts = cache.lengths();
        for (std::size_t b = 0; b < B::extent; ++b)
            for (std::size_t i = 0; i < counts[b]; ++i)
                for (std::size_t c = 0; c < C::extent; ++c) x(b, i, c) = rows[b](0, starts[b] + i, c);

        const auto got = layer(x, cache, counts);
        for (std::size_t b = 0; b < B::extent; ++b) {
            INFO("seed " << seed << ", step " << step << ", batch row " << b << ": " << starts[b] << " held, "
                         << counts[b] << " of " << n << " new");
            REQUIRE(cache.lengths()[b] == starts[b] + counts[b]);
            const auto want = layer(shaped::slice<Td>(rows[b], 0, starts[b] + counts[b]));
            for (std::size_t i = 0; i < n; ++i)
                for (std::size_t d = 0; d < C::extent; ++d) {
                    if (i >= counts[b]) {
                        REQUIRE(got(b, i, d) == 0.0f);
                        continue;
                    }
                    const double w = want(0, starts[b] + i, d);
                    REQUIRE(std::abs(got(b, i, d) - w) <= tolerance * (1.0 + std::abs(w)));
                }
        }
    }
}

}  // namespace

// ---- rms_norm and nn::RMSNorm ---------------------------------------------------------------

TEMPLATE_TEST_CASE("rms_norm divides each row by its root mean square plus eps, times the weight",
                   "[llama][rms_norm]", float, double) {
    using V = TestType;
    using N = shaped::dim<"N">;
    using T = shaped::dim<"T", 3>;
    const auto n = static_cast<std::size_t>(GENERATE(1, 3, 16, 37));
    shaped::Tensor<V, B, T, N> x(N{n});
    shaped::Tensor<V, N> w(N{n});
    ref::fill(x, 1);
    ref::fill(w, 2);
    // An offset: RMSNorm keeps the mean, so a kernel that took it away (layer_norm's) would show.
    x = x + V(1.5);
    const auto want = naive_rms_norm(ref::values(x), n, ref::values(w));
    const double tol = std::is_same_v<V, float> ? 1e-5 : 1e-12;

    SECTION("into a new tensor") {
        const shaped::Tensor<V, B, T, N> y = shaped::rms_norm(x, w);
        ref::require_close(ref::values(y), want, tol);
    }
    SECTION("in place") {
        x = shaped::rms_norm(x, w);
        ref::require_close(ref::values(x), want, tol);
    }
    SECTION("eps is added to the mean square") {
        const shaped::Tensor<V, B, T, N> y = shaped::rms_norm(x, w, 0.5);
        ref::require_close(ref::values(y), naive_rms_norm(ref::values(x), n, ref::values(w), 0.5), tol);
    }
    SECTION("of an elementwise expression, inside another one") {
        const shaped::Tensor<V, B, T, N> y = shaped::rms_norm(x * V(3), w) - V(1);
        auto tripled = ref::values(x);
        for (double& v : tripled) v *= 3;
        auto shifted = naive_rms_norm(tripled, n, ref::values(w));
        for (double& v : shifted) v -= 1;
        ref::require_close(ref::values(y), shifted, tol);
    }
    SECTION("of a transposed input, whose rows are strided") {
        shaped::Tensor<V, B, N, T> stored(N{n});
        ref::fill(stored, 3);
        const auto transposed = shaped::transpose<1, 2>(stored);  // (B, T, N), N's stride T
        const shaped::Tensor<V, B, T, N> y = shaped::rms_norm(transposed, w);
        ref::require_close(ref::values(y), naive_rms_norm(ref::values(transposed), n, ref::values(w)), tol);
    }
    SECTION("of a slice, and into a strided view") {
        shaped::Tensor<V, B, T, N> storage(N{2 * n});
        ref::fill(storage, 4);
        const auto input = shaped::slice<N>(storage, n, 2 * n);
        const auto input_values = ref::values(input);
        auto out = shaped::slice<N>(storage, 0, n);
        out = shaped::rms_norm(input, w);
        ref::require_close(ref::values(out), naive_rms_norm(input_values, n, ref::values(w)), tol);
        ref::require_close(ref::values(input), input_values, 0);
    }
    SECTION("a weight of another extent is a shape_error naming both dims") {
        const shaped::Tensor<V, N> w2(N{n + 1});
        REQUIRE_THROWS_AS(shaped::rms_norm(x, w2), shaped::shape_error);
        REQUIRE_THROWS_WITH(shaped::rms_norm(x, w2),
                            "shaped::rms_norm: weight must be (C), C the input's last dim: input's N(" +
                                std::to_string(n) + "), weight's N(" + std::to_string(n + 1) + ")");
    }
}

TEMPLATE_TEST_CASE("nn::RMSNorm: weight ones, eps 1e-5 or the config's, over the last dim", "[llama][rms_norm]", float,
                   double) {
    using V = TestType;
    using C7 = shaped::dim<"C", 7>;
    shaped::Generator gen(5);
    shaped::nn::RMSNorm<C7, V> norm(gen);
    REQUIRE(ref::values(norm.weight) == std::vector<double>(7, 1.0));
    REQUIRE(norm.eps == 1e-5);
    ref::fill(norm.weight, 6);
    const double tol = std::is_same_v<V, float> ? 1e-5 : 1e-12;
    const auto t = static_cast<std::size_t>(GENERATE(1, 5, 19));
    const auto x = shaped::randn<V, B, Td, C7>(gen, Td{t});
    const shaped::Tensor<V, B, Td, C7> y = norm(x);
    ref::require_close(ref::values(y), naive_rms_norm(ref::values(x), 7, ref::values(norm.weight)), tol);
    norm.eps = 1e-2;
    const shaped::Tensor<V, B, Td, C7> z = norm(x);
    ref::require_close(ref::values(z), naive_rms_norm(ref::values(x), 7, ref::values(norm.weight), 1e-2), tol);
    // A 2-d input, and a dynamic channel dim of the wrong extent caught at run time.
    const auto rows = shaped::randn<V, Td, C7>(gen, Td{3});
    ref::require_close(ref::values(norm(rows)), naive_rms_norm(ref::values(rows), 7, ref::values(norm.weight), 1e-2),
                       tol);
    using Cd = shaped::dim<"C">;
    const auto wide = shaped::randn<V, B, Cd>(gen, Cd{8});
    REQUIRE_THROWS_AS(norm(wide), shaped::shape_error);
}

// ---- silu -----------------------------------------------------------------------------------

TEMPLATE_TEST_CASE("silu is x / (1 + exp(-x)), to both tails", "[llama][silu]", float, double) {
    using V = TestType;
    using N = shaped::dim<"N">;
    const double tol = std::is_same_v<V, float> ? 1e-6 : 1e-13;
    const auto n = static_cast<std::size_t>(GENERATE(1, 7, 64, 1001));
    shaped::Tensor<V, N> x(N{n});
    ref::fill(x, 9);
    x = x * V(4);
    std::vector<double> want;
    for (double v : ref::values(x)) want.push_back(naive_silu(v));
    ref::require_close(ref::values(shaped::silu(x)), want, tol);
    x = shaped::silu(x);
    ref::require_close(ref::values(x), want, tol);

    // Large |x|: exp(-x) overflows to inf for x far below 0, where silu is -0, not NaN; far above
    // 0 silu is x itself.
    const auto tails = shaped::tensor<V, shaped::dim<"N", 8>>({-1000, -100, -30, -0.5, 0.5, 30, 100, 1000});
    std::vector<double> want_tails;
    for (double v : ref::values(tails)) want_tails.push_back(naive_silu(v));
    const auto got = ref::values(shaped::silu(tails));
    for (double v : got) REQUIRE(std::isfinite(v));
    ref::require_close(got, want_tails, tol);
}

// ---- rotary_encoding ------------------------------------------------------------------------

namespace {

using HS8 = shaped::dim<"HS", 8>;
using NKV2 = shaped::dim<"NKV", 2>;
using NH4 = shaped::dim<"NH", 4>;

// rope on random q (B, NH, T, HS) and k (B, NKV, T, HS) at the given starts, against the naive
// rotation of each element.
template <class Encoding>
void check_rotary(const Encoding& rope, std::size_t t, const std::vector<std::size_t>& starts, std::uint64_t seed) {
    shaped::Generator gen(seed);
    auto q = shaped::randn<float, B, NH4, Td, HS8>(gen, Td{t});
    auto k = shaped::randn<float, B, NKV2, Td, HS8>(gen, Td{t});
    const naive_position p = naive_position_of(rope);
    const auto want_q = naive_rotary(ref::values(q), 4, t, 8, starts, p);
    const auto want_k = naive_rotary(ref::values(k), 2, t, 8, starts, p);
    rope(q.view(), k.view(), starts);
    INFO("R=" << Encoding::rotated << (p.halves ? " halves" : " adjacent") << ", T=" << t << ", starts " << starts[0]
              << ", " << starts[1]);
    ref::require_close(ref::values(q), want_q, tolerance);
    ref::require_close(ref::values(k), want_k, tolerance);
}

}  // namespace

TEST_CASE("rotary_encoding turns each pair by position x theta^(-2i/R), in both pairings", "[llama][rotary]") {
    const auto t = static_cast<std::size_t>(GENERATE(1, 5, 17));
    SECTION("adjacent, every channel") {
        check_rotary(shaped::nn::rotary_encoding<HS8, rotary_pairing::adjacent>{}, t, {0, 0}, 1);
    }
    SECTION("halves, every channel, another theta") {
        check_rotary(shaped::nn::rotary_encoding<HS8, rotary_pairing::halves>{.theta = 500}, t, {0, 0}, 2);
    }
    SECTION("partial: R < HS leaves the channels past R as they are") {
        check_rotary(shaped::nn::rotary_encoding<HS8, rotary_pairing::adjacent, 4>{}, t, {0, 0}, 3);
        check_rotary(shaped::nn::rotary_encoding<HS8, rotary_pairing::halves, 6>{.theta = 100}, t, {0, 0}, 4);
    }
    SECTION("ragged: each batch row from its own start") {
        check_rotary(shaped::nn::rotary_encoding<HS8, rotary_pairing::adjacent>{}, t, {3, 11}, 5);
        check_rotary(shaped::nn::rotary_encoding<HS8, rotary_pairing::halves, 4>{}, t, {7, 0}, 6);
    }
}

TEST_CASE("rotary_encoding rotates through a strided view, as attention hands it the heads", "[llama][rotary]") {
    // q stored (B, T, NH, HS), its heads viewed (B, NH, T, HS) in place.
    shaped::Generator gen(7);
    auto stored_q = shaped::randn<float, B, Td, NH4, HS8>(gen, Td{6});
    auto stored_k = shaped::randn<float, B, Td, NKV2, HS8>(gen, Td{6});
    const auto q = shaped::view_of(shaped::transpose<1, 2>(stored_q.view()));
    const auto k = shaped::view_of(shaped::transpose<1, 2>(stored_k.view()));
    const shaped::nn::rotary_encoding<HS8, rotary_pairing::halves> rope{.theta = 50};
    const std::vector<std::size_t> starts{2, 9};
    const auto want_q = naive_rotary(ref::values(q), 4, 6, 8, starts, naive_position_of(rope));
    const auto want_k = naive_rotary(ref::values(k), 2, 6, 8, starts, naive_position_of(rope));
    rope(q, k, starts);
    ref::require_close(ref::values(q), want_q, tolerance);
    ref::require_close(ref::values(k), want_k, tolerance);
}

TEST_CASE("rotary_encoding: q . k after rotation depends on the positions only through their difference",
          "[llama][rotary]") {
    using One = shaped::dim<"H", 1>;
    using T1 = shaped::dim<"T", 1>;
    shaped::Generator gen(8);
    const auto q = shaped::randn<float, B1, One, T1, HS8>(gen);
    const auto k = shaped::randn<float, B1, One, T1, HS8>(gen);
    const shaped::nn::rotary_encoding<HS8, rotary_pairing::adjacent> rope{.theta = 100};
    // q at position m, k at position n: their dot product after rotation.
    const auto score = [&](std::size_t m, std::size_t n) {
        auto qm = q, kn = k, unused = k;
        const std::array<std::size_t, 1> at_m{m}, at_n{n};
        rope(qm.view(), unused.view(), at_m);
        rope(kn.view(), unused.view(), at_n);
        double s = 0;
        for (std::size_t d = 0; d < 8; ++d) s += static_cast<double>(qm(0, 0, 0, d)) * kn(0, 0, 0, d);
        return s;
    };
    double unrotated = 0;
    for (std::size_t d = 0; d < 8; ++d) unrotated += static_cast<double>(q(0, 0, 0, d)) * k(0, 0, 0, d);
    for (std::size_t difference : {0, 1, 3, 10}) {
        const double at_origin = score(difference, 0);
        for (std::size_t shift : {1, 7, 40}) {
            INFO("m - n = " << difference << ", both shifted by " << shift);
            CHECK(std::abs(score(difference + shift, shift) - at_origin) <= 1e-4 * (1 + std::abs(at_origin)));
        }
    }
    // At equal positions the rotations cancel; at different ones they do not (the test can fail).
    CHECK(std::abs(score(5, 5) - unrotated) <= 1e-4 * (1 + std::abs(unrotated)));
    CHECK(std::abs(score(3, 0) - unrotated) > 1e-3);
}

TEST_CASE("rotary_encoding: halves is adjacent with the channels permuted", "[llama][rotary]") {
    // Channel 2i of the adjacent layout is channel i of the halves layout, 2i + 1 is i + R/2;
    // channels past R stay where they are.
    constexpr std::size_t rotated = 6, half = rotated / 2;
    const auto to_halves = [](std::size_t d) { return d >= rotated ? d : (d % 2 ? d / 2 + half : d / 2); };
    shaped::Generator gen(9);
    auto adjacent_q = shaped::randn<float, B, NH4, Td, HS8>(gen, Td{9});
    auto adjacent_k = shaped::randn<float, B, NKV2, Td, HS8>(gen, Td{9});
    auto halves_q = adjacent_q;
    auto halves_k = adjacent_k;
    for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t h = 0; h < 4; ++h)
            for (std::size_t t = 0; t < 9; ++t)
                for (std::size_t d = 0; d < 8; ++d) {
                    halves_q(b, h, t, to_halves(d)) = adjacent_q(b, h, t, d);
                    if (h < 2) halves_k(b, h, t, to_halves(d)) = adjacent_k(b, h, t, d);
                }
    const std::vector<std::size_t> starts{4, 0};
    shaped::nn::rotary_encoding<HS8, rotary_pairing::adjacent, rotated>{.theta = 300}(adjacent_q.view(), adjacent_k.view(),
                                                                                    starts);
    shaped::nn::rotary_encoding<HS8, rotary_pairing::halves, rotated>{.theta = 300}(halves_q.view(), halves_k.view(),
                                                                                  starts);
    for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t h = 0; h < 4; ++h)
            for (std::size_t t = 0; t < 9; ++t)
                for (std::size_t d = 0; d < 8; ++d) {
                    INFO("b " << b << ", h " << h << ", t " << t << ", adjacent channel " << d);
                    REQUIRE(std::abs(halves_q(b, h, t, to_halves(d)) - adjacent_q(b, h, t, d)) <= 1e-6);
                    if (h < 2) REQUIRE(std::abs(halves_k(b, h, t, to_halves(d)) - adjacent_k(b, h, t, d)) <= 1e-6);
                }
}

// ---- GroupedQueryAttention ------------------------------------------------------------------

TEST_CASE("GroupedQueryAttention: parameters have Meta's names and layouts, the cache NKV heads", "[llama][gqa]") {
    using Q = shaped::dim<"Q", 16>;
    using KV = shaped::dim<"KV", 8>;
    using NKV = shaped::dim<"NKV", 2>;
    const Gqa<2> gqa;
    static_assert(std::is_same_v<decltype(gqa.wq.weight), shaped::Tensor<float, Q, C>>);
    static_assert(std::is_same_v<decltype(gqa.wk.weight), shaped::Tensor<float, KV, C>>);
    static_assert(std::is_same_v<decltype(gqa.wv.weight), shaped::Tensor<float, KV, C>>);
    static_assert(std::is_same_v<decltype(gqa.wo.weight), shaped::Tensor<float, C, Q>>);
    static_assert(!decltype(gqa.wq)::has_bias && !decltype(gqa.wo)::has_bias);
    static_assert(Gqa<2>::group_dim::extent == 2 && Gqa<1>::group_dim::extent == 4 && Gqa<4>::group_dim::extent == 1);
    static_assert(std::is_same_v<Gqa<2>::cache_type<B, S>, shaped::nn::KVCache<float, B, NKV, S, HS>>);

    // NH / NKV times smaller than a cache of every head's, MultiHeadAttention's of the same sizes.
    using Mha = shaped::nn::MultiHeadAttention<C, NH, HS>;
    constexpr std::size_t mha_bytes = Mha::cache_type<B, S>::bytes;
    STATIC_REQUIRE(mha_bytes == 2 * 2 * 4 * 24 * 4 * sizeof(float));
    STATIC_REQUIRE(Gqa<4>::cache_type<B, S>::bytes == mha_bytes);
    STATIC_REQUIRE(Gqa<2>::cache_type<B, S>::bytes * 2 == mha_bytes);
    STATIC_REQUIRE(Gqa<1>::cache_type<B, S>::bytes * 4 == mha_bytes);
}

TEMPLATE_TEST_CASE("GroupedQueryAttention: the full causal forward matches repeated key/value heads, naively",
                   "[llama][gqa]", Gqa<4>, Gqa<2>, Gqa<1>, (Gqa<4, Rope>), (Gqa<2, Rope>), (Gqa<1, Rope>),
                   (Gqa<2, RopeHalvesPartial>)) {
    using Layer = TestType;
    for (std::uint64_t seed : {1, 2}) {
        const auto layer = random_attention<Layer>(seed, seed == 1 ? 10000 : 30);
        for (std::size_t t : {1, 6, 19}) {
            shaped::Generator gen(seed + 10);
            const auto x = shaped::randn<float, B, Td, C>(gen, Td{t});
            const auto out = layer(x);
            static_assert(std::is_same_v<decltype(out), const shaped::Tensor<float, B, Td, C>>);
            INFO("NKV=" << Layer::kv_heads_dim::extent << ", seed " << seed << ", T=" << t);
            ref::require_close(ref::values(out), naive_grouped_attention(layer, ref::values(x), 2, t), tolerance);
        }
    }
}

TEST_CASE("GroupedQueryAttention: the cache holds the NKV key/value heads, rotated", "[llama][gqa]") {
    const auto layer = random_attention<Gqa<2, Rope>>(3, 50);
    shaped::Generator gen(4);
    const auto x = shaped::randn<float, B, Td, C>(gen, Td{5});
    Gqa<2, Rope>::cache_type<B, S> cache;
    layer(x, cache);
    REQUIRE(cache.keys().extents() == std::array<std::size_t, 4>{2, 2, 5, 4});
    // The projections split into heads (batch, NKV, t, HS); keys rotated, values as projected.
    const auto heads = [](const std::vector<double>& projected) {
        std::vector<double> h(projected.size());
        for (std::size_t b = 0; b < 2; ++b)
            for (std::size_t g = 0; g < 2; ++g)
                for (std::size_t t = 0; t < 5; ++t)
                    for (std::size_t d = 0; d < 4; ++d)
                        h[((b * 2 + g) * 5 + t) * 4 + d] = projected[((b * 5 + t) * 2 + g) * 4 + d];
        return h;
    };
    const auto keys = heads(naive_linear(ref::values(x), 16, ref::values(layer.wk.weight), 8));
    const auto values = heads(naive_linear(ref::values(x), 16, ref::values(layer.wv.weight), 8));
    ref::require_close(ref::values(cache.keys()),
                       naive_rotary(keys, 2, 5, 4, {0, 0}, naive_position_of(layer.position())), tolerance);
    ref::require_close(ref::values(cache.values()), values, tolerance);
}

TEMPLATE_TEST_CASE("GroupedQueryAttention: cached decoding equals the full forward, chunked and ragged",
                   "[llama][gqa]", Gqa<4>, Gqa<1>, (Gqa<2, Rope>), (Gqa<1, Rope>), (Gqa<2, RopeHalvesPartial>)) {
    using Layer = TestType;
    using Cache = typename Layer::template cache_type<B, S>;
    for (std::uint64_t seed = 500; seed < 510; ++seed) {
        const auto layer = random_attention<Layer>(seed, 1000);
        decode_in_random_chunks<Layer, Cache>(layer, seed);
    }
    for (std::uint64_t seed = 600; seed < 605; ++seed) {
        const auto layer = random_attention<Layer>(seed, 1000);
        decode_ragged<Layer, Cache>(layer, seed);
    }
}

TEST_CASE("GroupedQueryAttention: a long context decoded chunk by chunk, against the naive forward", "[llama][gqa]") {
    using Long = shaped::dim<"S", 96>;
    const auto layer = random_attention<Gqa<2, Rope>>(9, 10000);
    shaped::Generator gen(10);
    const auto x = shaped::randn<float, B, Td, C>(gen, Td{96});
    const auto want = naive_grouped_attention(layer, ref::values(x), 2, 96);
    Gqa<2, Rope>::cache_type<B, Long> cache;
    std::vector<double> got(want.size());
    for (std::size_t pos = 0; pos < 96; pos += 32) {
        const auto out = layer(shaped::slice<Td>(x, pos, pos + 32), cache);
        for (std::size_t b = 0; b < 2; ++b)
            for (std::size_t i = 0; i < 32; ++i)
                for (std::size_t c = 0; c < 16; ++c) got[(b * 96 + pos + i) * 16 + c] = out(b, i, c);
    }
    ref::require_close(got, want, tolerance);
}

// ---- SwiGLU and LlamaBlock ------------------------------------------------------------------

TEST_CASE("nn::SwiGLU is w2(silu(w1 x) * w3 x), and add_to accumulates it", "[llama][swiglu]") {
    using Ff = shaped::nn::SwiGLU<C, Hidden>;
    static_assert(std::is_same_v<decltype(Ff{}.w1.weight), shaped::Tensor<float, Hidden, C>>);
    static_assert(std::is_same_v<decltype(Ff{}.w2.weight), shaped::Tensor<float, C, Hidden>>);
    static_assert(std::is_same_v<decltype(Ff{}.w3.weight), shaped::Tensor<float, Hidden, C>>);
    shaped::Generator gen(11);
    Ff ff(gen);
    // Wider than PyTorch's initialisation, so that the gate reaches silu's curved part.
    ref::fill(ff.w1.weight, 12);
    const auto t = static_cast<std::size_t>(GENERATE(1, 4, 23));
    const auto x = shaped::randn<float, B, Td, C>(gen, Td{t});
    const auto want = naive_swiglu(ff, ref::values(x));
    const auto y = ff(x);
    STATIC_REQUIRE(std::is_same_v<std::remove_cvref_t<decltype(y)>, shaped::Tensor<float, B, Td, C>>);
    ref::require_close(ref::values(y), want, tolerance);

    auto out = shaped::randn<float, B, Td, C>(gen, Td{t});
    auto sum = ref::values(out);
    for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += want[i];
    ff.add_to(out, x);
    ref::require_close(ref::values(out), sum, tolerance);

    // A 2-d input, rows of C.
    const auto rows = shaped::randn<float, Td, C>(gen, Td{3});
    ref::require_close(ref::values(ff(rows)), naive_swiglu(ff, ref::values(rows)), tolerance);
}

namespace {

template <std::size_t KV, class Position = Rope>
using Llama = shaped::nn::LlamaBlock<C, NH, shaped::dim<"NKV", KV>, HS, Hidden, Position>;

// A block with every parameter random (RMSNorm's ones would hide a swapped weight).
template <class Block>
Block random_llama_block(std::uint64_t seed) {
    shaped::Generator gen(seed);
    Block block(gen);
    block.attention = random_attention<typename Block::attention_type>(seed + 1, 500);
    ref::fill(block.feed_forward.w1.weight, seed + 2);
    ref::fill(block.attention_norm.weight, seed + 3);
    ref::fill(block.ffn_norm.weight, seed + 4);
    block.ffn_norm.eps = 1e-3;
    return block;
}

}  // namespace

TEMPLATE_TEST_CASE("LlamaBlock is x + attention(attention_norm(x)), then + feed_forward(ffn_norm(.)), naively",
                   "[llama][block]", Llama<2>, (Llama<1, shaped::nn::no_position_encoding>)) {
    using Block = TestType;
    for (std::uint64_t seed : {1, 2}) {
        const auto block = random_llama_block<Block>(seed);
        for (std::size_t t : {1, 7, 20}) {
            shaped::Generator gen(seed + 20);
            const auto x = shaped::randn<float, B, Td, C>(gen, Td{t});
            const auto out = block(x);
            STATIC_REQUIRE(std::is_same_v<std::remove_cvref_t<decltype(out)>, shaped::Tensor<float, B, Td, C>>);
            INFO("NKV=" << Block::kv_heads_dim::extent << ", seed " << seed << ", T=" << t);
            ref::require_close(ref::values(out), naive_llama_block(block, ref::values(x), 2, t), tolerance);
        }
    }
}

TEST_CASE("LlamaBlock: cached decoding equals the full forward, chunked and ragged", "[llama][block]") {
    using Block = Llama<2>;
    using Cache = Block::cache_type<B, S>;
    static_assert(std::is_same_v<Cache, shaped::nn::KVCache<float, B, shaped::dim<"NKV", 2>, S, HS>>);
    for (std::uint64_t seed = 700; seed < 708; ++seed) decode_in_random_chunks<Block, Cache>(random_llama_block<Block>(seed), seed);
    for (std::uint64_t seed = 800; seed < 804; ++seed) decode_ragged<Block, Cache>(random_llama_block<Block>(seed), seed);
}
