#pragma once
// Reductions along one dim (sum, mean, max, min, var) and softmax / log_softmax along one dim.
// The dim is named by position as PyTorch does (softmax<-1>) or by name (softmax<T>); a name
// must occur exactly once in the tensor. layer_norm normalises along the last dim.
//
//   sum<-1>(x)             (B, T, C) -> (B, T)       x.sum(-1)
//   mean<C, keepdim>(x)    (B, T, C) -> (B, T, C=1)  x.mean(-1, keepdim=True): broadcasts against x

#include <shaped/expr/expression.hpp>
#include <shaped/expr/structure.hpp>

#include <concepts>
#include <cstddef>
#include <string_view>
#include <type_traits>
#include <utility>

namespace shaped {

namespace op {
struct sum {};
struct mean {};
struct max {};
struct min {};
struct var {};  // unbiased, as torch.var
struct softmax {};
struct log_softmax {};
}  // namespace op

// A reduction's keepdim=True: sum<C, keepdim>(x), sum<-1, keepdim>(x). The reduced dim stays, of
// extent 1 under its own name, so that x - mean<C, keepdim>(x) broadcasts by the usual rule (the
// names align; a static extent 1 spreads). A tag in the template arguments rather than a bool
// or a second function name: the positional and named forms read alike and as PyTorch's
// keyword, the plain forms keep their one template argument, and a misfit is the same check.
struct keepdim {};


// A reduction of E along its dim at Axis (normalized); the result lacks that dim.
template <class Op, std::size_t Axis, class E>
class reduce_node : public expression_base {
public:
    using value_type = value_type_of<E>;
    using dims_type = drop_at<Axis, dims_of<E>>;
    using op_type = Op;
    static constexpr bool owns_storage = false;
    static constexpr std::size_t rank = dims_type::rank;
    static constexpr std::size_t axis = Axis;

    template <operand_for<E> A>
    explicit reduce_node(A&& a) : operand_(std::forward<A>(a)) {
        const auto in = operand_.extents();
        for (std::size_t i = 0, j = 0; i < in.size(); ++i)
            if (i != Axis) extents_[j++] = in[i];
    }

    const std::array<std::size_t, rank>& extents() const { return extents_; }
    const E& operand() const { return operand_; }

private:
    E operand_;
    std::array<std::size_t, rank> extents_;
};

// softmax (or log_softmax) of E along its dim at Axis; the dims are E's.
template <std::size_t Axis, class E, bool Log = false>
class softmax_node : public expression_base {
public:
    using value_type = value_type_of<E>;
    using dims_type = dims_of<E>;
    static constexpr bool owns_storage = false;
    static constexpr std::size_t rank = dims_type::rank;
    static constexpr std::size_t axis = Axis;
    static constexpr bool log = Log;

    template <operand_for<E> A>
    explicit softmax_node(A&& a) : operand_(std::forward<A>(a)) {}

    auto extents() const { return operand_.extents(); }
    const E& operand() const { return operand_; }

private:
    E operand_;
};

// layer_norm of E over its last dim, D: each row of D elements less its mean, over the square
// root of its biased variance plus eps, times W, plus Bi (W and Bi of dims (D); Bi may be
// std::nullptr_t, no bias). The dims are E's. Not Centered, it is rms_norm: no mean is taken
// away, and the row is divided by the square root of its mean square plus eps.
template <class E, class W, class Bi, bool Centered = true>
class layer_norm_node : public expression_base {
public:
    using value_type = value_type_of<E>;
    using dims_type = dims_of<E>;
    static constexpr bool owns_storage = false;
    static constexpr std::size_t rank = dims_type::rank;
    static constexpr bool has_bias = !std::is_null_pointer_v<Bi>;
    static constexpr bool centered = Centered;

    template <operand_for<E> A, operand_for<W> WA, operand_for<Bi> BA>
    layer_norm_node(A&& a, WA&& weight, BA&& bias, double eps)
        : operand_(std::forward<A>(a)), weight_(std::forward<WA>(weight)), bias_(std::forward<BA>(bias)), eps_(eps) {}

