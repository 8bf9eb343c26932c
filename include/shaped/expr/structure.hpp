#pragma once
// Nodes that move or mask positions rather than compute values: tril/triu, a permutation of
// dims (transpose, mT), rename, and a dim of extent 1 inserted or dropped (unsqueeze, squeeze,
// a reduction's keepdim). Over a Tensor or View they cost nothing: the kernels read the
// operand's storage through permuted strides (a matmul takes a transposed operand as a BLAS
// transpose flag).

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

namespace detail {
// An operand's extents or strides with an entry for a dim of extent 1 inserted at Axis (as
// `value`), or the entry at Axis dropped: the same elements seen with that dim or without it.
template <std::size_t Axis, std::size_t To, class V, std::size_t From>
constexpr std::array<V, To> with_unit_entry(const std::array<V, From>& in, V value) {
    static_assert(To + 1 == From || From + 1 == To);
    std::array<V, To> out{};
    if constexpr (To > From) {
        for (std::size_t i = 0, j = 0; i < To; ++i) out[i] = i == Axis ? value : in[j++];
    } else {
        for (std::size_t i = 0, j = 0; i < From; ++i)
            if (i != Axis) out[j++] = in[i];
    }
    return out;
}
}  // namespace detail

// E with a dim of extent 1 inserted at Axis (NewDims has one dim more than E: unsqueeze, a
// reduction kept as a dim) or E's dim of extent 1 at Axis dropped (one dim fewer: squeeze). The
// elements are E's, in E's order. Over stored elements these are Views (tensor/reshape.hpp);
// this node is what the same takes over any other expression, and the kernels evaluate it by
// writing E's value straight into the target seen with E's dims: no element is copied twice.
template <class E, std::size_t Axis, class NewDims>
class unit_dim_node : public expression_base {
public:
    using value_type = value_type_of<E>;
    using dims_type = NewDims;
    static constexpr bool owns_storage = false;
    static constexpr std::size_t rank = dims_type::rank;
    static constexpr std::size_t unit_axis = Axis;
    static constexpr bool inserts = rank > rank_of<E>;
    static_assert(rank == rank_of<E> + 1 || rank + 1 == rank_of<E>);

    template <operand_for<E> A>
    explicit unit_dim_node(A&& a) : operand_(std::forward<A>(a)) {}

    std::array<std::size_t, rank> extents() const {
        return detail::with_unit_entry<Axis, rank>(operand_.extents(), std::size_t{1});
    }
    const E& operand() const { return operand_; }

private:
    E operand_;
};

// Each operation has two overloads: the one that runs, and the one a misfit picks, only
// declared, whose return type is the failed check. The compiler instantiates that type at the
// caller's line, so the diagnostic is one error with no frame of ours around it.
template <Expression E>
    requires axis_in_range<-2, rank_of<E>>
auto tril(E&& e, long diagonal = 0) {
    return triangle_node<operand_t<E&&>, false>(std::forward<E>(e), diagonal);
}
template <Expression E>
    requires(!axis_in_range<-2, rank_of<E>>)
detail::axis_diag<op::tril, -2, dims_of<E>::rank> tril(E&&, long = 0);
template <Failed E>
failed tril(E&&, long = 0);

template <Expression E>
    requires axis_in_range<-2, rank_of<E>>
auto triu(E&& e, long diagonal = 0) {
    return triangle_node<operand_t<E&&>, true>(std::forward<E>(e), diagonal);
}
template <Expression E>
    requires(!axis_in_range<-2, rank_of<E>>)
detail::axis_diag<op::triu, -2, dims_of<E>::rank> triu(E&&, long = 0);
template <Failed E>
failed triu(E&&, long = 0);

namespace detail {
template <int I, int J, class List>
consteval auto transpose_misfit() {
    if constexpr (!axis_in_range<I, List::rank>) return std::type_identity<axis_diag<op::transpose, I, List::rank>>{};
    else if constexpr (!axis_in_range<J, List::rank>) return std::type_identity<axis_diag<op::transpose, J, List::rank>>{};
    else return std::type_identity<void>{};
}
template <int I, int J, class E>
using transpose_misfit_t = typename decltype(transpose_misfit<I, J, dims_of<E>>())::type;
}  // namespace detail

// transpose<I, J>(e): swaps two dims by position, as x.transpose(i, j) does.
template <int I, int J, Expression E>
    requires std::is_void_v<detail::transpose_misfit_t<I, J, E>>
auto transpose(E&& e) {
    constexpr std::size_t rank = rank_of<E>;
    constexpr auto perm = detail::swapped_indices<rank, normalize_axis<I, rank>, normalize_axis<J, rank>>();
    return permute_node<operand_t<E&&>, perm>(std::forward<E>(e));
}
template <int I, int J, Expression E>
    requires(!std::is_void_v<detail::transpose_misfit_t<I, J, E>>)
detail::transpose_misfit_t<I, J, E> transpose(E&&);
template <int I, int J, Failed E>
failed transpose(E&&);

