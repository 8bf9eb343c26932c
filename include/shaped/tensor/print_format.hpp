#pragma once

// Shape-agnostic text formatting of tensors, compiled once in src/print.cpp so that every
// tensor type's operator<< shares one implementation of PyTorch's print layout.

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <span>

namespace shaped::detail {

// Writes `tensor(...)` as PyTorch 1.13's default repr does (precision 4, threshold 1000,
// edgeitems 3, linewidth 80), for a row-major array with the given extents (empty span = 0-d
// tensor). The element type picks the torch dtype: float is torch.float32 (the default dtype),
// double is torch.float64, bool is torch.bool, and the integer types are torch.int32 and
// torch.int64; a `dtype=...` suffix is written exactly when torch writes one.
void print_torch(std::ostream& os, std::span<const std::size_t> shape,
                 std::span<const float> data);
void print_torch(std::ostream& os, std::span<const std::size_t> shape,
                 std::span<const double> data);
void print_torch(std::ostream& os, std::span<const std::size_t> shape,
                 std::span<const bool> data);
void print_torch(std::ostream& os, std::span<const std::size_t> shape,
                 std::span<const std::int32_t> data);
void print_torch(std::ostream& os, std::span<const std::size_t> shape,
                 std::span<const std::int64_t> data);

}  // namespace shaped::detail
