#pragma once
// The one causal self-attention routine every attention layer runs, forward and decoding:
//
//   1. project    x (B, T, C) -> q, k, v, each (B, [NH,] T, HS), where the layer's projections
//                 put them (views of one fused projection, or tensors of their own)
//   2. position   the layer's position encoding of q and k (in place, or returned and written
//                 back, so that decoding caches the encoded keys)
//   3. cache      decoding only: k and v appended to the cache
//   4. attend     softmax(q k^T * scale, causal) v, written straight into the merged layout
//                 (B, T, [NH x] HS): the heads side by side, with no copy to merge them. With
//                 grouped heads, each group of query heads reads its key/value head in place.
//   5. project    the layer's output projection of the merged heads, or the heads themselves
//
// A layer takes part by naming its parts (see Head and MultiHeadAttention in nn/attention.hpp):
//
//   value_type, head_size_dim, merged_dim     its element type, HS, and the merged heads' dim
//   heads_dim, kv_heads_dim, group_dim         grouped-query layers only: NH query heads in
//                                              groups of G over NKV key/value heads
//   project(x)                                 step 1's storage: whatever owns q, k and v,
//                                              held with eval(...) (so that a differentiated x
//                                              gives values on the tape, train/traced.hpp)
//   heads(projected)                           q, k, v as writable views (B, [NH,] T, HS)
//   encode_positions(q, k, starts)             step 2; starts[b] is row b's first position.
//                                              Either writes q and k in place (void: none, or
//                                              a rotary_encoding as position(), whose backward
//                                              turns back), or returns them encoded, a pair
//                                              held with eval(...) (`return std::pair{eval(
//                                              q_norm(q)), eval(k_norm(k))};`): written back
//                                              into q and k, or, differentiated, attended as
//                                              the values the layer's ops recorded
//   heads_of(merged)                           the merged (B, T, M) tensor as (B, [NH,] T, HS)
//   project_out(merged)                        step 5
//   window_type                                optional: shaped::window<W>, a sliding window
//                                              that step 4 masks by, forward and decoding, and
//                                              decoding with a RingKVCache of W positions
//   scale()                                    optional: the factor of q @ k^T, a value_type
//                                              (HS^-0.5 without it)
//   score_mod(), mask_mod()                    optional: a score modifier and a mask
//                                              (expr/attention_modifiers.hpp) step 4 runs in
//                                              the fused kernel, forward and decoding, given
//                                              each score's batch row, head (the query head)
//                                              and absolute positions
//
// What heads and heads_of give is checked by name against x (B, T, C): (B, NH, T, HS) with
// heads_dim, keys and values (B, NKV, T, HS) with kv_heads_dim, (B, T, HS) for one head. So a
// layer that swaps NH and T, or forgets to split its channels into heads, is one compile error
// naming the part and both dim lists, not attention across the wrong dim.

#include <shaped/nn/differentiated.hpp>
#include <shaped/nn/kv_cache.hpp>
#include <shaped/nn/ring_kv_cache.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <optional>
#include <span>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace shaped::nn {

// The factor q @ k^T is scaled by, head_size^-0.5: it keeps the scores' variance near one, so
// that softmax does not saturate as heads widen (the chapter's section 2).
template <StaticDim HS, class T = float>
inline const T attention_scale = static_cast<T>(std::pow(static_cast<double>(HS::extent), -0.5));

// The position encoding of a layer whose positions are embeddings added to its input (GPT's):
// queries and keys are attended as projected.
struct no_position_encoding {
    template <class Q, class K>
    void operator()(const Q&, const K&, std::span<const std::size_t>) const {}
};

// The window of a layer without a sliding window: each query sees every position before it.
struct no_window {};

