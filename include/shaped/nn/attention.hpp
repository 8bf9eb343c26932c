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
// mixes positions, and a position sees the same keys and values either way.

#include <shaped/nn/kv_cache.hpp>
#include <shaped/nn/linear.hpp>

#include <algorithm>
#include <cmath>
#include <optional>
#include <tuple>
#include <type_traits>

namespace shaped::op {
struct attention_head {};
struct multi_head_attention {};
}  // namespace shaped::op

namespace shaped::nn {

namespace detail {
template <class C>
inline constexpr bool is_kv_cache = false;
template <class T, Dim... Ds>
    requires cache_layout<Ds...>
inline constexpr bool is_kv_cache<KVCache<T, Ds...>> = true;

// The diagnostic of a decoding call whose cache does not fit the layer or the input, or void.
template <class Layer, class X, class Cache, Dim HS, Dim... Heads>
consteval auto cache_misfit();
template <class Layer, class X, class Cache, Dim HS, Dim... Heads>
using cache_misfit_t = typename decltype(cache_misfit<Layer, X, Cache, HS, Heads...>())::type;

// x is (B, T, C), C the layer's.
template <Dim C, class X>
inline constexpr bool input_fits = [] {
    if constexpr (rank_of<X> != 3) return false;
    else return can_meet<dim_at<2, dims_of<X>>, C>;
}();

struct check_passed {};
}  // namespace detail

template <class C>
concept KeyValueCache = detail::is_kv_cache<std::remove_cvref_t<C>>;

// The factor q @ k^T is scaled by, head_size^-0.5: it keeps the scores' variance near one, so
// that softmax does not saturate as heads widen (the chapter's section 2).
template <StaticDim HS>
inline const float attention_scale = static_cast<float>(std::pow(static_cast<double>(HS::extent), -0.5));

template <StaticDim C, StaticDim H>
class Head {
public:
    using channel_dim = C;
    using head_size_dim = H;
    // The cache this head decodes with: keys and values (B, S, H), S the capacity.
    template <StaticDim B, StaticDim S>
    using cache_type = KVCache<float, B, S, H>;

    // Parameters zero-filled, to be loaded.
    Head() = default;
    // PyTorch's initialisation, drawn for key, query and value in that order, as the chapter.
    explicit Head(Generator& gen) : key(gen), query(gen), value(gen) {}

    // The full causal forward: x (B, T, C) -> (B, T, H).
    template <Expression X>
    auto operator()(const X& x) const;

    // Decoding: x (B, n, C) holds the next n positions of every batch row -> (B, n, H). With
    // counts (a ragged batch), batch row b takes only the first counts[b] positions of x.
    template <Expression X, KeyValueCache Cache>
    auto operator()(const X& x, Cache& cache,
                    std::optional<typename Cache::lengths_type> counts = std::nullopt) const;

    // Calls f(name, parameter) for each parameter, named as the chapter's Head module's
    // state_dict names them: "key.weight", "query.weight", "value.weight".
    template <class F>
    void for_each_parameter(F&& f) { visit_parameters(*this, f); }
    template <class F>
    void for_each_parameter(F&& f) const { visit_parameters(*this, f); }

    Linear<C, H, false> key;
    Linear<C, H, false> query;
    Linear<C, H, false> value;

private:
    template <class Self, class F>
    static void visit_parameters(Self& self, F& f) {
        self.key.for_each_parameter(detail::prefixed("key.", f));
        self.query.for_each_parameter(detail::prefixed("query.", f));
        self.value.for_each_parameter(detail::prefixed("value.", f));
    }
};

template <StaticDim C, StaticDim NH, StaticDim HS, bool Bias = true>
class MultiHeadAttention {
    // NH heads of size HS share the C channels: NH x HS must be C.
    static constexpr std::conditional_t<NH::extent * HS::extent == C::extent, detail::check_passed,
                                        diag::attention_heads_product<diag::show<C>, diag::show<NH>, diag::show<HS>>>
        heads_fill_channels{};

public:
    using channel_dim = C;
    using heads_dim = NH;
    using head_size_dim = HS;
    // c_attn's output: the queries, keys and values of all heads, side by side.
    using fused_dim = dim<"QKV", 3 * C::extent>;
    // Which of the three a slice of fused_dim is: 0 queries, 1 keys, 2 values.
    using part_dim = dim<"QKV", 3>;
    // The cache this layer decodes with: keys and values (B, NH, S, HS), S the capacity.
    template <StaticDim B, StaticDim S>
    using cache_type = KVCache<float, B, NH, S, HS>;

    // Parameters zero-filled, to be loaded.
    MultiHeadAttention() = default;
    // PyTorch's initialisation, drawn for c_attn, then c_proj.
    explicit MultiHeadAttention(Generator& gen) : c_attn(gen), c_proj(gen) {}

    // The full causal forward: x (B, T, C) -> (B, T, C).
    template <Expression X>
    auto operator()(const X& x) const;

