#pragma once
// Shape-agnostic reading and writing of NumPy .npy files (format versions 1.0, 2.0 and 3.0).
//
// This layer does not look at shaped's typed tensors: it moves a dtype, a shape and a block of
// bytes in and out of files, and checks everything a file claims before trusting it. The typed
// loaders of io/npy.hpp hand what it reads to io/core.hpp's typed_tensor.

#include <shaped/io/core.hpp>

#include <cstddef>
#include <filesystem>
#include <span>
#include <string_view>
#include <vector>

namespace shaped::io {

// An array as read from a file, normalised so that callers never need to look at the header
// again: elements are in C (row-major) order and in the host's byte order, and bools are 0 or
// 1. `data.size()` is always the product of `shape` times `dtype_size(type)`; an empty `shape`
// is a 0-d array holding one element. Copy elements out with std::memcpy: `data` is only
// guaranteed the alignment of operator new.
struct npy_array {
    dtype type;
    std::vector<std::size_t> shape;
    std::vector<std::byte> data;
};

// Reads a whole .npy file. Big-endian data is byte-swapped and Fortran-order data is
// transposed into C order; everything else unexpected throws io_error.
npy_array read_npy(const std::filesystem::path& path);

// Parses the bytes of a .npy file held in memory; `what` names the source in error messages.
npy_array parse_npy(std::span<const std::byte> bytes, std::string_view what);

// Writes `data` (C order, host byte order, `product(shape) * dtype_size(type)` bytes) as a
// .npy file that numpy.load reads back; the bytes match what numpy.save writes for the same
// array. The file is written beside `path` under a temporary name and renamed over it only when
// complete, so a failed write leaves any existing file at `path` untouched.
void write_npy(const std::filesystem::path& path, dtype type, std::span<const std::size_t> shape,
               std::span<const std::byte> data);

}  // namespace shaped::io
