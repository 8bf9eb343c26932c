#pragma once
// Typed .npy loading and saving: a file's dtype must be the tensor's element type (no silent
// conversion) and its shape must fit the tensor's dims — static extents exactly, dynamic ones
// taken from the file (io/core.hpp's typed_tensor checks both, as for every format).
//
//   auto w = shaped::io::load_npy<float, H, C>("key_weight.npy");
//   auto x = shaped::io::load_npy<float, B, shaped::dim<"T">, C>("x.npy");  // T from the file
//   shaped::io::load_parameters(head, shaped::io::npy_directory("weights"));  // weights/key.weight.npy, ...

#include <shaped/io/core.hpp>
#include <shaped/io/npy_format.hpp>
#include <shaped/kernels/evaluate.hpp>
#include <shaped/tensor/tensor.hpp>

#include <algorithm>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace shaped::io {

template <class T, Dim... Ds>
Tensor<T, Ds...> load_npy(const std::filesystem::path& path);

// An array already read (read_npy, parse_npy) as a Tensor<T, Ds...>; `what` names its source
// in messages.
template <class T, Dim... Ds>
Tensor<T, Ds...> from_npy(const npy_array& array, std::string_view what);

// Writes an expression's values (evaluated) as a .npy file.
template <Expression E>
void save_npy(const std::filesystem::path& path, const E& e);

// A directory of .npy files, one a tensor, each named as its tensor is ("c_attn.weight.npy"):
// a source for load_parameters, as numpy.save writes a state_dict out file by file.
class npy_directory {
public:
    explicit npy_directory(std::filesystem::path directory) : directory_(std::move(directory)) {}

    const std::filesystem::path& path() const { return directory_; }

    template <class T, Dim... Ds>
    Tensor<T, Ds...> load(std::string_view name) const {
        return load_npy<T, Ds...>(file(name));
    }
    // Where a message is about: `<directory>/<name>.npy: tensor "<name>"`, as a safetensors
    // file's messages name a tensor.
    std::string where(std::string_view name) const {
        return file(name).string() + ": tensor \"" + std::string(name) + "\"";
    }

private:
    std::filesystem::path file(std::string_view name) const { return directory_ / (std::string(name) + ".npy"); }
    std::filesystem::path directory_;
};

// ---- implementation ------------------------------------------------------------------------

namespace detail {

// `where` names the function and the source, for messages.
template <class T, Dim... Ds>
Tensor<T, Ds...> typed_npy(const npy_array& array, const std::string& where) {
    const stored_tensor stored{where, dtype_name(array.type), array.type, array.shape};
    return typed_tensor<T, Ds...>(stored, [&](std::span<std::byte> out) {
        // An npy_array built by hand need not keep read_npy's promise of data.size().
        if (array.data.size() != out.size())
            throw io_error(where + ": holds " + std::to_string(array.data.size()) + " data bytes, but its shape needs " +
                           std::to_string(out.size()));
        std::copy(array.data.begin(), array.data.end(), out.begin());
    });
}

}  // namespace detail

template <class T, Dim... Ds>
Tensor<T, Ds...> load_npy(const std::filesystem::path& path) {
    return detail::typed_npy<T, Ds...>(read_npy(path), "shaped::io::load_npy: " + path.string());
}

template <class T, Dim... Ds>
Tensor<T, Ds...> from_npy(const npy_array& array, std::string_view what) {
    return detail::typed_npy<T, Ds...>(array, "shaped::io::from_npy: " + std::string(what));
}

template <Expression E>
void save_npy(const std::filesystem::path& path, const E& e) {
    const auto t = eval(e);
    const tensor_bytes bytes = bytes_of("", t);
    write_npy(path, bytes.type, bytes.shape, bytes.data);
}

}  // namespace shaped::io
