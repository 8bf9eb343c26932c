#pragma once
// The checks of Tensor's, View's and the reshapes' rules, in the vocabulary of
// core/diagnostics.hpp.

#include <shaped/core/diagnostics.hpp>

namespace shaped::diag {

// The first argument names the reshape, split or merge (its run-time check: reshape.hpp).
#define SHAPED_RULE_RESHAPE_PRODUCT "the product of the new extents differs from the old extent"
template <class... Shown>
struct reshape_product : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::reshape: " SHAPED_RULE_RESHAPE_PRODUCT);
};

#define SHAPED_RULE_RESHAPE_NOT_ADJACENT "only two adjacent dims, in order, can merge"
template <class... Shown>
struct reshape_not_adjacent : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::merge: " SHAPED_RULE_RESHAPE_NOT_ADJACENT);
};

// An assignment to a Tensor or View: the target's dims, then the expression's. (A Tensor's
// constructor asserts the same rule in place: tensor.hpp.)
template <class... Shown>
struct assign_dims : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::assign: " SHAPED_RULE_DECLARED_DIMS);
};

#define SHAPED_RULE_INDEX_COUNT "an element access takes one index per dim"
template <class... Shown>
struct index_count : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::Tensor: " SHAPED_RULE_INDEX_COUNT);
};

}  // namespace shaped::diag
