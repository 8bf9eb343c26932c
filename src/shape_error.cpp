// The messages of shape errors, built once here rather than in every template that may throw one
// (core/shape_error.hpp).
#include <shaped/core/diagnostics.hpp>
#include <shaped/core/extents.hpp>
#include <shaped/core/shape_error.hpp>

#include <string>

namespace shaped::detail {

std::string describe_dim(std::string_view name, std::size_t extent) {
    return std::string(name) + "(" + std::to_string(extent) + ")";
}

std::string describe_shape(std::span<const named_dim> dims) {
    std::string text = "(";
    for (std::size_t i = 0; i < dims.size(); ++i) {
        if (i > 0) text += ", ";
        text += dims[i].name;
        if (dims[i].extent) text += "=" + std::to_string(*dims[i].extent);
    }
    return text + ')';
}

std::string describe_extents(std::span<const std::string_view> names, std::span<const std::size_t> extents) {
    std::string text = "(";
    for (std::size_t i = 0; i < extents.size(); ++i)
        text += (i ? ", " : "") + std::string(names[i]) + "=" + std::to_string(extents[i]);
    return text + ")";
}

std::string message(std::initializer_list<message_part> parts) {
    std::string text;
    for (const message_part& part : parts) {
        switch (part.kind) {
        case message_part::text_part: text += part.text; break;
        case message_part::signed_part: text += std::to_string(part.signed_number); break;
        case message_part::unsigned_part: text += std::to_string(part.unsigned_number); break;
        case message_part::dim_part: text += describe_dim(part.dim.name, part.dim.extent); break;
        }
    }
    return text;
}

void throw_rule(std::string_view operation, std::string_view rule, std::string_view found) {
    throw shape_error("shaped::" + std::string(operation) + ": " + std::string(rule) + ": " + std::string(found));
}

void throw_dims_do_not_meet(std::string_view operation, std::string_view rule, std::string_view lhs_role,
                            std::string_view lhs_name, std::size_t lhs_extent, std::string_view rhs_role,
                            std::string_view rhs_name, std::size_t rhs_extent) {
    throw_rule(operation, rule,
               std::string(lhs_role) + " " + describe_dim(lhs_name, lhs_extent) + ", " + std::string(rhs_role) + " " +
                   describe_dim(rhs_name, rhs_extent));
}

void throw_extents_overflow(std::string_view operation, std::span<const std::string_view> names,
                            std::span<const std::size_t> extents, std::size_t element_size) {
    throw_rule(operation, SHAPED_RULE_EXTENTS_OVERFLOW,
               describe_extents(names, extents) + " of " + std::to_string(element_size) +
                   "-byte elements span more than the " + std::to_string(max_array_bytes) +
                   " bytes an array can address");
}

}  // namespace shaped::detail
