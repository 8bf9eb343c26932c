#pragma once
// Lazy expressions. Every shaped value that can be read — a Tensor, a View, or a node built by
// an operation — is an Expression: it knows its element type and dims at compile time and its
// extents at run time. Nodes keep the structure of what the user wrote (a masked_fill of a
// scaled matmul stays recognisable as such), so the kernels layer can choose how to lower it.

#include <shaped/core.hpp>
#include <shaped/expr/diagnostics.hpp>

#include <array>
#include <concepts>
#include <cstddef>
#include <tuple>
#include <type_traits>

namespace shaped {

// Base of every expression; carries no data.
struct expression_base {};

template <class E>
concept Expression = std::derived_from<std::remove_cvref_t<E>, expression_base>;

template <class E>
using value_type_of = typename std::remove_cvref_t<E>::value_type;

template <class E>
using dims_of = typename std::remove_cvref_t<E>::dims_type;

template <class E>
inline constexpr std::size_t rank_of = dims_of<E>::rank;

// How a node holds an operand: a Tensor passed as an lvalue by reference (no copy of its
// storage), everything else — temporaries, views, nodes — by value.
template <class E>
using operand_t = std::conditional_t<std::is_lvalue_reference_v<E> && std::remove_cvref_t<E>::owns_storage,
                                     const std::remove_cvref_t<E>&, std::remove_cvref_t<E>>;

// What a node's constructor takes for its operand of held type E: that operand, as an lvalue or
// an rvalue. A constructor constrained so cannot take the node itself, so copying a node held in
// a variable copies it rather than wrapping it in a new node of the same type.
template <class A, class E>
concept operand_for = std::same_as<std::remove_cvref_t<A>, std::remove_cvref_t<E>>;

// A number in an expression: 0-d, broadcasts against anything.
template <class T>
struct scalar : expression_base {
    using value_type = T;
    using dims_type = dims<>;
    static constexpr bool owns_storage = false;

    T value;

    constexpr explicit scalar(T v) : value(v) {}
    constexpr std::array<std::size_t, 0> extents() const { return {}; }
};

template <class S>
concept Scalar = std::is_arithmetic_v<std::remove_cvref_t<S>>;

namespace detail {

// The rules of naming a dim, as an operation's overloads use them: the one that runs requires
// names_one, and the one only declared for a misfit returns named_diag, the failed check, which
// the compiler instantiates at the caller's line:
//     template <Dim D, Expression E> requires detail::names_one<D, dims_of<E>> auto x(E&& e);
//     template <Dim D, Expression E> requires(!detail::names_one<D, dims_of<E>>)
//     detail::named_diag<op::x, D, dims_of<E>> x(E&&);
template <Dim D, class List>
inline constexpr bool names_one = count_named<D, List> == 1;

template <class Op, Dim D, class List>
using named_diag = std::conditional_t<count_named<D, List> == 0,
                                      diag::dim_not_found<Op, D, List>,
                                      diag::ambiguous_dim<Op, D, List>>;

// The diagnostic for the first of Ds that does not name exactly one dim of List.
template <class Op, class List, Dim D, Dim... Rest>
struct first_unnamed {
    using type = typename std::conditional_t<names_one<D, List>, first_unnamed<Op, List, Rest...>,
                                             std::type_identity<named_diag<Op, D, List>>>::type;
};
template <class Op, class List, Dim D>
struct first_unnamed<Op, List, D> {
    using type = named_diag<Op, D, List>;
};
template <class Op, class List, Dim... Ds>
using first_unnamed_diag = typename first_unnamed<Op, List, Ds...>::type;

template <class Op, int Axis, std::size_t Rank>
using axis_diag = diag::axis_out_of_range<Op, diag::axis<Axis>, diag::rank<Rank>>;

// ---- what a node reads ------------------------------------------------------------------------

// f(child) for each child of node n, in order: its operands, or whichever of operand, lhs, rhs,
// weight, bias (unless it is nullptr: none), table, ids, query, key and value it has. The walks
// over an expression at run time (the leaves a plain evaluation reads, whether a derivative wants
// a gradient) go through this one list; train's reads_traced, the same walk over types, mirrors it.
template <class N, class F>
constexpr void for_each_child(const N& n, F&& f) {
    if constexpr (requires { n.operands(); }) {
        std::apply([&](const auto&... o) { (f(o), ...); }, n.operands());
    } else {
        if constexpr (requires { n.operand(); }) f(n.operand());
        if constexpr (requires { n.lhs(); }) f(n.lhs());
        if constexpr (requires { n.rhs(); }) f(n.rhs());
        if constexpr (requires { n.weight(); }) f(n.weight());
        if constexpr (requires { n.bias(); })
            if constexpr (!std::is_null_pointer_v<std::remove_cvref_t<decltype(n.bias())>>) f(n.bias());
        if constexpr (requires { n.table(); }) f(n.table());
        if constexpr (requires { n.ids(); }) f(n.ids());
        if constexpr (requires { n.query(); }) {
            f(n.query());
            f(n.key());
            f(n.value());
        }
    }
}

}  // namespace detail

}  // namespace shaped
