#pragma once
// Typed safetensors reading and writing (https://github.com/huggingface/safetensors), and the
// loading and saving of a layer's parameters by their PyTorch state_dict names (io/core.hpp's
// load_parameters, with a safetensors file as the source).
//
//   shaped::io::safetensors_file file("model.safetensors");    // header parsed and checked
//   auto w = file.load<float, C3, C>("c_attn.weight");          // dtype and dims checked
//   shaped::io::load_parameters(attn, file, "transformer.h.0.attn.");
//
// A file is an 8-byte little-endian header length N, N bytes of JSON naming each tensor's
// dtype, shape and byte range, then the data. Everything the header claims is checked when the
// file is opened, before any tensor is read: a corrupt or truncated file, or one that does not
// match what the caller asks for, is an io_error (or a shape_error for dims that do not fit)
// naming the file, the tensor and what is wrong — never a silent wrong answer.

#include <shaped/io/core.hpp>
#include <shaped/kernels/evaluate.hpp>
#include <shaped/tensor/tensor.hpp>

#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace shaped::io {

// The "__metadata__" of a file: free-form strings (torch writes {"format": "pt"}).
using safetensors_metadata = std::map<std::string, std::string>;

// One tensor as a file's header describes it.
struct safetensors_info {
    std::string dtype;                // the file's spelling: "F32", "F64", "BF16", "I64", ...
    std::vector<std::size_t> shape;   // empty for a 0-d tensor
    std::size_t data_begin = 0;       // its bytes [data_begin, data_end) of the data buffer
    std::size_t data_end = 0;
};

// The safetensors spelling of a shaped element type: "F32", "F64", "I32", "I64", "U8", "BOOL".
std::string_view safetensors_dtype_name(dtype type);
// The element type a safetensors dtype names, if shaped stores it (none for "BF16", ...).
std::optional<dtype> dtype_from_safetensors(std::string_view name);

// A safetensors file opened for reading. The constructor reads and validates the header as the
// reference implementation does (a sane header length, a JSON object, every entry's fields
// present and typed, a known dtype, byte ranges that match dtype x shape, lie inside the data
// buffer, and cover it exactly with no overlap and no hole); tensors are read one at a time,
// on request, from the open file. Copies share the open file; loading is thread-safe.
class safetensors_file {
public:
    explicit safetensors_file(const std::filesystem::path& path);

    const std::filesystem::path& path() const;
    // Tensor names, sorted.
    std::vector<std::string> names() const;
    bool contains(std::string_view name) const;
    // io_error naming the tensor (and the file's closest names) when there is none by that name.
    const safetensors_info& info(std::string_view name) const;
    const safetensors_metadata& metadata() const;

    // The tensor `name` as a Tensor<T, Ds...> (io/core.hpp's typed_tensor). Its dtype must be
    // T's exactly (F32 for float, F64 for double; no conversion), else io_error; its shape must
    // fit the dims — static extents exactly, dynamic ones taken from the file — else
    // shape_error naming the file and the tensor and showing both shapes.
    template <class T, Dim... Ds>
    Tensor<T, Ds...> load(std::string_view name) const;

    // The raw bytes of tensor `name` (little-endian, C order; BOOL normalised to 0 or 1) into
    // `out`, which must be exactly its size.
    void read(std::string_view name, std::span<std::byte> out) const;

    // Where a message is about: `<path>: tensor "<name>"`, the name escaped.
    std::string where(std::string_view name) const;

private:
    struct state;
    std::shared_ptr<state> state_;
};

// One tensor to write: its bytes are read, not copied, so they must live until the write.
struct safetensors_view {
    std::string name;
    std::string dtype;                // "F32", ... as in safetensors_info
    std::vector<std::size_t> shape;
    std::span<const std::byte> data;  // C order, little-endian
};

// Writes `tensors` (and `metadata`, if any) as one safetensors file: tensors in name order, the
// JSON header padded with spaces to a multiple of 8 bytes. The file is written beside `path`
// under a temporary name and renamed over it only when complete. io_error for a duplicate or
// reserved name, an unknown dtype, or data whose size does not match dtype x shape.
void write_safetensors(const std::filesystem::path& path, std::span<const safetensors_view> tensors,
                       const safetensors_metadata& metadata = {});

// Collects named tensors, then writes them as one file:
//
//   shaped::io::safetensors_writer out;
//   out.add("x", x);                 // any expression: its values are evaluated and kept
//   out.add_metadata("format", "pt");
//   out.save("x.safetensors");
class safetensors_writer {
public:
    template <Expression E>
    void add(std::string name, const E& e) {
        const auto t = eval(e);
        tensor_bytes bytes = bytes_of(std::move(name), t);
        entries_.push_back({std::move(bytes.name), std::string(safetensors_dtype_name(bytes.type)), std::move(bytes.shape),
                            std::vector<std::byte>(bytes.data.begin(), bytes.data.end())});
    }
    void add_metadata(std::string key, std::string value) { metadata_[std::move(key)] = std::move(value); }
    void save(const std::filesystem::path& path) const;

private:
    struct entry {
        std::string name;
        std::string dtype;
        std::vector<std::size_t> shape;
        std::vector<std::byte> data;
    };
    std::vector<entry> entries_;
    safetensors_metadata metadata_;
};

// ---- layer parameters ----------------------------------------------------------------------
//
// io/core.hpp's load_parameters takes a safetensors_file as its source; these take a path.

// load_parameters from the safetensors file at `path`.
template <class Layer>
void load_parameters(Layer& layer, const std::filesystem::path& path, std::string_view prefix = "") {
    load_parameters(layer, safetensors_file(path), prefix);
}

// What write_safetensors takes of parameter_bytes' tensors: views of the same bytes, which must
// outlive the write.
inline std::vector<safetensors_view> safetensors_views(std::vector<tensor_bytes> tensors) {
    std::vector<safetensors_view> views;
    views.reserve(tensors.size());
    for (tensor_bytes& tensor : tensors)
        views.push_back({std::move(tensor.name), std::string(safetensors_dtype_name(tensor.type)), std::move(tensor.shape),
                         tensor.data});
    return views;
}

// Writes every parameter of `layer` under prefix + its name, as one safetensors file (the
// parameters' bytes are written straight from the layer, not copied).
template <class Layer>
void save_parameters(const std::filesystem::path& path, const Layer& layer,
                     const safetensors_metadata& metadata = {}, std::string_view prefix = "") {
    write_safetensors(path, safetensors_views(parameter_bytes(layer, prefix)), metadata);
}

// ---- implementation ------------------------------------------------------------------------

template <class T, Dim... Ds>
Tensor<T, Ds...> safetensors_file::load(std::string_view name) const {
    const safetensors_info& entry = info(name);
    const std::string context = "shaped::io::safetensors_file::load: " + where(name);
    const stored_tensor stored{context, entry.dtype, dtype_from_safetensors(entry.dtype), entry.shape};
    return typed_tensor<T, Ds...>(stored, [&](std::span<std::byte> out) { read(name, out); });
}

}  // namespace shaped::io
