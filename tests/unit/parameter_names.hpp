#pragma once
// The names of a module's parameters, in declaration order, as for_each_parameter visits them:
// what the tests compare where a layer's names must be another's or a checkpoint's.

#include <shaped/shaped.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace ref {

inline std::vector<std::string> parameter_names(const auto& module) {
    std::vector<std::string> names;
    shaped::nn::for_each_parameter(module, [&](std::string_view name, const auto&) { names.emplace_back(name); });
    return names;
}

}  // namespace ref
