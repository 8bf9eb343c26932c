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
#include <vector>

namespace shaped::nn {

// ALiBi (Press et al., 2022): a bias linear in how far back the key is, with head h's slope
// 2^(-8 (h + 1) / NH), so that heads attend at different ranges. Its rows are one vector loop.
template <StaticDim NH>
struct alibi {
    static double slope(head_index h) {
        return std::exp2(-8.0 * static_cast<double>(h.value + 1) / static_cast<double>(NH::extent));
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
        each_vector(scores, n, [&](auto s) { return T(cap) * xsimd::tanh(s / T(cap)); },
                    [&](T s) { return T(cap) * std::tanh(s / T(cap)); });
    }
    template <class T>
    void row_with_slopes(T* scores, T* slopes, std::size_t n, batch_index, head_index, query_position,
                         key_position) const {
        using V = xsimd::batch<T>;
        std::size_t j = 0;
        for (; j + V::size <= n; j += V::size) {
            const V t = xsimd::tanh(V::load_unaligned(scores + j) / V(T(cap)));
            (V(T(cap)) * t).store_unaligned(scores + j);
            (V(T{1}) - t * t).store_unaligned(slopes + j);
        }
        for (; j < n; ++j) {
            const T t = std::tanh(scores[j] / T(cap));
            scores[j] = T(cap) * t;
            slopes[j] = T{1} - t * t;
        }
    }

private:
    // scores[j] = f(scores[j]), whole vectors by vector_f and the rest one by one.
    template <class T, class VectorF, class ScalarF>
    static void each_vector(T* scores, std::size_t n, const VectorF& vector_f, const ScalarF& scalar_f) {
        using V = xsimd::batch<T>;
        std::size_t j = 0;
        for (; j + V::size <= n; j += V::size) vector_f(V::load_unaligned(scores + j)).store_unaligned(scores + j);
        for (; j < n; ++j) scores[j] = scalar_f(scores[j]);
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
    std::array<std::size_t, 2> element(batch_index, head_index h, query_position q, key_position kv) const {
        return {h.value, static_cast<std::size_t>(bucket(q - kv))};
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