namespace detail {

// A layer's score modifier and mask: its score_mod() and mask_mod(), or none.
template <class Layer>
auto score_mod_of(const Layer& layer) {
    if constexpr (requires { layer.score_mod(); }) return layer.score_mod();
    else return unmodified_scores{};
}
template <class Layer>
auto mask_mod_of(const Layer& layer) {
    if constexpr (requires { layer.mask_mod(); }) return layer.mask_mod();
    else return keep_every_key{};
}
template <class Layer>
using layer_mask_mod_t = decltype(mask_mod_of(std::declval<const Layer&>()));

// A layer's window: its window_type where that is a window, else the window its mask_mod()
// holds, else no_window.
template <class Layer>
struct declared_window {
    using type = no_window;
};
template <class Layer>
    requires requires { typename Layer::window_type; }
struct declared_window<Layer> {
    using type = typename Layer::window_type;
};
template <class Layer, std::size_t InMask = window_in<layer_mask_mod_t<Layer>>>
struct layer_window {
    using type = std::conditional_t<is_window<typename declared_window<Layer>::type>, typename declared_window<Layer>::type,
                                    window<InMask>>;
};
template <class Layer>
struct layer_window<Layer, 0> {
    using type = typename declared_window<Layer>::type;
};
template <class Layer>
using layer_window_t = typename layer_window<Layer>::type;

template <class Layer>
concept windowed_layer = is_window<layer_window_t<Layer>>;

// The layer's mask whole: its window and its mask_mod() together.
template <class Layer>
auto mask_of(const Layer& layer) {
    if constexpr (windowed_layer<Layer>) return and_masks(layer_window_t<Layer>{}, mask_mod_of(layer));
    else return mask_mod_of(layer);
}

// The factor a layer's scores are scaled by: its own scale(), or HS^-0.5.
template <class Layer>
typename Layer::value_type scale_of(const Layer& layer) {
    if constexpr (requires { layer.scale(); }) return layer.scale();
    else return attention_scale<typename Layer::head_size_dim, typename Layer::value_type>;
}

// What step 4 hands the kernel of a layer: its score_mod() and the mask `keeps`. Batch row b of
// the problem is the layer's batch row b + batch_origin, key j its position j + key_origin; a
// head is one of the layer's query heads.
template <class Layer, class Mask>
auto modifiers_with(const Layer& layer, Mask keeps, std::size_t batch_origin, std::size_t key_origin) {
    std::size_t heads = 1;
    if constexpr (requires { typename Layer::heads_dim; }) heads = Layer::heads_dim::extent;
    return attention_modifiers<decltype(score_mod_of(layer)), Mask>{score_mod_of(layer), std::move(keeps), heads,
                                                                     batch_origin, key_origin};
}
// The modifiers the kernel runs besides the layer's window, which it attends as a band.
template <class Layer>
auto modifiers_of(const Layer& layer, std::size_t batch_origin, std::size_t key_origin) {
    return modifiers_with(layer, beyond_band(mask_mod_of(layer)), batch_origin, key_origin);
}

// A layer with modifiers beyond a window (those the kernel is told positions for).
template <class Layer>
concept modifying_layer = decltype(modifiers_of(std::declval<const Layer&>(), 0, 0))::modifies_scores ||
                          decltype(modifiers_of(std::declval<const Layer&>(), 0, 0))::masks_keys;

// The diagnostic of a layer's modifier of the wrong signature; void where both fit.
template <class Layer>
consteval auto modifier_misfit() {
    using Value = typename Layer::value_type;
    if constexpr (!score_modifier_for<decltype(score_mod_of(std::declval<const Layer&>())), Value>)
        return std::type_identity<diag::attention_modifier<Layer, diag::modifier_part::score_mod,
                                                           decltype(score_mod_of(std::declval<const Layer&>()))>>{};
    else if constexpr (!key_mask<decltype(mask_mod_of(std::declval<const Layer&>()))>)
        return std::type_identity<diag::attention_modifier<Layer, diag::modifier_part::mask_mod,
                                                           decltype(mask_mod_of(std::declval<const Layer&>()))>>{};
    else
        return std::type_identity<void>{};
}

// The dims the routine expects of a layer's heads, by name: (B, heads..., T, HS), heads the
// layer's heads_dim (queries) or kv_heads_dim (keys and values), none for a single head.
template <class Layer>
struct query_heads_of {
    using type = dims<>;
};
template <class Layer>
    requires requires { typename Layer::heads_dim; }
struct query_heads_of<Layer> {
    using type = dims<typename Layer::heads_dim>;
};
template <class Layer>
struct kv_heads_of : query_heads_of<Layer> {};
template <class Layer>
    requires requires { typename Layer::kv_heads_dim; }
struct kv_heads_of<Layer> {
    using type = dims<typename Layer::kv_heads_dim>;
};
template <Dim B, class Heads, Dim T, Dim HS>
struct heads_layout;
template <Dim B, Dim... Heads, Dim T, Dim HS>
struct heads_layout<B, dims<Heads...>, T, HS> {
    using type = dims<B, Heads..., T, HS>;
};

// Whether two dim lists meet dim by dim (names equal, extents not provably different).
template <class Expected, class Got>
inline constexpr bool dims_meet = false;
template <Dim... E, Dim... G>
    requires(sizeof...(E) == sizeof...(G))
inline constexpr bool dims_meet<dims<E...>, dims<G...>> = (can_meet<E, G> && ...);

// The first of the parts that does not meet its expected dims, as a diagnostic; void if all do.
template <class Layer, class Part, class Expected, class Got, class... Rest>
consteval auto first_misfit_part() {
    if constexpr (!dims_meet<Expected, Got>)
        return std::type_identity<diag::attention_heads<Layer, Part, Expected, Got>>{};
    else if constexpr (sizeof...(Rest) == 0)
        return std::type_identity<void>{};
    else
        return first_misfit_part<Layer, Rest...>();
}

// The diagnostic of what a layer hands the routine for an input x (B, T, C): its heads by name,
// then its scale's type; void when both fit.
template <class Layer, class X>
consteval auto self_attention_misfit() {
    if constexpr (!Expression<X> || rank_of<X> != 3) {
        return std::type_identity<void>{};   // the layer's input check names this
    } else {
        using Value = typename Layer::value_type;
        using B = dim_at<0, dims_of<X>>;
        using T = dim_at<1, dims_of<X>>;
        using HS = typename Layer::head_size_dim;
        using queries = typename heads_layout<B, typename query_heads_of<Layer>::type, T, HS>::type;
        using keys = typename heads_layout<B, typename kv_heads_of<Layer>::type, T, HS>::type;
        using projected = decltype(std::declval<const Layer&>().project(std::declval<const X&>()));
        using heads = decltype(Layer::heads(std::declval<projected&>()));
        using merged = Tensor<Value, B, T, typename Layer::merged_dim>;
        using merged_heads = decltype(Layer::heads_of(std::declval<merged&>()));
        using got_q = dims_of<std::remove_cvref_t<std::tuple_element_t<0, heads>>>;
        using got_k = dims_of<std::remove_cvref_t<std::tuple_element_t<1, heads>>>;
        using got_v = dims_of<std::remove_cvref_t<std::tuple_element_t<2, heads>>>;
        using got_merged = dims_of<std::remove_cvref_t<merged_heads>>;
        using parts = decltype(first_misfit_part<Layer, diag::heads_part::queries, queries, got_q,
                                                 diag::heads_part::keys, keys, got_k, diag::heads_part::values, keys,
                                                 got_v, diag::heads_part::merged, queries, got_merged>());
        if constexpr (!std::is_void_v<typename parts::type>)
            return parts{};
        else if constexpr (requires(const Layer& layer) { layer.scale(); }) {
            using scale = std::remove_cvref_t<decltype(std::declval<const Layer&>().scale())>;
            if constexpr (!std::is_same_v<scale, Value>)
                return std::type_identity<diag::attention_scale_type<Layer, Value, scale>>{};
            else
                return modifier_misfit<Layer>();
        } else {
            return modifier_misfit<Layer>();
        }
    }
}
template <class Layer, class X>
using self_attention_misfit_t = typename decltype(self_attention_misfit<Layer, X>())::type;

// Every batch row starting at position 0, as the full forward's rows do: inline for a static
// batch dim (a small forward allocates nothing for it).
template <Dim B>
auto first_positions(std::size_t batch) {
    if constexpr (B::is_static) return std::array<std::size_t, B::extent>{};
    else return std::vector<std::size_t>(batch, 0);
}

// A grouped-query layer's queries (B, NH, T, HS) as (B, NKV, G, T, HS), and its keys or values
// (B, NKV, T, HS) as (B, NKV, 1, T, HS): the group dim of 1 broadcasts, so that attention reads
// each key/value head once for all G query heads of its group, in place. Other layers' heads
// are attended as they are.
template <class Layer>
concept grouped_query_layer = requires { typename Layer::group_dim; };

template <class Layer, class Q>
auto grouped_queries(const Q& q) {
    if constexpr (grouped_query_layer<Layer>)
        return split<typename Layer::heads_dim, typename Layer::kv_heads_dim, typename Layer::group_dim>(q);
    else return q;
}
template <class Layer, class K>
auto shared_by_group(const K& k) {
    if constexpr (grouped_query_layer<Layer>) {
        using KV = typename Layer::kv_heads_dim;
        return split<KV, KV, dim<Layer::group_dim::name, 1>>(k);
    } else {
        return k;
    }
}

// out = causal_attention(q, k, v, scale, the layer's modifiers and whole mask), grouped as the
// layer's heads are. q, k and v are batch rows batch_origin.. of the layer's, and k's first key
// is at position key_origin (what a modifier is told).
template <class Layer, class Out, class Q, class K, class V>
void attend_heads(const Layer& layer, const Out& out, const Q& q, const K& k, const V& v, typename Layer::value_type scale,
                  std::size_t batch_origin = 0, std::size_t key_origin = 0) {
    grouped_queries<Layer>(out) =
        causal_attention(grouped_queries<Layer>(q), shared_by_group<Layer>(k), shared_by_group<Layer>(v), scale,
                         modifiers_with(layer, mask_of(layer), batch_origin, key_origin));
}

// Step 2 of the plain paths: the layer's encode_positions, its q and k written back where it
// returns them.
template <class Layer, class Q, class K>
void encode_positions_in_place(const Layer& layer, const Q& q, const K& k, std::span<const std::size_t> starts);

// Steps 1, 2, 4 and 5; `attend(heads_out, q, k, v)` is step 4 (and 3, decoding).
template <class Layer, class X, class Attend>
auto run_self_attention(const Layer& layer, const X& x, std::span<const std::size_t> starts, Attend&& attend);

// Attention of new queries q (B, [NH,] n, HS) over a cache that already holds their keys and
// values, into out: batch row b's new queries are its positions starts[b] .. starts[b] +
// counts[b] - 1, and each sees its row's positions up to its own. Positions of out past
// counts[b] are left as they are (padding).
template <class Layer, class Out, class Q, class Cache>
void cached_attention_into(const Layer& layer, const Out& out, const Q& q, const Cache& cache,
                           const typename Cache::lengths_type& starts, const typename Cache::lengths_type& counts,
                           typename Cache::value_type scale);

// Steps 3 and 4 with a ring cache, decoding a windowed layer: new queries q and their keys k and
// values v (B, [NH,] n, HS), batch row b's first counts[b] of them its next positions. Each query
// sees the last W positions up to its own, held in the ring or new.
template <class Layer, class Out, class Q, class K, class V, class Cache>
void ring_attention_into(const Layer& layer, const Out& out, const Q& q, const K& k, const V& v, Cache& cache,
                         const typename Cache::lengths_type& counts, typename Cache::value_type scale);

// Zeroes positions counts[b] and later of each batch row of out (B, n, D): a ragged batch's padding.
template <class Out, std::size_t Batch>
void zero_padding(Out& out, const std::array<std::size_t, Batch>& counts);

}  // namespace detail

