#pragma once
// concat<D>(a, b, ...): tensors joined along dim D (by name or by position), as torch.cat.
// The other dims must meet; D's extent is the sum, static where every operand's is.

#include <shaped/kernels/diagnostics.hpp>
#include <shaped/kernels/evaluate.hpp>

#include <optional>
#include <string>

namespace shaped {

namespace op {
struct concat {};
}  // namespace op

namespace detail {

// The static sum of the joined extents, or nothing where one is dynamic or the sum overflows
// (then the joined dim is dynamic, and the sum is checked at run time).
template <std::size_t Axis, class First, class... Rest>
consteval std::optional<std::size_t> static_joined_extent() {
    using D = dim_at<Axis, dims_of<First>>;
    if constexpr ((D::is_static && ... && dim_at<Axis, dims_of<Rest>>::is_static)) {
        std::optional<std::size_t> total = D::extent;
        ((total = total ? checked_sum(*total, dim_at<Axis, dims_of<Rest>>::extent) : total), ...);
        return total;
    } else {
        return std::nullopt;
    }
}

template <std::size_t Axis, class First, class... Rest>
consteval auto joined_dim() {
    using D = dim_at<Axis, dims_of<First>>;
    constexpr auto extent = static_joined_extent<Axis, First, Rest...>();
    if constexpr (extent.has_value())
        return std::type_identity<dim<D::name, *extent>>{};
    else
        return std::type_identity<dynamic_of<D>>{};
}

// Other has First's rank and dims, except for the extent of the joined dim.
template <std::size_t Axis, class First, class Other>
inline constexpr bool joinable = [] {
    using F = dims_of<First>;
    using O = dims_of<Other>;
    if constexpr (F::rank != O::rank)
        return false;
    else
        return []<std::size_t... I>(std::index_sequence<I...>) {
            return ((I == Axis ? same_name<dim_at<I, F>, dim_at<I, O>> : can_meet<dim_at<I, F>, dim_at<I, O>>) && ...);
        }(std::make_index_sequence<F::rank>{});
}();

template <std::size_t Axis, class First, class... Rest>
auto concat_along(const First& first, const Rest&... rest) {
    using D = typename decltype(joined_dim<Axis, First, Rest...>())::type;
    using Result = tensor_for<value_type_of<First>, replace_at<Axis, D, dims_of<First>>>;
    auto extents = first.extents();
    for (const auto& other : {rest.extents()...}) {
        for (std::size_t i = 0; i < extents.size(); ++i)
            if (i != Axis && other[i] != extents[i])
                throw_dims_do_not_meet("concat", SHAPED_RULE_CONCAT_DIMS, "first operand's", names_of<First>()[i],
                                       extents[i], "another's", names_of<First>()[i], other[i]);
        const auto joined = checked_sum(extents[Axis], other[Axis]);
        if (!joined)
            throw shape_error(message({"shaped::concat: the operands' extents along ", names_of<First>()[Axis],
                                       " add up to more than size_t holds"}));
        extents[Axis] = *joined;
    }
    Result result{typename Result::shape_type(extents)};
    std::size_t offset = 0;
    auto place = [&](const auto& part) {
        const std::size_t n = part.extents()[Axis];
        // Through the View's assignment, as any write: a part being differentiated is then the
        // derivation's compile error (train/derivatives.hpp), never a silent copy of its value.
        const auto window = slice<dim_at<Axis, dims_of<Result>>>(result, offset, offset + n);
        window = part;
        offset += n;
    };
    place(first);
    (place(rest), ...);
    return result;
}

}  // namespace detail

namespace detail {
// The check of concatenating along Axis (a position, or the dim named like D) that fails, or void.
template <auto Axis, class First, class... Rest>
consteval auto concat_misfit() {
    // An operand that is no expression (a failed one) picks no overload of these: nothing to show.
    if constexpr (!Expression<First> || !(Expression<Rest> && ...)) {
        return std::type_identity<failed>{};
    } else if constexpr (std::is_same_v<decltype(Axis), int>) {
        using List = dims_of<First>;
        if constexpr (!axis_in_range<Axis, List::rank>)
            return std::type_identity<axis_diag<op::concat, Axis, List::rank>>{};
        else if constexpr (!(joinable<normalize_axis<Axis, List::rank>, First, Rest> && ...))
            return std::type_identity<diag::concat_dims<List, dims_of<Rest>...>>{};
        else
            return std::type_identity<void>{};
    } else {
        using List = dims_of<First>;
        using D = typename decltype(Axis)::type;
        if constexpr (!names_one<D, List>)
            return std::type_identity<named_diag<op::concat, D, List>>{};
        else if constexpr (!(joinable<index_named<D, List>, First, Rest> && ...))
            return std::type_identity<diag::concat_dims<List, dims_of<Rest>...>>{};
        else
            return std::type_identity<void>{};
    }
}
template <auto Axis, class First, class... Rest>
using concat_misfit_t = typename decltype(concat_misfit<Axis, First, Rest...>())::type;
}  // namespace detail

// Each form has two overloads: the one that runs, and the one a misfit picks, only declared,
// whose return type is the failed check (instantiated at the caller's line).
template <int Axis, Expression First, Expression... Rest>
    requires std::is_void_v<detail::concat_misfit_t<Axis, First, Rest...>>
auto concat(const First& first, const Rest&... rest) {
    return detail::concat_along<normalize_axis<Axis, rank_of<First>>>(first, rest...);
}
template <int Axis, Expression First, Expression... Rest>
    requires(!std::is_void_v<detail::concat_misfit_t<Axis, First, Rest...>>)
detail::concat_misfit_t<Axis, First, Rest...> concat(const First&, const Rest&...);
template <int Axis, class... Es>
    requires any_failed<Es...>
failed concat(const Es&...);

template <Dim D, Expression First, Expression... Rest>
    requires std::is_void_v<detail::concat_misfit_t<std::type_identity<D>{}, First, Rest...>>
auto concat(const First& first, const Rest&... rest) {
    return detail::concat_along<index_named<D, dims_of<First>>>(first, rest...);
}
template <Dim D, Expression First, Expression... Rest>
    requires(!std::is_void_v<detail::concat_misfit_t<std::type_identity<D>{}, First, Rest...>>)
detail::concat_misfit_t<std::type_identity<D>{}, First, Rest...> concat(const First&, const Rest&...);
template <Dim D, class... Es>
    requires any_failed<Es...>
failed concat(const Es&...);

}  // namespace shaped
