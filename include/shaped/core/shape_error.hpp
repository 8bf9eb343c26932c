#pragma once
// The run-time side of shape checking: where an extent is dynamic, a rule that the compiler
// could not check throws shape_error with the same words its static_assert says (a rule's
// SHAPED_RULE_* macro, core/diagnostics.hpp), then the extents it found.

#include <cstddef>
#include <initializer_list>
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

// Error messages are built out of line (src/shape_error.cpp): a template's error path is one
// call with names and numbers, not a chain of string concatenations compiled again with every
// instantiation of the template (that code was a fifth of a small program's object).

// "T(4)"
std::string describe_dim(std::string_view name, std::size_t extent);

// A dim as a message names it: its name, and its extent when static.
struct named_dim {
    std::string_view name;
    std::optional<std::size_t> extent;
};

// "(B=2, T, C=6)"
std::string describe_shape(std::span<const named_dim> dims);

// "(B=2, T=4)": names and extents side by side.
std::string describe_extents(std::span<const std::string_view> names, std::span<const std::size_t> extents);

// One piece of a message: text, a number, or a dim with its extent ("T(4)").
struct message_part {
    struct dim_extent {
        std::string_view name;
        std::size_t extent;
    };
    message_part(const char* text) : kind(text_part), text(text) {}
    message_part(std::string_view text) : kind(text_part), text(text) {}
    message_part(const std::string& text) : kind(text_part), text(text) {}
    message_part(int n) : kind(signed_part), signed_number(n) {}
    message_part(long n) : kind(signed_part), signed_number(n) {}
    message_part(long long n) : kind(signed_part), signed_number(n) {}
    message_part(unsigned n) : kind(unsigned_part), unsigned_number(n) {}
    message_part(unsigned long n) : kind(unsigned_part), unsigned_number(n) {}
    message_part(unsigned long long n) : kind(unsigned_part), unsigned_number(n) {}
    message_part(dim_extent d) : kind(dim_part), dim(d) {}

    enum { text_part, signed_part, unsigned_part, dim_part } kind;
    union {
        std::string_view text;
        long long signed_number;
        unsigned long long unsigned_number;
        dim_extent dim;
    };
};

// The pieces joined: message({"index ", i, " is out of range for dim ", {name, extent}}).
std::string message(std::initializer_list<message_part> parts);

// "shaped::<operation>: <rule>: <found>"
[[noreturn]] void throw_rule(std::string_view operation, std::string_view rule, std::string_view found);

// "shaped::matmul: <rule>: lhs H(16), rhs T(4)"
[[noreturn]] void throw_dims_do_not_meet(std::string_view operation, std::string_view rule, std::string_view lhs_role,
                                         std::string_view lhs_name, std::size_t lhs_extent, std::string_view rhs_role,
                                         std::string_view rhs_name, std::size_t rhs_extent);

}  // namespace detail
}  // namespace shaped
