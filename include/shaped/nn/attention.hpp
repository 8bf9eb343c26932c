#pragma once
// Causal self-attention layers, as the chapter builds them.
//
//   Head<C, H>                     one head: key, query and value projections without bias,
//                                  scores scaled by head_size^-0.5, the causal mask, softmax,
//                                  and the weighted values.
//   MultiHeadAttention<C, NH, HS>  NH heads of size HS from one fused projection (c_attn), and
//                                  an output projection (c_proj), as nanoGPT's
//                                  CausalSelfAttention. The heads are a split of the channel
//                                  dim, viewed in place, not a copy per head.
//
// Parameters have PyTorch's names and layouts (key.weight is (H, C), c_attn.weight (3C, C)), so
// a state_dict fills them tensor by tensor. Each layer runs two ways:
//
//   layer(x)          the full causal forward over x (B, T, C): each position attends to itself
//                     and the positions before it.
//   layer(x, cache)   decoding. x holds the next n positions of every batch row; their keys and
//                     values are appended to the cache, and each new query attends over its
//                     row's positions up to itself. Prefill (a prompt on an empty cache), a
//                     decode step (n = 1) and a chunk (n > 1) are all this one call; no query
//                     is kept. With counts, batch row b takes only its first counts[b]
//                     positions of x (a ragged batch); the output at its padding positions is 0.
//
// Both ways give the same numbers for the same positions: attention is the only layer that
// mixes positions, and a position sees the same keys and values either way. Both run the one
// routine of nn/causal_self_attention.hpp, called by nn::causal_layer's checked call operators;
// each layer only names where its q, k and v come from and where its result goes. The element type is the last parameter (float by default; double
// for reference computations).

#include <shaped/nn/causal_layer.hpp>
#include <shaped/nn/linear.hpp>

#include <optional>
#include <span>
#include <tuple>
#include <type_traits>

namespace shaped::nn {

namespace detail {
// NH heads of size HS share the C channels: NH x HS must be C.
template <Dim C, Dim NH, Dim HS>
inline constexpr bool heads_fill_channels = NH::extent * HS::extent == C::extent;
}  // namespace detail

template <StaticDim C, StaticDim H, class T = float>
class Head : public causal_layer<Head<C, H, T>> {
public:
    using value_type = T;
    using channel_dim = C;
    using head_size_dim = H;
    // The cache this head decodes with: keys and values (B, S, H), S the capacity.
    template <StaticDim B, StaticDim S>
    using cache_type = KVCache<T, B, S, H>;

    // Parameters zero-filled, to be loaded.
    Head() = default;
    // PyTorch's initialisation, drawn for key, query and value in that order, as the chapter.
    explicit Head(Generator& gen) : key(gen), query(gen), value(gen) {}


    // The projections, named as the chapter's Head names them: "key.weight", "query.weight",
    // "value.weight".
    BOOST_HANA_DEFINE_STRUCT(Head,
        (Linear<C, H, false, T>, key),
        (Linear<C, H, false, T>, query),
        (Linear<C, H, false, T>, value));

    // The parts causal_self_attention runs: three projections of their own, one head, no output
    // projection. The result is the head's output (B, T, H).
    using merged_dim = H;
    template <class X>
    auto project(const X& x) const { return std::tuple{eval(query(x)), eval(key(x)), eval(value(x))}; }
    template <class P>
    static auto heads(P& p) {
        auto& [queries, keys, values] = p;
        return std::tuple{view_of(queries), view_of(keys), view_of(values)};
    }
    no_position_encoding encode_positions;
    template <class M>
    static auto heads_of(M& merged) { return view_of(merged); }
    template <class M>
    M project_out(M merged) const { return merged; }
};

template <StaticDim C, StaticDim NH, StaticDim HS, bool Bias = true, class T = float>
class MultiHeadAttention;
namespace detail {
template <StaticDim C, StaticDim NH, StaticDim HS, bool Bias, class T>
inline constexpr bool layer_keeps_rules<MultiHeadAttention<C, NH, HS, Bias, T>> = heads_fill_channels<C, NH, HS>;
}  // namespace detail

template <StaticDim C, StaticDim NH, StaticDim HS, bool Bias, class T>
class MultiHeadAttention : public causal_layer<MultiHeadAttention<C, NH, HS, Bias, T>> {
    static_assert(detail::heads_fill_channels<C, NH, HS>,
                  "shaped::nn::MultiHeadAttention: " SHAPED_RULE_HEADS_FILL_CHANNELS);

public:
    using value_type = T;
    using channel_dim = C;
    using heads_dim = NH;
    using head_size_dim = HS;
    // c_attn's output: the queries, keys and values of all heads, side by side.
    using fused_dim = dim<"QKV", 3 * C::extent>;
    // Which of the three a slice of fused_dim is: 0 queries, 1 keys, 2 values.
    using part_dim = dim<"QKV", 3>;
    // The cache this layer decodes with: keys and values (B, NH, S, HS), S the capacity.
    template <StaticDim B, StaticDim S>
    using cache_type = KVCache<T, B, NH, S, HS>;

    // Parameters zero-filled, to be loaded.
    MultiHeadAttention() = default;
    // PyTorch's initialisation, drawn for c_attn, then c_proj.
    explicit MultiHeadAttention(Generator& gen) : c_attn(gen), c_proj(gen) {}


    // The projections, named as nanoGPT's CausalSelfAttention names them: "c_attn.weight",
    // "c_attn.bias", "c_proj.weight", "c_proj.bias" (the biases only with Bias).
    BOOST_HANA_DEFINE_STRUCT(MultiHeadAttention,
        (Linear<C, fused_dim, Bias, T>, c_attn),
        (Linear<C, C, Bias, T>, c_proj));

    // The parts causal_self_attention runs. The queries, keys and values of every head,
    // (B, NH, T, HS) each, are views of c_attn's output (B, T, 3C): the channel dim split into
    // (3, NH, HS), one part selected, T and NH swapped. The heads' outputs are written the same
    // way into (B, T, C), side by side, which c_proj reads as it lies.
    using merged_dim = C;
    template <class X>
    auto project(const X& x) const { return eval(c_attn(x)); }
    template <class QKV>
    static auto heads(QKV& qkv) {
        auto parts = split<fused_dim, part_dim, C>(qkv);
        auto heads = split<C, NH, HS>(parts);
        auto part = [&](std::size_t which) { return view_of(transpose<1, 2>(select<part_dim>(heads, which))); };
        return std::tuple{part(0), part(1), part(2)};
    }
    no_position_encoding encode_positions;
    template <class M>
    static auto heads_of(M& merged) { return view_of(transpose<1, 2>(split<C, NH, HS>(merged))); }
    template <class M>
    auto project_out(const M& merged) const { return eval(c_proj(merged)); }
};

}  // namespace shaped::nn
