#pragma once
// Reshapes by name: split and merge, the two attention needs; reshape, several adjacent dims as
// several others; and unsqueeze and squeeze, a dim of extent 1 inserted or dropped.
//
//   split<C, NH, HS>(x)    (B, T, C)      -> (B, T, NH, HS)   as x.view(B, T, nh, hs)
//   merge<NH, HS, C>(y)    (B, T, NH, HS) -> (B, T, C)        as y.view(B, T, C)
//   reshape<dims<H, W>, dims<P, Q>>(z)
//                          (B, H, W, C)   -> (B, P, Q, C)     as z.view(b, p, q, c)
//   unsqueeze<1, H>(x)     (B, T, C)      -> (B, H=1, T, C)   as x.unsqueeze(1)
//   squeeze<H>(z)          (B, H=1, T, C) -> (B, T, C)        as z.squeeze(1)
//
// The new extents' product must equal the old extent: a compile error where every extent
// involved is static, a shape_error at run time otherwise. Over a Tensor lvalue or a View the
// result is a View of the same elements — a split always is; a merge is when the two dims lie in
// memory as one. Any other operand (a transposed tensor, a temporary) is evaluated once into a
// new Tensor with the new dims, as PyTorch's .contiguous().view(...).

#include <shaped/tensor/tensor.hpp>
#include <shaped/tensor/view.hpp>
#include <shaped/tensor/view_of.hpp>

#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

