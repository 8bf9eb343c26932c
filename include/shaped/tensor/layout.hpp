#pragma once
// A strided layout: where each element of an array lies, kept apart from the storage it lies in
// (as mdspan keeps layout and storage apart). A View reads its storage through one; the kernels
// describe their operands, and the fused attention kernel its matrices, with the same type.

#include <array>
#include <cstddef>

namespace shaped {

// Element (i_0, ..., i_R-1) lies sum over d of i_d * strides[d] elements from the first.
template <std::size_t R>
struct strided_layout {
    std::array<std::size_t, R> extents;
    std::array<std::ptrdiff_t, R> strides;
};

}  // namespace shaped