    // Decoding: x (B, n, C) holds the next n positions of every batch row -> (B, n, C). With
    // counts (a ragged batch), batch row b takes only the first counts[b] positions of x.
    template <Expression X, KeyValueCache Cache>
    auto operator()(const X& x, Cache& cache,
                    std::optional<typename Cache::lengths_type> counts = std::nullopt) const;

    // Calls f(name, parameter) for each parameter, named as nanoGPT's CausalSelfAttention's
    // state_dict names them: "c_attn.weight", "c_attn.bias", "c_proj.weight", "c_proj.bias"
    // (the biases only with Bias).
    template <class F>
    void for_each_parameter(F&& f) { visit_parameters(*this, f); }
    template <class F>
    void for_each_parameter(F&& f) const { visit_parameters(*this, f); }

    Linear<C, fused_dim, Bias> c_attn;
    Linear<C, C, Bias> c_proj;

private:
    template <class Self, class F>
    static void visit_parameters(Self& self, F& f) {
        self.c_attn.for_each_parameter(detail::prefixed("c_attn.", f));
        self.c_proj.for_each_parameter(detail::prefixed("c_proj.", f));
    }
};

// ---- implementation ------------------------------------------------------------------------

namespace detail {

template <class Layer, class X, class Cache, Dim HS, Dim... Heads>
consteval auto cache_misfit() {
    using CD = typename Cache::dims_type;
    using XB = dim_at<0, dims_of<X>>;
    if constexpr (CD::rank != 3 + sizeof...(Heads))
        return std::type_identity<diag::attention_cache_heads<Layer, diag::dims<diag::show<Heads>...>, diag::show_dims<CD>>>{};
    else if constexpr (!(can_meet<Heads, dim_at<1, CD>> && ...))
        return std::type_identity<diag::attention_cache_heads<Layer, diag::dims<diag::show<Heads>...>, diag::show_dims<CD>>>{};
    else if constexpr (!can_meet<HS, dim_at<CD::rank - 1, CD>>)
        return std::type_identity<diag::attention_cache_head_size<Layer, diag::show<HS>, diag::show<dim_at<CD::rank - 1, CD>>>>{};
    else if constexpr (!can_meet<XB, dim_at<0, CD>>)
        return std::type_identity<diag::attention_cache_batch<Layer, diag::show<XB>, diag::show<dim_at<0, CD>>>>{};
    else
        return std::type_identity<void>{};
}

// Attention of new queries q (B, [NH,] n, HS) over a cache that already holds their keys and
// values: batch row b's new queries are its positions starts[b] .. starts[b] + counts[b] - 1,
// and each sees its row's positions up to its own. Positions of out past counts[b] are left as
// they are (padding).
template <class Out, class Q, class Cache>
void cached_attention_into(Out& out, const Q& q, const Cache& cache, const typename Cache::lengths_type& starts,
                           const typename Cache::lengths_type& counts, float scale) {
    using B = typename Cache::batch_dim;
    using S = typename Cache::length_dim;
    using Tq = dim_at<rank_of<Q> - 2, dims_of<Q>>;
    const std::size_t n = q.extents()[rank_of<Q> - 2];
    const auto keys = cache.keys();
    const auto values = cache.values();
    // An even batch — every row as long as the others, every row taking all n — is one problem:
    // its queries are the last n of the positions the cache holds.
    const bool even = std::all_of(starts.begin(), starts.end(), [&](std::size_t s) { return s == starts[0]; }) &&
                      std::all_of(counts.begin(), counts.end(), [&](std::size_t c) { return c == n; });
    if (even) {
        out = causal_attention(q, keys, values, scale);
        return;
    }
    // A ragged batch: each row is a problem of its own, over its own positions only.
    const auto queries = eval(q);
    for (std::size_t b = 0; b < B::extent; ++b) {
        if (counts[b] == 0) continue;
        const std::size_t seen = starts[b] + counts[b];
        const auto row_queries = select<B>(queries, b);
        const auto row_keys = select<B>(keys, b);
        const auto row_values = select<B>(values, b);
        auto row_out = select<B>(out, b);
        auto new_out = slice<Tq>(row_out, 0, counts[b]);
        new_out = causal_attention(slice<Tq>(row_queries, 0, counts[b]), slice<S>(row_keys, 0, seen),
                                   slice<S>(row_values, 0, seen), scale);
    }
}

// Zeroes positions counts[b] and later of each batch row of out (B, n, D): a ragged batch's padding.
template <class Out, std::size_t Batch>
void zero_padding(Out& out, const std::array<std::size_t, Batch>& counts) {
    const auto extents = out.extents();
    for (std::size_t b = 0; b < Batch; ++b)
        for (std::size_t i = counts[b]; i < extents[1]; ++i)
            for (std::size_t d = 0; d < extents[2]; ++d) out(b, i, d) = 0.0f;
}

// The queries, keys and values of every head, (B, NH, T, HS) each, as views of c_attn's output
// (B, T, 3C): the channel dim split into (3, NH, HS), one part selected, T and NH swapped.
template <class Layer, class QKV>
auto split_heads(QKV& qkv) {
    auto parts = split<typename Layer::fused_dim, typename Layer::part_dim, typename Layer::channel_dim>(qkv);
    auto heads = split<typename Layer::channel_dim, typename Layer::heads_dim, typename Layer::head_size_dim>(parts);
    auto part = [&](std::size_t which) { return transpose<1, 2>(select<typename Layer::part_dim>(heads, which)); };
    return std::tuple{part(0), part(1), part(2)};
}

}  // namespace detail

// ---- Head ----------------------------------------------------------------------------------

template <StaticDim C, StaticDim H>
template <Expression X>
auto Head<C, H>::operator()(const X& x) const {
    // The checks are written here, in the function the user calls, so that a misuse is one error.
    if constexpr (!detail::input_fits<C, X>) {
        (void)diag::layer_input<op::attention_head, diag::show<C>, diag::show_dims<dims_of<X>>>{};
        return diag::failed{};
    } else {
        using B = dim_at<0, dims_of<X>>;
        using T = dim_at<1, dims_of<X>>;
        const Tensor<float, B, T, H> k = key(x);
        const Tensor<float, B, T, H> q = query(x);
        const Tensor<float, B, T, H> v = value(x);
        return Tensor<float, B, T, H>(causal_attention(q, k, v, attention_scale<H>));
    }
}

template <StaticDim C, StaticDim H>
template <Expression X, KeyValueCache Cache>
auto Head<C, H>::operator()(const X& x, Cache& cache, std::optional<typename Cache::lengths_type> counts) const {
    using misfit = detail::cache_misfit_t<op::attention_head, X, Cache, H>;
    if constexpr (!detail::input_fits<C, X>) {
        (void)diag::layer_input<op::attention_head, diag::show<C>, diag::show_dims<dims_of<X>>>{};
        return diag::failed{};
    } else if constexpr (!std::is_void_v<misfit>) {
        (void)misfit{};
        return diag::failed{};
    } else {
        using B = dim_at<0, dims_of<X>>;
        using T = dim_at<1, dims_of<X>>;
        const Tensor<float, B, T, H> k = key(x);
        const Tensor<float, B, T, H> q = query(x);
        const Tensor<float, B, T, H> v = value(x);
        if (!counts) counts.emplace().fill(x.extents()[1]);
        const auto starts = cache.lengths();
        cache.append(k, v, counts);
        Tensor<float, B, T, H> out{q.shape()};
        detail::cached_attention_into(out, q, cache, starts, *counts, attention_scale<H>);
        return out;
    }
}

// ---- MultiHeadAttention --------------------------------------------------------------------

template <StaticDim C, StaticDim NH, StaticDim HS, bool Bias>
template <Expression X>
auto MultiHeadAttention<C, NH, HS, Bias>::operator()(const X& x) const {
    if constexpr (!detail::input_fits<C, X>) {
        (void)diag::layer_input<op::multi_head_attention, diag::show<C>, diag::show_dims<dims_of<X>>>{};
        return diag::failed{};
    } else {
        using B = dim_at<0, dims_of<X>>;
        using T = dim_at<1, dims_of<X>>;
        Tensor<float, B, T, fused_dim> qkv = c_attn(x);
        const auto [q, k, v] = detail::split_heads<MultiHeadAttention>(qkv);
        const Tensor<float, B, NH, T, HS> y = causal_attention(q, k, v, attention_scale<HS>);
        // The heads side by side again, (B, T, C), then mixed by the output projection.
        return Tensor<float, B, T, C>(c_proj(merge<NH, HS, C>(transpose<1, 2>(y))));
    }
}

template <StaticDim C, StaticDim NH, StaticDim HS, bool Bias>
template <Expression X, KeyValueCache Cache>
auto MultiHeadAttention<C, NH, HS, Bias>::operator()(const X& x, Cache& cache,
                                                     std::optional<typename Cache::lengths_type> counts) const {
    using misfit = detail::cache_misfit_t<op::multi_head_attention, X, Cache, HS, NH>;
    if constexpr (!detail::input_fits<C, X>) {
        (void)diag::layer_input<op::multi_head_attention, diag::show<C>, diag::show_dims<dims_of<X>>>{};
        return diag::failed{};
    } else if constexpr (!std::is_void_v<misfit>) {
        (void)misfit{};
        return diag::failed{};
    } else {
        using B = dim_at<0, dims_of<X>>;
        using T = dim_at<1, dims_of<X>>;
        Tensor<float, B, T, fused_dim> qkv = c_attn(x);
        const auto [q, k, v] = detail::split_heads<MultiHeadAttention>(qkv);
        if (!counts) counts.emplace().fill(x.extents()[1]);
        const auto starts = cache.lengths();
        cache.append(k, v, counts);
        Tensor<float, B, NH, T, HS> y{Shape<B, NH, T, HS>(q.extents())};
        detail::cached_attention_into(y, q, cache, starts, *counts, attention_scale<HS>);
        Tensor<float, B, T, C> out = c_proj(merge<NH, HS, C>(transpose<1, 2>(y)));
        detail::zero_padding(out, *counts);
        return out;
    }
}

}  // namespace shaped::nn
