#pragma once
// Shape algebra on type-level lists of dims, computed at compile time: find a dim by name or
// position, drop, swap or replace one, and broadcast two lists. Operations pick dims by
// index arrays computed in constexpr functions, so the algebra reads as ordinary code.

#include <shaped/core/dim.hpp>

#include <array>
#include <cstddef>
#include <tuple>
#include <utility>

namespace shaped {

template <Dim... Ds>
struct dims {
    static constexpr std::size_t rank = sizeof...(Ds);
    static constexpr bool all_static = (Ds::is_static && ...);
};

template <std::size_t I, class List>
struct dim_at_impl;
template <std::size_t I, class... Ds>
struct dim_at_impl<I, dims<Ds...>> {
    using type = std::tuple_element_t<I, std::tuple<Ds...>>;
};
template <std::size_t I, class List>
using dim_at = typename dim_at_impl<I, List>::type;

// ---- positions -----------------------------------------------------------------------------

// A positional axis as PyTorch takes it: -1 is the last dim.
template <int Axis, std::size_t Rank>
inline constexpr bool axis_in_range = Axis >= -static_cast<int>(Rank) && Axis < static_cast<int>(Rank);

template <int Axis, std::size_t Rank>
inline constexpr std::size_t normalize_axis =
    Axis < 0 ? static_cast<std::size_t>(static_cast<int>(Rank) + Axis) : static_cast<std::size_t>(Axis);

// How many dims of List are named like D, and where the first one is.
template <Dim D, class List>
inline constexpr std::size_t count_named = 0;
template <Dim D, Dim... Ds>
inline constexpr std::size_t count_named<D, dims<Ds...>> = (std::size_t{same_name<D, Ds>} + ... + 0);

template <Dim D, class List>
inline constexpr std::size_t index_named = 0;
template <Dim D, Dim... Ds>
inline constexpr std::size_t index_named<D, dims<Ds...>> = [] {
    constexpr std::array<bool, sizeof...(Ds)> hits{same_name<D, Ds>...};
    for (std::size_t i = 0; i < hits.size(); ++i)
        if (hits[i]) return i;
    return hits.size();
}();

// ---- picking dims by index arrays ----------------------------------------------------------

namespace detail {
template <class List, auto Indices, class Seq = std::make_index_sequence<Indices.size()>>
struct pick_impl;
template <class List, auto Indices, std::size_t... K>
struct pick_impl<List, Indices, std::index_sequence<K...>> {
    using type = dims<dim_at<Indices[K], List>...>;
};

template <std::size_t Rank>
constexpr auto iota_array() {
    std::array<std::size_t, Rank> a{};
    for (std::size_t i = 0; i < Rank; ++i) a[i] = i;
    return a;
}

template <std::size_t Rank, std::size_t Drop>
constexpr auto without_index() {
    std::array<std::size_t, Rank - 1> a{};
    for (std::size_t i = 0, j = 0; i < Rank; ++i)
        if (i != Drop) a[j++] = i;
    return a;
}

template <std::size_t Rank, std::size_t I, std::size_t J>
constexpr auto swapped_indices() {
    auto a = iota_array<Rank>();
    std::swap(a[I], a[J]);
    return a;
}

template <std::size_t From, std::size_t To>
constexpr auto index_range() {
    std::array<std::size_t, To - From> a{};
    for (std::size_t i = From; i < To; ++i) a[i - From] = i;
    return a;
}
}  // namespace detail

// The dims of List at the given indices, in that order.
template <class List, auto Indices>
using pick = typename detail::pick_impl<List, Indices>::type;

template <std::size_t I, class List>
using drop_at = pick<List, detail::without_index<List::rank, I>()>;

template <std::size_t I, std::size_t J, class List>
using swap_at = pick<List, detail::swapped_indices<List::rank, I, J>()>;

template <std::size_t From, std::size_t To, class List>
using slice_dims = pick<List, detail::index_range<From, To>()>;

template <class... Lists>
struct concat_dims_impl;
template <>
struct concat_dims_impl<> {
    using type = dims<>;
};
template <class... As>
struct concat_dims_impl<dims<As...>> {
    using type = dims<As...>;
};
template <class... As, class... Bs, class... Rest>
struct concat_dims_impl<dims<As...>, dims<Bs...>, Rest...> {
    using type = typename concat_dims_impl<dims<As..., Bs...>, Rest...>::type;
};
template <class... Lists>
using concat_dims = typename concat_dims_impl<Lists...>::type;

template <std::size_t I, Dim D, class List>
using replace_at = concat_dims<slice_dims<0, I, List>, dims<D>, slice_dims<I + 1, List::rank, List>>;

// ---- broadcasting --------------------------------------------------------------------------
// NumPy's rule by position, aligned from the right, where aligned dims must also agree in name;
// a dim absent from the shorter list broadcasts, and so does a static extent of 1.

template <Dim A, Dim B>
inline constexpr bool broadcastable_pair =
    same_name<A, B> && (!extents_differ<A, B> || has_static_extent<A, 1> || has_static_extent<B, 1>);

namespace detail {
template <Dim A, Dim B>
consteval auto broadcast_pair_of() {
    constexpr bool a_spreads = has_static_extent<A, 1>;
    constexpr bool b_spreads = has_static_extent<B, 1>;
    if constexpr (A::is_static && !a_spreads) return std::type_identity<A>{};
    else if constexpr (B::is_static && !b_spreads) return std::type_identity<B>{};
    else if constexpr (A::is_static && B::is_static) return std::type_identity<A>{};
    else return std::type_identity<dynamic_of<A>>{};
}
}  // namespace detail

// The dim where A and B broadcast: the static one that does not spread, else a dynamic one.
template <Dim A, Dim B>
using broadcast_pair = typename decltype(detail::broadcast_pair_of<A, B>())::type;

namespace detail {
// The first position (from the left of the longer list) where the lists fail to broadcast, or
// the longer rank when they do.
template <class L, class R>
struct broadcast_impl;
template <Dim... Ls, Dim... Rs>
struct broadcast_impl<dims<Ls...>, dims<Rs...>> {
    static constexpr std::size_t rank = std::max(sizeof...(Ls), sizeof...(Rs));
    static constexpr std::size_t lpad = rank - sizeof...(Ls);
    static constexpr std::size_t rpad = rank - sizeof...(Rs);
    using L = dims<Ls...>;
    using R = dims<Rs...>;

