#pragma once
// Nodes that move or mask positions rather than compute values: tril/triu, a permutation of
// dims (transpose, mT) and rename. Over a Tensor or View they cost nothing: the kernels read
// the operand's storage through permuted strides (a matmul takes a transposed operand as a
// BLAS transpose flag).

#include <shaped/expr/expression.hpp>

#include <array>
#include <utility>

namespace shaped {

namespace op {
struct transpose {};
struct permute {};
struct rename {};
struct tril {};
struct triu {};
}  // namespace op

// tril (Upper = false) or triu over the last two dims: elements off the kept triangle are zero.
// Diagonal shifts the kept triangle as torch.tril(x, diagonal) does.
template <class E, bool Upper>
class triangle_node : public expression_base {
public:
    using value_type = value_type_of<E>;
    using dims_type = dims_of<E>;
    static constexpr bool owns_storage = false;
    static constexpr std::size_t rank = dims_type::rank;
    static constexpr bool upper = Upper;

    template <operand_for<E> A>
    triangle_node(A&& a, long diagonal) : operand_(std::forward<A>(a)), diagonal_(diagonal) {}

    auto extents() const { return operand_.extents(); }
    const E& operand() const { return operand_; }
    long diagonal() const { return diagonal_; }

private:
    E operand_;
    long diagonal_;
};

// E's dims reordered: result dim i is E's dim Perm[i].
template <class E, std::array<std::size_t, rank_of<E>> Perm>
class permute_node : public expression_base {
public:
    using value_type = value_type_of<E>;
    using dims_type = pick<dims_of<E>, Perm>;
    static constexpr bool owns_storage = false;
    static constexpr std::size_t rank = dims_type::rank;
    static constexpr auto permutation = Perm;

    template <operand_for<E> A>
    explicit permute_node(A&& a) : operand_(std::forward<A>(a)) {}

    std::array<std::size_t, rank> extents() const {
        const auto in = operand_.extents();
        std::array<std::size_t, rank> out{};
        for (std::size_t i = 0; i < rank; ++i) out[i] = in[Perm[i]];
        return out;
    }
    const E& operand() const { return operand_; }

private:
    E operand_;
};

// E under other dim names (and the same extents).
template <class E, class NewDims>
class rename_node : public expression_base {
public:
    using value_type = value_type_of<E>;
    using dims_type = NewDims;
    static constexpr bool owns_storage = false;
    static constexpr std::size_t rank = dims_type::rank;

    template <operand_for<E> A>
    explicit rename_node(A&& a) : operand_(std::forward<A>(a)) {}

