#pragma once
// What the kernels recognise in an expression's type: each node kind, and the patterns a fused
// or folded kernel runs — a matmul scaled (or not), a matmul plus a bias, the chapter's
// attention. One recogniser each, used by every kernel that asks.

#include <shaped/tensor/quantized.hpp>
#include <shaped/tensor/view.hpp>

#include <array>
#include <cstddef>
#include <type_traits>

namespace shaped::kernels::detail {

// ---- node kinds --------------------------------------------------------------------------------

template <class T>
inline constexpr bool is_attention = false;
template <class Q, class K, class V, class Mods>
inline constexpr bool is_attention<attention_node<Q, K, V, Mods>> = true;

template <class T>
inline constexpr bool is_softmax = false;
template <std::size_t Axis, class E, bool Log>
inline constexpr bool is_softmax<softmax_node<Axis, E, Log>> = true;

template <class T>
inline constexpr bool is_reduce = false;
template <class Op, std::size_t Axis, class E>
inline constexpr bool is_reduce<reduce_node<Op, Axis, E>> = true;

template <class T>
inline constexpr bool is_unit_dim = false;
template <class E, std::size_t Axis, class NewDims>
inline constexpr bool is_unit_dim<unit_dim_node<E, Axis, NewDims>> = true;

template <class T>
inline constexpr bool is_gather = false;
template <class Table, class Ids>
inline constexpr bool is_gather<gather_node<Table, Ids>> = true;

template <class T>
inline constexpr bool is_quantized_linear = false;
template <class X, class F, class Rows, class Cols>
inline constexpr bool is_quantized_linear<quantized_linear_node<X, F, Rows, Cols>> = true;

template <class T>
inline constexpr bool is_triangle = false;
template <class E, bool Upper>
inline constexpr bool is_triangle<triangle_node<E, Upper>> = true;

template <class T>
inline constexpr bool is_layer_norm = false;
template <class E, class W, class Bi, bool Centered>
inline constexpr bool is_layer_norm<layer_norm_node<E, W, Bi, Centered>> = true;

// ---- matmul patterns ---------------------------------------------------------------------------

// A matmul, scaled or not: matmul, matmul * s, s * matmul, matmul / s. product is the matmul;
// scale is in the scalar's type (which is the product's), 1 for a bare matmul.
template <class E>
struct scaled_matmul : std::false_type {};
template <class L, class R>
struct scaled_matmul<matmul_node<L, R>> : std::true_type {
    static const auto& product(const auto& e) { return e; }
    static value_type_of<matmul_node<L, R>> scale(const auto&) { return 1; }
};
template <class L, class R, class T>
struct scaled_matmul<elementwise<op::multiply, matmul_node<L, R>, scalar<T>>> : std::true_type {
    static const auto& product(const auto& e) { return e.template operand<0>(); }
    static T scale(const auto& e) { return e.template operand<1>().value; }
};
template <class L, class R, class T>
struct scaled_matmul<elementwise<op::multiply, scalar<T>, matmul_node<L, R>>> : std::true_type {
    static const auto& product(const auto& e) { return e.template operand<1>(); }
    static T scale(const auto& e) { return e.template operand<0>().value; }
};
template <class L, class R, class T>
struct scaled_matmul<elementwise<op::divide, matmul_node<L, R>, scalar<T>>> : std::true_type {
    static const auto& product(const auto& e) { return e.template operand<0>(); }
    static T scale(const auto& e) { return T{1} / e.template operand<1>().value; }
};

// A matmul plus a stored addend: a bias along its last dim (as a Linear layer with bias
// computes) or a whole array of its shape (out = out + matmul(a, b), a residual connection).
template <class Bias, class L, class R>
inline constexpr bool is_matmul_addend =
    Strided<std::remove_cvref_t<Bias>> && (rank_of<Bias> == 1 || rank_of<Bias> == rank_of<matmul_node<L, R>>);
template <class E>
struct biased_matmul : std::false_type {};
template <class L, class R, class Bias>
    requires is_matmul_addend<Bias, L, R>
struct biased_matmul<elementwise<op::add, matmul_node<L, R>, Bias>> : std::true_type {
    static auto& product(const auto& e) { return e.template operand<0>(); }
    static auto& bias(const auto& e) { return e.template operand<1>(); }
};
template <class Bias, class L, class R>
    requires is_matmul_addend<Bias, L, R>
struct biased_matmul<elementwise<op::add, Bias, matmul_node<L, R>>> : std::true_type {
    static auto& product(const auto& e) { return e.template operand<1>(); }
    static auto& bias(const auto& e) { return e.template operand<0>(); }
};

// ---- the chapter's attention -------------------------------------------------------------------

// The mask: tril(x) == 0. It is causal when x has no zero on or below tril's diagonal, which is
// checked at run time.
template <class E>
struct tril_mask : std::false_type {};
template <class X, class S>
struct tril_mask<elementwise<op::equal, triangle_node<X, false>, scalar<S>>> : std::true_type {};

// The weights: softmax over the last dim of the logits, masked or not; the logits are
// matmul(q, kT), scaled or not.
template <class E>
struct attention_weights : std::false_type {};
template <std::size_t Axis, class L>
struct attention_weights<softmax_node<Axis, L, false>>
    : std::bool_constant<scaled_matmul<L>::value && Axis == rank_of<L> - 1> {
    static constexpr bool masked = false;
    static const auto& logits(const auto& w) { return w.operand(); }
};
template <std::size_t Axis, class L, class M, class F>
struct attention_weights<softmax_node<Axis, elementwise<op::masked_fill, L, M, scalar<F>>, false>>
    : std::bool_constant<scaled_matmul<L>::value && tril_mask<M>::value && Axis == rank_of<L> - 1> {
    static constexpr bool masked = true;
    static const auto& logits(const auto& w) { return w.operand().template operand<0>(); }
};

template <class T>
inline constexpr bool is_float_or_double = std::is_same_v<T, float> || std::is_same_v<T, double>;

// matmul(weights, v), all of one floating-point type.
template <class E>
struct recognised_attention : std::false_type {};
template <class W, class V>
struct recognised_attention<matmul_node<W, V>>
    : std::bool_constant<attention_weights<W>::value && is_float_or_double<value_type_of<V>> &&
                         std::is_same_v<value_type_of<W>, value_type_of<V>>> {};

}  // namespace shaped::kernels::detail