// The full causal forward: x (B, T, C) -> (B, T, merged or projected).
// A layer whose heads or scale misfit picks the overload only declared, whose return type is the
// failed check (instantiated at the caller's line).
template <class Layer, class X>
    requires std::is_void_v<detail::self_attention_misfit_t<Layer, X>>
auto causal_self_attention(const Layer& layer, const X& x) {
    const auto starts = detail::first_positions<dim_at<0, dims_of<X>>>(x.extents()[0]);
    const auto scale = detail::scale_of(layer);
    return detail::run_self_attention(layer, x, starts, [&layer, scale](const auto& heads_out, const auto& q, const auto& k, const auto& v) {
        detail::attend_heads(layer, heads_out, q, k, v, scale);
    });
}
template <class Layer, class X>
    requires(!std::is_void_v<detail::self_attention_misfit_t<Layer, X>>)
detail::self_attention_misfit_t<Layer, X> causal_self_attention(const Layer&, const X&);

// Decoding: x (B, n, C) holds the next n positions of every batch row; their keys and values are
// appended to the cache, and each new query attends over its row's positions up to itself. With
// counts (a ragged batch), batch row b takes only its first counts[b] positions; the output at
// its padding positions is 0.
template <class Layer, class X, class Cache>
    requires std::is_void_v<detail::self_attention_misfit_t<Layer, X>>
