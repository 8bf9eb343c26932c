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

#include <array>
#include <cmath>
#include <cstddef>

namespace shaped::nn {

// ALiBi (Press et al., 2022): a bias linear in how far back the key is, with head h's slope
// 2^(-8 (h + 1) / NH), so that heads attend at different ranges.
template <StaticDim NH>
struct alibi {
    static double slope(head_index h) {
        return std::exp2(-8.0 * static_cast<double>(h.value + 1) / static_cast<double>(NH::extent));
    }
    template <class S>
    S operator()(S s, batch_index, head_index h, query_position q, key_position kv) const {
        return s - slope(h) * static_cast<double>(q - kv);
    }
};

// Soft-capping (Gemma 2): scores squashed into (-cap, cap), smoothly.
struct soft_cap {
    double cap;
    template <class S>
    S operator()(S s, batch_index, head_index, query_position, key_position) const {
        using std::tanh;
        return cap * tanh(s / cap);
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
};

// Documents packed into one row: ids(b, position) names the document of each position, and a
// query sees only the keys of its own. Ids is anything indexed so (a Tensor<int, B, S>, say).
template <class Ids>
struct same_document {
    const Ids* ids;
    bool operator()(batch_index b, head_index, query_position q, key_position kv) const {
        return (*ids)(b.value, q.value) == (*ids)(b.value, kv.value);
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
