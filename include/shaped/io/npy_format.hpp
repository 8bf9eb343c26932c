#pragma once
// Shape-agnostic reading and writing of NumPy .npy files (format versions 1.0, 2.0 and 3.0).
//
// This layer knows nothing about shaped's typed tensors: it moves a dtype, a shape and a block
// of bytes in and out of files, and checks everything a file claims before trusting it. The
// typed loaders in io/ build on it and compare the shape it reports with the tensor's dims.

#include <cstddef>
#include <filesystem>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace shaped::io {

// Raised for files that are missing, corrupt, or do not match what the caller asked for. The
// message names the file (or the byte source) and what is wrong with it.
class io_error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// The element types shaped stores. Anything else in a file (float16, complex, strings,
// objects, structured records) is rejected with the file's own dtype string in the message.
enum class dtype { f32, f64, i32, i64, u8, b1 };

// NumPy's name for the type: "float32", "float64", "int32", "int64", "uint8", "bool".
std::string_view dtype_name(dtype type);

// Bytes per element: 4, 8, 4, 8, 1, 1.
std::size_t dtype_size(dtype type);

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
