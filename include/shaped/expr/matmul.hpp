#pragma once
// matmul(a, b): contracts the last dim of a with the second-to-last of b, which must agree in
// name and extent; the batch dims in front broadcast as elementwise dims do (aligned from the
// right, absent ones spread). A rank-1 operand is not promoted: attention code is batched.

#include <shaped/expr/elementwise.hpp>

#include <utility>

namespace shaped {

template <class L, class R>
struct matmul_dims {
    using lhs_batch = slice_dims<0, L::rank - 2, L>;
    using rhs_batch = slice_dims<0, R::rank - 2, R>;
    using lhs_inner = dim_at<L::rank - 1, L>;
    using rhs_inner = dim_at<R::rank - 2, R>;
    using type = concat_dims<broadcast_dims<lhs_batch, rhs_batch>, dims<dim_at<L::rank - 2, L>, dim_at<R::rank - 1, R>>>;
};

template <class L, class R>
class matmul_node : public expression_base {
public:
    using value_type = std::common_type_t<value_type_of<L>, value_type_of<R>>;
    using dims_type = typename matmul_dims<dims_of<L>, dims_of<R>>::type;
    static constexpr bool owns_storage = false;
    static constexpr std::size_t rank = dims_type::rank;

    template <operand_for<L> A, operand_for<R> B>
    matmul_node(A&& a, B&& b) : lhs_(std::forward<A>(a)), rhs_(std::forward<B>(b)) {
        const auto le = lhs_.extents();
        const auto re = rhs_.extents();
        constexpr std::size_t lr = rank_of<L>, rr = rank_of<R>;
        using inner = matmul_dims<dims_of<L>, dims_of<R>>;
        if (le[lr - 1] != re[rr - 2])
            detail::throw_dims_do_not_meet("matmul", SHAPED_RULE_MATMUL_INNER_DIMS, "lhs", inner::lhs_inner::name.view(),
                                           le[lr - 1], "rhs", inner::rhs_inner::name.view(), re[rr - 2]);
        extents_.fill(1);
        // Batch dims align from the right; one absent from a side, or of extent 1, spreads.
        constexpr std::size_t batch = rank - 2;
        constexpr auto lhs_names = detail::names_of<L>();
        constexpr auto rhs_names = detail::names_of<R>();
        for (std::size_t i = 0; i < batch; ++i) {
            const bool in_lhs = i + lr >= rank, in_rhs = i + rr >= rank;
            const std::size_t li = i + lr - rank, ri = i + rr - rank;
            const std::size_t l = in_lhs ? le[li] : 1;
            const std::size_t r = in_rhs ? re[ri] : 1;
            if (l != r && l != 1 && r != 1)
                detail::throw_dims_do_not_meet("matmul", SHAPED_RULE_MATMUL_BATCH_DIMS, "lhs", lhs_names[li], l, "rhs",
                                               rhs_names[ri], r);
            extents_[i] = l == 1 ? r : l;
        }
        extents_[rank - 2] = le[lr - 2];
        extents_[rank - 1] = re[rr - 1];
    }

    const std::array<std::size_t, rank>& extents() const { return extents_; }
    const L& lhs() const { return lhs_; }
    const R& rhs() const { return rhs_; }

private:
    L lhs_;
    R rhs_;
    std::array<std::size_t, rank> extents_;
};

namespace detail {
// The check of matmul(L, R) that fails, or void.
template <class LD, class RD>
consteval auto matmul_misfit() {
    if constexpr (LD::rank < 2 || RD::rank < 2) {
        return std::type_identity<diag::matmul_rank<LD, RD>>{};
    } else {
        using shape = matmul_dims<LD, RD>;
        using failure = broadcast_failure<typename shape::lhs_batch, typename shape::rhs_batch>;
        if constexpr (!can_meet<typename shape::lhs_inner, typename shape::rhs_inner>)
            return std::type_identity<diag::matmul_inner_dims<typename shape::lhs_inner, typename shape::rhs_inner>>{};
        else if constexpr (!broadcastable<typename shape::lhs_batch, typename shape::rhs_batch>)
            return std::type_identity<diag::matmul_batch_dims<typename failure::lhs, typename failure::rhs>>{};
        else
            return std::type_identity<void>{};
    }
}
template <class L, class R>
using matmul_misfit_t = typename decltype(matmul_misfit<dims_of<L>, dims_of<R>>())::type;
}  // namespace detail

template <Expression L, Expression R>
    requires std::is_void_v<detail::matmul_misfit_t<L, R>>
auto matmul(L&& lhs, R&& rhs) {
    return matmul_node<operand_t<L&&>, operand_t<R&&>>(std::forward<L>(lhs), std::forward<R>(rhs));
}
// A misfit picks this overload, only declared: its return type is the check, which the compiler
// instantiates at the caller's line, with no frame of ours around it.
template <Expression L, Expression R>
    requires(!std::is_void_v<detail::matmul_misfit_t<L, R>>)
detail::matmul_misfit_t<L, R> matmul(L&&, R&&);
template <class L, class R>
    requires any_failed<L, R>
failed matmul(L&&, R&&);

}  // namespace shaped
