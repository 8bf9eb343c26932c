#pragma once
// Overflow-checked extent arithmetic. Every element count, byte count, product or sum of
// extents that shaped computes from values it does not control goes through these, so that an
// extent too large for memory is a shape_error naming the dims — never a size_t that wrapped
// into a small tensor, or a stride that overflowed.
//
// An array's extents fit when the bytes it would span with each zero extent taken as one fit in
// a ptrdiff_t: then its byte count, each of its strides in elements and every offset within it
// are representable. An empty array (0, 2, 2^63) still has strides, so it must fit too.

#include <shaped/core/diagnostics.hpp>
#include <shaped/core/dims.hpp>
#include <shaped/core/shape_error.hpp>

#include <array>
#include <cstddef>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace shaped {

// a * b and a + b, or nothing where the result does not fit in size_t.
constexpr std::optional<std::size_t> checked_product(std::size_t a, std::size_t b) {
    std::size_t result = 0;
    if (__builtin_mul_overflow(a, b, &result)) return std::nullopt;
    return result;
}
constexpr std::optional<std::size_t> checked_sum(std::size_t a, std::size_t b) {
    std::size_t result = 0;
    if (__builtin_add_overflow(a, b, &result)) return std::nullopt;
    return result;
}

// The most bytes one array may span.
inline constexpr std::size_t max_array_bytes = static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max());

// The byte count of an array of these extents (0 when one extent is 0), or nothing when its
// extents do not fit (see above).
constexpr std::optional<std::size_t> checked_byte_count(std::span<const std::size_t> extents, std::size_t element_size) {
    std::size_t span = element_size;
    bool empty = false;
    for (const std::size_t extent : extents) {
        if (extent == 0) {
            empty = true;
            continue;
        }
        const auto next = checked_product(span, extent);
        if (!next || *next > max_array_bytes) return std::nullopt;
        span = *next;
    }
    if (span > max_array_bytes) return std::nullopt;
    return empty ? 0 : span;
}

// Whether static extents fit, for a compile-time check.
template <std::size_t ElementSize, std::size_t... Extents>
inline constexpr bool static_extents_fit = [] {
    constexpr std::array<std::size_t, sizeof...(Extents)> extents{Extents...};
    return checked_byte_count(extents, ElementSize).has_value();
}();

namespace detail {

// "(A=6148914691236517206, B=3)"
template <Dim... Ds>
std::string describe_extents(dims<Ds...>, const std::array<std::size_t, sizeof...(Ds)>& extents) {
    static constexpr std::array<std::string_view, sizeof...(Ds)> names{Ds::name.view()...};
    return describe_extents(names, extents);
}

// shape_error: extents that span more bytes than an array can address.
[[noreturn]] void throw_extents_overflow(std::string_view operation, std::span<const std::string_view> names,
                                         std::span<const std::size_t> extents, std::size_t element_size);

// The element count of an array of these extents; shape_error naming the dims when they do not
// fit. `operation` is what the user called.
template <Dim... Ds>
std::size_t checked_element_count(std::string_view operation, dims<Ds...>,
                                  const std::array<std::size_t, sizeof...(Ds)>& extents, std::size_t element_size) {
    static constexpr std::array<std::string_view, sizeof...(Ds)> names{Ds::name.view()...};
    const auto bytes = checked_byte_count(extents, element_size);
    if (!bytes) throw_extents_overflow(operation, names, extents, element_size);
    return *bytes / element_size;
}

}  // namespace detail
}  // namespace shaped
