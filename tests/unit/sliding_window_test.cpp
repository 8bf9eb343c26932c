// Sliding-window attention against naive references in double: the fused kernel's window over
// sizes around its blocks (both the block path and the row path), the positions a window of W
// includes, and the ring-buffer cache decoding past W positions, equal at every step to a full
// recompute with the windowed mask.

#include "dense_attention.hpp"
#include "reference.hpp"

#include <shaped/shaped.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

namespace {

using B = shaped::dim<"B", 2>;
using NH = shaped::dim<"NH", 3>;
using Td = shaped::dim<"T">;
using Sd = shaped::dim<"S">;
using Hd = shaped::dim<"H">;
using Dd = shaped::dim<"D">;

// out[b, i, :] = sum_j softmax_j(q[b, i] . k[b, j] * scale) v[b, j] over the keys j that query i
// sees: the queries are the last tq of the tk positions, so query i stands at position
// i + tk - tq, and sees positions p with position - window < p <= position. Matrices row-major,
// one after another.
template <class Q, class K, class V>
std::vector<double> naive_windowed_attention(const Q& q, const K& k, const V& v, double scale, std::size_t window) {
    const auto qe = q.extents(), ke = k.extents(), ve = v.extents();
    constexpr std::size_t r = std::tuple_size_v<decltype(qe)>;
    const std::size_t tq = qe[r - 2], tk = ke[r - 2];
    return ref::dense_attention(ref::values(q), ref::values(k), ref::values(v), tq, tk, qe[r - 1], ve[r - 1],
                                [&](std::size_t, std::size_t i, std::size_t j, double product) {
                                    const std::size_t position = i + tk - tq;
                                    return j <= position && j + window > position ? product * scale : ref::unseen;
                                });
}

template <class V>
double tolerance() {
    return std::is_same_v<V, float> ? 2e-5 : 1e-12;
}

// Windowed attention of the last tq of tk positions, fused, against the naive reference.
template <class V, std::size_t W>
void check_window(std::size_t tk, std::size_t tq, std::size_t h) {
    CAPTURE(W, tk, tq, h);
    shaped::Generator gen(tk * 7 + tq + h + W);
    const auto q_all = shaped::randn<V, B, NH, Td, Hd>(gen, Td{tk}, Hd{h});
    const auto k = shaped::randn<V, B, NH, Sd, Hd>(gen, Sd{tk}, Hd{h});
    const auto v = shaped::randn<V, B, NH, Sd, Dd>(gen, Sd{tk}, Dd{24});
    const auto q = shaped::slice<Td>(q_all, tk - tq, tk);
    const shaped::Tensor<V, B, NH, Td, Dd> out = shaped::causal_attention(q, k, v, V{0.3}, shaped::window<W>{});
    ref::require_close(ref::values(out), naive_windowed_attention(q, k, v, 0.3, W), tolerance<V>());
}

}  // namespace

TEST_CASE("a window of W includes a query's own position and the W - 1 before it", "[sliding_window]") {
    // Zero queries weigh every key they see alike, and values one-hot by position show which:
    // out[i][j] is 1/3 where query i sees position j, 0 elsewhere.
    using T8 = shaped::dim<"T", 8>;
    using P8 = shaped::dim<"P", 8>;
    shaped::Generator gen(1);
    const auto q = shaped::zeros<double, T8, Hd>(Hd{4});
    const auto k = shaped::randn<double, T8, Hd>(gen, Hd{4});
    shaped::Tensor<double, T8, P8> v = shaped::zeros<double, T8, P8>();
    for (std::size_t j = 0; j < 8; ++j) v(j, j) = 1;
    const shaped::Tensor<double, T8, P8> out = shaped::causal_attention(q, k, v, 1.0, shaped::window<3>{});
    for (std::size_t i = 0; i < 8; ++i)
        for (std::size_t j = 0; j < 8; ++j) {
            CAPTURE(i, j);
            const bool seen = j <= i && j + 3 > i;  // i - 2, i - 1, i
            REQUIRE(out(i, j) == Approx(seen ? 1.0 / static_cast<double>(std::min<std::size_t>(i + 1, 3)) : 0.0));
        }
}

