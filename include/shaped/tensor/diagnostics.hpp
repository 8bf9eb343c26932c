#pragma once
// The checks of Tensor's, View's and the reshapes' rules, in the vocabulary of
// core/diagnostics.hpp.

#include <shaped/core/diagnostics.hpp>

namespace shaped::diag {

template <class... Shown>
struct reshape_product : failed {
    static_assert(sizeof...(Shown) == 0,
                  "shaped::reshape: the product of the new extents differs from the old extent");
};

template <class... Shown>
struct reshape_not_adjacent : failed {
    static_assert(sizeof...(Shown) == 0,
                  "shaped::merge: only two adjacent dims, in order, can merge");
};

template <class... Shown>
struct assign_dims : failed {
    static_assert(sizeof...(Shown) == 0,
                  "shaped::Tensor: the assigned expression's dims differ from the tensor's declared dims");
};

template <class... Shown>
struct extents_overflow : failed {
    static_assert(sizeof...(Shown) == 0,
                  "shaped::Tensor: the static extents' element count does not fit in memory");
};

template <class... Shown>
struct index_count : failed {
    static_assert(sizeof...(Shown) == 0,
                  "shaped::Tensor: an element access takes one index per dim");
};

}  // namespace shaped::diag
