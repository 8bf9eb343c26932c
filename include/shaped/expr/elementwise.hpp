#pragma once
// Elementwise nodes: arithmetic, comparisons, unary math, where and masked_fill. Building one
// checks the operands' dims (at compile time where static, at run time otherwise) and
// allocates nothing; the work runs when the node is assigned to a Tensor or evaluated.

#include <shaped/expr/expression.hpp>

#include <cmath>
#include <tuple>
#include <utility>

namespace shaped {

// The operations an elementwise node can carry; each names itself for diagnostics.
namespace op {
struct add {};
struct subtract {};
struct multiply {};
struct divide {};
struct maximum {};
struct minimum {};
struct equal {};
struct not_equal {};
struct less {};
struct less_equal {};
struct greater {};
struct greater_equal {};
struct logical_and {};
struct logical_or {};
struct negate {};
struct logical_not {};
struct exp {};
struct log {};
struct sqrt {};
struct rsqrt {};
struct tanh {};
struct abs {};
struct sigmoid {};
struct relu {};
struct square {};
struct gelu {};  // x * Phi(x), Phi the standard normal CDF: torch.nn.GELU()'s exact (erf) form
struct gelu_tanh {};  // GELU's tanh approximation: GPT-2's gelu_new, torch.nn.GELU(approximate='tanh')
struct silu {};  // x * sigmoid(x): torch.nn.functional.silu, the gate of Llama's SwiGLU
struct where {};        // where(condition, if_true, if_false)
struct masked_fill {};  // masked_fill(tensor, mask, value): value where mask holds
template <class To>
struct cast {};
}  // namespace op

template <class Op>
inline constexpr bool is_comparison = std::is_same_v<Op, op::equal> || std::is_same_v<Op, op::not_equal> ||
                                      std::is_same_v<Op, op::less> || std::is_same_v<Op, op::less_equal> ||
                                      std::is_same_v<Op, op::greater> || std::is_same_v<Op, op::greater_equal> ||
                                      std::is_same_v<Op, op::logical_and> || std::is_same_v<Op, op::logical_or> ||
                                      std::is_same_v<Op, op::logical_not>;

namespace detail {
template <class Op, class... Es>
struct elementwise_value {
    using type = std::common_type_t<value_type_of<Es>...>;
};
template <class Op, class... Es>
    requires is_comparison<Op>
struct elementwise_value<Op, Es...> {
    using type = bool;
};
template <class C, class A, class B>
struct elementwise_value<op::where, C, A, B> {
    using type = std::common_type_t<value_type_of<A>, value_type_of<B>>;
};
template <class E, class M, class V>
struct elementwise_value<op::masked_fill, E, M, V> {
    using type = value_type_of<E>;
};
template <class To, class E>
struct elementwise_value<op::cast<To>, E> {
    using type = To;
};

template <class... Lists>
struct broadcast_all;
template <class L>
struct broadcast_all<L> {
    using type = L;
};
template <class L, class R, class... Rest>
struct broadcast_all<L, R, Rest...> {
    using type = typename broadcast_all<broadcast_dims<L, R>, Rest...>::type;
};

// The rule an elementwise node's run-time check reports: its operation's own, as the static one.
template <class Op>
constexpr std::string_view broadcast_rule() {
    if constexpr (std::is_same_v<Op, op::where>) return SHAPED_RULE_WHERE_DIMS;
    else if constexpr (std::is_same_v<Op, op::masked_fill>) return SHAPED_RULE_MASKED_FILL_MASK;
    else return SHAPED_RULE_BROADCAST_DIMS;
}

// Extents where operands broadcast, checked where an extent is dynamic.
template <class Result, std::size_t N>
void broadcast_extents_into(std::string_view operation, std::string_view rule, std::array<std::size_t, Result::rank>& out,
                            const std::array<std::size_t, N>& in, const std::array<std::string_view, N>& names) {
    const std::size_t pad = Result::rank - N;
    for (std::size_t i = 0; i < N; ++i) {
        std::size_t& o = out[pad + i];
        if (in[i] == o || in[i] == 1) continue;
        if (o == 1) {
            o = in[i];
            continue;
        }
        throw_dims_do_not_meet(operation, rule, "one operand's", names[i], o, "another's", names[i], in[i]);
    }
}

template <class E>
constexpr auto names_of() {
    return []<Dim... Ds>(dims<Ds...>) { return std::array<std::string_view, sizeof...(Ds)>{Ds::name.view()...}; }(
        dims_of<E>{});
}
}  // namespace detail

template <class Op, class... Es>
class elementwise : public expression_base {
public:
    using value_type = typename detail::elementwise_value<Op, Es...>::type;
    using dims_type = typename detail::broadcast_all<dims_of<Es>...>::type;
    using op_type = Op;
    static constexpr bool owns_storage = false;
    static constexpr std::size_t rank = dims_type::rank;