TEMPLATE_TEST_CASE("windowed attention meets the naive masked softmax, block and row paths", "[sliding_window]", float,
                   double) {
    using V = TestType;
    const std::size_t tk = GENERATE(1, 5, 9, 64, 65, 130, 300);
    const std::size_t tq = GENERATE(1, 3, 8, 9, 70, 300);
    const std::size_t h = GENERATE(5, 16);
    if (tq > tk) return;
    check_window<V, 1>(tk, tq, h);
    check_window<V, 3>(tk, tq, h);
    check_window<V, 64>(tk, tq, h);
    check_window<V, 100>(tk, tq, h);
    check_window<V, 1000>(tk, tq, h);
}

TEST_CASE("windowed attention in parallel, many blocks, meets the naive masked softmax", "[sliding_window]") {
    check_window<float, 100>(700, 700, 64);
    check_window<float, 129>(700, 450, 32);
}

// ---- the layer: Mistral's grouped-query attention with a window -----------------------------

namespace {

using C = shaped::dim<"C", 16>;
using NH4 = shaped::dim<"NH", 4>;
using NKV = shaped::dim<"NKV", 2>;
using HS = shaped::dim<"HS", 4>;
using S64 = shaped::dim<"S", 64>;
using Rotary = shaped::nn::rotary_encoding<HS>;
constexpr std::size_t W = 5;
using Windowed = shaped::nn::GroupedQueryAttention<C, NH4, NKV, HS, Rotary, double, shaped::window<W>>;
using Unwindowed = shaped::nn::GroupedQueryAttention<C, NH4, NKV, HS, Rotary, double>;
using Ring = Windowed::cache_type<B, S64>;

// The same parameters in a layer without a window.
Unwindowed without_window(const Windowed& layer) {
    Unwindowed plain;
    plain.wq = layer.wq;
    plain.wk = layer.wk;
    plain.wv = layer.wv;
    plain.wo = layer.wo;
    return plain;
}

// Decodes rows (B, T, C) through a ring in ragged steps (counts per batch row), each step's
// input the rows' next positions then padding, by decode(x, ring, counts); every position's
// output must be full's at that position, the padding's 0. Returns the ring.
template <class Decode>
Ring decode_ragged_steps(shaped::Generator& gen, const shaped::Tensor<double, B, Td, C>& rows,
                         const shaped::Tensor<double, B, Td, C>& full,
                         const std::vector<std::array<std::size_t, 2>>& steps, const Decode& decode) {
    Ring cache;
    for (const auto& counts : steps) {
        const std::size_t n = std::max(counts[0], counts[1]);
        const auto starts = cache.lengths();
        CAPTURE(starts[0], starts[1], counts[0], counts[1]);
        auto x = shaped::randn<double, B, Td, C>(gen, Td{n});
        for (std::size_t b = 0; b < 2; ++b)
            for (std::size_t i = 0; i < counts[b]; ++i)
                for (std::size_t c = 0; c < C::extent; ++c) x(b, i, c) = rows(b, starts[b] + i, c);
        const auto got = decode(x, cache, counts);
        for (std::size_t b = 0; b < 2; ++b) {
            REQUIRE(cache.lengths()[b] == starts[b] + counts[b]);
            for (std::size_t i = 0; i < n; ++i)
                for (std::size_t c = 0; c < C::extent; ++c) {
                    CAPTURE(b, i, c);
                    if (i < counts[b]) REQUIRE(got(b, i, c) == Approx(full(b, starts[b] + i, c)).epsilon(1e-10));
                    else REQUIRE(got(b, i, c) == 0);
                }
        }
    }
    return cache;
}

}  // namespace

TEST_CASE("RingKVCache: a windowed layer's cache is a ring of W positions", "[sliding_window][cache]") {
    STATIC_REQUIRE(std::is_same_v<Ring, shaped::nn::RingKVCache<double, B, NKV, shaped::dim<"S", W>, HS>>);
    STATIC_REQUIRE(Ring::capacity == W);
    STATIC_REQUIRE(Ring::bytes == 2 * 2 * 2 * W * 4 * sizeof(double));
    STATIC_REQUIRE(std::is_same_v<Unwindowed::cache_type<B, S64>, shaped::nn::KVCache<double, B, NKV, S64, HS>>);
}

