// The cached decode path: KVCache on its own, then Head, MultiHeadAttention and a layer of the user's, whose full
// causal forward is checked against naive loops and whose cached decoding is checked against
// the full forward over the same prefix, at every step, over random weights, lengths up to the
// capacity, chunkings and ragged batches.
#include "parameter_names.hpp"
#include "reference.hpp"

#include <shaped/shaped.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using B = shaped::dim<"B", 2>;
using B1 = shaped::dim<"B", 1>;
using T = shaped::dim<"T">;
using S = shaped::dim<"S", 24>;
using Sd = shaped::dim<"S">;
using C = shaped::dim<"C", 12>;
using NH = shaped::dim<"NH", 3>;
using HS = shaped::dim<"HS", 4>;
using H = shaped::dim<"H", 16>;

using HeadLayer = shaped::nn::Head<C, H>;
using HeadCache = HeadLayer::cache_type<B, S>;
using MultiHead = shaped::nn::MultiHeadAttention<C, NH, HS>;
using MultiHeadCache = MultiHead::cache_type<B, S>;

constexpr double tolerance = 1e-5;

// ---- naive references, in double, from the definitions -----------------------------------------

// x (rows x in) @ w^T (w: out x in) + bias, each row.
std::vector<double> linear(const std::vector<double>& x, std::size_t rows, std::size_t in,
                           const std::vector<double>& w, std::size_t out, const std::vector<double>& bias) {
    std::vector<double> y(rows * out);
    for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t o = 0; o < out; ++o) {
            double s = bias.empty() ? 0.0 : bias[o];
            for (std::size_t i = 0; i < in; ++i) s += x[r * in + i] * w[o * in + i];
            y[r * out + o] = s;
        }
    return y;
}

// Causal attention of one sequence: q, k, v are (t x width) with row stride `stride` starting at
// their offsets; the result (t x width) goes to out with the same stride and out_offset.
void causal_attention(const std::vector<double>& qkv, std::size_t t, std::size_t width, std::size_t stride,
                      std::size_t q_at, std::size_t k_at, std::size_t v_at, std::vector<double>& out,
                      std::size_t out_stride, std::size_t out_at, double scale = 0) {
    if (scale == 0) scale = 1.0 / std::sqrt(static_cast<double>(width));   // the default, HS^-0.5
    for (std::size_t i = 0; i < t; ++i) {
        std::vector<double> w(i + 1);
        double max = -INFINITY;
        for (std::size_t j = 0; j <= i; ++j) {
            double s = 0;
            for (std::size_t d = 0; d < width; ++d) s += qkv[i * stride + q_at + d] * qkv[j * stride + k_at + d];
            w[j] = s * scale;
            max = std::max(max, w[j]);
        }
        double z = 0;
        for (double& e : w) z += (e = std::exp(e - max));
        for (std::size_t d = 0; d < width; ++d) {
            double s = 0;
            for (std::size_t j = 0; j <= i; ++j) s += w[j] / z * qkv[j * stride + v_at + d];
            out[i * out_stride + out_at + d] = s;
        }
    }
}

// The chapter's head over x (batch x t x C).
std::vector<double> naive_head(const HeadLayer& head, const std::vector<double>& x, std::size_t batch, std::size_t t) {
    const std::size_t c = C::extent, h = H::extent;
    std::vector<double> out(batch * t * h);
    for (std::size_t b = 0; b < batch; ++b) {
        const std::vector<double> xb(x.begin() + b * t * c, x.begin() + (b + 1) * t * c);
        const auto k = linear(xb, t, c, ref::values(head.key.weight), h, {});
        const auto q = linear(xb, t, c, ref::values(head.query.weight), h, {});
        const auto v = linear(xb, t, c, ref::values(head.value.weight), h, {});
        std::vector<double> qkv(t * 3 * h);
        for (std::size_t i = 0; i < t; ++i)
            for (std::size_t d = 0; d < h; ++d) {
                qkv[i * 3 * h + d] = q[i * h + d];
                qkv[i * 3 * h + h + d] = k[i * h + d];
                qkv[i * 3 * h + 2 * h + d] = v[i * h + d];
            }
        std::vector<double> y(t * h);
        causal_attention(qkv, t, h, 3 * h, 0, h, 2 * h, y, h, 0);
        std::copy(y.begin(), y.end(), out.begin() + b * t * h);
    }
    return out;
}