    template <class... Args>
        requires(sizeof...(Args) == sizeof...(Es) && (operand_for<Args, Es> && ...))
    explicit elementwise(std::string_view operation, Args&&... args) : operands_(std::forward<Args>(args)...) {
        extents_.fill(1);
        std::apply(
            [&](const auto&... e) {
                (detail::broadcast_extents_into<dims_type>(operation, detail::broadcast_rule<Op>(), extents_,
                                                           e.extents(), detail::names_of<decltype(e)>()),
                 ...);
            },
            operands_);
    }

    const std::array<std::size_t, rank>& extents() const { return extents_; }
    const std::tuple<Es...>& operands() const { return operands_; }
    template <std::size_t I>
    const auto& operand() const { return std::get<I>(operands_); }

private:
    std::tuple<Es...> operands_;
    std::array<std::size_t, rank> extents_;
};

namespace detail {
template <class Op, class... Args>
auto make_elementwise(std::string_view operation, Args&&... args) {
    return elementwise<Op, operand_t<Args&&>...>(operation, std::forward<Args>(args)...);
}

// A scalar beside an expression takes the expression's element type, as in PyTorch.
template <class E, class S>
auto as_operand(S&& s) -> decltype(auto) {
    if constexpr (Expression<S>) return std::forward<S>(s);
    else return scalar<value_type_of<E>>(static_cast<value_type_of<E>>(s));
}

// Two expressions whose dims do not broadcast. The operations below then pick an overload that is
// only declared: its return type is the diagnostic, which the compiler instantiates at the
// caller's line (the operators are macros, and a check inside one would add the macro's
// expansion to the error).
template <class L, class R>
concept Unbroadcastable = Expression<L> && Expression<R> && !broadcastable<dims_of<L>, dims_of<R>>;

template <class Op, class LD, class RD, bool = broadcastable<LD, RD>>
struct broadcast_diag_of {
    using type = void;
};
template <class Op, class LD, class RD>
struct broadcast_diag_of<Op, LD, RD, false> {
    using failure = broadcast_failure<LD, RD>;
    using type = diag::broadcast_dims<Op, typename failure::lhs, typename failure::rhs>;
};
template <class Op, class L, class R>
using broadcast_diag = typename broadcast_diag_of<Op, dims_of<L>, dims_of<R>>::type;

template <class Op, class L, class R>
auto binary(std::string_view operation, L&& l, R&& r) {
    if constexpr (!Expression<L>) {
        return make_elementwise<Op>(operation, as_operand<R>(std::forward<L>(l)), std::forward<R>(r));
    } else if constexpr (!Expression<R>) {
        return make_elementwise<Op>(operation, std::forward<L>(l), as_operand<L>(std::forward<R>(r)));
    } else {
        return make_elementwise<Op>(operation, std::forward<L>(l), std::forward<R>(r));
    }
}
}  // namespace detail

template <class L, class R>
concept BinaryOperands = (Expression<L> && (Expression<R> || Scalar<R>)) || (Scalar<L> && Expression<R>);

#define SHAPED_BINARY_OPERATOR(symbol, op_tag)                                              \
    template <class L, class R>                                                             \
        requires BinaryOperands<L, R> && (!detail::Unbroadcastable<L, R>)                  \
    auto operator symbol(L&& l, R&& r) {                                                    \
        return detail::binary<op::op_tag>(#symbol, std::forward<L>(l), std::forward<R>(r)); \
    }                                                                                       \
    template <class L, class R>                                                             \
        requires detail::Unbroadcastable<L, R>                                              \
    detail::broadcast_diag<op::op_tag, L, R> operator symbol(L&&, R&&);                     \
    template <class L, class R>                                                             \
        requires any_failed<L, R>                                                           \
    failed operator symbol(L&&, R&&);

SHAPED_BINARY_OPERATOR(+, add)
SHAPED_BINARY_OPERATOR(-, subtract)
SHAPED_BINARY_OPERATOR(*, multiply)
SHAPED_BINARY_OPERATOR(/, divide)
SHAPED_BINARY_OPERATOR(==, equal)
SHAPED_BINARY_OPERATOR(!=, not_equal)
SHAPED_BINARY_OPERATOR(<, less)
SHAPED_BINARY_OPERATOR(<=, less_equal)
SHAPED_BINARY_OPERATOR(>, greater)
SHAPED_BINARY_OPERATOR(>=, greater_equal)
SHAPED_BINARY_OPERATOR(&&, logical_and)
SHAPED_BINARY_OPERATOR(||, logical_or)
#undef SHAPED_BINARY_OPERATOR

template <class L, class R>
    requires BinaryOperands<L, R> && (!detail::Unbroadcastable<L, R>)
auto maximum(L&& l, R&& r) {
    return detail::binary<op::maximum>("maximum", std::forward<L>(l), std::forward<R>(r));
}
template <class L, class R>
    requires detail::Unbroadcastable<L, R>
detail::broadcast_diag<op::maximum, L, R> maximum(L&&, R&&);
template <class L, class R>
    requires any_failed<L, R>
failed maximum(L&&, R&&);
template <class L, class R>
    requires BinaryOperands<L, R> && (!detail::Unbroadcastable<L, R>)
auto minimum(L&& l, R&& r) {
    return detail::binary<op::minimum>("minimum", std::forward<L>(l), std::forward<R>(r));
}
template <class L, class R>
    requires detail::Unbroadcastable<L, R>
detail::broadcast_diag<op::minimum, L, R> minimum(L&&, R&&);
template <class L, class R>
    requires any_failed<L, R>
failed minimum(L&&, R&&);

#define SHAPED_UNARY_FUNCTION(name, op_tag)                               \
    template <Expression E>                                               \
    auto name(E&& e) {                                                    \
        return detail::make_elementwise<op::op_tag>(#name, std::forward<E>(e)); \
    }                                                                     \
    template <Failed E>                                                   \
    failed name(E&&);

SHAPED_UNARY_FUNCTION(operator-, negate)
SHAPED_UNARY_FUNCTION(operator!, logical_not)
SHAPED_UNARY_FUNCTION(exp, exp)
SHAPED_UNARY_FUNCTION(log, log)
SHAPED_UNARY_FUNCTION(sqrt, sqrt)
SHAPED_UNARY_FUNCTION(rsqrt, rsqrt)
SHAPED_UNARY_FUNCTION(tanh, tanh)
SHAPED_UNARY_FUNCTION(abs, abs)
SHAPED_UNARY_FUNCTION(sigmoid, sigmoid)
SHAPED_UNARY_FUNCTION(relu, relu)
SHAPED_UNARY_FUNCTION(square, square)
SHAPED_UNARY_FUNCTION(gelu, gelu)
SHAPED_UNARY_FUNCTION(gelu_tanh, gelu_tanh)
SHAPED_UNARY_FUNCTION(silu, silu)
#undef SHAPED_UNARY_FUNCTION

template <class To, Expression E>
auto cast(E&& e) {
    return detail::make_elementwise<op::cast<To>>("cast", std::forward<E>(e));
}
template <class To, Failed E>
failed cast(E&&);

namespace detail {
// where's operands as it holds them: a number as a scalar of the other value's element type.
template <class A, class B>
using where_value = std::conditional_t<Expression<A>, A, B>;
template <class V, class S>
using where_operand = decltype(as_operand<V>(std::declval<S>()));

template <class C, class A, class B>
inline constexpr bool where_fits = [] {
    using TA = where_operand<where_value<A, B>, A>;
    using TB = where_operand<where_value<A, B>, B>;
    if constexpr (!broadcastable<dims_of<TA>, dims_of<TB>>) return false;
    else return broadcastable<dims_of<C>, broadcast_dims<dims_of<TA>, dims_of<TB>>>;
}();

template <class C, class A, class B>
using where_diag = diag::where_dims<dims_of<C>, dims_of<where_operand<where_value<A, B>, A>>,
                                    dims_of<where_operand<where_value<A, B>, B>>>;

template <class E, class M>
inline constexpr bool mask_fits = rank_of<M> <= rank_of<E> && broadcastable<dims_of<E>, dims_of<M>>;
}  // namespace detail

// Each operation has two overloads: the one that runs, and the one a misfit picks, only
// declared, whose return type is the failed check (instantiated at the caller's line).

// where(condition, a, b): a where the condition holds, b elsewhere; all three broadcast.
template <Expression C, class A, class B>
    requires(Expression<A> || Expression<B>) && (!any_failed<A, B>) && detail::where_fits<C, A, B>
auto where(C&& condition, A&& a, B&& b) {
    using Value = detail::where_value<A, B>;
    auto&& ta = detail::as_operand<Value>(std::forward<A>(a));
    auto&& tb = detail::as_operand<Value>(std::forward<B>(b));
    return detail::make_elementwise<op::where>("where", std::forward<C>(condition), std::forward<decltype(ta)>(ta),
                                               std::forward<decltype(tb)>(tb));
}
template <Expression C, class A, class B>
    requires(Expression<A> || Expression<B>) && (!any_failed<A, B>) && (!detail::where_fits<C, A, B>)
detail::where_diag<C, A, B> where(C&&, A&&, B&&);
template <class C, class A, class B>
    requires any_failed<C, A, B>
failed where(C&&, A&&, B&&);

// masked_fill(t, mask, value): PyTorch's t.masked_fill(mask, value). The mask broadcasts to t's
// dims and never widens them.
template <Expression E, Expression M, Scalar V>
    requires detail::mask_fits<E, M>
auto masked_fill(E&& e, M&& mask, V value) {
    return detail::make_elementwise<op::masked_fill>("masked_fill", std::forward<E>(e), std::forward<M>(mask),
                                                     scalar<value_type_of<E>>(static_cast<value_type_of<E>>(value)));
}
template <Expression E, Expression M, Scalar V>
    requires(!detail::mask_fits<E, M>)
diag::masked_fill_mask<dims_of<M>, dims_of<E>> masked_fill(E&&, M&&, V);
template <class E, class M, class V>
    requires any_failed<E, M>
failed masked_fill(E&&, M&&, V);

}  // namespace shaped
