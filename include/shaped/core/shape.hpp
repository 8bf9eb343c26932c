#pragma once
// The run-time shape of a tensor: the extents of its dims, static and dynamic alike.

#include <shaped/core/diagnostics.hpp>
#include <shaped/core/dims.hpp>
#include <shaped/core/extents.hpp>
#include <shaped/core/shape_error.hpp>

#include <array>
#include <cstddef>
#include <ostream>
#include <string_view>
#include <type_traits>

namespace shaped {

template <class List>
using extents_of = std::array<std::size_t, List::rank>;

// Strides, in elements, of a row-major array with these extents, which must fit
// (checked_byte_count): then no stride overflows.
template <std::size_t R>
constexpr std::array<std::ptrdiff_t, R> row_major_strides(const std::array<std::size_t, R>& extents) {
    std::array<std::ptrdiff_t, R> strides{};
    std::ptrdiff_t stride = 1;
    for (std::size_t i = R; i-- > 0;) {
        strides[i] = stride;
        stride *= static_cast<std::ptrdiff_t>(extents[i]);
    }
    return strides;
}

template <Dim... Ds>
class Shape {
public:
    static constexpr std::size_t rank = sizeof...(Ds);

    constexpr explicit Shape(const std::array<std::size_t, rank>& extents) : extents_(extents) {}

    constexpr std::size_t operator[](std::size_t i) const { return extents_[i]; }
    constexpr const std::array<std::size_t, rank>& extents() const { return extents_; }
    // The element count; shape_error where the extents do not fit (core/extents.hpp).
    std::size_t numel() const { return detail::checked_element_count("Shape::numel", dims<Ds...>{}, extents_, 1); }
    static constexpr std::array<std::string_view, rank> names() { return {Ds::name.view()...}; }

    friend constexpr bool operator==(const Shape&, const Shape&) = default;

    // Size([B=2, T=4, H=16]), PyTorch's torch.Size with the names added.
    friend std::ostream& operator<<(std::ostream& os, const Shape& shape) {
        os << "Size([";
        for (std::size_t i = 0; i < rank; ++i)
            os << (i ? ", " : "") << names()[i] << '=' << shape.extents_[i];
        return os << "])";
    }

private:
    std::array<std::size_t, rank> extents_;
};

namespace detail {

// The dynamic dims of a list, in order: the extents that making a value of those dims needs.
template <class List>
struct dynamic_dims_impl;
template <Dim... Ds>
struct dynamic_dims_impl<dims<Ds...>> {
    using type = concat_dims<std::conditional_t<Ds::is_static, dims<>, dims<Ds>>...>;
};

// The extent where it is static; a dynamic dim's slot is filled from its value.
template <Dim D>
constexpr std::size_t extent_or_zero() {
    if constexpr (D::is_static) return D::extent;
    else return 0;
}

// Whether arguments are the extents of a list's dynamic dims: values of those dims, in order.
// Where not, the declared overload of the function called (Op) returns the check, with the
// wanted dims and the arguments given.
template <class List, class... Given>
inline constexpr bool gives_dynamic_extents =
    std::is_same_v<typename dynamic_dims_impl<List>::type, dims<std::remove_cvref_t<Given>...>>;
template <class Op, class List, class... Given>
using dynamic_extents_diag =
    diag::dynamic_extents<Op, typename dynamic_dims_impl<List>::type, std::remove_cvref_t<Given>...>;

// Full extents from the static ones and the given dynamic dim values.
template <Dim... Ds, Dim... Dynamic>
    requires gives_dynamic_extents<dims<Ds...>, Dynamic...>
constexpr std::array<std::size_t, sizeof...(Ds)> make_extents(dims<Ds...>, const Dynamic&... dynamic) {
    std::array<std::size_t, sizeof...(Ds)> extents{extent_or_zero<Ds>()...};
    const std::array<std::size_t, sizeof...(Dynamic)> given{dynamic.size()...};
    constexpr std::array<bool, sizeof...(Ds)> is_dynamic{!Ds::is_static...};
    for (std::size_t i = 0, j = 0; i < extents.size(); ++i)
        if (is_dynamic[i]) extents[i] = given[j++];
    return extents;
}

// Run-time half of "one check, both worlds": the extents of a value must fit the dims its type
// declares (static ones exactly).
template <Dim... Ds>
void check_extents_fit(std::string_view operation, dims<Ds...>, const std::array<std::size_t, sizeof...(Ds)>& got) {
    constexpr std::array<std::string_view, sizeof...(Ds)> names{Ds::name.view()...};
    constexpr std::array<std::size_t, sizeof...(Ds)> want{extent_or_zero<Ds>()...};
    constexpr std::array<bool, sizeof...(Ds)> fixed{Ds::is_static...};
    for (std::size_t i = 0; i < got.size(); ++i)
        if (fixed[i] && got[i] != want[i])
            throw_dims_do_not_meet(operation, SHAPED_RULE_DECLARED_DIMS, "declared", names[i], want[i], "given",
                                   names[i], got[i]);
}

// The extents of what is written into a target must be the target's, dim by dim.
template <Dim... Ds>
void check_extents_equal(std::string_view operation, dims<Ds...>, const std::array<std::size_t, sizeof...(Ds)>& target,
                         const std::array<std::size_t, sizeof...(Ds)>& source) {
    constexpr std::array<std::string_view, sizeof...(Ds)> names{Ds::name.view()...};
    for (std::size_t i = 0; i < target.size(); ++i)
        if (target[i] != source[i])
            throw_dims_do_not_meet(operation, SHAPED_RULE_DECLARED_DIMS, "declared", names[i], target[i], "given",
                                   names[i], source[i]);
}

}  // namespace detail

template <class List>
using dynamic_dims = typename detail::dynamic_dims_impl<List>::type;

}  // namespace shaped
