#pragma once
// Lowering: each shaped expression becomes an xtensor expression (elementwise work, evaluated
// with xsimd when assigned), and each node that is not elementwise — matmul, softmax, a
// reduction, tril — is first run by its own kernel into a temporary.

#include <shaped/tensor/tensor.hpp>

#include <xtensor/xadapt.hpp>
#include <xtensor/xbroadcast.hpp>
#include <xtensor/xmanipulation.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xoperation.hpp>
#include <xtensor/xstrided_view.hpp>
#include <xsimd/xsimd.hpp>

#include <cmath>

#include <tuple>
#include <utility>
#include <vector>

namespace shaped::kernels {

// Declared together first: lowering recurses through node types in any order.
template <class T, Dim... Ds>
const auto& lower(const Tensor<T, Ds...>& t);
template <class T, Dim... Ds>
auto lower(const View<T, Ds...>& v);
template <class T>
auto lower(const scalar<T>& s);
template <class E, std::array<std::size_t, rank_of<E>> Perm>
auto lower(const permute_node<E, Perm>& p);
template <class E, class NewDims>
decltype(auto) lower(const rename_node<E, NewDims>& r);
template <class Op, std::size_t Axis, class E>
auto lower(const reduce_node<Op, Axis, E>& r);
template <std::size_t Axis, class E, bool Log>
auto lower(const softmax_node<Axis, E, Log>& s);
template <class L, class R>
auto lower(const matmul_node<L, R>& m);
template <class E, bool Upper>
auto lower(const triangle_node<E, Upper>& t);
template <class Q, class K, class V>
auto lower(const attention_node<Q, K, V>& a);
template <class E, class W, class Bi, bool Centered>
auto lower(const layer_norm_node<E, W, Bi, Centered>& n);
template <class Op, class... Es>
auto lower(const elementwise<Op, Es...>& e);

// Each overload returns an xtensor expression with E's extents.
template <class T, Dim... Ds>
const auto& lower(const Tensor<T, Ds...>& t) {
    return t.xtensor();
}

template <class T, Dim... Ds>
auto lower(const View<T, Ds...>& v) {
    using value = std::remove_const_t<T>;
    return xt::adapt(const_cast<value*>(static_cast<const value*>(v.data())), v.size(), xt::no_ownership(),
                     v.extents(), v.strides());
}

template <class T>
auto lower(const scalar<T>& s) {
    return xt::xscalar<T>(s.value);
}

template <class E, std::array<std::size_t, rank_of<E>> Perm>
auto lower(const permute_node<E, Perm>& p) {
    // xt::transpose permutes strides: an operand that has none (an elementwise node) is
    // evaluated first.
    if constexpr (requires { lower(p.operand()).strides(); }) return xt::transpose(lower(p.operand()), Perm);
    else return xt::transpose(xt::eval(lower(p.operand())), Perm);
}

template <class E, class NewDims>
decltype(auto) lower(const rename_node<E, NewDims>& r) {
    return lower(r.operand());
}

// Nodes that run a kernel of their own are lowered to the temporary the kernel fills.
template <Expression E>
    requires(!Strided<E>)
auto lower_by_evaluating(const E& e) {
    auto evaluated = eval(e);
    return std::move(evaluated.xtensor());
}

template <class Op, std::size_t Axis, class E>
auto lower(const reduce_node<Op, Axis, E>& r) {
    return lower_by_evaluating(r);
}
template <std::size_t Axis, class E, bool Log>
auto lower(const softmax_node<Axis, E, Log>& s) {
    return lower_by_evaluating(s);
}
template <class L, class R>
auto lower(const matmul_node<L, R>& m) {
    return lower_by_evaluating(m);
}
template <class E, bool Upper>
auto lower(const triangle_node<E, Upper>& t) {
    return lower_by_evaluating(t);
}
template <class Q, class K, class V>
auto lower(const attention_node<Q, K, V>& a) {
    return lower_by_evaluating(a);
}
template <class E, class W, class Bi, bool Centered>
auto lower(const layer_norm_node<E, W, Bi, Centered>& n) {
    return lower_by_evaluating(n);
}

// ---- elementwise ---------------------------------------------------------------------------

namespace detail {
template <class Op>
struct apply;

#define SHAPED_LOWER_OP(tag, ...)                      \
    template <>                                        \
    struct apply<op::tag> {                            \
        template <class... A>                          \
        static auto on(A&&... a) {                     \
            return __VA_ARGS__;                        \
        }                                              \
    };

SHAPED_LOWER_OP(add, (std::forward<A>(a) + ...))
SHAPED_LOWER_OP(subtract, (std::forward<A>(a) - ...))
SHAPED_LOWER_OP(multiply, (std::forward<A>(a) * ...))
SHAPED_LOWER_OP(divide, (std::forward<A>(a) / ...))
SHAPED_LOWER_OP(maximum, xt::maximum(std::forward<A>(a)...))
SHAPED_LOWER_OP(minimum, xt::minimum(std::forward<A>(a)...))
SHAPED_LOWER_OP(equal, xt::equal(std::forward<A>(a)...))
SHAPED_LOWER_OP(not_equal, xt::not_equal(std::forward<A>(a)...))
SHAPED_LOWER_OP(less, xt::less(std::forward<A>(a)...))
SHAPED_LOWER_OP(less_equal, xt::less_equal(std::forward<A>(a)...))
SHAPED_LOWER_OP(greater, xt::greater(std::forward<A>(a)...))
SHAPED_LOWER_OP(greater_equal, xt::greater_equal(std::forward<A>(a)...))
SHAPED_LOWER_OP(logical_and, (std::forward<A>(a) && ...))
SHAPED_LOWER_OP(logical_or, (std::forward<A>(a) || ...))
SHAPED_LOWER_OP(where, xt::where(std::forward<A>(a)...))
#undef SHAPED_LOWER_OP

#define SHAPED_LOWER_UNARY(tag, ...)                   \
    template <>                                        \
    struct apply<op::tag> {                            \
        template <class A>                             \
        static auto on(A&& a) {                        \
            return __VA_ARGS__;                        \
        }                                              \
    };
SHAPED_LOWER_UNARY(negate, -std::forward<A>(a))
SHAPED_LOWER_UNARY(logical_not, !std::forward<A>(a))
SHAPED_LOWER_UNARY(exp, xt::exp(std::forward<A>(a)))
SHAPED_LOWER_UNARY(log, xt::log(std::forward<A>(a)))
SHAPED_LOWER_UNARY(sqrt, xt::sqrt(std::forward<A>(a)))
SHAPED_LOWER_UNARY(rsqrt, 1 / xt::sqrt(std::forward<A>(a)))
SHAPED_LOWER_UNARY(tanh, xt::tanh(std::forward<A>(a)))
SHAPED_LOWER_UNARY(abs, xt::abs(std::forward<A>(a)))
SHAPED_LOWER_UNARY(sigmoid, 1 / (1 + xt::exp(-std::forward<A>(a))))
SHAPED_LOWER_UNARY(relu, xt::maximum(std::forward<A>(a), 0))
SHAPED_LOWER_UNARY(square, xt::square(std::forward<A>(a)))
#undef SHAPED_LOWER_UNARY

// GELU, 0.5 x (1 + erf(x / sqrt 2)), as one xtensor functor that reads each element once, with
// its xsimd form (xsimd::erf) for vectorised assignment. Constants are in the element type: a
// double constant would widen a float expression and lose the vectorisation.
struct gelu_fun {
    template <class A>
    A operator()(const A& a) const {
        using std::erf;
        return A(0.5) * a * (A(1) + erf(a * A(0.70710678118654752440)));
    }
    template <class Batch>
    Batch simd_apply(const Batch& b) const {
        using A = typename Batch::value_type;
        return A(0.5) * b * (A(1) + xsimd::erf(b * A(0.70710678118654752440)));
    }
};

template <>
struct apply<op::gelu> {
    template <class A>
    static auto on(A&& a) {
        return xt::detail::make_xfunction<gelu_fun>(std::forward<A>(a));
    }
};

// GELU's tanh approximation, 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), as gelu_fun.
struct gelu_tanh_fun {
    template <class A>
    A operator()(const A& a) const {
        using std::tanh;
        return A(0.5) * a * (A(1) + tanh(A(0.79788456080286535588) * (a + A(0.044715) * a * a * a)));
    }
    template <class Batch>
    Batch simd_apply(const Batch& b) const {
        using A = typename Batch::value_type;
        return A(0.5) * b * (A(1) + xsimd::tanh(A(0.79788456080286535588) * (b + A(0.044715) * b * b * b)));
    }
};

template <>
struct apply<op::gelu_tanh> {
    template <class A>
    static auto on(A&& a) {
        return xt::detail::make_xfunction<gelu_tanh_fun>(std::forward<A>(a));
    }
};

// SiLU, x / (1 + exp(-x)), as gelu_fun: one read of each element, and its xsimd form.
struct silu_fun {
    template <class A>
    A operator()(const A& a) const {
        using std::exp;
        return a / (A(1) + exp(-a));
    }
    template <class Batch>
    Batch simd_apply(const Batch& b) const {
        using A = typename Batch::value_type;
        return b / (A(1) + xsimd::exp(-b));
    }
};

template <>
struct apply<op::silu> {
    template <class A>
    static auto on(A&& a) {
        return xt::detail::make_xfunction<silu_fun>(std::forward<A>(a));
    }
};

template <>
struct apply<op::masked_fill> {
    template <class E, class M, class V>
    static auto on(E&& e, M&& mask, V&& value) {
        return xt::where(std::forward<M>(mask), std::forward<V>(value), std::forward<E>(e));
    }
};

template <class To>
struct apply<op::cast<To>> {
    template <class E>
    static auto on(E&& e) {
        return xt::cast<To>(std::forward<E>(e));
    }
};
}  // namespace detail

namespace detail {
// An operand lowered to an xtensor expression of static shape that broadcasts against its node
// is spread to the node's extents explicitly. xtensor 0.24 judges an expression of static
// shapes by its direct operands alone: (x + bias) + c, whose outer operands agree, was assigned
// linearly, reading the bias inside it past its end.
template <class Node, class E>
decltype(auto) lower_operand(const Node& node, const E& operand) {
    using lowered = std::decay_t<decltype(lower(operand))>;
    if constexpr (!std::is_same_v<dims_of<E>, dims_of<Node>> && !std::is_same_v<E, scalar<value_type_of<E>>> &&
                  xt::detail::is_fixed<typename lowered::shape_type>::value)
        return xt::broadcast(lower(operand), node.extents());
    else
        return lower(operand);
}
}  // namespace detail

template <class Op, class... Es>
auto lower(const elementwise<Op, Es...>& e) {
    return std::apply([&](const auto&... operand) { return detail::apply<Op>::on(detail::lower_operand(e, operand)...); },
                      e.operands());
}

}  // namespace shaped::kernels