auto causal_self_attention(const Layer& layer, const X& x, Cache& cache,
                           std::optional<typename Cache::lengths_type> counts) {
    if (!counts) counts.emplace().fill(x.extents()[1]);
    const auto starts = cache.lengths();
    const auto scale = detail::scale_of(layer);
    auto out = detail::run_self_attention(layer, x, starts, [&](const auto& heads_out, const auto& q, const auto& k, const auto& v) {
        if constexpr (detail::is_ring_kv_cache<Cache>) {
            detail::ring_attention_into(layer, heads_out, q, k, v, cache, *counts, scale);
        } else {
            cache.append(k, v, counts);
            detail::cached_attention_into(layer, heads_out, q, cache, starts, *counts, scale);
        }
    });
    detail::zero_padding(out, *counts);
    return out;
}
template <class Layer, class X, class Cache>
    requires(!std::is_void_v<detail::self_attention_misfit_t<Layer, X>>)
detail::self_attention_misfit_t<Layer, X> causal_self_attention(const Layer&, const X&, Cache&,
                                                                 std::optional<typename Cache::lengths_type>);

// ---- implementation ------------------------------------------------------------------------

namespace detail {

template <class Layer, class X, class Attend>
auto run_self_attention(const Layer& layer, const X& x, std::span<const std::size_t> starts, Attend&& attend) {
    using B = dim_at<0, dims_of<X>>;
    using T = dim_at<1, dims_of<X>>;
    using M = typename Layer::merged_dim;
    auto projected = layer.project(x);
    const auto [q, k, v] = Layer::heads(projected);
    if constexpr (differentiated<X>) {
        // x is being differentiated (it evaluates to a value on a tape, train/traced.hpp): the
        // positions' encoding and the heads' attention are recorded operations, the second's
        // value the merged heads, found by argument-dependent lookup (train/attention.hpp). Only
        // the full forward is differentiated.
        const auto [encoded_q, encoded_k] = encoded_positions(layer, q, k, starts);
        return layer.project_out(attended_heads(layer, encoded_q, encoded_k, v, scale_of(layer), x));
    } else {
        encode_positions_in_place(layer, q, k, starts);
        Tensor<typename Layer::value_type, B, T, M> merged{Shape<B, T, M>({x.extents()[0], x.extents()[1], M::extent})};
        attend(Layer::heads_of(merged), q, k, v);
        return layer.project_out(std::move(merged));
    }
}

template <class Layer, class Q, class K>
void encode_positions_in_place(const Layer& layer, const Q& q, const K& k, std::span<const std::size_t> starts) {
    if constexpr (std::is_void_v<decltype(layer.encode_positions(q, k, starts))>) {
        layer.encode_positions(q, k, starts);
    } else {
        const auto [encoded_q, encoded_k] = layer.encode_positions(q, k, starts);
        q = encoded_q;
        k = encoded_k;
    }
}

template <class Layer, class Out, class Q, class Cache>
void cached_attention_into(const Layer& layer, const Out& out, const Q& q, const Cache& cache,
                           const typename Cache::lengths_type& starts, const typename Cache::lengths_type& counts,
                           typename Cache::value_type scale) {
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
        attend_heads(layer, out, q, keys, values, scale);
        return;
    }
    // A ragged batch: each row is a problem of its own, over its own positions only.
    for (std::size_t b = 0; b < B::extent; ++b) {
        if (counts[b] == 0) continue;
        const std::size_t seen = starts[b] + counts[b];
        const auto row_queries = select<B>(q, b);
        const auto row_keys = select<B>(keys, b);
        const auto row_values = select<B>(values, b);
        const auto row_out = select<B>(out, b);
        attend_heads(layer, slice<Tq>(row_out, 0, counts[b]), slice<Tq>(row_queries, 0, counts[b]),
                     slice<S>(row_keys, 0, seen), slice<S>(row_values, 0, seen), scale, b);
    }
}

