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
// routine of nn/causal_self_attention.hpp; each layer only names where its q, k and v come from
// and where its result goes. The element type is the last parameter (float by default; double
// for reference computations).

#include <shaped/nn/causal_self_attention.hpp>
#include <shaped/nn/linear.hpp>

#include <optional>
#include <span>
#include <tuple>
#include <type_traits>

namespace shaped::nn {

namespace detail {
template <class C>
inline constexpr bool is_kv_cache = false;
template <class T, Dim... Ds>
    requires cache_layout<Ds...>
inline constexpr bool is_kv_cache<KVCache<T, Ds...>> = true;
template <class T, Dim... Ds>
    requires cache_layout<Ds...>
inline constexpr bool is_kv_cache<RingKVCache<T, Ds...>> = true;

// A layer with a sliding window of W decodes with a ring of W positions, and only such a layer
// with a ring.
template <class Layer, class Cache>
inline constexpr bool cache_fits_window = [] {
    if constexpr (windowed_layer<Layer>)
        return is_ring_kv_cache<Cache> && Cache::capacity == layer_window_t<Layer>::size;
    else
        return !is_ring_kv_cache<Cache>;
}();

// The diagnostic of an attention layer's call (Op is the layer) whose input x is not
// (B, T, C), or whose cache (void for the full forward) does not fit the layer or the input;
// void when the call fits. Heads are the cache's heads dims (none for a single head).
template <class Op, Dim C, class X, class Cache, Dim HS, Dim... Heads>
consteval auto attention_misfit();
template <class Op, Dim C, class X, class Cache, Dim HS, Dim... Heads>
using attention_misfit_t = typename decltype(attention_misfit<Op, C, X, Cache, HS, Heads...>())::type;

// Whether a layer's own dims keep its class's rules; a layer that breaks one was reported with
// its type, and its calls are silent. Specialised by the layers that have such rules.
template <class Layer>
inline constexpr bool layer_keeps_rules = true;

// NH heads of size HS share the C channels: NH x HS must be C.
template <Dim C, Dim NH, Dim HS>
inline constexpr bool heads_fill_channels = NH::extent * HS::extent == C::extent;
}  // namespace detail

template <class C>
concept KeyValueCache = detail::is_kv_cache<std::remove_cvref_t<C>>;

template <StaticDim C, StaticDim H, class T = float>
class Head {
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

    // The full causal forward: x (B, T, C) -> (B, T, H).
    // A misfit picks the overload only declared, whose return type is the failed check: the compiler
    // instantiates it at the caller's line, with no frame of ours around it.
    template <Expression X>
        requires std::is_void_v<detail::attention_misfit_t<Head, C, X, void, H>>
    auto operator()(const X& x) const {
        return causal_self_attention(*this, x);
    }
    template <Expression X>
        requires(!std::is_void_v<detail::attention_misfit_t<Head, C, X, void, H>>)
    detail::attention_misfit_t<Head, C, X, void, H> operator()(const X&) const;

    // Decoding: x (B, n, C) holds the next n positions of every batch row -> (B, n, H). With
    // counts (a ragged batch), batch row b takes only the first counts[b] positions of x.
    template <Expression X, KeyValueCache Cache>
        requires std::is_void_v<detail::attention_misfit_t<Head, C, X, Cache, H>>
    auto operator()(const X& x, Cache& cache, std::optional<typename Cache::lengths_type> counts = std::nullopt) const {
        return causal_self_attention(*this, x, cache, counts);
    }
    template <Expression X, KeyValueCache Cache>
        requires(!std::is_void_v<detail::attention_misfit_t<Head, C, X, Cache, H>>)
    detail::attention_misfit_t<Head, C, X, Cache, H> operator()(const X&, Cache&,
                                                                   std::optional<typename Cache::lengths_type> = std::nullopt) const;

