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

// reshape's old dims (found by name), then the tensor's dims.
#define SHAPED_RULE_RESHAPE_RUN "the dims reshaped must be adjacent dims of the tensor, in its order"
template <class... Shown>
struct reshape_not_a_run : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::reshape: " SHAPED_RULE_RESHAPE_RUN);
};

// reshape's new dims.
#define SHAPED_RULE_RESHAPE_DYNAMIC "at most one new dim may be dynamic, its extent what the product leaves"
template <class... Shown>
struct reshape_dynamic : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::reshape: " SHAPED_RULE_RESHAPE_DYNAMIC);
};

// unsqueeze's new dim, then the tensor's dims.
#define SHAPED_RULE_UNSQUEEZE_EXTENT "the new dim must have the static extent 1"
template <class... Shown>
struct unsqueeze_extent : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::unsqueeze: " SHAPED_RULE_UNSQUEEZE_EXTENT);
};

#define SHAPED_RULE_UNSQUEEZE_COLLISION "the new dim's name is already a dim of the tensor"
template <class... Shown>
struct unsqueeze_collision : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::unsqueeze: " SHAPED_RULE_UNSQUEEZE_COLLISION);
};

// The squeezed dim as the tensor has it, then the tensor's dims. (A dynamic extent is checked
// when it is known: reshape.hpp.)
#define SHAPED_RULE_SQUEEZE_EXTENT "only a dim of extent 1 can be squeezed"
template <class... Shown>
struct squeeze_extent : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::squeeze: " SHAPED_RULE_SQUEEZE_EXTENT);
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