template <class Layer, class Out, class Q, class K, class V, class Cache>
void ring_attention_into(const Layer& layer, const Out& out, const Q& q, const K& k, const V& v, Cache& cache,
                         const typename Cache::lengths_type& counts, typename Cache::value_type scale) {
    using T = typename Cache::value_type;
    using B = typename Cache::batch_dim;
    using S = typename Cache::length_dim;
    using Tq = dim_at<rank_of<Q> - 2, dims_of<Q>>;
    constexpr std::size_t ring = Cache::capacity;
    const std::size_t n = q.extents()[rank_of<Q> - 2];
    if (n == 1 && !modifying_layer<Layer>) {
        // A step: once its key is in, a row's ring holds exactly the positions its one query
        // sees, the last W, so attention reads the slots in place, in whatever order they lie
        // (a modifier is told positions, so a modifying layer's step takes the chunk's way).
        cache.append(k, v, counts);
        const auto held = cache.held();
        const auto keys = cache.keys();
        const auto values = cache.values();
        const bool even = std::all_of(held.begin(), held.end(), [&](std::size_t h) { return h == held[0]; }) &&
                          std::all_of(counts.begin(), counts.end(), [](std::size_t c) { return c == 1; });
        if (even) {
            attend_heads(layer, out, q, keys, values, scale);
            return;
        }
        for (std::size_t b = 0; b < B::extent; ++b) {
            if (counts[b] == 0) continue;
            const auto row_keys = select<B>(keys, b);
            const auto row_values = select<B>(values, b);
            attend_heads(layer, select<B>(out, b), select<B>(q, b), slice<S>(row_keys, 0, held[b]),
                         slice<S>(row_values, 0, held[b]), scale, b);
        }
        return;
    }
    // A chunk: its first query sees up to W - 1 held positions, which its own append may
    // overwrite. So, per row: those positions and the chunk's own gathered in position order (a
    // copy of at most W - 1 + n rows), attended with the window, and only then the append. The
    // append's checks come first, before counts say how much of k and v to read.
    detail::check_new_positions("nn::RingKVCache", typename Cache::dims_type{}, k, v, counts);
    const auto keys = cache.keys();
    const auto values = cache.values();
    for (std::size_t b = 0; b < B::extent; ++b) {
        const std::size_t count = counts[b];
        if (count == 0) continue;
        const std::size_t start = cache.lengths()[b], older = std::min(start, ring - 1);
        const auto runs = cache.slots_from(b, start - older);
        const auto gather = [&](const auto& held, const auto& fresh) {
            using row_dims = dims_of<decltype(held)>;
            auto extents = held.extents();
            extents[row_dims::rank - 2] = older + count;
            tensor_for<T, row_dims> run{typename tensor_for<T, row_dims>::shape_type(extents)};
            std::size_t at = 0;
            for (const auto slots : runs) {
                if (slots.begin == slots.end) continue;
                slice<S>(run, at, at + (slots.end - slots.begin)) = slice<S>(held, slots.begin, slots.end);
                at += slots.end - slots.begin;
            }
            const view_for<const T, row_dims> fresh_positions(fresh.data(), fresh.extents(), fresh.strides());
            slice<S>(run, older, older + count) = slice<S>(fresh_positions, 0, count);
            return run;
        };
        const auto row_keys = gather(select<B>(keys, b), select<B>(k, b));
        const auto row_values = gather(select<B>(values, b), select<B>(v, b));
        const auto row_queries = select<B>(q, b);
        const auto row_out = select<B>(out, b);
        attend_heads(layer, slice<Tq>(row_out, 0, count), slice<Tq>(row_queries, 0, count), row_keys, row_values, scale,
                     b, start - older);
    }
    cache.append(k, v, counts);
}

template <class Out, std::size_t Batch>
void zero_padding(Out& out, const std::array<std::size_t, Batch>& counts) {
    using T = value_type_of<Out>;
    const auto extents = out.extents();
    for (std::size_t b = 0; b < Batch; ++b)
        for (std::size_t i = counts[b]; i < extents[1]; ++i)
            for (std::size_t d = 0; d < extents[2]; ++d) out(b, i, d) = T{0};
}

}  // namespace detail

}  // namespace shaped::nn