    auto extents() const { return operand_.extents(); }
    const E& operand() const { return operand_; }
    const W& weight() const { return weight_; }
    const Bi& bias() const { return bias_; }
    double eps() const { return eps_; }

private:
    E operand_;
    W weight_;
    Bi bias_;
    double eps_;
};

namespace detail {
// weight or bias of layer_norm: one dim, meeting x's last.
// (False for an operand that is no expression, such as a failed one: this is also read while
// overloads are sorted out.)
template <class X, class P>
inline constexpr bool fits_last_dim = [] {
    if constexpr (!Expression<X> || !Expression<P>) return false;
    else if constexpr (rank_of<X> == 0 || rank_of<P> != 1) return false;
    else return can_meet<dim_at<0, dims_of<P>>, dim_at<rank_of<X> - 1, dims_of<X>>>;
}();

// The check of a weight or bias that does not fit.
template <class X, class W, class Bi>
using layer_norm_diag = diag::layer_norm_parameter<dims_of<X>, dims_of<std::conditional_t<fits_last_dim<X, W>, Bi, W>>>;

template <class X, class P>
void check_last_dim(std::string_view operation, std::string_view rule, std::string_view role, const X& x, const P& p) {
    using D = dim_at<rank_of<X> - 1, dims_of<X>>;
    using PD = dim_at<0, dims_of<P>>;
    const std::size_t have = x.extents()[rank_of<X> - 1], want = p.extents()[0];
    if (have != want) throw_dims_do_not_meet(operation, rule, "input's", D::name.view(), have, role, PD::name.view(), want);
}
}  // namespace detail

// torch.nn.functional.layer_norm(x, (D,), weight, bias, eps) over x's last dim D: weight and
// bias are (D). Lazy, as every operation; it runs as one row kernel when assigned.
// A misfit picks the overload only declared, whose return type is the failed check (instantiated
// at the caller's line).
template <Expression X, Expression W, Expression Bi>
    requires(detail::fits_last_dim<X, W> && detail::fits_last_dim<X, Bi>)
auto layer_norm(X&& x, W&& weight, Bi&& bias, double eps = 1e-5) {
    detail::check_last_dim("layer_norm", SHAPED_RULE_LAYER_NORM_PARAMETER, "weight's", x, weight);
    detail::check_last_dim("layer_norm", SHAPED_RULE_LAYER_NORM_PARAMETER, "bias's", x, bias);
    return layer_norm_node<operand_t<X&&>, operand_t<W&&>, operand_t<Bi&&>>(
        std::forward<X>(x), std::forward<W>(weight), std::forward<Bi>(bias), eps);
}
template <Expression X, Expression W, Expression Bi>
    requires(!(detail::fits_last_dim<X, W> && detail::fits_last_dim<X, Bi>))
detail::layer_norm_diag<X, W, Bi> layer_norm(X&&, W&&, Bi&&, double = 1e-5);

// Without a bias (nanoGPT's LayerNorm with bias=False).
template <Expression X, Expression W>
    requires detail::fits_last_dim<X, W>
auto layer_norm(X&& x, W&& weight, std::nullptr_t, double eps = 1e-5) {
    detail::check_last_dim("layer_norm", SHAPED_RULE_LAYER_NORM_PARAMETER, "weight's", x, weight);
    return layer_norm_node<operand_t<X&&>, operand_t<W&&>, std::nullptr_t>(std::forward<X>(x),
                                                                          std::forward<W>(weight), nullptr, eps);
}
template <Expression X, Expression W>
    requires(!detail::fits_last_dim<X, W>)
diag::layer_norm_parameter<dims_of<X>, dims_of<W>> layer_norm(X&&, W&&, std::nullptr_t, double = 1e-5);

template <class X, class W, class Bi>
    requires any_failed<X, W, Bi>
failed layer_norm(X&&, W&&, Bi&&, double = 1e-5);

// RMSNorm over x's last dim D, as Llama's: x / sqrt(mean(x^2) + eps) * weight, weight (D). Lazy,
// and the same row kernel as layer_norm, which it is without the mean and the bias.
template <Expression X, Expression W>
    requires detail::fits_last_dim<X, W>
auto rms_norm(X&& x, W&& weight, double eps = 1e-5) {
    detail::check_last_dim("rms_norm", SHAPED_RULE_RMS_NORM_WEIGHT, "weight's", x, weight);
    return layer_norm_node<operand_t<X&&>, operand_t<W&&>, std::nullptr_t, false>(std::forward<X>(x),
                                                                                 std::forward<W>(weight), nullptr, eps);
}
template <Expression X, Expression W>
    requires(!detail::fits_last_dim<X, W>)
diag::rms_norm_weight<dims_of<X>, dims_of<W>> rms_norm(X&&, W&&, double = 1e-5);
template <class X, class W>
    requires any_failed<X, W>
failed rms_norm(X&&, W&&, double = 1e-5);

namespace detail {
template <class Op, std::size_t Axis, class E>
auto make_along(E&& e) {
    if constexpr (std::is_same_v<Op, op::softmax>)
        return softmax_node<Axis, operand_t<E&&>, false>(std::forward<E>(e));
    else if constexpr (std::is_same_v<Op, op::log_softmax>)
        return softmax_node<Axis, operand_t<E&&>, true>(std::forward<E>(e));
    else
        return reduce_node<Op, Axis, operand_t<E&&>>(std::forward<E>(e));
}

// The reduction along Axis with that dim kept, of extent 1: the plain reduction's node seen with
// the dim put back, evaluated by the same kernel straight into the target (no second copy).
template <class Op, std::size_t Axis, class E>
auto make_kept(E&& e) {
    using List = dims_of<E>;
    using kept = replace_at<Axis, dim<dim_at<Axis, List>::name, 1>, List>;
    using reduced = reduce_node<Op, Axis, operand_t<E&&>>;
    return unit_dim_node<reduced, Axis, kept>(reduced(std::forward<E>(e)));
}
}  // namespace detail

// The positional and named forms of each operation along a dim. An axis out of range, or a name
// that is not exactly one dim, picks the overload that is only declared: its return type is the
// diagnostic, which the compiler instantiates at the caller's line (the operations are macros,
// and a check inside one would add the macro's expansion to the error).
#define SHAPED_ALONG_DIM(name)                                                                     \
    template <int Axis, Expression E>                                                              \
        requires axis_in_range<Axis, rank_of<E>>                                                   \
    auto name(E&& e) {                                                                             \
        return detail::make_along<op::name, normalize_axis<Axis, rank_of<E>>>(std::forward<E>(e)); \
    }                                                                                              \
    template <int Axis, Expression E>                                                              \
        requires(!axis_in_range<Axis, rank_of<E>>)                                                 \
    detail::axis_diag<op::name, Axis, dims_of<E>::rank> name(E&&);                                 \
    template <Dim D, Expression E>                                                                 \
        requires detail::names_one<D, dims_of<E>>                                                  \
    auto name(E&& e) {                                                                             \
        return detail::make_along<op::name, index_named<D, dims_of<E>>>(std::forward<E>(e));       \
    }                                                                                              \
    template <Dim D, Expression E>                                                                 \
        requires(!detail::names_one<D, dims_of<E>>)                                                \
    detail::named_diag<op::name, D, dims_of<E>> name(E&&);                                         \
    template <int Axis, Failed E>                                                                  \
    failed name(E&&);                                                                              \
    template <Dim D, Failed E>                                                                     \
    failed name(E&&);

// The reductions' keepdim forms, name<Axis, keepdim>(e) and name<D, keepdim>(e), with the same
// checks. (The plain forms above cannot take them: keepdim is no Expression and no Dim.)
#define SHAPED_KEPT_ALONG_DIM(name)                                                                \
    template <int Axis, std::same_as<keepdim> K, Expression E>                                     \
        requires axis_in_range<Axis, rank_of<E>>                                                   \
    auto name(E&& e) {                                                                             \
        return detail::make_kept<op::name, normalize_axis<Axis, rank_of<E>>>(std::forward<E>(e));  \
    }                                                                                              \
    template <int Axis, std::same_as<keepdim> K, Expression E>                                     \
        requires(!axis_in_range<Axis, rank_of<E>>)                                                 \
    detail::axis_diag<op::name, Axis, dims_of<E>::rank> name(E&&);                                 \
    template <Dim D, std::same_as<keepdim> K, Expression E>                                        \
        requires detail::names_one<D, dims_of<E>>                                                  \
    auto name(E&& e) {                                                                             \
        return detail::make_kept<op::name, index_named<D, dims_of<E>>>(std::forward<E>(e));        \
    }                                                                                              \
    template <Dim D, std::same_as<keepdim> K, Expression E>                                        \
        requires(!detail::names_one<D, dims_of<E>>)                                                \
    detail::named_diag<op::name, D, dims_of<E>> name(E&&);                                         \
    template <int Axis, std::same_as<keepdim> K, Failed E>                                         \
    failed name(E&&);                                                                              \
    template <Dim D, std::same_as<keepdim> K, Failed E>                                            \
    failed name(E&&);

SHAPED_ALONG_DIM(softmax)
SHAPED_ALONG_DIM(log_softmax)
SHAPED_ALONG_DIM(sum)
SHAPED_ALONG_DIM(mean)
SHAPED_ALONG_DIM(max)
SHAPED_ALONG_DIM(min)
SHAPED_ALONG_DIM(var)
SHAPED_KEPT_ALONG_DIM(sum)
SHAPED_KEPT_ALONG_DIM(mean)
SHAPED_KEPT_ALONG_DIM(max)
SHAPED_KEPT_ALONG_DIM(min)
SHAPED_KEPT_ALONG_DIM(var)
#undef SHAPED_KEPT_ALONG_DIM
#undef SHAPED_ALONG_DIM

}  // namespace shaped