// nanoGPT's CausalSelfAttention over x (batch x t x C): qkv, heads, attention, output projection.
// A layer with nanoGPT's parameters (c_attn, c_proj); scale 0 is HS^-0.5.
template <class Layer>
std::vector<double> naive_multi_head(const Layer& mha, const std::vector<double>& x, std::size_t batch, std::size_t t,
                                     double scale = 0) {
    const std::size_t c = C::extent, hs = HS::extent;
    std::vector<double> out(batch * t * c);
    for (std::size_t b = 0; b < batch; ++b) {
        const std::vector<double> xb(x.begin() + b * t * c, x.begin() + (b + 1) * t * c);
        const auto qkv = linear(xb, t, c, ref::values(mha.c_attn.weight), 3 * c, ref::values(mha.c_attn.bias));
        std::vector<double> y(t * c);
        for (std::size_t h = 0; h < NH::extent; ++h)
            causal_attention(qkv, t, hs, 3 * c, h * hs, c + h * hs, 2 * c + h * hs, y, c, h * hs, scale);
        const auto o = linear(y, t, c, ref::values(mha.c_proj.weight), c, ref::values(mha.c_proj.bias));
        std::copy(o.begin(), o.end(), out.begin() + b * t * c);
    }
    return out;
}

// ---- helpers -----------------------------------------------------------------------------------

// Cached decoding of x in random chunks against the full causal forward over each prefix.
template <class Layer, class Cache>
void decode_in_random_chunks(const Layer& layer, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    const std::size_t total = 1 + rng() % Cache::capacity;
    shaped::Generator gen(seed);
    const auto x = shaped::randn<float, B, T, C>(gen, T{total});
    Cache cache;
    // A prompt first (prefill), then steps of one position or a few (chunks).
    std::size_t pos = 0;
    while (pos < total) {
        const std::size_t left = total - pos;
        const std::size_t n = pos == 0 ? 1 + rng() % left : (rng() % 2 ? 1 : 1 + rng() % std::min<std::size_t>(left, 5));
        const auto chunk = shaped::slice<T>(x, pos, pos + n);
        const auto got = layer(chunk, cache);
        REQUIRE(cache.length() == pos + n);
        const auto prefix = shaped::slice<T>(x, 0, pos + n);
        const auto want = layer(prefix);
        INFO("seed " << seed << ", " << pos << " positions held, " << n << " new");
        ref::require_rows_match(got, want, pos);
        pos += n;
    }
}

