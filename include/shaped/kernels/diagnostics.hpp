#pragma once
// The checks of the rules of what this layer runs eagerly (concat), in the vocabulary of
// core/diagnostics.hpp.

#include <shaped/core/diagnostics.hpp>

namespace shaped::diag {

#define SHAPED_RULE_CONCAT_DIMS "the operands differ in a dim other than the one joined"
template <class... Shown>
struct concat_dims : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::concat: " SHAPED_RULE_CONCAT_DIMS);
};

}  // namespace shaped::diag
