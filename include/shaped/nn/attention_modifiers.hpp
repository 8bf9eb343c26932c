#pragma once
// Score modifiers and masks researchers reach for, each a few lines over the typed coordinates of
// expr/attention_modifiers.hpp; a layer returns them from score_mod() and mask_mod()
// (nn/causal_self_attention.hpp), and the fused kernel runs them forward, decoding and in the
// backward. Each score modifier is written over any score type, so that its derivative is taken
// over dual numbers.
//
//   alibi<NH>{}                       s - slope(h) (q - kv), ALiBi's geometric slopes
//   soft_cap{c}                       c tanh(s / c), Gemma 2's soft-capping
//   learned_bias{&table, bucket, then}  then(s + table(h, bucket(q - kv))): a bias the model learns
//   then_modify{first, second}        second(first(s))
//   same_document{&ids}               q sees kv only within its own document (ids(b, position))
//   prefix_lm{n}                      the first n positions see one another whole, the rest causally

#include <shaped/expr/attention_modifiers.hpp>
#include <shaped/tensor.hpp>

#include <xsimd/xsimd.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <type_traits>
#include <vector>

namespace shaped::nn {

// ALiBi (Press et al., 2022): a bias linear in how far back the key is, with head h's slope
// 2^(-8 (h + 1) / NH), so that heads attend at different ranges. Its rows are one vector loop.
template <StaticDim NH>
struct alibi {
    static double slope(head_index h) {
        static const std::array<double, NH::extent> slopes = [] {
            std::array<double, NH::extent> s{};
            for (std::size_t i = 0; i < NH::extent; ++i)
                s[i] = std::exp2(-8.0 * static_cast<double>(i + 1) / static_cast<double>(NH::extent));
            return s;
        }();
        return slopes[h.value];
    }
    template <class S>
    S operator()(S s, batch_index, head_index h, query_position q, key_position kv) const {
        return s - slope(h) * static_cast<double>(q - kv);
    }
    template <class T>
    void row(T* scores, std::size_t n, batch_index, head_index h, query_position q, key_position first) const {
        const T m = static_cast<T>(slope(h));
        const T back = static_cast<T>(q - first);  // how far back the first key is
        for (std::size_t j = 0; j < n; ++j) scores[j] -= m * (back - static_cast<T>(j));
    }
    template <class T>
    void row_with_slopes(T* scores, T* slopes, std::size_t n, batch_index b, head_index h, query_position q,
                         key_position first) const {
        row(scores, n, b, h, q, first);
        std::fill(slopes, slopes + n, T{1});
    }
};

// Soft-capping (Gemma 2): scores squashed into (-cap, cap), smoothly. Its rows run in vectors.
struct soft_cap {
    double cap;
    template <class S>
    S operator()(S s, batch_index, head_index, query_position, key_position) const {
        using std::tanh;
        return cap * tanh(s / cap);
    }
    template <class T>
    void row(T* scores, std::size_t n, batch_index, head_index, query_position, key_position) const {
        each_tanh(scores, n, [&](std::size_t j, auto t) { (t * T(cap)).store_unaligned(scores + j); },
                  [&](std::size_t j, T t) { scores[j] = T(cap) * t; });
    }
    template <class T>
    void row_with_slopes(T* scores, T* slopes, std::size_t n, batch_index, head_index, query_position,
                         key_position) const {
        each_tanh(scores, n,
                  [&](std::size_t j, auto t) {
                      (t * T(cap)).store_unaligned(scores + j);
                      (T{1} - t * t).store_unaligned(slopes + j);
                  },
                  [&](std::size_t j, T t) {
                      scores[j] = T(cap) * t;
                      slopes[j] = T{1} - t * t;
                  });
    }

private:
    // put(j, tanh(scores[j] / cap)) for each j < n, whole vectors at once. The last n % lanes
    // scores go through one zero-padded vector too: the diagonal tiles have rows of every length,
    // and libm's tanhf per score made that tail a tenth of the kernel.
    template <class T, class PutVector, class PutOne>
    void each_tanh(const T* scores, std::size_t n, const PutVector& put_vector, const PutOne& put_one) const {
        using V = xsimd::batch<T>;
        const T over_cap = T(1 / cap);
        std::size_t j = 0;
        for (; j + V::size <= n; j += V::size) put_vector(j, lanes_tanh(V::load_unaligned(scores + j) * over_cap));
        if (j == n) return;
        std::array<T, V::size> rest{}, tanh_rest{};
        std::copy(scores + j, scores + n, rest.begin());
        lanes_tanh(V::load_unaligned(rest.data()) * over_cap).store_unaligned(tanh_rest.data());
        for (std::size_t i = 0; j + i < n; ++i) put_one(j + i, tanh_rest[i]);
    }
    // tanh of each lane. Floats: Eigen's 13/6 rational interpolant, a couple of ulp on [-9, 9] and
    // +-1 beyond (as tanh is, in float): one division, no exp. Doubles: 1 - 2 / (1 + exp(2x)),
    // whose error near 0 is an ulp of 1, absolute, which scores of order one do not notice.
    template <class T>
    static xsimd::batch<T> lanes_tanh(xsimd::batch<T> x) {
        if constexpr (std::is_same_v<T, float>) {
            const xsimd::batch<float> bound(9.0f);
            x = xsimd::min(bound, xsimd::max(-bound, x));  // in this order a NaN stays NaN
            const auto x2 = x * x;
            auto p = xsimd::fma(x2, xsimd::batch<float>(-2.76076847742355e-16f), xsimd::batch<float>(2.00018790482477e-13f));
            p = xsimd::fma(x2, p, xsimd::batch<float>(-8.60467152213735e-11f));
            p = xsimd::fma(x2, p, xsimd::batch<float>(5.12229709037114e-08f));
            p = xsimd::fma(x2, p, xsimd::batch<float>(1.48572235717979e-05f));
            p = xsimd::fma(x2, p, xsimd::batch<float>(6.37261928875436e-04f));
            p = xsimd::fma(x2, p, xsimd::batch<float>(4.89352455891786e-03f));
            auto q = xsimd::fma(x2, xsimd::batch<float>(1.19825839466702e-06f), xsimd::batch<float>(1.18534705686654e-04f));
            q = xsimd::fma(x2, q, xsimd::batch<float>(2.26843463243900e-03f));
            q = xsimd::fma(x2, q, xsimd::batch<float>(4.89352518554385e-03f));
            return x * p / q;
        } else {
            return T{1} - T{2} / (T{1} + xsimd::exp(x * T{2}));
        }
    }
};

// A bias the model learns, read from a parameter table (NH, Buckets) at the query's head and
// bucket(q - kv) (T5's relative position bias buckets its distances; a clamp is the simplest),
// added to the score before `then` modifies it further (ALiBi, a cap): then(s + bias). So the
// bias's gradient is the score's, summed at each element of the table. The table is the layer's
// parameter, held by pointer: score_mod() makes the modifier afresh each call.
template <class Table, class Bucket, class Then = unmodified_scores>
struct learned_bias {
    const Table* parameters;
    Bucket bucket;  // (q - kv) -> a column of the table
    Then then{};
    const Table& table() const { return *parameters; }
    // The table's element at a head and a bucket; a bucket past the table's columns (a key after
    // the query, under a mask that replaces causality) reads the nearest column, never past it.
    std::array<std::size_t, 2> element(batch_index, head_index h, query_position q, key_position kv) const {
        const auto columns = static_cast<std::ptrdiff_t>(parameters->extents()[1]);
        const auto column = std::clamp<std::ptrdiff_t>(static_cast<std::ptrdiff_t>(bucket(q - kv)), 0, columns - 1);
        return {h.value, static_cast<std::size_t>(column)};
    }
    template <class S>
    S operator()(S s, batch_index b, head_index h, query_position q, key_position kv) const {
        const auto at = element(b, h, q, kv);
        return then(s + (*parameters)(at[0], at[1]), b, h, q, kv);
    }
};

// Two score modifiers, one after the other: second(first(s)).
template <class First, class Second>
struct then_modify {
    First first;
    Second second;
    template <class S>
    S operator()(S s, batch_index b, head_index h, query_position q, key_position kv) const {
        return second(first(s, b, h, q, kv), b, h, q, kv);
    }
    // Row by row where both modify rows: the slopes multiply (the chain rule).
    template <class T>
        requires requires(const First& f, const Second& g, T* s) {
            f.row_with_slopes(s, s, std::size_t{}, batch_index{}, head_index{}, query_position{}, key_position{});
            g.row_with_slopes(s, s, std::size_t{}, batch_index{}, head_index{}, query_position{}, key_position{});
        }
    void row(T* scores, std::size_t n, batch_index b, head_index h, query_position q, key_position kv) const {
        first.row(scores, n, b, h, q, kv);
        second.row(scores, n, b, h, q, kv);
    }
    template <class T>
        requires requires(const First& f, const Second& g, T* s) {
            f.row_with_slopes(s, s, std::size_t{}, batch_index{}, head_index{}, query_position{}, key_position{});
            g.row_with_slopes(s, s, std::size_t{}, batch_index{}, head_index{}, query_position{}, key_position{});
        }
    void row_with_slopes(T* scores, T* slopes, std::size_t n, batch_index b, head_index h, query_position q,
                         key_position kv) const {
        first.row_with_slopes(scores, slopes, n, b, h, q, kv);
        thread_local std::vector<T> outer;
        outer.resize(n);
        second.row_with_slopes(scores, outer.data(), n, b, h, q, kv);
        for (std::size_t j = 0; j < n; ++j) slopes[j] *= outer[j];
    }
};

// Documents packed into one row: ids(b, position) names the document of each position, and a
// query sees only the keys of its own. Ids is anything indexed so (a Tensor<int, B, S>, say).
template <class Ids>
struct same_document {
    const Ids* ids;
    bool operator()(batch_index b, head_index, query_position q, key_position kv) const {
        return (*ids)(b.value, q.value) == (*ids)(b.value, kv.value);
    }
    // A block at once where the ids of its queries and of its keys each run in order (documents
    // packed one after another): then its corners tell. Otherwise nothing is assumed.
    keys_kept block(batch_index b, head_index, query_position q0, query_position q1, key_position k0,
                    key_position k1) const {
        const auto id = [&](std::size_t position) { return (*ids)(b.value, position); };
        const auto in_order = [&](std::size_t from, std::size_t to) {
            for (std::size_t p = from; p + 1 < to; ++p)
                if (id(p + 1) < id(p)) return false;
            return true;
        };
        if (q0.value >= q1.value || k0.value >= k1.value) return keys_kept::none;
        if (!in_order(q0.value, q1.value) || !in_order(k0.value, k1.value)) return keys_kept::some;
        const auto first_q = id(q0.value), last_q = id(q1.value - 1), first_k = id(k0.value), last_k = id(k1.value - 1);
        if (last_q < first_k || last_k < first_q) return keys_kept::none;
        if (first_q == last_q && first_k == last_k && first_q == first_k) return keys_kept::all;
        return keys_kept::some;
    }
};

// A prefix-LM (UniLM, T5's prefix LM): the first `prefix` positions see one another whole, the
// rest each its past. It replaces causality rather than adding to it.
struct prefix_lm {
    static constexpr bool causal = false;
    std::size_t prefix;
    bool operator()(batch_index, head_index, query_position q, key_position kv) const {
        return kv.value <= q.value || kv.value < prefix;
    }
};

}  // namespace shaped::nn