    // After a failed check (in the input's expression, or a rejected cache type): failed, with no
    // second error.
    template <class... Args>
        requires any_failed<Args...>
    failed operator()(Args&&...) const;

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
class MultiHeadAttention {
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

    // The full causal forward: x (B, T, C) -> (B, T, C).
    // A misfit picks the overload only declared, whose return type is the failed check: the compiler
    // instantiates it at the caller's line, with no frame of ours around it.
    template <Expression X>
        requires std::is_void_v<detail::attention_misfit_t<MultiHeadAttention, C, X, void, HS, NH>>
    auto operator()(const X& x) const {
        return causal_self_attention(*this, x);
    }
    template <Expression X>
        requires(!std::is_void_v<detail::attention_misfit_t<MultiHeadAttention, C, X, void, HS, NH>>)
    detail::attention_misfit_t<MultiHeadAttention, C, X, void, HS, NH> operator()(const X&) const;

    // Decoding: x (B, n, C) holds the next n positions of every batch row -> (B, n, C). With
    // counts (a ragged batch), batch row b takes only the first counts[b] positions of x.
    template <Expression X, KeyValueCache Cache>
        requires std::is_void_v<detail::attention_misfit_t<MultiHeadAttention, C, X, Cache, HS, NH>>
    auto operator()(const X& x, Cache& cache, std::optional<typename Cache::lengths_type> counts = std::nullopt) const {
        return causal_self_attention(*this, x, cache, counts);
    }
    template <Expression X, KeyValueCache Cache>
        requires(!std::is_void_v<detail::attention_misfit_t<MultiHeadAttention, C, X, Cache, HS, NH>>)
    detail::attention_misfit_t<MultiHeadAttention, C, X, Cache, HS, NH> operator()(
        const X&, Cache&, std::optional<typename Cache::lengths_type> = std::nullopt) const;

    // After a failed check (in the input's expression, or a rejected cache type): failed, with no
    // second error.
    template <class... Args>
        requires any_failed<Args...>
    failed operator()(Args&&...) const;

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

// ---- implementation ------------------------------------------------------------------------

namespace detail {

template <class Op, Dim C, class X, class Cache, Dim HS, Dim... Heads>
consteval auto attention_misfit() {
    // A layer that breaks its rules was reported with its type, and an input or cache that is no
    // expression or cache (a failed one) picks no overload of these: silent here.
    if constexpr (!layer_keeps_rules<Op> || !Expression<X> || (!std::is_void_v<Cache> && !KeyValueCache<Cache>)) {
        return std::type_identity<failed>{};
    } else if constexpr (rank_of<X> != 3 || !can_meet<dim_at<2, dims_of<X>>, C>) {
        return std::type_identity<diag::layer_input<Op, C, dims_of<X>>>{};
    } else if constexpr (std::is_void_v<Cache>) {
        return std::type_identity<void>{};
    } else {
        using CD = typename Cache::dims_type;
        using XB = dim_at<0, dims_of<X>>;
        using heads = diag::attention_cache_heads<Op, dims<Heads...>, CD>;
        if constexpr (CD::rank != 3 + sizeof...(Heads))
            return std::type_identity<heads>{};
        else if constexpr (!(can_meet<Heads, dim_at<1, CD>> && ...))
            return std::type_identity<heads>{};
        else if constexpr (!can_meet<HS, dim_at<CD::rank - 1, CD>>)
            return std::type_identity<diag::attention_cache_head_size<Op, HS, dim_at<CD::rank - 1, CD>>>{};
        else if constexpr (!can_meet<XB, dim_at<0, CD>>)
            return std::type_identity<diag::attention_cache_batch<Op, XB, dim_at<0, CD>>>{};
        else if constexpr (!cache_fits_window<Op, Cache>)
            return std::type_identity<diag::attention_cache_window<Op, layer_window_t<Op>, Cache>>{};
        else
            return std::type_identity<void>{};
    }
}

}  // namespace detail

}  // namespace shaped::nn