    auto extents() const { return operand_.extents(); }
    const E& operand() const { return operand_; }

private:
    E operand_;
};

// Each operation checks its dims itself, not in a helper: see detail::names_one.
template <Expression E>
auto tril(E&& e, long diagonal = 0) {
    if constexpr (!axis_in_range<-2, rank_of<E>>) {
        (void)detail::axis_diag<op::tril, -2, rank_of<E>>{};
        return diag::failed{};
    } else {
        return triangle_node<operand_t<E&&>, false>(std::forward<E>(e), diagonal);
    }
}

template <Expression E>
auto triu(E&& e, long diagonal = 0) {
    if constexpr (!axis_in_range<-2, rank_of<E>>) {
        (void)detail::axis_diag<op::triu, -2, rank_of<E>>{};
        return diag::failed{};
    } else {
        return triangle_node<operand_t<E&&>, true>(std::forward<E>(e), diagonal);
    }
}

// transpose<I, J>(e): swaps two dims by position, as x.transpose(i, j) does.
template <int I, int J, Expression E>
auto transpose(E&& e) {
    constexpr std::size_t rank = rank_of<E>;
    if constexpr (!axis_in_range<I, rank>) {
        (void)detail::axis_diag<op::transpose, I, rank>{};
        return diag::failed{};
    } else if constexpr (!axis_in_range<J, rank>) {
        (void)detail::axis_diag<op::transpose, J, rank>{};
        return diag::failed{};
    } else {
        constexpr auto perm = detail::swapped_indices<rank, normalize_axis<I, rank>, normalize_axis<J, rank>>();
        return permute_node<operand_t<E&&>, perm>(std::forward<E>(e));
    }
}

// transpose<A, B>(e) by name: each name must occur exactly once.
template <Dim A, Dim B, Expression E>
auto transpose(E&& e) {
    using List = dims_of<E>;
    if constexpr (!detail::names_one<A, List>) {
        (void)detail::named_diag<op::transpose, A, List>{};
        return diag::failed{};
    } else if constexpr (!detail::names_one<B, List>) {
        (void)detail::named_diag<op::transpose, B, List>{};
        return diag::failed{};
    } else {
        return transpose<static_cast<int>(index_named<A, List>), static_cast<int>(index_named<B, List>)>(
            std::forward<E>(e));
    }
}

// mT(e): the last two dims swapped, as x.mT (and x.transpose(-2, -1)).
template <Expression E>
auto mT(E&& e) {
    return transpose<-2, -1>(std::forward<E>(e));
}

namespace detail {
template <int... Axes>
constexpr bool is_permutation() {
    constexpr int rank = sizeof...(Axes);
    std::array<bool, sizeof...(Axes)> seen{};
    for (int a : {Axes...}) {
        const int i = a < 0 ? a + rank : a;
        if (i < 0 || i >= rank || seen[static_cast<std::size_t>(i)]) return false;
        seen[static_cast<std::size_t>(i)] = true;
    }
    return true;
}
}  // namespace detail

// permute<Axes...>(e): result dim i is e's dim Axes[i], as x.permute(...) does.
template <int... Axes, Expression E>
    requires(sizeof...(Axes) > 0)
auto permute(E&& e) {
    constexpr std::size_t rank = rank_of<E>;
    if constexpr (sizeof...(Axes) != rank || !detail::is_permutation<Axes...>()) {
        (void)diag::not_a_permutation<op::permute, diag::axis<Axes>..., diag::rank<rank>>{};
        return diag::failed{};
    } else {
        constexpr std::array<std::size_t, rank> perm{normalize_axis<Axes, rank>...};
        return permute_node<operand_t<E&&>, perm>(std::forward<E>(e));
    }
}

// permute<Ds...>(e) by name: the same dims in the order named; each name must occur once.
template <Dim... Ds, Expression E>
    requires(sizeof...(Ds) > 0)
auto permute(E&& e) {
    using List = dims_of<E>;
    if constexpr (!(detail::names_one<Ds, List> && ...)) {
        (void)detail::first_unnamed_diag<op::permute, List, Ds...>{};
        return diag::failed{};
    } else if constexpr (sizeof...(Ds) != List::rank ||
                         !detail::is_permutation<static_cast<int>(index_named<Ds, List>)...>()) {
        (void)diag::not_a_permutation<op::permute, diag::show<Ds>..., diag::show_dims<List>>{};
        return diag::failed{};
    } else {
        return permute_node<operand_t<E&&>, std::array<std::size_t, List::rank>{index_named<Ds, List>...}>(
            std::forward<E>(e));
    }
}

// rename<From, To>(e): the dim named From is called To; To must not name another dim already.
template <Dim From, Dim To, Expression E>
auto rename(E&& e) {
    using List = dims_of<E>;
    if constexpr (!detail::names_one<From, List>) {
        (void)detail::named_diag<op::rename, From, List>{};
        return diag::failed{};
    } else if constexpr (count_named<To, List> > 0 && !same_name<From, To>) {
        (void)diag::rename_collision<diag::show<From>, diag::show<To>, diag::show_dims<List>>{};
        return diag::failed{};
    } else {
        using old = dim_at<index_named<From, List>, List>;
        using target = renamed_dim<old, To::name>;
        if constexpr (!can_meet<target, To>) {
            (void)diag::rename_extent<diag::show<old>, diag::show<To>>{};
            return diag::failed{};
        } else {
            return rename_node<operand_t<E&&>, replace_at<index_named<From, List>, target, List>>(std::forward<E>(e));
        }
    }
}

}  // namespace shaped
