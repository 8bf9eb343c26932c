// libFuzzer target for the .npy reader: parse_npy on arbitrary bytes, then what a user does with
// an array it returns (from_npy into typed tensors). io_error and shape_error are the reader's
// answers to bad input; any other exception, a broken invariant or a sanitizer report is a bug.

#include <shaped/io/npy.hpp>

#include "fuzz_support.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <string>

namespace {

using fuzz_support::byte_count;
using fuzz_support::require;

using A = shaped::dim<"A">;
using B = shaped::dim<"B">;
using C = shaped::dim<"C">;
using Two = shaped::dim<"Two", 2>;
using Three = shaped::dim<"Three", 3>;

constexpr std::string_view source_name = "fuzz";

// from_npy<T, Ds...>, which may refuse the array only with io_error or shape_error. Returns
// whether it loaded; a loaded tensor must hold the array's extents and bytes.
template <class T, class... Ds>
bool try_load(const shaped::io::npy_array& array) {
    try {
        const auto tensor = shaped::io::from_npy<T, Ds...>(array, source_name);
        fuzz_support::require_loaded_as(tensor, array.shape, array.data);
        return true;
    } catch (const shaped::io::io_error&) {
    } catch (const shaped::shape_error&) {
    }
    return false;
}

// Every rank 0..3 with dynamic dims, of which exactly the array's own rank loads, and tensors
// with static dims, which load only when the extents match.
template <class T>
void load_as(const shaped::io::npy_array& array) {
    const std::size_t rank = array.shape.size();
    require(try_load<T>(array) == (rank == 0), "0-d tensor loads exactly a 0-d array");
    require(try_load<T, A>(array) == (rank == 1), "rank-1 tensor loads exactly a rank-1 array");
    require(try_load<T, A, B>(array) == (rank == 2), "rank-2 tensor loads exactly a rank-2 array");
    require(try_load<T, A, B, C>(array) == (rank == 3), "rank-3 tensor loads exactly a rank-3 array");
    require(try_load<T, A, Two>(array) == (rank == 2 && array.shape[1] == 2),
            "(A, Two=2) loads exactly a rank-2 array of 2 columns");
    require(try_load<T, Three>(array) == (rank == 1 && array.shape[0] == 3),
            "(Three=3) loads exactly a rank-1 array of 3 elements");
}

// A type the array does not hold: from_npy must refuse it with io_error, converting nothing.
template <class T>
void refuse_as(const shaped::io::npy_array& array) {
    try {
        (void)shaped::io::from_npy<T>(array, source_name);
    } catch (const shaped::io::io_error&) {
        return;
    } catch (const shaped::shape_error&) {
        return;  // from_npy does not promise which of its checks comes first
    }
    require(false, "from_npy refuses an element type the array does not hold");
}

void exercise(const shaped::io::npy_array& array) {
    using shaped::io::dtype;
    const std::size_t item_size = shaped::io::dtype_size(array.type);
    require(item_size != 0, "a parsed array has a known dtype");
    const auto expected = byte_count(array.shape, item_size);
    require(expected.has_value(), "a parsed array's byte count fits in size_t");
    require(array.data.size() == *expected, "data.size() == product(shape) * dtype_size(type)");
    if (array.type == dtype::b1) {
        require(std::all_of(array.data.begin(), array.data.end(),
                            [](std::byte b) { return b == std::byte{0} || b == std::byte{1}; }),
                "bools are 0 or 1");
    }
    switch (array.type) {
        case dtype::f32: load_as<float>(array); refuse_as<double>(array); break;
        case dtype::f64: load_as<double>(array); refuse_as<float>(array); break;
        case dtype::i32: load_as<std::int32_t>(array); refuse_as<std::int64_t>(array); break;
        case dtype::i64: load_as<std::int64_t>(array); refuse_as<std::int32_t>(array); break;
        case dtype::u8: load_as<std::uint8_t>(array); refuse_as<bool>(array); break;
        case dtype::b1: load_as<bool>(array); refuse_as<std::uint8_t>(array); break;
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const auto bytes = std::as_bytes(std::span(data, size));
    shaped::io::npy_array array;
    try {
        array = shaped::io::parse_npy(bytes, source_name);
    } catch (const shaped::io::io_error&) {
        return 0;
    }
    exercise(array);
    return 0;
}