namespace shaped {

namespace op {
struct split {};
struct merge {};
struct reshape {};
struct unsqueeze {};
struct squeeze {};
}  // namespace op

namespace detail {

// Whether Outer x Inner can be Old: always, unless all three are static and the product differs.
template <Dim Old, Dim Outer, Dim Inner>
inline constexpr bool product_fits = [] {
    if constexpr (Old::is_static && Outer::is_static && Inner::is_static)
        return checked_product(Outer::extent, Inner::extent) == Old::extent;
    else
        return true;
}();

// "shaped::split: the product of the new extents differs from the old extent: C(384) is not NH(6) x HS(32)"
// A product that overflows differs from every extent.
template <Dim Old, Dim Outer, Dim Inner>
void check_reshape_extents(std::string_view operation, std::size_t old, std::size_t outer, std::size_t inner) {
    if (checked_product(outer, inner) != old)
        throw_rule(operation, SHAPED_RULE_RESHAPE_PRODUCT,
                   message({message_part::dim_extent{Old::name.view(), old}, " is not ",
                            message_part::dim_extent{Outer::name.view(), outer}, " x ",
                            message_part::dim_extent{Inner::name.view(), inner}}));
}

// Whether the result can be a View of x's own elements: x is strided and outlives the call.
template <class E>
inline constexpr bool reshape_as_view = Strided<E> && (std::is_lvalue_reference_v<E> || !std::remove_cvref_t<E>::owns_storage);

// x's values, evaluated once into a new Tensor whose dims are NewDims. Reshaping a row-major
// array moves no element, so x is written straight into the new storage seen with x's dims.
template <class NewDims, class E>
auto reshape_evaluated(const E& x, const extents_of<NewDims>& new_extents) {
    using T = value_type_of<E>;
    tensor_for<T, NewDims> result{typename tensor_for<T, NewDims>::shape_type(new_extents)};
    const auto old_extents = x.extents();
    view_for<T, dims_of<E>> as_old(result.data(), old_extents, row_major_strides(old_extents));
    as_old = x;
    return result;
}

}  // namespace detail

namespace detail {
template <Dim D, Dim D1, Dim D2, class List, class... Given>
consteval auto split_misfit() {
    if constexpr (count_named<D, List> != 1) return std::type_identity<named_diag<op::split, D, List>>{};
    else if constexpr (!product_fits<dim_at<index_named<D, List>, List>, D1, D2>)
        return std::type_identity<diag::reshape_product<op::split, dim_at<index_named<D, List>, List>, D1, D2>>{};
    else if constexpr (!gives_dynamic_extents<dims<D1, D2>, Given...>)
        return std::type_identity<dynamic_extents_diag<op::split, dims<D1, D2>, Given...>>{};
    else return std::type_identity<void>{};
}
template <Dim D, Dim D1, Dim D2, class E, class... Given>
using split_misfit_t = typename decltype(split_misfit<D, D1, D2, dims_of<E>, Given...>())::type;

template <Dim D1, Dim D2, Dim D, class List>
consteval auto merge_misfit() {
    if constexpr (count_named<D1, List> != 1) {
        return std::type_identity<named_diag<op::merge, D1, List>>{};
    } else if constexpr (count_named<D2, List> != 1) {
        return std::type_identity<named_diag<op::merge, D2, List>>{};
    } else if constexpr (index_named<D2, List> != index_named<D1, List> + 1) {
        return std::type_identity<diag::reshape_not_adjacent<D1, D2, List>>{};
    } else {
        using Outer = dim_at<index_named<D1, List>, List>;
        using Inner = dim_at<index_named<D1, List> + 1, List>;
        if constexpr (!product_fits<D, Outer, Inner>)
            return std::type_identity<diag::reshape_product<op::merge, D, Outer, Inner>>{};
        else return std::type_identity<void>{};
    }
}
template <Dim D1, Dim D2, Dim D, class E>
using merge_misfit_t = typename decltype(merge_misfit<D1, D2, D, dims_of<E>>())::type;
}  // namespace detail

// Each operation has two overloads: the one that runs, and the one a misfit picks, only declared,
// whose return type is the failed check (instantiated at the caller's line).

// split<D, D1, D2>(x, dynamic extents...): x's dim D as D1 (outer) and D2 (inner). A dynamic D1
// or D2 takes its extent as a value, one per dynamic dim, in order: split<T, W, P>(x, W{4}).
template <Dim D, Dim D1, Dim D2, Expression E, DynamicDim... Dynamic>
    requires std::is_void_v<detail::split_misfit_t<D, D1, D2, E, Dynamic...>>
auto split(E&& x, Dynamic... extents) {
    using List = dims_of<E>;
    constexpr std::size_t axis = index_named<D, List>;
    using Old = dim_at<axis, List>;
    using NewDims = concat_dims<slice_dims<0, axis, List>, dims<D1, D2>, slice_dims<axis + 1, List::rank, List>>;
    const auto [outer, inner] = detail::make_extents(dims<D1, D2>{}, extents...);
    const auto old_extents = x.extents();
    detail::check_reshape_extents<Old, D1, D2>("split", old_extents[axis], outer, inner);

    extents_of<NewDims> new_extents{};
    for (std::size_t i = 0; i < List::rank; ++i) new_extents[i < axis ? i : i + 1] = old_extents[i];
    new_extents[axis] = outer;
    new_extents[axis + 1] = inner;

    if constexpr (detail::reshape_as_view<E>) {
        const auto old_strides = x.strides();
        std::array<std::ptrdiff_t, NewDims::rank> strides{};
        for (std::size_t i = 0; i < List::rank; ++i) strides[i < axis ? i : i + 1] = old_strides[i];
        strides[axis] = old_strides[axis] * static_cast<std::ptrdiff_t>(inner);
        strides[axis + 1] = old_strides[axis];
        return detail::rebased(
            x, view_for<detail::view_element_t<std::remove_reference_t<E>>, NewDims>(x.data(), new_extents, strides));
    } else {
        return detail::reshape_evaluated<NewDims>(x, new_extents);
    }
}
template <Dim D, Dim D1, Dim D2, Expression E, class... Given>
    requires(!std::is_void_v<detail::split_misfit_t<D, D1, D2, E, Given...>>)
detail::split_misfit_t<D, D1, D2, E, Given...> split(E&&, Given...);
template <Dim D, Dim D1, Dim D2, Failed E, class... Given>
failed split(E&&, Given...);

// merge<D1, D2, D>(x): x's adjacent dims D1, D2 (in that order) as one dim D. A dynamic D takes
// the product of their extents.
template <Dim D1, Dim D2, Dim D, Expression E>
    requires std::is_void_v<detail::merge_misfit_t<D1, D2, D, E>>
auto merge(E&& x) {
    using List = dims_of<E>;
    constexpr std::size_t axis = index_named<D1, List>;
    using Outer = dim_at<axis, List>;
    using Inner = dim_at<axis + 1, List>;
    using NewDims = concat_dims<slice_dims<0, axis, List>, dims<D>, slice_dims<axis + 2, List::rank, List>>;
    const auto old_extents = x.extents();
    const std::size_t outer = old_extents[axis], inner = old_extents[axis + 1];
    const auto merged_extent = checked_product(outer, inner);
    if constexpr (D::is_static) detail::check_reshape_extents<D, Outer, Inner>("merge", D::extent, outer, inner);
    else if (!merged_extent)
        detail::checked_element_count("merge", List{}, old_extents, 1);  // throws: x's extents do not fit

    extents_of<NewDims> new_extents{};
    for (std::size_t i = 0; i < List::rank; ++i)
        if (i != axis + 1) new_extents[i <= axis ? i : i - 1] = old_extents[i];
    new_extents[axis] = *merged_extent;

    if constexpr (detail::reshape_as_view<E>) {
        const auto old_strides = x.strides();
        // The two dims lie as one when stepping the outer one skips exactly one run of the
        // inner one; a dim of extent 1 is never stepped.
        std::ptrdiff_t merged = old_strides[axis + 1];
        if (inner == 1) merged = old_strides[axis];
        else if (outer != 1 && old_strides[axis] != old_strides[axis + 1] * static_cast<std::ptrdiff_t>(inner))
            throw shape_error(detail::message({"shaped::merge: dims ", detail::message_part::dim_extent{Outer::name.view(), outer},
                                               " and ", detail::message_part::dim_extent{Inner::name.view(), inner},
                                               " of the view do not lie in memory as one dim; merge an evaluated copy, "
                                               "merge<...>(eval(x))"}));
        std::array<std::ptrdiff_t, NewDims::rank> strides{};
        for (std::size_t i = 0; i < List::rank; ++i)
            if (i != axis + 1) strides[i <= axis ? i : i - 1] = old_strides[i];
        strides[axis] = merged;
        return detail::rebased(
            x, view_for<detail::view_element_t<std::remove_reference_t<E>>, NewDims>(x.data(), new_extents, strides));
    } else {
        return detail::reshape_evaluated<NewDims>(x, new_extents);
    }
}
template <Dim D1, Dim D2, Dim D, Expression E>
    requires(!std::is_void_v<detail::merge_misfit_t<D1, D2, D, E>>)
detail::merge_misfit_t<D1, D2, D, E> merge(E&&);
template <Dim D1, Dim D2, Dim D, Failed E>
failed merge(E&&);

// ---- reshape -------------------------------------------------------------------------------------

namespace detail {
// The product of static extents, or nullopt where it overflows.
template <Dim... Ds>
inline constexpr std::optional<std::size_t> static_product = [] {
    std::optional<std::size_t> p = 1;
    ((p = p ? checked_product(*p, Ds::extent) : std::nullopt), ...);
    return p;
}();

// A dim's static extent, 0 for a dynamic one (its extent not known yet).
template <Dim D>
inline constexpr std::size_t known_extent = [] {
    if constexpr (D::is_static) return D::extent;
    else return std::size_t{0};
}();

// Whether the positions follow each other, in order.
template <std::size_t First, std::size_t... Rest>
consteval bool consecutive() {
    std::size_t next = First;
    return ((Rest == ++next) && ...);
}

template <class Old, class New, class List>
consteval auto reshape_misfit() {
    return []<Dim... From, Dim... To>(dims<From...>, dims<To...>) {
        if constexpr (sizeof...(From) == 0 || sizeof...(To) == 0) {
            return std::type_identity<diag::reshape_not_a_run<dims<From...>, List>>{};
        } else if constexpr (!(names_one<From, List> && ...)) {
            return std::type_identity<first_unnamed_diag<op::reshape, List, From...>>{};
        } else if constexpr (!consecutive<index_named<From, List>...>()) {
            return std::type_identity<diag::reshape_not_a_run<dims<From...>, List>>{};
        } else if constexpr ((!To::is_static + ... + 0) > 1) {
            return std::type_identity<diag::reshape_dynamic<dims<To...>>>{};
        } else {
            using Found = dims<dim_at<index_named<From, List>, List>...>;
            if constexpr (Found::all_static && (To::is_static && ...)) {
                if constexpr (static_product<dim_at<index_named<From, List>, List>...> != static_product<To...>)
                    return std::type_identity<diag::reshape_product<op::reshape, Found, dims<To...>>>{};
                else
                    return std::type_identity<void>{};
            } else {
                return std::type_identity<void>{};
            }
        }
    }(Old{}, New{});
}
template <class Old, class New, class E>
using reshape_misfit_t = typename decltype(reshape_misfit<Old, New, dims_of<E>>())::type;

// "shaped::reshape: the product of the new extents differs from the old extent: H(4) x W(5) is not P(21)"
template <std::size_t N, std::size_t M>
[[noreturn]] void throw_reshape_product(const std::array<message_part::dim_extent, N>& old,
                                        const std::array<message_part::dim_extent, M>& to) {
    std::string found;
    const auto join = [&](const auto& parts) {
        for (std::size_t i = 0; i < parts.size(); ++i) found += message({i ? " x " : "", parts[i]});
    };
    join(old);
    found += " is not ";
    join(to);
    throw_rule("reshape", SHAPED_RULE_RESHAPE_PRODUCT, found);
}
}  // namespace detail

// reshape<dims<From...>, dims<To...>>(x): x's adjacent dims From... (named in x's order) as the
// dims To..., the product of their extents kept. One of To may be dynamic: its extent is what
// the product leaves, as PyTorch's view(-1). Over a Tensor lvalue or a View a View of the same
// elements when the From dims lie in memory as one (a View whose dims do not is a shape_error,
// as merge's); any other operand evaluated once into a new Tensor.
template <class Old, class New, Expression E>
    requires std::is_void_v<detail::reshape_misfit_t<Old, New, E>>
auto reshape(E&& x) {
    // An expression being differentiated is recorded once (eval), then viewed.
    if constexpr (!Strided<E> && !std::remove_cvref_t<decltype(eval(x))>::owns_storage)
        return reshape<Old, New>(eval(std::forward<E>(x)));
    else return [&]<Dim... From, Dim... To>(dims<From...>, dims<To...>) {
        using List = dims_of<E>;
        constexpr std::size_t n = sizeof...(From), m = sizeof...(To);
        constexpr std::size_t axis = std::min({index_named<From, List>...});
        using NewDims = concat_dims<slice_dims<0, axis, List>, dims<To...>, slice_dims<axis + n, List::rank, List>>;
        const auto old_extents = x.extents();
        const std::array<detail::message_part::dim_extent, n> old{
            detail::message_part::dim_extent{From::name.view(), old_extents[index_named<From, List>]}...};
        std::array<detail::message_part::dim_extent, m> to{detail::message_part::dim_extent{To::name.view(), detail::known_extent<To>}...};
        std::optional<std::size_t> old_count = 1, to_count = 1;
        for (const auto& d : old) old_count = old_count ? checked_product(*old_count, d.extent) : std::nullopt;
        if (!old_count) detail::checked_element_count("reshape", List{}, old_extents, 1);  // throws: x does not fit
        constexpr std::array<bool, m> dynamic{!To::is_static...};
        for (std::size_t i = 0; i < m; ++i)
            if (!dynamic[i]) to_count = to_count ? checked_product(*to_count, to[i].extent) : std::nullopt;
        // The dynamic dim takes what is left; without one, the products must be equal.
        for (std::size_t i = 0; i < m; ++i)
            if (dynamic[i] && to_count && *to_count != 0 && *old_count % *to_count == 0) {
                to[i].extent = *old_count / *to_count;
                to_count = *old_count;
            }
        if (to_count != old_count) detail::throw_reshape_product(old, to);

        extents_of<NewDims> new_extents{};
        for (std::size_t i = 0; i < axis; ++i) new_extents[i] = old_extents[i];
        for (std::size_t i = 0; i < m; ++i) new_extents[axis + i] = to[i].extent;
        for (std::size_t i = axis + n; i < List::rank; ++i) new_extents[i - n + m] = old_extents[i];

        if constexpr (detail::reshape_as_view<E>) {
            const auto old_strides = x.strides();
            // The From dims lie as one when each, stepped, skips exactly one run of those inside
            // it; a dim of extent 1 is never stepped. The innermost stepped stride is the run's.
            std::optional<std::ptrdiff_t> step, expected;
            for (std::size_t i = axis + n; i-- > axis;) {
                if (old_extents[i] == 1) continue;
                if (expected && old_strides[i] != *expected)
                    throw shape_error(detail::message(
                        {"shaped::reshape: the view's dims ", old[0], " .. ", old[n - 1],
                         " do not lie in memory as one run; reshape an evaluated copy, reshape<...>(eval(x))"}));
                if (!step) step = old_strides[i];
                expected = old_strides[i] * static_cast<std::ptrdiff_t>(old_extents[i]);
            }
            std::array<std::ptrdiff_t, NewDims::rank> strides{};
            for (std::size_t i = 0; i < axis; ++i) strides[i] = old_strides[i];
            std::ptrdiff_t inner = step.value_or(1);
            for (std::size_t i = m; i-- > 0;) {
                strides[axis + i] = inner;
                inner *= static_cast<std::ptrdiff_t>(to[i].extent);
            }
            for (std::size_t i = axis + n; i < List::rank; ++i) strides[i - n + m] = old_strides[i];
            return detail::rebased(
                x, view_for<detail::view_element_t<std::remove_reference_t<E>>, NewDims>(x.data(), new_extents, strides));
        } else {
            return detail::reshape_evaluated<NewDims>(x, new_extents);
        }
    }(Old{}, New{});
}
template <class Old, class New, Expression E>
    requires(!std::is_void_v<detail::reshape_misfit_t<Old, New, E>>)
detail::reshape_misfit_t<Old, New, E> reshape(E&&);
template <class Old, class New, Failed E>
failed reshape(E&&);

// ---- unsqueeze and squeeze ----------------------------------------------------------------------
// The same elements with a dim of extent 1 more or fewer: over a Tensor lvalue or a View (or a
// value being differentiated) a View of them, else a lazy node (expr/structure.hpp) that the
// kernels evaluate straight into the target. Never a copy.

namespace detail {
// unsqueeze<P, D>: P a position as x.unsqueeze(p) takes it, 0 .. rank, or -1 (after the last dim)
// down to -(rank + 1).
template <int P, std::size_t Rank>
inline constexpr bool position_in_range = axis_in_range<P, Rank + 1>;

template <int P, Dim D, class List>
consteval auto unsqueeze_misfit() {
    if constexpr (!position_in_range<P, List::rank>) return std::type_identity<axis_diag<op::unsqueeze, P, List::rank>>{};
    else if constexpr (!has_static_extent<D, 1>) return std::type_identity<diag::unsqueeze_extent<D, List>>{};
    else if constexpr (count_named<D, List> != 0) return std::type_identity<diag::unsqueeze_collision<D, List>>{};
    else return std::type_identity<void>{};
}
template <int P, Dim D, class E>
using unsqueeze_misfit_t = typename decltype(unsqueeze_misfit<P, D, dims_of<E>>())::type;

// squeeze of the dim at Axis of List (found by name or position before): its extent 1, or dynamic.
template <std::size_t Axis, class List>
inline constexpr bool squeezable = [] {
    using D = dim_at<Axis, List>;
    if constexpr (D::is_static) return D::extent == 1;
    else return true;
}();

template <Dim D, class List>
consteval auto squeeze_named_misfit() {
    if constexpr (count_named<D, List> != 1) return std::type_identity<named_diag<op::squeeze, D, List>>{};
    else if constexpr (!squeezable<index_named<D, List>, List>)
        return std::type_identity<diag::squeeze_extent<dim_at<index_named<D, List>, List>, List>>{};
    else return std::type_identity<void>{};
}
template <Dim D, class E>
using squeeze_named_misfit_t = typename decltype(squeeze_named_misfit<D, dims_of<E>>())::type;

template <int Axis, class List>
consteval auto squeeze_misfit() {
    if constexpr (!axis_in_range<Axis, List::rank>) return std::type_identity<axis_diag<op::squeeze, Axis, List::rank>>{};
    else if constexpr (!squeezable<normalize_axis<Axis, List::rank>, List>)
        return std::type_identity<diag::squeeze_extent<dim_at<normalize_axis<Axis, List::rank>, List>, List>>{};
    else return std::type_identity<void>{};
}
template <int Axis, class E>
using squeeze_misfit_t = typename decltype(squeeze_misfit<Axis, dims_of<E>>())::type;

// x with a dim of extent 1 inserted at Axis or dropped from it, NewDims the result's dims.
template <std::size_t Axis, class NewDims, class E>
auto unit_dim(E&& x) {
    if constexpr (reshape_as_view<E>) return rebased(x, unit_dim_view<Axis, NewDims>(x));
    else return unit_dim_node<operand_t<E&&>, Axis, NewDims>(std::forward<E>(x));
}

// squeeze's run-time check, where the dim's extent is dynamic.
template <std::size_t Axis, class E>
void check_squeezed(const E& x) {
    using D = dim_at<Axis, dims_of<E>>;
    if constexpr (!D::is_static) {
        const std::size_t extent = x.extents()[Axis];
        if (extent != 1)
            throw_rule("squeeze", SHAPED_RULE_SQUEEZE_EXTENT, message({message_part::dim_extent{D::name.view(), extent}}));
    }
}
}  // namespace detail

// Each operation has two overloads: the one that runs, and the one a misfit picks, only declared,
// whose return type is the failed check (instantiated at the caller's line).

// unsqueeze<P, D>(x): x with the dim D inserted before x's dim P (after the last for P = rank or
// -1), as x.unsqueeze(p). D is new to x and has the static extent 1: unsqueeze<0, dim<"B", 1>>(x).
template <int P, Dim D, Expression E>
    requires std::is_void_v<detail::unsqueeze_misfit_t<P, D, E>>
auto unsqueeze(E&& x) {
    using List = dims_of<E>;
    constexpr std::size_t axis = P < 0 ? static_cast<std::size_t>(static_cast<int>(List::rank) + 1 + P) : static_cast<std::size_t>(P);
    using NewDims = concat_dims<slice_dims<0, axis, List>, dims<D>, slice_dims<axis, List::rank, List>>;
    return detail::unit_dim<axis, NewDims>(std::forward<E>(x));
}
template <int P, Dim D, Expression E>
    requires(!std::is_void_v<detail::unsqueeze_misfit_t<P, D, E>>)
detail::unsqueeze_misfit_t<P, D, E> unsqueeze(E&&);
template <int P, Dim D, Failed E>
failed unsqueeze(E&&);

// squeeze<D>(x), squeeze<Axis>(x): x without its dim of extent 1 named D (or at Axis), as
// x.squeeze(dim). A static extent other than 1 does not compile; a dynamic one other than 1
// throws shape_error.
template <Dim D, Expression E>
    requires std::is_void_v<detail::squeeze_named_misfit_t<D, E>>
auto squeeze(E&& x) {
    constexpr std::size_t axis = index_named<D, dims_of<E>>;
    detail::check_squeezed<axis>(x);
    return detail::unit_dim<axis, drop_at<axis, dims_of<E>>>(std::forward<E>(x));
}
template <Dim D, Expression E>
    requires(!std::is_void_v<detail::squeeze_named_misfit_t<D, E>>)
detail::squeeze_named_misfit_t<D, E> squeeze(E&&);
template <Dim D, Failed E>
failed squeeze(E&&);

template <int Axis, Expression E>
    requires std::is_void_v<detail::squeeze_misfit_t<Axis, E>>
auto squeeze(E&& x) {
    constexpr std::size_t axis = normalize_axis<Axis, rank_of<E>>;
    detail::check_squeezed<axis>(x);
    return detail::unit_dim<axis, drop_at<axis, dims_of<E>>>(std::forward<E>(x));
}
template <int Axis, Expression E>
    requires(!std::is_void_v<detail::squeeze_misfit_t<Axis, E>>)
detail::squeeze_misfit_t<Axis, E> squeeze(E&&);
template <int Axis, Failed E>
failed squeeze(E&&);

}  // namespace shaped