// A ragged batch: each row has its own sequence and takes a random number of positions per
// step (padding fills the rest of the step's input); each row's outputs must equal the full
// forward over its own prefix, and its padding outputs must be zero.
template <class Layer, class Cache>
void decode_ragged(const Layer& layer, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    shaped::Generator gen(seed);
    std::vector<shaped::Tensor<float, B1, T, C>> rows;
    for (std::size_t b = 0; b < B::extent; ++b)
        rows.push_back(shaped::randn<float, B1, T, C>(gen, T{Cache::capacity}));
    Cache cache;
    for (int step = 0; step < 12; ++step) {
        const std::size_t n = 1 + rng() % 4;
        typename Cache::lengths_type counts{};
        for (std::size_t b = 0; b < B::extent; ++b)
            counts[b] = std::min<std::size_t>(rng() % (n + 1), Cache::capacity - cache.lengths()[b]);
        // Row b's next counts[b] positions, then padding that must not matter.
        auto x = shaped::randn<float, B, T, C>(gen, T{n});
        const auto starts = cache.lengths();
        for (std::size_t b = 0; b < B::extent; ++b)
            for (std::size_t i = 0; i < counts[b]; ++i)
                for (std::size_t c = 0; c < C::extent; ++c) x(b, i, c) = rows[b](0, starts[b] + i, c);

        const auto got = layer(x, cache, counts);
        for (std::size_t b = 0; b < B::extent; ++b) {
            INFO("seed " << seed << ", step " << step << ", batch row " << b << ": " << starts[b] << " held, "
                         << counts[b] << " of " << n << " new");
            REQUIRE(cache.lengths()[b] == starts[b] + counts[b]);
            const auto own = shaped::slice<T>(rows[b], 0, starts[b] + counts[b]);
            const auto want = layer(own);
            for (std::size_t i = 0; i < n; ++i)
                for (std::size_t d = 0; d < got.extents()[2]; ++d) {
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

// ---- KVCache -------------------------------------------------------------------------------------

TEST_CASE("KVCache: its type carries capacity, batch, heads and head size", "[decode][cache]") {
    using Cache = shaped::nn::KVCache<float, B, NH, S, HS>;
    static_assert(Cache::capacity == 24 && Cache::batch == 2 && Cache::has_heads);
    static_assert(Cache::bytes == 2 * 2 * 3 * 24 * 4 * sizeof(float));
    static_assert(shaped::nn::KVCache<double, B1, S, H>::bytes == 2 * 24 * 16 * sizeof(double));
    static_assert(std::is_same_v<decltype(std::declval<const Cache&>().keys()), shaped::View<const float, B, NH, Sd, HS>>);
    static_assert(std::is_same_v<HeadCache, shaped::nn::KVCache<float, B, S, H>>);
    static_assert(std::is_same_v<MultiHeadCache, Cache>);

    const Cache cache;
    REQUIRE(cache.empty());
    REQUIRE(cache.length() == 0);
    REQUIRE(cache.keys().extents() == std::array<std::size_t, 4>{2, 3, 0, 4});
}

TEST_CASE("KVCache: append writes the new rows in place and keys() views the filled prefix", "[decode][cache]") {
    shaped::Generator gen(11);
    shaped::nn::KVCache<float, B, NH, S, HS> cache;
    const float* storage = cache.keys().data();
    const auto k1 = shaped::randn<float, B, NH, T, HS>(gen, T{5});
    const auto v1 = shaped::randn<float, B, NH, T, HS>(gen, T{5});
    cache.append(k1, v1);
    // One token, given as a transposed view (B, T, NH, HS) -> (B, NH, T, HS), as attention makes it.
    const auto k2 = shaped::randn<float, B, T, NH, HS>(gen, T{1});
    const auto v2 = shaped::randn<float, B, T, NH, HS>(gen, T{1});
    cache.append(shaped::transpose<1, 2>(k2), shaped::transpose<1, 2>(v2));

    REQUIRE(cache.length() == 6);
    REQUIRE(cache.lengths() == std::array<std::size_t, 2>{6, 6});
    const auto keys = cache.keys();
    const auto values = cache.values();
    REQUIRE(keys.extents() == std::array<std::size_t, 4>{2, 3, 6, 4});
    // The storage allocated at construction is the storage read now: nothing was reallocated.
    REQUIRE(keys.data() == storage);
    for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t h = 0; h < 3; ++h)
            for (std::size_t d = 0; d < 4; ++d) {
                for (std::size_t t = 0; t < 5; ++t) {
                    REQUIRE(keys(b, h, t, d) == k1(b, h, t, d));
                    REQUIRE(values(b, h, t, d) == v1(b, h, t, d));
                }
                REQUIRE(keys(b, h, 5, d) == k2(b, 0, h, d));
                REQUIRE(values(b, h, 5, d) == v2(b, 0, h, d));
            }
}

TEST_CASE("KVCache: the filled prefix is an ordinary operand of shaped expressions", "[decode][cache]") {
    shaped::Generator gen(12);
    shaped::nn::KVCache<float, B1, S, H> cache;
    const auto k = shaped::randn<float, B1, T, H>(gen, T{7});
    cache.append(k, k * 2.0f);
    const auto q = shaped::randn<float, B1, T, H>(gen, T{1});
    // One query against every cached key: (B, 1, H) @ (B, H, S) -> (B, 1, S).
    const shaped::Tensor<float, B1, T, Sd> scores = shaped::matmul(q, cache.keys().mT());
    const shaped::Tensor<float, B1, T, H> mixed = shaped::matmul(shaped::softmax<-1>(scores), cache.values());
    REQUIRE(scores.extents() == std::array<std::size_t, 3>{1, 1, 7});
    const auto want_scores = ref::matmul(ref::values(q), ref::transpose(ref::values(k), 1, 7, 16), 1, 1, 7, 16, 0, 0);
    ref::require_close(ref::values(scores), want_scores, ref::tolerance<float>(16));
    const auto weights = ref::softmax(want_scores, {1, 7, 1});
    std::vector<double> twice = ref::values(k);
    for (double& e : twice) e *= 2;
    ref::require_close(ref::values(mixed), ref::matmul(weights, twice, 1, 1, 16, 7, 0, 0), ref::tolerance<float>(7));
}

TEST_CASE("KVCache: appending past the capacity throws, naming it, and changes nothing", "[decode][cache]") {
    shaped::Generator gen(13);
    shaped::nn::KVCache<float, B, S, H> cache;
    // Ragged: row 0 holds 22 of 24 positions, row 1 holds 2, so that keys() shows row 1's
    // unfilled storage too: nothing of it may change either.
    const auto k = shaped::randn<float, B, T, H>(gen, T{22});
    cache.append(k, k, std::array<std::size_t, 2>{22, 2});
    const auto keys_before = ref::values(cache.keys());
    const auto values_before = ref::values(cache.values());

    const auto more = shaped::randn<float, B, T, H>(gen, T{3});
    REQUIRE_THROWS_AS(cache.append(more, more), shaped::nn::cache_overflow);
    REQUIRE_THROWS_WITH(cache.append(more, more),
                        "shaped::nn::KVCache::append: 3 new positions after the 22 held in batch row 0 would exceed "
                        "the capacity S(24)");
    REQUIRE(cache.lengths() == std::array<std::size_t, 2>{22, 2});
    REQUIRE(ref::values(cache.keys()) == keys_before);
    REQUIRE(ref::values(cache.values()) == values_before);

    // What fits still goes in.
    cache.append(more, more, std::array<std::size_t, 2>{2, 3});
    REQUIRE(cache.lengths() == std::array<std::size_t, 2>{24, 5});
    REQUIRE_THROWS_WITH(cache.append(shaped::slice<T>(more, 0, 1), shaped::slice<T>(more, 0, 1)),
                        Catch::Contains("1 new position after the 24 held") && Catch::Contains("capacity S(24)"));
}

TEST_CASE("KVCache: extents the types leave open are checked at run time, before any write", "[decode][cache]") {
    using Bd = shaped::dim<"B">;
    shaped::Generator gen(14);
    shaped::nn::KVCache<float, B, S, H> cache;
    const auto three_rows = shaped::randn<float, Bd, T, H>(gen, Bd{3}, T{2});
    REQUIRE_THROWS_WITH(cache.append(three_rows, three_rows),
                        "shaped::nn::KVCache::append: the new keys' or values' dims do not meet the cache's (batch, "
                        "heads, head size): cache B(2), new keys' B(3)");
    const auto k = shaped::randn<float, B, T, H>(gen, T{2});
    const auto v = shaped::randn<float, B, T, H>(gen, T{3});
    REQUIRE_THROWS_WITH(cache.append(k, v), "shaped::nn::KVCache::append: the new keys and values hold different "
                                            "numbers of positions: keys T(2), values T(3)");
    REQUIRE_THROWS_WITH(cache.append(k, k, std::array<std::size_t, 2>{1, 3}),
                        "shaped::nn::KVCache::append: batch row 1 takes 3 of 2 new positions");
    REQUIRE(cache.empty());
}

TEST_CASE("KVCache: reset empties it, and the storage is used again from the start", "[decode][cache]") {
    shaped::Generator gen(15);
    shaped::nn::KVCache<float, B, S, H> cache;
    const auto k = shaped::randn<float, B, T, H>(gen, T{24});
    cache.append(k, k);
    const float* storage = cache.keys().data();
    cache.reset();
    REQUIRE(cache.empty());
    REQUIRE(cache.keys().extents()[1] == 0);
    const auto again = shaped::randn<float, B, T, H>(gen, T{4});
    cache.append(again, again);
    REQUIRE(cache.keys().data() == storage);
    REQUIRE(ref::values(cache.keys()) == ref::values(again));
}

// ---- Head ----------------------------------------------------------------------------------------

TEST_CASE("Head: parameters have PyTorch's names and layouts", "[decode][head]") {
    const HeadLayer head;
    static_assert(std::is_same_v<decltype(head.key.weight), shaped::Tensor<float, H, C>>);
    static_assert(std::is_same_v<decltype(head.query.weight), shaped::Tensor<float, H, C>>);
    static_assert(std::is_same_v<decltype(head.value.weight), shaped::Tensor<float, H, C>>);
    static_assert(!decltype(head.key)::has_bias);
    SUCCEED();
}

TEST_CASE("Head: the full causal forward matches the naive head", "[decode][head]") {
    for (std::uint64_t seed : {1, 2, 3}) {
        shaped::Generator gen(seed);
        const HeadLayer head(gen);
        for (std::size_t t : {1, 4, 17}) {
            const auto x = shaped::randn<float, B, T, C>(gen, T{t});
            const auto out = head(x);
            static_assert(std::is_same_v<decltype(out), const shaped::Tensor<float, B, T, H>>);
            INFO("seed " << seed << ", T=" << t);
            ref::require_close(ref::values(out), naive_head(head, ref::values(x), 2, t), tolerance);
        }
    }
}

TEST_CASE("Head: the chapter's head, weights from PyTorch, gives PyTorch's output", "[decode][head]") {
    using Bc = shaped::dim<"B", 2>;
    using Tc = shaped::dim<"T", 4>;
    using Cc = shaped::dim<"C", 6>;
    const std::string fixtures = std::string(SHAPED_TEST_DATA_DIR) + "/../../parity/fixtures/";
    shaped::nn::Head<Cc, H> head;
    head.key.weight = shaped::io::load_npy<float, H, Cc>(fixtures + "key_weight.npy");
    head.query.weight = shaped::io::load_npy<float, H, Cc>(fixtures + "query_weight.npy");
    head.value.weight = shaped::io::load_npy<float, H, Cc>(fixtures + "value_weight.npy");
    const auto x = shaped::io::load_npy<float, Bc, Tc, Cc>(fixtures + "x.npy");
    const auto want = shaped::io::load_npy<float, Bc, Tc, H>(fixtures + "out_scaled.npy");
    ref::require_close(ref::values(head(x)), ref::values(want), tolerance);

    // Decoded one token at a time, the same numbers.
    shaped::nn::Head<Cc, H>::cache_type<Bc, shaped::dim<"S", 4>> cache;
    for (std::size_t t = 0; t < 4; ++t) {
        const auto out = head(shaped::slice<Tc>(x, t, t + 1), cache);
        ref::require_rows_match(out, want, t);
    }
}

TEST_CASE("Head: the cache holds the keys and values the head projects", "[decode][head]") {
    shaped::Generator gen(4);
    const HeadLayer head(gen);
    const auto x = shaped::randn<float, B, T, C>(gen, T{6});
    HeadCache cache;
    head(x, cache);
    ref::require_close(ref::values(cache.keys()), ref::values(head.key(x)), tolerance);
    ref::require_close(ref::values(cache.values()), ref::values(head.value(x)), tolerance);
}

TEST_CASE("Head: cached decoding equals the full forward over the prefix, at every step", "[decode][head]") {
    for (std::uint64_t seed = 100; seed < 120; ++seed) {
        shaped::Generator gen(seed);
        const HeadLayer head(gen);
        decode_in_random_chunks<HeadLayer, HeadCache>(head, seed);
    }
}

TEST_CASE("Head: a ragged batch decodes each row as if it were alone", "[decode][head]") {
    for (std::uint64_t seed = 200; seed < 210; ++seed) {
        shaped::Generator gen(seed);
        const HeadLayer head(gen);
        decode_ragged<HeadLayer, HeadCache>(head, seed);
    }
}

TEST_CASE("Head: a step past the capacity throws and leaves the cache as it was", "[decode][head]") {
    shaped::Generator gen(5);
    const HeadLayer head(gen);
    HeadCache cache;
    const auto prompt = shaped::randn<float, B, T, C>(gen, T{23});
    head(prompt, cache);
    const auto two = shaped::randn<float, B, T, C>(gen, T{2});
    const auto keys_before = ref::values(cache.keys());
    REQUIRE_THROWS_AS(head(two, cache), shaped::nn::cache_overflow);
    REQUIRE(cache.length() == 23);
    REQUIRE(ref::values(cache.keys()) == keys_before);
    head(shaped::slice<T>(two, 0, 1), cache);
    REQUIRE(cache.length() == 24);
}

// ---- MultiHeadAttention --------------------------------------------------------------------------

TEST_CASE("MultiHeadAttention: parameters have PyTorch's names and layouts", "[decode][mha]") {
    using QKV = shaped::dim<"QKV", 36>;
    const MultiHead mha;
    static_assert(std::is_same_v<decltype(mha.c_attn.weight), shaped::Tensor<float, QKV, C>>);
    static_assert(std::is_same_v<decltype(mha.c_attn.bias), shaped::Tensor<float, QKV>>);
    static_assert(std::is_same_v<decltype(mha.c_proj.weight), shaped::Tensor<float, C, C>>);
    static_assert(std::is_same_v<decltype(mha.c_proj.bias), shaped::Tensor<float, C>>);
    const shaped::nn::MultiHeadAttention<C, NH, HS, false> plain;
    static_assert(!decltype(plain.c_attn)::has_bias && !decltype(plain.c_proj)::has_bias);
    SUCCEED();
}

TEST_CASE("MultiHeadAttention: the full causal forward matches nanoGPT's, naively", "[decode][mha]") {
    for (std::uint64_t seed : {1, 2, 3}) {
        shaped::Generator gen(seed);
        const MultiHead mha(gen);
        for (std::size_t t : {1, 5, 19}) {
            const auto x = shaped::randn<float, B, T, C>(gen, T{t});
            const auto out = mha(x);
            static_assert(std::is_same_v<decltype(out), const shaped::Tensor<float, B, T, C>>);
            INFO("seed " << seed << ", T=" << t);
            ref::require_close(ref::values(out), naive_multi_head(mha, ref::values(x), 2, t), tolerance);
        }
    }
}

TEST_CASE("MultiHeadAttention: the cache holds each head's keys and values, split from c_attn", "[decode][mha]") {
    shaped::Generator gen(6);
    const MultiHead mha(gen);
    const auto x = shaped::randn<float, B, T, C>(gen, T{5});
    MultiHeadCache cache;
    mha(x, cache);
    const shaped::Tensor<float, B, T, MultiHead::fused_dim> qkv = mha.c_attn(x);
    const auto keys = cache.keys();
    const auto values = cache.values();
    for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t h = 0; h < 3; ++h)
            for (std::size_t t = 0; t < 5; ++t)
                for (std::size_t d = 0; d < 4; ++d) {
                    REQUIRE(keys(b, h, t, d) == qkv(b, t, 12 + h * 4 + d));
                    REQUIRE(values(b, h, t, d) == qkv(b, t, 24 + h * 4 + d));
                }
}

TEST_CASE("MultiHeadAttention: cached decoding equals the full forward over the prefix, at every step",
          "[decode][mha]") {
    for (std::uint64_t seed = 300; seed < 320; ++seed) {
        shaped::Generator gen(seed);
        const MultiHead mha(gen);
        decode_in_random_chunks<MultiHead, MultiHeadCache>(mha, seed);
    }
    // Without biases, too.
    shaped::Generator gen(320);
    const shaped::nn::MultiHeadAttention<C, NH, HS, false> plain(gen);
    decode_in_random_chunks<decltype(plain), MultiHeadCache>(plain, 320);
}

TEST_CASE("MultiHeadAttention: a ragged batch decodes each row as if it were alone", "[decode][mha]") {
    for (std::uint64_t seed = 400; seed < 410; ++seed) {
        shaped::Generator gen(seed);
        const MultiHead mha(gen);
        decode_ragged<MultiHead, MultiHeadCache>(mha, seed);
    }
}

TEST_CASE("MultiHeadAttention: a long context, chunk by chunk, against the naive forward", "[decode][mha]") {
    using Long = shaped::dim<"S", 160>;
    shaped::Generator gen(7);
    const MultiHead mha(gen);
    const auto x = shaped::randn<float, B, T, C>(gen, T{160});
    const auto want = naive_multi_head(mha, ref::values(x), 2, 160);
    MultiHead::cache_type<B, Long> cache;
    std::vector<double> got(want.size());
    for (std::size_t pos = 0; pos < 160; pos += 32) {
        const auto out = mha(shaped::slice<T>(x, pos, pos + 32), cache);
        for (std::size_t b = 0; b < 2; ++b)
            for (std::size_t i = 0; i < 32; ++i)
                for (std::size_t c = 0; c < 12; ++c) got[(b * 160 + pos + i) * 12 + c] = out(b, i, c);
    }
    ref::require_close(got, want, tolerance);
}

// ---- a layer of the user's, through nn::causal_layer -----------------------------------------------

namespace {
// nanoGPT's attention as a user writes it from the guide, scaled as muP scales attention, by
// 1 / HS instead of HS^-0.5: its calls are nn::causal_layer's, its routine the library's.
struct MuPAttention : shaped::nn::causal_layer<MuPAttention> {
    using value_type = float;
    using channel_dim = C;
    using heads_dim = NH;
    using head_size_dim = HS;
    using merged_dim = C;
    using fused_dim = MultiHead::fused_dim;

    explicit MuPAttention(shaped::Generator& gen) : c_attn(gen), c_proj(gen) {}
    BOOST_HANA_DEFINE_STRUCT(MuPAttention,
        (shaped::nn::Linear<C, fused_dim>, c_attn),
        (shaped::nn::Linear<C, C>, c_proj));

    float scale() const { return 1.0f / HS::extent; }
    template <class X>
    auto project(const X& x) const { return eval(c_attn(x)); }
    // The heads as nn::MultiHeadAttention views them, borrowed: only the scale is this layer's.
    template <class QKV>
    static auto heads(QKV& qkv) { return MultiHead::heads(qkv); }
    shaped::nn::no_position_encoding encode_positions;
    template <class M>
    static auto heads_of(M& merged) { return MultiHead::heads_of(merged); }
    template <class M>
    auto project_out(const M& merged) const { return eval(c_proj(merged)); }
};
}  // namespace

TEST_CASE("a user's layer: its own scale, the full forward against the naive one", "[decode][user]") {
    shaped::Generator gen(11);
    const MuPAttention layer(gen);
    const auto x = shaped::randn<float, B, T, C>(gen, T{9});
    const auto got = layer(x);
    ref::require_close(ref::values(got), naive_multi_head(layer, ref::values(x), 2, 9, 1.0 / HS::extent), tolerance);
    // The scale is the layer's: the default's numbers are not these.
    const auto plain = naive_multi_head(layer, ref::values(x), 2, 9);
    double apart = 0;
    for (std::size_t i = 0; i < plain.size(); ++i) apart = std::max(apart, std::abs(plain[i] - ref::values(got)[i]));
    REQUIRE(apart > 1e-3);
}

TEST_CASE("a user's layer decodes with a KVCache as its full forward runs", "[decode][user]") {
    for (std::uint64_t seed = 500; seed < 506; ++seed) {
        shaped::Generator gen(seed);
        const MuPAttention layer(gen);
        decode_in_random_chunks<MuPAttention, MultiHeadCache>(layer, seed);
        decode_ragged<MuPAttention, MultiHeadCache>(layer, seed);
    }
}

// ---- a user's layer with score and mask modifiers ---------------------------------------------------

namespace {
// ALiBi and soft-capping: what a score is depends on its head and its query's and key's
// positions, not on its batch row, so a ragged row decodes as if alone.
struct alibi_capped {
    float operator()(float s, shaped::batch_index, shaped::head_index h, shaped::query_position q,
                     shaped::key_position kv) const {
        const float biased = s - std::ldexp(1.0f, -static_cast<int>(h.value + 1)) * static_cast<float>(q - kv);
        return 3.0f * std::tanh(biased / 3.0f);
    }
};
// Documents of 3 + b positions in batch row b: a mask that depends on the row.
struct row_documents {
    bool operator()(shaped::batch_index b, shaped::head_index, shaped::query_position q, shaped::key_position kv) const {
        return q.value / (3 + b.value) == kv.value / (3 + b.value);
    }
};

// nanoGPT's attention with modifiers, as a user writes it from the guide: nn::extends of
// MultiHeadAttention (its parameters, constructors and heads), a score_mod() and a mask_mod().
template <class Score, class Mask>
struct ModifiedAttention : shaped::nn::extends<MultiHead, ModifiedAttention<Score, Mask>> {
    using ModifiedAttention::extends::extends;
    Score score_mod() const { return {}; }
    Mask mask_mod() const { return {}; }
};
using AlibiCapped = ModifiedAttention<alibi_capped, shaped::keep_every_key>;
using Documented = ModifiedAttention<alibi_capped, row_documents>;

// The largest difference of a modified layer's output from the plain one's, same parameters.
template <class Layer>
double apart_from_plain(const Layer& layer, std::size_t t) {
    shaped::Generator gen(1);
    const auto x = shaped::randn<float, B, T, C>(gen, T{t});
    MultiHead plain;
    plain.c_attn = layer.c_attn;
    plain.c_proj = layer.c_proj;
    const auto a = ref::values(layer(x)), b = ref::values(plain(x));
    double apart = 0;
    for (std::size_t i = 0; i < a.size(); ++i) apart = std::max(apart, std::abs(a[i] - b[i]));
    return apart;
}
}  // namespace

TEST_CASE("a user's layer with modifiers: its forward is modified, and decodes as it runs whole", "[decode][user][modifiers]") {
    for (std::uint64_t seed = 600; seed < 606; ++seed) {
        shaped::Generator gen(seed);
        const AlibiCapped capped(gen);
        const Documented documented(gen);
        // An extended layer's parameters are its base's, by name.
        REQUIRE(ref::parameter_names(capped) == ref::parameter_names(MultiHead{}));
        REQUIRE(apart_from_plain(capped, 9) > 1e-3);
        REQUIRE(apart_from_plain(documented, 9) > 1e-3);
        decode_in_random_chunks<AlibiCapped, MultiHeadCache>(capped, seed);
        decode_ragged<AlibiCapped, MultiHeadCache>(capped, seed);
        decode_in_random_chunks<Documented, MultiHeadCache>(documented, seed);
    }
}
