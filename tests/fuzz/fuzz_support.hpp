#pragma once
// What the fuzz targets share: an invariant check that libFuzzer sees as a crash, and the byte
// count a reader's result must have, computed here independently of the library.

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <span>

namespace fuzz_support {

// Aborts, so that libFuzzer saves the input: used for broken invariants, which throw nothing.
inline void require(bool holds, const char* invariant) {
    if (holds) return;
    std::fprintf(stderr, "fuzz: invariant broken: %s\n", invariant);
    std::abort();
}

// product(shape) * item_size, or nothing when it overflows; 0 whenever an extent is 0.
inline std::optional<std::size_t> byte_count(std::span<const std::size_t> shape, std::size_t item_size) {
    if (std::find(shape.begin(), shape.end(), std::size_t{0}) != shape.end()) return 0;
    std::size_t total = item_size;
    for (const std::size_t extent : shape) {
        if (total > std::numeric_limits<std::size_t>::max() / extent) return std::nullopt;
        total *= extent;
    }
    return total;
}

// A tensor a reader loaded has the file's extents (and so has its view, which computes the
// strides, as every indexing and slicing does) and holds exactly the file's bytes.
template <class Tensor>
void require_loaded_as(const Tensor& tensor, std::span<const std::size_t> shape, std::span<const std::byte> bytes) {
    const auto extents = tensor.extents();
    require(std::equal(extents.begin(), extents.end(), shape.begin(), shape.end()), "a loaded tensor has the file's extents");
    const auto view = tensor.view();
    require(view.extents() == extents && view.size() == tensor.size(), "a tensor's view has its extents");
    require(tensor.size() * sizeof(typename Tensor::value_type) == bytes.size(), "a loaded tensor holds the file's bytes");
    require(bytes.empty() || std::memcmp(tensor.data(), bytes.data(), bytes.size()) == 0,
            "a loaded tensor holds the file's values");
}

}  // namespace fuzz_support