    template <std::size_t I>
    static constexpr bool ok_at() {
        if constexpr (I < lpad || I < rpad) return true;
        else return broadcastable_pair<dim_at<I - lpad, L>, dim_at<I - rpad, R>>;
    }
    template <std::size_t I>
    static auto result_dim() {
        if constexpr (I < lpad) return std::type_identity<dim_at<I - rpad, R>>{};
        else if constexpr (I < rpad) return std::type_identity<dim_at<I - lpad, L>>{};
        else return std::type_identity<broadcast_pair<dim_at<I - lpad, L>, dim_at<I - rpad, R>>>{};
    }
    template <std::size_t... I>
    static constexpr std::size_t first_failure(std::index_sequence<I...>) {
        constexpr std::array<bool, sizeof...(I)> ok{ok_at<I>()...};
        for (std::size_t i = 0; i < ok.size(); ++i)
            if (!ok[i]) return i;
        return ok.size();
    }
    template <std::size_t... I>
    static auto result(std::index_sequence<I...>) -> dims<typename decltype(result_dim<I>())::type...>;

    static constexpr std::size_t failure = first_failure(std::make_index_sequence<rank>{});
    static constexpr bool ok = failure == rank;
};
}  // namespace detail

template <class L, class R>
inline constexpr bool broadcastable = detail::broadcast_impl<L, R>::ok;

// The offending pair where L and R fail to broadcast (only meaningful when they do fail).
template <class L, class R>
struct broadcast_failure {
    using impl = detail::broadcast_impl<L, R>;
    static constexpr std::size_t at = impl::failure;
    using lhs = dim_at<at - impl::lpad, L>;
    using rhs = dim_at<at - impl::rpad, R>;
};

template <class L, class R>
using broadcast_dims = decltype(detail::broadcast_impl<L, R>::result(
    std::make_index_sequence<detail::broadcast_impl<L, R>::rank>{}));

template <class L, class R>
inline constexpr bool same_dims = std::is_same_v<L, R>;

}  // namespace shaped
