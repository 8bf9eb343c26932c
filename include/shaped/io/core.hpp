#pragma once
// What every file format in io/ shares: the errors, the element types shaped stores, the one
// typed conversion from what a file holds (dtype, shape, bytes) to a Tensor<T, Ds...>, and the
// loading and saving of a layer's parameters by name. A format supplies only its bytes:
//
//   shaped::io::load_parameters(attn, shaped::io::safetensors_file("model.safetensors"));
//   shaped::io::load_parameters(attn, shaped::io::npy_directory("weights/"));
//
// A tensor whose stored shape does not fit its declared dims is a shape_error worded the same
// for every format, showing both whole shapes:
//
//   shaped::io::safetensors_file::load: model.safetensors: tensor "c_attn.weight": the file's
//   shape (48, 144) does not fit the declared shape (C3=144, C=48): it is the declared shape transposed
//
// and a floating-point parameter that is not finite is refused by every loader alike, naming
// the tensor, the element and its value (a plain load of data keeps its NaNs):
//
//   shaped::io::load_parameter: model.safetensors: tensor "model.norm.weight": element 3 is nan,
//   not a finite weight

#include <shaped/nn/module.hpp>
#include <shaped/tensor/tensor.hpp>

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeindex>
#include <utility>
#include <vector>

namespace shaped::io {

// Raised for files that are missing, corrupt, or do not match what the caller asked for. The
// message names the file (or the byte source) and what is wrong with it.
class io_error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// The whole of the regular file at `path`, at most `max_bytes` of it; `what` says what the file
// is ("the training text"). A directory, a device, a FIFO or a socket is refused before it is
// opened (a FIFO would block, /dev/zero never end), and so is a file larger than the limit,
// both before it is read and if it grows while it is read:
//
//   shaped::io::read_file: corpus.txt: is 2147483648 bytes, more than the 1 GiB the training text may be
std::string read_file(const std::filesystem::path& path, std::size_t max_bytes, std::string_view what);

// The element types shaped stores. Anything else in a file (float16, complex, strings,
// objects, structured records) is refused with the file's own name for its dtype.
enum class dtype { f32, f64, i32, i64, u8, b1 };

// NumPy's name for the type: "float32", "float64", "int32", "int64", "uint8", "bool".
std::string_view dtype_name(dtype type);

// Bytes per element: 4, 8, 4, 8, 1, 1.
std::size_t dtype_size(dtype type);

// The dtype of a tensor's elements; no other element type can be read or written.
template <class T>
constexpr dtype dtype_of() {
    if constexpr (std::is_same_v<T, float>) return dtype::f32;
    else if constexpr (std::is_same_v<T, double>) return dtype::f64;
    else if constexpr (std::is_same_v<T, std::int32_t>) return dtype::i32;
    else if constexpr (std::is_same_v<T, std::int64_t>) return dtype::i64;
    else if constexpr (std::is_same_v<T, std::uint8_t>) return dtype::u8;
    else if constexpr (std::is_same_v<T, bool>) return dtype::b1;
    else static_assert(sizeof(T) == 0, "shaped::io: no file dtype for this element type");
}

// The same of an element type known at run time (a parameter's slot, nn::parameter_list).
dtype dtype_of(std::type_index element);

// One tensor as a file describes it, before its bytes are read.
struct stored_tensor {
    std::string_view where;              // names it in messages: the function, the file, the tensor
    std::string_view dtype_spelling;     // the file's own name for its dtype ("F32", "float32", "BF16")
    std::optional<dtype> type;           // none for a dtype shaped does not store
    std::span<const std::size_t> shape;  // empty for a 0-d tensor
};

// The stored tensor as a Tensor<T, Ds...>, its bytes (C order, host byte order, bools 0 or 1)
// written by read_bytes(std::span<std::byte>) once the dtype and shape are checked. The dtype
// must be T's exactly (no conversion), else io_error; the shape must fit the dims — static
// extents exactly, dynamic ones taken from the file — else shape_error.
template <class T, Dim... Ds, class ReadBytes>
Tensor<T, Ds...> typed_tensor(const stored_tensor& stored, ReadBytes&& read_bytes);

// ---- a module's parameters -----------------------------------------------------------------
//
// A layer or model (an nn module, nn/module.hpp) names its parameters as PyTorch's state_dict
// does; nn::for_each_parameter visits them.

// Where load_parameters takes tensors from: anything with `source.load<T, Ds...>(name)` and
// `source.where(name)`, which names the tensor's file (and the tensor in it) for messages (a
// safetensors_file, an npy_directory).
template <class Source>
concept TensorSource = requires(const Source& source, std::string_view name) {
    source.template load<float>(name);
    { source.where(name) } -> std::convertible_to<std::string>;
};

// The parameter `name` of `source`, as P: the one load every parameter goes through
// (load_parameters, models::load_gpt, models::load_llama). A floating-point parameter must be
// finite: a NaN or an infinity is an io_error naming the tensor, the element and its value.
template <class P, TensorSource Source>
P load_parameter(const Source& source, std::string_view name);

// Fills every parameter of `layer` from the tensor named prefix + its name (e.g. prefix
// "transformer.h.0.attn." and "c_attn.weight"). Tensors the layer does not name are ignored;
// a missing one is the source's error. Strong guarantee: every parameter is read and checked
// first, and the layer is assigned only when all of them succeeded, so a source that does not
// fit leaves the layer as it was.
template <class Layer, TensorSource Source>
void load_parameters(Layer& layer, const Source& source, std::string_view prefix = "");

// A tensor's bytes as a format writes them, read in place (they must outlive the write).
struct tensor_bytes {
    std::string name;
    dtype type;
    std::vector<std::size_t> shape;
    std::span<const std::byte> data;  // C order, host byte order
};

template <class T, Dim... Ds>
tensor_bytes bytes_of(std::string name, const Tensor<T, Ds...>& tensor);

// Every parameter of `layer`, named prefix + its name, for a format to write.
template <class Layer>
std::vector<tensor_bytes> parameter_bytes(const Layer& layer, std::string_view prefix = "");

// ---- implementation ------------------------------------------------------------------------

namespace detail {

// A declared dim as the shape check sees it: its name, and its extent when static.
using declared_dim = shaped::detail::named_dim;

template <Dim D>
constexpr declared_dim declared() {
    if constexpr (D::is_static) return {D::name.view(), D::extent};
    else return {D::name.view(), std::nullopt};
}

// io_error unless the stored dtype is `wanted`.
void check_dtype(const stored_tensor& stored, dtype wanted);

// shape_error, showing both shapes, unless the stored shape fits the declared dims.
void check_shape_fits(const stored_tensor& stored, std::span<const declared_dim> declared);

// A byte count as limits are spoken of: "16 MiB", "1 GiB", "4096 bytes".
std::string describe_bytes(std::size_t bytes);

// io_error `<where>: element i is nan, not a finite weight` for the first element of `values`
// that is not finite. Every weight loader's check (llama2.c's reader too), worded once.
void require_finite(std::span<const float> values, std::string_view where);
void require_finite(std::span<const double> values, std::string_view where);

template <class P>
struct tensor_loader;
template <class T, Dim... Ds>
struct tensor_loader<Tensor<T, Ds...>> {
    template <class Source>
    static Tensor<T, Ds...> load(const Source& source, std::string_view name) {
        return source.template load<T, Ds...>(name);
    }
};

}  // namespace detail

template <class T, Dim... Ds, class ReadBytes>
Tensor<T, Ds...> typed_tensor(const stored_tensor& stored, ReadBytes&& read_bytes) {
    static constexpr std::array<detail::declared_dim, sizeof...(Ds)> declared{detail::declared<Ds>()...};
    detail::check_dtype(stored, dtype_of<T>());
    detail::check_shape_fits(stored, declared);
    std::array<std::size_t, sizeof...(Ds)> extents{};
    for (std::size_t i = 0; i < extents.size(); ++i) extents[i] = stored.shape[i];  // the ranks agree: checked
    Tensor<T, Ds...> tensor{Shape<Ds...>(extents)};
    read_bytes(std::as_writable_bytes(std::span<T>(tensor.data(), tensor.size())));
    return tensor;
}

template <class P, TensorSource Source>
P load_parameter(const Source& source, std::string_view name) {
    P value = detail::tensor_loader<P>::load(source, name);
    if constexpr (std::is_floating_point_v<value_type_of<P>>)
        detail::require_finite(std::span<const value_type_of<P>>(value.data(), value.size()),
                               "shaped::io::load_parameter: " + std::string(source.where(name)));
    return value;
}

template <class Layer, TensorSource Source>
void load_parameters(Layer& layer, const Source& source, std::string_view prefix) {
    std::vector<std::function<void()>> assign_all;
    nn::for_each_parameter(layer, [&](std::string_view name, auto& parameter) {
        using P = std::remove_cvref_t<decltype(parameter)>;
        auto value = std::make_shared<P>(load_parameter<P>(source, std::string(prefix) + std::string(name)));
        assign_all.push_back([&parameter, value] { parameter = std::move(*value); });
    });
    // Every parameter is read and checked: now assign them, which cannot throw (a Tensor's move
    // assignment is noexcept).
    for (const auto& assign : assign_all) assign();
}

template <class T, Dim... Ds>
tensor_bytes bytes_of(std::string name, const Tensor<T, Ds...>& tensor) {
    const auto extents = tensor.extents();
    return {std::move(name), dtype_of<T>(), std::vector<std::size_t>(extents.begin(), extents.end()),
            std::as_bytes(std::span<const T>(tensor.data(), tensor.size()))};
}

template <class Layer>
std::vector<tensor_bytes> parameter_bytes(const Layer& layer, std::string_view prefix) {
    std::vector<tensor_bytes> all;
    for (const nn::const_parameter_slot& parameter : nn::parameter_list(layer))
        all.push_back({std::string(prefix) + std::string(parameter.name), dtype_of(parameter.element_type),
                       std::vector<std::size_t>(parameter.extents.begin(), parameter.extents.end()),
                       std::span(static_cast<const std::byte*>(parameter.data), parameter.size * parameter.element_bytes)});
    return all;
}

}  // namespace shaped::io