TEST_CASE("RingKVCache: appends past W keep each row's last W positions, slot p % W", "[sliding_window][cache]") {
    using One = shaped::dim<"H", 1>;
    using Cache = shaped::nn::RingKVCache<double, B, shaped::dim<"W", 3>, One>;
    Cache cache;
    // Keys and values whose one element is their position, 100 more in row 1.
    std::array<std::size_t, 2> next{0, 0};
    const auto append = [&](std::size_t n, std::array<std::size_t, 2> counts) {
        auto k = shaped::zeros<double, B, Td, One>(Td{n});
        for (std::size_t b = 0; b < 2; ++b)
            for (std::size_t t = 0; t < n; ++t) k(b, t, 0) = static_cast<double>(next[b] + t + 100 * b);
        cache.append(k, k, counts);
        for (std::size_t b = 0; b < 2; ++b) next[b] += counts[b];
    };
    // The positions row b holds, oldest first, read through slots_from.
    const auto held = [&](std::size_t b) {
        std::vector<double> positions;
        const auto keys = cache.keys();
        for (const auto run : cache.slots_from(b, cache.lengths()[b] - cache.held()[b]))
            for (std::size_t s = run.begin; s < run.end; ++s) positions.push_back(keys(b, s, 0));
        return positions;
    };
    append(2, {2, 1});
    REQUIRE(cache.lengths() == std::array<std::size_t, 2>{2, 1});
    REQUIRE(held(0) == std::vector<double>{0, 1});
    REQUIRE(held(1) == std::vector<double>{100});
    append(7, {7, 3});  // row 0 takes more than the ring holds: only its last 3 stay
    REQUIRE(cache.lengths() == std::array<std::size_t, 2>{9, 4});
    REQUIRE(cache.held() == std::array<std::size_t, 2>{3, 3});
    REQUIRE(held(0) == std::vector<double>{6, 7, 8});
    REQUIRE(held(1) == std::vector<double>{101, 102, 103});
    REQUIRE(cache.keys()(0, 9 % 3, 0) == 6);  // position 6 in slot 0 (6 % 3)
    append(1, {1, 1});
    REQUIRE(held(0) == std::vector<double>{7, 8, 9});
    REQUIRE(held(1) == std::vector<double>{102, 103, 104});
    const auto from_8 = cache.slots_from(0, 8);  // positions 8, 9 in slots 2, 0
    REQUIRE(from_8[0].begin == 2);
    REQUIRE(from_8[0].end == 3);
    REQUIRE(from_8[1].begin == 0);
    REQUIRE(from_8[1].end == 1);
    cache.reset();
    REQUIRE(cache.empty());
    REQUIRE(cache.keys().extents()[1] == 0);
}

TEST_CASE("RingKVCache: extents the types leave open are checked at run time, naming the dims",
          "[sliding_window][cache]") {
    using Cache = shaped::nn::RingKVCache<float, B, NKV, shaped::dim<"W", 4>, HS>;
    using NKVd = shaped::dim<"NKV">;
    Cache cache;
    const auto wrong_heads = shaped::zeros<float, B, NKVd, Td, HS>(NKVd{3}, Td{1});
    REQUIRE_THROWS_WITH(cache.append(wrong_heads, wrong_heads),
                        Catch::Contains("nn::RingKVCache::append") && Catch::Contains("cache NKV(2), new keys' NKV(3)"));
    const auto two = shaped::zeros<float, B, NKV, Td, HS>(Td{2});
    REQUIRE_THROWS_WITH(cache.append(two, two, std::array<std::size_t, 2>{3, 0}),
                        Catch::Contains("RingKVCache::append: batch row 0 takes 3 of 2 new positions"));
    REQUIRE(cache.empty());
}

TEST_CASE("a windowed layer's forward: each position as the plain layer over its last W positions",
          "[sliding_window][layer]") {
    // Rotary positions enter attention only through their differences, so position t of the
    // windowed forward is the last position of the plain forward over x[t - W + 1 .. t].
    shaped::Generator gen(5);
    const Windowed layer(gen);
    const Unwindowed plain = without_window(layer);
    const std::size_t t_all = 13;
    const auto x = shaped::randn<double, B, Td, C>(gen, Td{t_all});
    const auto got = layer(x);
    for (std::size_t t = 0; t < t_all; ++t) {
        CAPTURE(t);
        const std::size_t from = t + 1 >= W ? t + 1 - W : 0;
        const auto alone = plain(shaped::slice<Td>(x, from, t + 1));
        for (std::size_t b = 0; b < 2; ++b)
            for (std::size_t c = 0; c < C::extent; ++c) REQUIRE(got(b, t, c) == Approx(alone(b, t - from, c)).epsilon(1e-12));
    }
    // And a window as long as the sequence is no window at all.
    const auto whole = plain(shaped::slice<Td>(x, 0, W));
    const auto first = layer(shaped::slice<Td>(x, 0, W));
    ref::require_close(ref::values(first), ref::values(whole), 1e-12);
}