// transpose<A, B>(e) by name: each name must occur exactly once.
template <Dim A, Dim B, Expression E>
    requires(detail::names_one<A, dims_of<E>> && detail::names_one<B, dims_of<E>>)
auto transpose(E&& e) {
    using List = dims_of<E>;
    return transpose<static_cast<int>(index_named<A, List>), static_cast<int>(index_named<B, List>)>(
        std::forward<E>(e));
}
template <Dim A, Dim B, Expression E>
    requires(!(detail::names_one<A, dims_of<E>> && detail::names_one<B, dims_of<E>>))
detail::first_unnamed_diag<op::transpose, dims_of<E>, A, B> transpose(E&&);
template <Dim A, Dim B, Failed E>
failed transpose(E&&);

// mT(e): the last two dims swapped, as x.mT (and x.transpose(-2, -1)).
template <Expression E>
auto mT(E&& e) {
    return transpose<-2, -1>(std::forward<E>(e));
}
template <Failed E>
failed mT(E&&);

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

template <class List, int... Axes>
inline constexpr bool permutes = sizeof...(Axes) == List::rank && is_permutation<Axes...>();

template <class List, Dim... Ds>
consteval auto permute_misfit() {
    if constexpr (!(names_one<Ds, List> && ...))
        return std::type_identity<first_unnamed_diag<op::permute, List, Ds...>>{};
    else if constexpr (!permutes<List, static_cast<int>(index_named<Ds, List>)...>)
        return std::type_identity<diag::not_a_permutation<op::permute, Ds..., List>>{};
    else
        return std::type_identity<void>{};
}
template <class E, Dim... Ds>
using permute_misfit_t = typename decltype(permute_misfit<dims_of<E>, Ds...>())::type;
}  // namespace detail

// permute<Axes...>(e): result dim i is e's dim Axes[i], as x.permute(...) does.
template <int... Axes, Expression E>
    requires(sizeof...(Axes) > 0 && detail::permutes<dims_of<E>, Axes...>)
auto permute(E&& e) {
    constexpr std::size_t rank = rank_of<E>;
    constexpr std::array<std::size_t, rank> perm{normalize_axis<Axes, rank>...};
    return permute_node<operand_t<E&&>, perm>(std::forward<E>(e));
}
template <int... Axes, Expression E>
    requires(sizeof...(Axes) > 0 && !detail::permutes<dims_of<E>, Axes...>)
diag::not_a_permutation<op::permute, diag::axis<Axes>..., diag::rank<dims_of<E>::rank>> permute(E&&);
template <int... Axes, Failed E>
failed permute(E&&);

// permute<Ds...>(e) by name: the same dims in the order named; each name must occur once.
template <Dim... Ds, Expression E>
    requires(sizeof...(Ds) > 0 && std::is_void_v<detail::permute_misfit_t<E, Ds...>>)
auto permute(E&& e) {
    using List = dims_of<E>;
    return permute_node<operand_t<E&&>, std::array<std::size_t, List::rank>{index_named<Ds, List>...}>(
        std::forward<E>(e));
}
template <Dim... Ds, Expression E>
    requires(sizeof...(Ds) > 0 && !std::is_void_v<detail::permute_misfit_t<E, Ds...>>)
detail::permute_misfit_t<E, Ds...> permute(E&&);
template <Dim... Ds, Failed E>
failed permute(E&&);

namespace detail {
template <Dim From, Dim To, class List>
consteval auto rename_misfit() {
    if constexpr (!names_one<From, List>) {
        return std::type_identity<named_diag<op::rename, From, List>>{};
    } else if constexpr (count_named<To, List> > 0 && !same_name<From, To>) {
        return std::type_identity<diag::rename_collision<From, To, List>>{};
    } else {
        using old = dim_at<index_named<From, List>, List>;
        if constexpr (!can_meet<renamed_dim<old, To::name>, To>) return std::type_identity<diag::rename_extent<old, To>>{};
        else return std::type_identity<void>{};
    }
}
template <Dim From, Dim To, class E>
using rename_misfit_t = typename decltype(rename_misfit<From, To, dims_of<E>>())::type;
}  // namespace detail

// rename<From, To>(e): the dim named From is called To; To must not name another dim already.
template <Dim From, Dim To, Expression E>
    requires std::is_void_v<detail::rename_misfit_t<From, To, E>>
auto rename(E&& e) {
    using List = dims_of<E>;
    using target = renamed_dim<dim_at<index_named<From, List>, List>, To::name>;
    return rename_node<operand_t<E&&>, replace_at<index_named<From, List>, target, List>>(std::forward<E>(e));
}
template <Dim From, Dim To, Expression E>
    requires(!std::is_void_v<detail::rename_misfit_t<From, To, E>>)
detail::rename_misfit_t<From, To, E> rename(E&&);
template <Dim From, Dim To, Failed E>
failed rename(E&&);

}  // namespace shaped
