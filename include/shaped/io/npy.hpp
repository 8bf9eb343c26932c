#pragma once
// Typed .npy loading and saving: a file's dtype must be the tensor's element type (no silent
// conversion) and its shape must fit the tensor's dims — static extents exactly, dynamic ones
// taken from the file.
//
//   auto w = shaped::io::load_npy<float, H, C>("key_weight.npy");
//   auto x = shaped::io::load_npy<float, B, shaped::dim<"T">, C>("x.npy");  // T from the file

#include <shaped/io/npy_format.hpp>
#include <shaped/tensor.hpp>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>

namespace shaped::io {

template <class T>
constexpr dtype dtype_of() {
    if constexpr (std::is_same_v<T, float>) return dtype::f32;
    else if constexpr (std::is_same_v<T, double>) return dtype::f64;
    else if constexpr (std::is_same_v<T, std::int32_t>) return dtype::i32;
    else if constexpr (std::is_same_v<T, std::int64_t>) return dtype::i64;
    else if constexpr (std::is_same_v<T, std::uint8_t>) return dtype::u8;
    else if constexpr (std::is_same_v<T, bool>) return dtype::b1;
    else static_assert(sizeof(T) == 0, "shaped::io: no .npy dtype for this element type");
}

// The array's values as a Tensor<T, Ds...>; io_error for a wrong dtype, shape_error (naming the
// file and the dims) for a shape that does not fit.
template <class T, Dim... Ds>
Tensor<T, Ds...> from_npy(const npy_array& array, std::string_view what) {
    constexpr std::size_t rank = sizeof...(Ds);
    if (array.type != dtype_of<T>())
        throw io_error(std::string(what) + ": holds " + std::string(dtype_name(array.type)) + ", not " +
                       std::string(dtype_name(dtype_of<T>())));
    if (array.shape.size() != rank)
        throw shape_error(std::string(what) + ": has " + std::to_string(array.shape.size()) +
                          " dims, the tensor declares " + std::to_string(rank));
    std::array<std::size_t, rank> extents{};
    std::copy(array.shape.begin(), array.shape.end(), extents.begin());
    try {
        detail::check_extents_fit("io::load_npy", dims<Ds...>{}, extents);
    } catch (const shape_error& e) {
        throw shape_error(std::string(what) + ": " + e.what());
    }
    Tensor<T, Ds...> t{Shape<Ds...>(extents)};
    if (t.size()) std::memcpy(t.data(), array.data.data(), t.size() * sizeof(T));
    return t;
}

template <class T, Dim... Ds>
Tensor<T, Ds...> load_npy(const std::filesystem::path& path) {
    return from_npy<T, Ds...>(read_npy(path), path.string());
}

// Writes an expression's values (evaluated) as a .npy file.
template <Expression E>
void save_npy(const std::filesystem::path& path, const E& e) {
    using T = value_type_of<E>;
    const auto t = eval(e);
    const auto extents = t.extents();
    write_npy(path, dtype_of<T>(), std::span<const std::size_t>(extents),
              std::as_bytes(std::span<const T>(t.data(), t.size())));
}

}  // namespace shaped::io