TEST_CASE("a windowed layer decodes past W with its ring, equal at every step to the full windowed forward",
          "[sliding_window][layer]") {
    shaped::Generator gen(11);
    const Windowed layer(gen);
    const std::size_t t_all = 40;
    const auto rows = shaped::randn<double, B, Td, C>(gen, Td{t_all});
    const auto full = layer(rows);  // the windowed mask over every position
    // Ragged steps: a prefill longer than W in row 0, chunks that cross the ring's end, single
    // steps (even and ragged), rows that sit a step out.
    const auto cache = decode_ragged_steps(
        gen, rows, full,
        {{7, 3}, {1, 1}, {0, 1}, {2, 6}, {5, 0}, {1, 1}, {1, 1}, {3, 2}, {1, 0}, {6, 11}, {1, 1}, {1, 1}, {2, 1}, {1, 1}},
        [&](const auto& x, Ring& ring, const Ring::lengths_type& counts) { return layer(x, ring, counts); });
    REQUIRE(cache.lengths() == std::array<std::size_t, 2>{32, 30});
}

TEST_CASE("a windowed layer decodes an even batch token by token in place, as the full forward", "[sliding_window][layer]") {
    shaped::Generator gen(12);
    const Windowed layer(gen);
    const std::size_t t_all = 3 * W + 2;
    const auto rows = shaped::randn<double, B, Td, C>(gen, Td{t_all});
    const auto full = layer(rows);
    Ring cache;
    for (std::size_t t = 0; t < t_all; ++t) {
        CAPTURE(t);
        const auto got = layer(shaped::slice<Td>(rows, t, t + 1), cache);
        for (std::size_t b = 0; b < 2; ++b)
            for (std::size_t c = 0; c < C::extent; ++c) REQUIRE(got(b, 0, c) == Approx(full(b, t, c)).epsilon(1e-10));
    }
}

TEST_CASE("a windowed Llama block (Mistral's) decodes with its attention's ring, as its full forward",
          "[sliding_window][layer]") {
    using Hidden = shaped::dim<"FF", 24>;
    using Block = shaped::nn::LlamaBlock<C, NH4, NKV, HS, Hidden, Rotary, double, shaped::window<W>>;
    STATIC_REQUIRE(std::is_same_v<Block::cache_type<B, S64>, Ring>);
    shaped::Generator gen(13);
    const Block block(gen);
    const std::size_t t_all = 2 * W + 3;
    const auto rows = shaped::randn<double, B, Td, C>(gen, Td{t_all});
    const auto full = block(rows);
    Block::cache_type<B, S64> cache;
    const auto prefill = block(shaped::slice<Td>(rows, 0, W + 2), cache);  // longer than the window
    for (std::size_t t = 0; t < W + 2; ++t)
        for (std::size_t c = 0; c < C::extent; ++c) REQUIRE(prefill(1, t, c) == Approx(full(1, t, c)).epsilon(1e-10));
    for (std::size_t t = W + 2; t < t_all; ++t) {
        CAPTURE(t);
        const auto step = block(shaped::slice<Td>(rows, t, t + 1), cache);
        for (std::size_t b = 0; b < 2; ++b)
            for (std::size_t c = 0; c < C::extent; ++c) REQUIRE(step(b, 0, c) == Approx(full(b, t, c)).epsilon(1e-10));
    }
}

TEST_CASE("a windowed layer's chunk that takes more positions than it has throws, and changes nothing",
          "[sliding_window][layer]") {
    shaped::Generator gen(14);
    const Windowed layer(gen);
    Ring cache;
    const auto x = shaped::randn<double, B, Td, C>(gen, Td{3});
    REQUIRE_THROWS_WITH(layer(x, cache, std::array<std::size_t, 2>{4, 1}),
                        Catch::Contains("RingKVCache::append: batch row 0 takes 4 of 3 new positions"));
    REQUIRE(cache.empty());
}

// ---- a windowed layer of the user's with modifiers, decoding with its ring ----------------------

