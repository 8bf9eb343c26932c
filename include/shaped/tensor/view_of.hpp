#pragma once
// view_of(e): the elements a stored expression reads, as a View of e's own dims — a Tensor or a
// View, or either with its dims transposed, permuted or renamed, or with a dim of extent 1
// inserted or dropped (unsqueeze, squeeze). No element is copied: the View
// has e's extents and the strides it reads its storage with. It is writable when the storage is
// (a permuted writable View), so that a result can be written straight into another layout:
//
//   auto heads = view_of(transpose<1, 2>(split<C, NH, HS>(out)));   // (B, NH, T, HS) of (B, T, C)
//   heads = causal_attention(q, k, v, scale);                        // written in out's layout

#include <shaped/expr/structure.hpp>
#include <shaped/tensor/view.hpp>

#include <array>
#include <cstddef>
#include <type_traits>

namespace shaped {

namespace detail {
template <class E>
inline constexpr bool viewable = Strided<E>;
template <class E, std::array<std::size_t, rank_of<E>> Perm>
inline constexpr bool viewable<permute_node<E, Perm>> = viewable<std::remove_cvref_t<E>>;
template <class E, class NewDims>
inline constexpr bool viewable<rename_node<E, NewDims>> = viewable<std::remove_cvref_t<E>>;
template <class E, std::size_t Axis, class NewDims>
inline constexpr bool viewable<unit_dim_node<E, Axis, NewDims>> = viewable<std::remove_cvref_t<E>>;

// Makes the View of a layout read off stored elements, unchecked: it fits, as they do.
struct stored_layout {
    template <class V>
    static V view(auto* data, const typename V::extents_type& extents, const typename V::strides_type& strides) {
        return V(typename V::unchecked{}, data, extents, strides);
    }
};

// The View of x's stored elements with a dim of extent 1 inserted at Axis, or x's dim at Axis
// (of extent 1) dropped, NewDims its dims: the same elements, no check needed. An inserted dim
// takes the stride a row-major layout would give it, so that a row-major x stays row-major.
template <std::size_t Axis, class NewDims, class S>
auto unit_dim_view(S&& x) {
    using element = std::remove_pointer_t<decltype(x.data())>;
    using V = view_for<element, NewDims>;
    constexpr std::size_t from = rank_of<S>, to = NewDims::rank;
    const auto extents = x.extents();
    const auto strides = x.strides();
    std::ptrdiff_t stride = 1;
    if constexpr (to > from && Axis < from) stride = strides[Axis] * static_cast<std::ptrdiff_t>(extents[Axis]);
    return stored_layout::view<V>(x.data(), with_unit_entry<Axis, to>(extents, std::size_t{1}),
                                  with_unit_entry<Axis, to>(strides, stride));
}
}  // namespace detail

// An expression whose elements are stored, read through strides: what view_of takes.
template <class E>
concept Viewable = Expression<E> && detail::viewable<std::remove_cvref_t<E>>;

// A Tensor lvalue gives a writable View; a const one, or one a node refers to, a read-only View.
template <Viewable E>
auto view_of(E&& e) {
    using node = std::remove_cvref_t<E>;
    if constexpr (Strided<node>) {
        using element = std::remove_pointer_t<decltype(e.data())>;
        return detail::rebased(e, detail::stored_layout::view<view_for<element, dims_of<node>>>(e.data(), e.extents(), e.strides()));
    } else {
        const auto inner = view_of(e.operand());
        using element = std::remove_pointer_t<decltype(inner.data())>;
        if constexpr (requires { node::permutation; }) {
            std::array<std::size_t, rank_of<node>> extents{};
            std::array<std::ptrdiff_t, rank_of<node>> strides{};
            for (std::size_t i = 0; i < rank_of<node>; ++i) {
                extents[i] = inner.extents()[node::permutation[i]];
                strides[i] = inner.strides()[node::permutation[i]];
            }
            return detail::rebased(inner, detail::stored_layout::view<view_for<element, dims_of<node>>>(inner.data(), extents, strides));
        } else if constexpr (requires { node::unit_axis; }) {
            return detail::rebased(inner, detail::unit_dim_view<node::unit_axis, dims_of<node>>(inner));
        } else {
            return detail::rebased(
                inner, detail::stored_layout::view<view_for<element, dims_of<node>>>(inner.data(), inner.extents(), inner.strides()));
        }
    }
}
template <Failed E>
failed view_of(E&&);

}  // namespace shaped
