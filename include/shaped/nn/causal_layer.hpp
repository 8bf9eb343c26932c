#pragma once
// nn::causal_layer<Layer>: the calls every causal layer answers, written once. A layer derives
// from it (CRTP) and gets
//
//   layer(x)                   the full causal forward over x (B, T, C)
//   layer(x, cache, counts)    decoding the next positions with its KV cache (counts: a ragged
//                              batch, row b taking its first counts[b] positions of x)
//
// each checked first, by name: x must be (B, T, C), C the layer's channel_dim, and the cache
// must fit the layer's heads, head size, batch and window. A call that does not fit picks an
// overload only declared, whose return type is the failed check, so the compiler reports it at
// the caller's line in a few lines; a call on an input that already failed is silent.
//
// What the call runs is the layer's:
//
//   forward(x[, cache, counts])   a layer made of others (a block): its own composition
//   otherwise                     nn::causal_self_attention(layer, x[, cache, counts]), the one
//                                 attention routine, run with the parts the layer names
//                                 (nn/causal_self_attention.hpp), its heads checked by name
//
// A layer names value_type, channel_dim, head_size_dim, and heads_dim (several heads),
// kv_heads_dim (grouped key/value heads) or neither (one head). nn::extends<Base, Layer> (below)
// is a built-in layer Base with parts of the user's own.

#include <shaped/nn/causal_self_attention.hpp>

#include <optional>
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
}  // namespace detail

template <class C>
concept KeyValueCache = detail::is_kv_cache<std::remove_cvref_t<C>>;

namespace detail {
// Whether a layer's own dims keep its class's rules; a layer that breaks one was reported with
// its type, and its calls are silent. Specialised by the layers that have such rules.
template <class Layer>
inline constexpr bool layer_keeps_rules = true;

// The diagnostic of a layer's call whose input x is not (B, T, C), whose cache (void for the full
// forward) does not fit the layer or the input, or, for a layer run by the attention routine,
// whose heads or scale do not fit; void when the call fits.
template <class Layer, class X, class Cache>
consteval auto layer_misfit();
template <class Layer, class X, class Cache>
using layer_misfit_t = typename decltype(layer_misfit<Layer, X, Cache>())::type;

template <class Layer, class... Args>
concept composed_layer = requires(const Layer& layer, Args&... args) { layer.forward(args...); };
}  // namespace detail

template <class Layer>
class causal_layer {
public:
    // The full causal forward: x (B, T, C) -> (B, T, the layer's output).
    template <Expression X>
        requires std::is_void_v<detail::layer_misfit_t<Layer, X, void>>
    auto operator()(const X& x) const {
        if constexpr (detail::composed_layer<Layer, const X>) return self().forward(x);
        else return causal_self_attention(self(), x);
    }
    template <Expression X>
        requires(!std::is_void_v<detail::layer_misfit_t<Layer, X, void>>)
    detail::layer_misfit_t<Layer, X, void> operator()(const X&) const;

    // Decoding: x (B, n, C) holds the next n positions of every batch row; with counts (a ragged
    // batch), batch row b takes only its first counts[b] positions, and its output at the
    // padding positions is 0.
    template <Expression X, KeyValueCache Cache>
        requires std::is_void_v<detail::layer_misfit_t<Layer, X, Cache>>
    auto operator()(const X& x, Cache& cache, std::optional<typename Cache::lengths_type> counts = std::nullopt) const {
        if constexpr (detail::composed_layer<Layer, const X, Cache, std::optional<typename Cache::lengths_type>>)
            return self().forward(x, cache, counts);
        else
            return causal_self_attention(self(), x, cache, counts);
    }
    template <Expression X, KeyValueCache Cache>
        requires(!std::is_void_v<detail::layer_misfit_t<Layer, X, Cache>>)
    detail::layer_misfit_t<Layer, X, Cache> operator()(const X&, Cache&,
                                                       std::optional<typename Cache::lengths_type> = std::nullopt) const;

    // After a failed check (in the input's expression, or a rejected cache type): failed, with no
    // second error.
    template <class... Args>
        requires any_failed<Args...>
    failed operator()(Args&&...) const;

private:
    const Layer& self() const { return static_cast<const Layer&>(*this); }
};

