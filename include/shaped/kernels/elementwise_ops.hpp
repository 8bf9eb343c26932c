#pragma once
// What each elementwise operation computes, written once for a single element and for a SIMD
// batch alike: the compiled elementwise machine (src/elementwise.cpp) runs these on xsimd batches
// and on the scalars of a row's tail, and the reference evaluator (kernels/lower.hpp) on each
// element of any type. Math is called unqualified after `using std::...`, so that a batch finds
// xsimd's by argument-dependent lookup; constants are in the element type, so that a float
// expression stays float.

#include <shaped/expr/elementwise.hpp>

#include <cmath>
#include <type_traits>

namespace shaped::kernels::elementwise_ops {

// c as an X: an element, or a batch of c (a batch names its element type value_type).
template <class X>
X constant(double c) {
    if constexpr (requires { typename X::value_type; }) return X(static_cast<typename X::value_type>(c));
    else return static_cast<X>(c);
}

template <class X>
X gelu(const X& x) {
    using std::erf;
    return constant<X>(0.5) * x * (constant<X>(1) + erf(x * constant<X>(0.70710678118654752440)));
}
template <class X>
X gelu_tanh(const X& x) {
    using std::tanh;
    const X inner = constant<X>(0.79788456080286535588) * (x + constant<X>(0.044715) * x * x * x);
    return constant<X>(0.5) * x * (constant<X>(1) + tanh(inner));
}
template <class X>
X silu(const X& x) {
    using std::exp;
    return x / (constant<X>(1) + exp(-x));
}
template <class X>
X sigmoid(const X& x) {
    using std::exp;
    return constant<X>(1) / (constant<X>(1) + exp(-x));
}
template <class X>
X rsqrt(const X& x) {
    using std::sqrt;
    return constant<X>(1) / sqrt(x);
}

template <class A>
A absolute(const A& a) {
    if constexpr (std::is_floating_point_v<A>) return std::abs(a);  // -0 gives +0
    else return static_cast<A>(a < A{} ? -a : a);
}

// One element of each operation, on the operands already converted to its operand type.
template <class Op>
struct scalar;

#define SHAPED_ELEMENTWISE_SCALAR(tag, ...)      \
    template <>                                  \
    struct scalar<op::tag> {                     \
        template <class A>                       \
        static auto apply(const A& a) {          \
            return __VA_ARGS__;                  \
        }                                        \
    };
SHAPED_ELEMENTWISE_SCALAR(negate, static_cast<A>(-a))
SHAPED_ELEMENTWISE_SCALAR(logical_not, !a)
SHAPED_ELEMENTWISE_SCALAR(exp, std::exp(a))
SHAPED_ELEMENTWISE_SCALAR(log, std::log(a))
SHAPED_ELEMENTWISE_SCALAR(sqrt, std::sqrt(a))
SHAPED_ELEMENTWISE_SCALAR(rsqrt, rsqrt(a))
SHAPED_ELEMENTWISE_SCALAR(tanh, std::tanh(a))
SHAPED_ELEMENTWISE_SCALAR(abs, absolute(a))
SHAPED_ELEMENTWISE_SCALAR(sigmoid, sigmoid(a))
SHAPED_ELEMENTWISE_SCALAR(relu, a < A{} ? A{} : a)  // NaN stays NaN, as torch.relu
SHAPED_ELEMENTWISE_SCALAR(square, static_cast<A>(a * a))
SHAPED_ELEMENTWISE_SCALAR(gelu, gelu(a))
SHAPED_ELEMENTWISE_SCALAR(gelu_tanh, gelu_tanh(a))
SHAPED_ELEMENTWISE_SCALAR(silu, silu(a))
#undef SHAPED_ELEMENTWISE_SCALAR

#define SHAPED_ELEMENTWISE_SCALAR(tag, ...)               \
    template <>                                           \
    struct scalar<op::tag> {                              \
        template <class A>                                \
        static auto apply(const A& a, const A& b) {       \
            return __VA_ARGS__;                           \
        }                                                 \
    };
SHAPED_ELEMENTWISE_SCALAR(add, static_cast<A>(a + b))
SHAPED_ELEMENTWISE_SCALAR(subtract, static_cast<A>(a - b))
SHAPED_ELEMENTWISE_SCALAR(multiply, static_cast<A>(a * b))
SHAPED_ELEMENTWISE_SCALAR(divide, static_cast<A>(a / b))
// NaN wins either way, as torch.maximum and torch.minimum.
SHAPED_ELEMENTWISE_SCALAR(maximum, (a != a || a > b) ? a : b)
SHAPED_ELEMENTWISE_SCALAR(minimum, (a != a || a < b) ? a : b)
SHAPED_ELEMENTWISE_SCALAR(equal, a == b)
SHAPED_ELEMENTWISE_SCALAR(not_equal, a != b)
SHAPED_ELEMENTWISE_SCALAR(less, a < b)
SHAPED_ELEMENTWISE_SCALAR(less_equal, a <= b)
SHAPED_ELEMENTWISE_SCALAR(greater, a > b)
SHAPED_ELEMENTWISE_SCALAR(greater_equal, a >= b)
SHAPED_ELEMENTWISE_SCALAR(logical_and, a && b)
SHAPED_ELEMENTWISE_SCALAR(logical_or, a || b)
#undef SHAPED_ELEMENTWISE_SCALAR

template <>
struct scalar<op::where> {
    template <class A>
    static A apply(bool condition, const A& if_true, const A& if_false) {
        return condition ? if_true : if_false;
    }
};

}  // namespace shaped::kernels::elementwise_ops
