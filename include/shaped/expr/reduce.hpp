#pragma once
// Reductions along one dim (sum, mean, max, min, var) and softmax / log_softmax along one dim.
// The dim is named by position as PyTorch does (softmax<-1>) or by name (softmax<T>); a name
// must occur exactly once in the tensor.

#include <shaped/expr/expression.hpp>

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

    template <class A>
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

    template <class A>
    explicit softmax_node(A&& a) : operand_(std::forward<A>(a)) {}

    auto extents() const { return operand_.extents(); }
    const E& operand() const { return operand_; }

private:
    E operand_;
};

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
    detail::axis_diag<op::name, Axis, rank_of<E>> name(E&&);                                       \
    template <Dim D, Expression E>                                                                 \
        requires detail::names_one<D, dims_of<E>>                                                  \
    auto name(E&& e) {                                                                             \
        return detail::make_along<op::name, index_named<D, dims_of<E>>>(std::forward<E>(e));       \
    }                                                                                              \
    template <Dim D, Expression E>                                                                 \
        requires(!detail::names_one<D, dims_of<E>>)                                                \
    detail::named_diag<op::name, D, dims_of<E>> name(E&&);

SHAPED_ALONG_DIM(softmax)
SHAPED_ALONG_DIM(log_softmax)
SHAPED_ALONG_DIM(sum)
SHAPED_ALONG_DIM(mean)
SHAPED_ALONG_DIM(max)
SHAPED_ALONG_DIM(min)
SHAPED_ALONG_DIM(var)
#undef SHAPED_ALONG_DIM

}  // namespace shaped
