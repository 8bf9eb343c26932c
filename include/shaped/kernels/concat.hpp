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
                throw_dims_do_not_meet("concat", "first operand's", names_of<First>()[i], extents[i],
                                       "another operand's", names_of<First>()[i], other[i]);
        const auto joined = checked_sum(extents[Axis], other[Axis]);
        if (!joined)
            throw shape_error("shaped::concat: the operands' extents along " + std::string(names_of<First>()[Axis]) +
                              " add up to more than size_t holds");
        extents[Axis] = *joined;
    }
    Result result{typename Result::shape_type(extents)};
    std::size_t offset = 0;
    auto place = [&](const auto& part) {
        const std::size_t n = part.extents()[Axis];
        auto window = slice<dim_at<Axis, dims_of<Result>>>(result, offset, offset + n);
        kernels::assign(window, part);
        offset += n;
    };
    place(first);
    (place(rest), ...);
    return result;
}

}  // namespace detail

template <int Axis, Expression First, Expression... Rest>
auto concat(const First& first, const Rest&... rest) {
    constexpr std::size_t rank = rank_of<First>;
    if constexpr (!axis_in_range<Axis, rank>) {
        (void)detail::axis_diag<op::concat, Axis, rank>{};
        return diag::failed{};
    } else {
        constexpr std::size_t axis = normalize_axis<Axis, rank>;
        if constexpr (!(detail::joinable<axis, First, Rest> && ...)) {
            (void)diag::concat_dims<diag::show_dims<dims_of<First>>, diag::show_dims<dims_of<Rest>>...>{};
            return diag::failed{};
        } else {
            return detail::concat_along<axis>(first, rest...);
        }
    }
}

// Checked here rather than by delegating to the positional form: a failure stays one frame
// from the caller's line.
template <Dim D, Expression First, Expression... Rest>
auto concat(const First& first, const Rest&... rest) {
    using List = dims_of<First>;
    if constexpr (!detail::names_one<D, List>) {
        (void)detail::named_diag<op::concat, D, List>{};
        return diag::failed{};
    } else if constexpr (!(detail::joinable<index_named<D, List>, First, Rest> && ...)) {
        (void)diag::concat_dims<diag::show_dims<List>, diag::show_dims<dims_of<Rest>>...>{};
        return diag::failed{};
    } else {
        return detail::concat_along<index_named<D, List>>(first, rest...);
    }
}

}  // namespace shaped