namespace {
// ALiBi over the query heads and documents of 4 + b positions in batch row b; a modifier is told
// absolute positions, also where the ring holds them out of order.
struct quarter_alibi {
    template <class S>
    S operator()(S s, shaped::batch_index, shaped::head_index h, shaped::query_position q,
                      shaped::key_position kv) const {
        return s - 0.25 * static_cast<double>(h.value + 1) * static_cast<double>(q - kv);
    }
};
struct row_documents {
    bool operator()(shaped::batch_index b, shaped::head_index, shaped::query_position q, shaped::key_position kv) const {
        return q.value / (4 + b.value) == kv.value / (4 + b.value);
    }
};
// The windowed layer's parts with those modifiers.
struct ModifiedWindowed : Windowed {
    using Windowed::Windowed;
    quarter_alibi score_mod() const { return {}; }
    row_documents mask_mod() const { return {}; }
};
// The same layer, its window one of its masks rather than its type's: a plain layer's parts.
struct MaskWindowed : shaped::nn::extends<Unwindowed, MaskWindowed> {
    using MaskWindowed::extends::extends;
    quarter_alibi score_mod() const { return {}; }
    auto mask_mod() const { return shaped::and_masks(shaped::window<W>{}, row_documents{}); }
};
}  // namespace

TEST_CASE("a windowed layer with modifiers decodes past W with its ring, as its full forward", "[sliding_window][layer][modifiers]") {
    shaped::Generator gen(13);
    const ModifiedWindowed layer(gen);
    const std::size_t t_all = 30;
    const auto rows = shaped::randn<double, B, Td, C>(gen, Td{t_all});
    const auto full = shaped::nn::causal_self_attention(layer, rows);
    // The modifiers change the numbers.
    const auto plain = layer(rows);
    REQUIRE(std::abs(full(1, 20, 3) - plain(1, 20, 3)) > 1e-6);
    decode_ragged_steps(gen, rows, full,
                        {{7, 3}, {1, 1}, {0, 1}, {2, 6}, {5, 0}, {1, 1}, {1, 1}, {3, 2}, {1, 0}, {6, 11}, {1, 1}, {1, 1}},
                        [&](const auto& x, Ring& ring, const Ring::lengths_type& counts) {
                            return shaped::nn::causal_self_attention(layer, x, ring, counts);
                        });
    // Token by token, an even batch: each step gathers the ring's positions in order.
    Ring even;
    for (std::size_t t = 0; t < 12; ++t) {
        CAPTURE(t);
        const auto got = shaped::nn::causal_self_attention(layer, shaped::slice<Td>(rows, t, t + 1), even, std::nullopt);
        for (std::size_t b = 0; b < 2; ++b)
            for (std::size_t c = 0; c < C::extent; ++c) REQUIRE(got(b, 0, c) == Approx(full(b, t, c)).epsilon(1e-10));
    }
}

TEST_CASE("a window in a layer's mask is its window: the ring, the decode and the gradients of a windowed layer's",
          "[sliding_window][layer][modifiers]") {
    shaped::Generator gen(17);
    ModifiedWindowed typed(gen);
    MaskWindowed masked;
    static_cast<Unwindowed&>(masked) = without_window(typed);  // the same parameters
    const std::size_t t_all = 24;
    const auto rows = shaped::randn<double, B, Td, C>(gen, Td{t_all});
    const auto full = shaped::nn::causal_self_attention(typed, rows);
    ref::require_close(ref::values(shaped::nn::causal_self_attention(masked, rows)), ref::values(full), 1e-12);
    // Its cache is the windowed layer's ring (a KVCache would be a compile error).
    decode_ragged_steps(gen, rows, full, {{7, 3}, {1, 1}, {0, 1}, {2, 6}, {5, 0}, {1, 1}, {3, 2}, {1, 0}, {1, 1}},
                        [&](const auto& x, Ring& ring, const Ring::lengths_type& counts) {
                            return shaped::nn::causal_self_attention(masked, x, ring, counts);
                        });
    // Trained, the same gradients through the fused backward.
    const auto loss = [&rows](const auto& layer, const auto& x) {
        return eval(sum(shaped::nn::causal_self_attention(layer, x) * rows));
    };
    const auto [typed_loss, typed_grads] = shaped::train::value_and_grad(loss, typed, rows);
    const auto [masked_loss, masked_grads] = shaped::train::value_and_grad(loss, masked, rows);
    REQUIRE(masked_loss == Approx(typed_loss).epsilon(1e-12));
    std::vector<double> typed_values, masked_values;
    shaped::train::for_each_gradient(typed, typed_grads, [&](std::string_view, auto&, auto& g) {
        typed_values.insert(typed_values.end(), g.data(), g.data() + g.size());
    });
    shaped::train::for_each_gradient(masked, masked_grads, [&](std::string_view, auto&, auto& g) {
        masked_values.insert(masked_values.end(), g.data(), g.data() + g.size());
    });
    REQUIRE(typed_values.size() == masked_values.size());
    ref::require_close(masked_values, typed_values, 1e-12);
}