// nn::extends<Base, Layer>: a built-in layer with parts of the user's own. Layer derives from it
// (CRTP) and has Base's parameters (the same names, so Base's checkpoints load), constructors
// and parts; what Layer declares itself (a score_mod, a mask_mod, a scale, its own heads)
// replaces or adds to them, because the calls are causal_layer<Layer>'s: the attention routine
// runs with Layer's parts.
//
//   struct ALiBiAttention : nn::extends<nn::MultiHeadAttention<C, NH, HS>, ALiBiAttention> {
//       using ALiBiAttention::extends::extends;
//       nn::alibi<NH> score_mod() const { return {}; }
//   };
template <class Base, class Layer>
class extends : public Base, public causal_layer<Layer> {
public:
    using Base::Base;
    // Layer's calls, not Base's (which would run without Layer's parts).
    using causal_layer<Layer>::operator();
};

// ---- implementation ------------------------------------------------------------------------

namespace detail {

// A layer with a sliding window of W decodes with a ring of W positions, and only such a layer
// with a ring.
template <class Layer, class Cache>
inline constexpr bool cache_fits_window = [] {
    if constexpr (windowed_layer<Layer>)
        return is_ring_kv_cache<Cache> && Cache::capacity == layer_window_t<Layer>::size;
    else
        return !is_ring_kv_cache<Cache>;
}();

// The cache's misfit with the layer's key/value heads (none for a single head), void if none.
template <class Layer, class X, class Cache, Dim... Heads>
consteval auto cache_misfit_of(dims<Heads...>) {
    using CD = typename Cache::dims_type;
    using HS = typename Layer::head_size_dim;
    using XB = dim_at<0, dims_of<X>>;
    using heads = diag::attention_cache_heads<Layer, dims<Heads...>, CD>;
    if constexpr (CD::rank != 3 + sizeof...(Heads))
        return std::type_identity<heads>{};
    else if constexpr (!(can_meet<Heads, dim_at<1, CD>> && ...))
        return std::type_identity<heads>{};
    else if constexpr (!can_meet<HS, dim_at<CD::rank - 1, CD>>)
        return std::type_identity<diag::attention_cache_head_size<Layer, HS, dim_at<CD::rank - 1, CD>>>{};
    else if constexpr (!can_meet<XB, dim_at<0, CD>>)
        return std::type_identity<diag::attention_cache_batch<Layer, XB, dim_at<0, CD>>>{};
    else if constexpr (!cache_fits_window<Layer, Cache>)
        return std::type_identity<diag::attention_cache_window<Layer, layer_window_t<Layer>, Cache>>{};
    else
        return std::type_identity<void>{};
}

// A layer run by the attention routine: what it hands the routine. A composed layer's parts
// check their own calls.
template <class Layer, class X>
consteval auto heads_misfit() {
    if constexpr (composed_layer<Layer, const X>) return std::type_identity<void>{};
    else return std::type_identity<self_attention_misfit_t<Layer, X>>{};
}

template <class Layer, class X, class Cache>
consteval auto layer_misfit() {
    using C = typename Layer::channel_dim;
    // A layer that breaks its rules was reported with its type, and an input or cache that is no
    // expression or cache (a failed one) picks no overload of these: silent here.
    if constexpr (!layer_keeps_rules<Layer> || !Expression<X> || (!std::is_void_v<Cache> && !KeyValueCache<Cache>)) {
        return std::type_identity<failed>{};
    } else if constexpr (rank_of<X> != 3 || !can_meet<dim_at<2, dims_of<X>>, C>) {
        return std::type_identity<diag::layer_input<Layer, C, dims_of<X>>>{};
    } else {
        if constexpr (!std::is_void_v<Cache>) {
            using cache = decltype(cache_misfit_of<Layer, X, Cache>(typename kv_heads_of<Layer>::type{}));
            if constexpr (!std::is_void_v<typename cache::type>) return cache{};
            else return heads_misfit<Layer, X>();
        } else {
            return heads_misfit<Layer, X>();
        }
    }
}

}  // namespace detail

}  // namespace shaped::nn
