// The text of nn::summary (nn/module.hpp): counts with thousands separators, lined up.

#include <shaped/nn/module.hpp>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace shaped::nn::detail {

namespace {

// 28224 as "28,224".
std::string grouped(std::size_t n) {
    std::string digits = std::to_string(n);
    for (std::size_t i = digits.size(); i > 3; i -= 3) digits.insert(i - 3, ",");
    return digits;
}

// Where the counts stand, so that a summary's counts line up as a column.
constexpr std::size_t count_column = 64;

}  // namespace

std::string with_count(std::string line, std::size_t count) {
    line.resize(std::max(line.size() + 2, count_column), ' ');
    return line + grouped(count) + (count == 1 ? " parameter" : " parameters");
}

namespace {
std::string element_name(std::type_index type) {
    if (type == typeid(float)) return "float";
    if (type == typeid(double)) return "double";
    if (type == typeid(std::int64_t)) return "std::int64_t";
    if (type == typeid(std::int32_t)) return "std::int32_t";
    return type.name();
}
}  // namespace

void throw_element_type(std::string_view parameter, std::type_index holds, std::type_index asked) {
    throw std::logic_error("shaped::nn: the parameter `" + std::string(parameter) + "` holds " + element_name(holds) +
                           " elements, read as " + element_name(asked));
}

std::string summary_total(std::size_t count, std::size_t bytes) {
    return grouped(count) + (count == 1 ? " parameter, " : " parameters, ") + grouped(bytes) + " bytes\n";
}

}  // namespace shaped::nn::detail
