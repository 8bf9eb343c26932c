#pragma once
// The run-time side of shape checking: where an extent is dynamic, a rule that the compiler
// could not check throws shape_error with the same words its static_assert says (a rule's
// SHAPED_RULE_* macro, core/diagnostics.hpp), then the extents it found.

#include <cstddef>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

namespace shaped {

class shape_error : public std::invalid_argument {
public:
    using std::invalid_argument::invalid_argument;
};

namespace detail {

inline std::string describe_dim(std::string_view name, std::size_t extent) {
    return std::string(name) + "(" + std::to_string(extent) + ")";
}

// A dim as a message names it: its name, and its extent when static.
struct named_dim {
    std::string_view name;
    std::optional<std::size_t> extent;
};

// "(B=2, T, C=6)"
inline std::string describe_shape(std::span<const named_dim> dims) {
    std::string text = "(";
    for (std::size_t i = 0; i < dims.size(); ++i) {
        if (i > 0) text += ", ";
        text += dims[i].name;
        if (dims[i].extent) text += "=" + std::to_string(*dims[i].extent);
    }
    return text + ')';
}

// "shaped::<operation>: <rule>: <found>"
[[noreturn]] inline void throw_rule(std::string_view operation, std::string_view rule, std::string_view found) {
    throw shape_error("shaped::" + std::string(operation) + ": " + std::string(rule) + ": " + std::string(found));
}

// "shaped::matmul: <rule>: lhs H(16), rhs T(4)"
[[noreturn]] inline void throw_dims_do_not_meet(std::string_view operation, std::string_view rule,
                                                std::string_view lhs_role, std::string_view lhs_name,
                                                std::size_t lhs_extent, std::string_view rhs_role,
                                                std::string_view rhs_name, std::size_t rhs_extent) {
    throw_rule(operation, rule,
               std::string(lhs_role) + " " + describe_dim(lhs_name, lhs_extent) + ", " + std::string(rhs_role) + " " +
                   describe_dim(rhs_name, rhs_extent));
}

}  // namespace detail
}  // namespace shaped
