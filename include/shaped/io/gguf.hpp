#pragma once
// GGUF reading and writing (llama.cpp's container, https://github.com/ggml-org/ggml/blob/master/docs/gguf.md):
// typed metadata, tensor infos in ggml's dim order, and the tensors' bytes memory-mapped.
//
//   shaped::io::gguf_file file("model.gguf");                      // header parsed and checked
//   auto layers = file.get<std::uint32_t>("llama.block_count");    // its type checked
//   const auto& tokens = file.get_array<std::string>("tokenizer.ggml.tokens");
//   std::span<const std::byte> q = file.bytes("blk.0.attn_q.weight");  // in place, in the map
//   auto norm = file.load<float, C>("output_norm.weight");          // F32 only; dims checked
//
// A file is the magic "GGUF", a uint32 version (3, or 2 with the same layout), uint64 tensor
// and key/value counts, the key/values, the tensor infos (name, dims, ggml type, offset), then,
// at the next multiple of the alignment (`general.alignment`, 32 by default), the data section
// that the offsets point into. Everything the header claims is checked when the file is
// opened, before anything is handed out: a truncated or corrupt file is an io_error naming the
// file, the key or tensor and what is wrong, on one line — never a half-loaded file, a huge
// allocation from a claimed count, or a tensor reaching past the end.
//
// ggml's dims run the other way from shaped's: ne[0] is the contiguous (row) dim, so a PyTorch
// (out, in) weight is stored with ne = {in, out}. gguf_tensor_info::shape() and load() give the
// row-major shape, ne reversed.

#include <shaped/io/core.hpp>
#include <shaped/kernels/evaluate.hpp>
#include <shaped/tensor/quantized.hpp>
#include <shaped/tensor/tensor.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace shaped::io {

// ---- metadata values -------------------------------------------------------------------------

// A metadata value's type, with GGUF's ids (gguf_type in llama.cpp's gguf.h).
enum class gguf_type : std::uint32_t {
    uint8 = 0, int8 = 1, uint16 = 2, int16 = 3, uint32 = 4, int32 = 5, float32 = 6, boolean = 7,
    string = 8, array = 9, uint64 = 10, int64 = 11, float64 = 12,
};

// "uint8", "int8", ..., "float32", "bool", "string", "array", ..., "float64".
std::string_view gguf_type_name(gguf_type type);

// A typed array: its elements are of one type, which may be string or array again (llama.cpp's
// own reader takes no arrays of arrays; gguf-py writes them). The alternative's index is the
// element type's id.
struct gguf_array {
    std::variant<std::vector<std::uint8_t>, std::vector<std::int8_t>, std::vector<std::uint16_t>,
                 std::vector<std::int16_t>, std::vector<std::uint32_t>, std::vector<std::int32_t>, std::vector<float>,
                 std::vector<bool>, std::vector<std::string>, std::vector<gguf_array>, std::vector<std::uint64_t>,
                 std::vector<std::int64_t>, std::vector<double>>
        values;

    gguf_array() = default;
    template <class T>
        requires std::is_constructible_v<decltype(values), std::vector<T>>
    gguf_array(std::vector<T> elements) : values(std::move(elements)) {}

    gguf_type element_type() const { return static_cast<gguf_type>(values.index()); }
    std::size_t size() const;
    bool operator==(const gguf_array&) const = default;
};

// A metadata value: the alternative's index is its type's id.
using gguf_value = std::variant<std::uint8_t, std::int8_t, std::uint16_t, std::int16_t, std::uint32_t, std::int32_t,
                                float, bool, std::string, gguf_array, std::uint64_t, std::int64_t, double>;

inline gguf_type type_of(const gguf_value& value) { return static_cast<gguf_type>(value.index()); }

// A value's type as messages show it: "uint32", "array of string", "array of array of int32".
std::string describe_type(const gguf_value& value);

// The gguf_type of a value held as T (one of gguf_value's alternatives).
template <class T>
constexpr gguf_type gguf_type_of();

// One key/value, as a file holds them in order.
struct gguf_kv {
    std::string key;
    gguf_value value;
};

// ---- tensors -------------------------------------------------------------------------------

// How a ggml type packs its elements: rows are whole blocks of `block_size` elements, each
// `block_bytes` bytes (Q8_0: 32 elements in 34 bytes; F32: 1 in 4).
struct ggml_type_traits {
    std::string_view name;  // ggml's: "f32", "q8_0", "q4_K", "bf16", "iq2_xxs"
    std::size_t block_size;
    std::size_t block_bytes;
};

const ggml_type_traits& ggml_traits(ggml_type type);
// The type with this id, if ggml has one.
std::optional<ggml_type> ggml_type_from_id(std::uint32_t id);

// One tensor as a file's tensor infos describe it. Checked when the file is opened: at most 4
// dims, ne[0] a whole number of blocks, the byte count representable, and the bytes inside the
// file, aligned, overlapping no other tensor's.
struct gguf_tensor_info {
    std::string name;
    ggml_type type;
    std::vector<std::uint64_t> ne;  // ggml order: ne[0] is the contiguous dim; empty for a 0-d tensor
    std::uint64_t offset = 0;       // from the start of the data section; a multiple of the alignment
    std::size_t size = 0;           // bytes

    // The row-major shape, ne reversed: {ne[n-1], ..., ne[0]}.
    std::vector<std::size_t> shape() const;
};

// A GGUF file opened for reading: the header, metadata and tensor infos parsed and checked, the
// file mapped read-only. Tensors' bytes are spans into the map, valid while any copy of this
// gguf_file lives (copies share the map). Like any memory map, it assumes nobody truncates the
// file while it is open.
class gguf_file {
public:
    explicit gguf_file(const std::filesystem::path& path);

    const std::filesystem::path& path() const;
    std::uint32_t version() const;
    std::size_t alignment() const;
    // Where the data section starts in the file: aligned, after the tensor infos (in a file
    // without tensors, where the infos end, as llama.cpp's gguf_get_data_offset says).
    std::size_t data_offset() const;

    // The key/values, in the file's order.
    const std::vector<gguf_kv>& metadata() const;
    bool has_key(std::string_view key) const;
    // The value of `key`, or nullptr when the file has none.
    const gguf_value* find(std::string_view key) const;
    // The value of `key`; io_error naming the key when the file has none.
    const gguf_value& value(std::string_view key) const;
    // The value of `key` as T, one of gguf_value's alternatives (std::uint32_t, float,
    // std::string, ...): io_error naming the key, the expected and the found type when it is
    // of another type (no conversion is done) or missing.
    template <class T>
    const T& get(std::string_view key) const;
    // The array `key` as a vector of T (float for tokenizer.ggml.scores, std::string for
    // tokenizer.ggml.tokens, ...): io_error, as get's, unless it is an array of exactly T.
    template <class T>
    const std::vector<T>& get_array(std::string_view key) const;

    // The tensor infos, in the file's order.
    const std::vector<gguf_tensor_info>& tensors() const;
    // Tensor names, in the file's order.
    std::vector<std::string> names() const;
    bool contains(std::string_view name) const;
    // io_error naming the tensor when there is none by that name.
    const gguf_tensor_info& info(std::string_view name) const;
    // The tensor's bytes as ggml lays them out, in place in the map (aligned to alignment()).
    std::span<const std::byte> bytes(std::string_view name) const;

    // The tensor `name` as a Tensor<T, Ds...> (io/core.hpp's typed_tensor), its dims ne
    // reversed. Its type must be T's exactly (f32 for float, f64 for double, i32, i64; a
    // quantized or half-precision tensor is not converted), else io_error; its shape must fit
    // the dims, else shape_error naming the file and the tensor and showing both shapes.
    template <class T, Dim... Ds>
    Tensor<T, Ds...> load(std::string_view name) const;
    // The tensor `name` as floats, Tensor<float, Ds...>, whatever format of tensor/quantized.hpp
    // it is stored in (f32, f16, bf16, q8_0, q4_0, q4_K, q6_K), by ggml's dequantization: another
    // type is an io_error naming the tensor and its type, a shape that does not fit the dims a
    // shape_error, as load's.
    template <Dim... Ds>
    Tensor<float, Ds...> dequantize(std::string_view name) const;

    // The 2-d tensor `name` in its blocks, as a QuantizedMatrix<F, Rows, Cols> (ne = {Cols, Rows}):
    // its ggml type must be F's (io_error naming the tensor, the expected and the found type),
    // its shape must fit the dims (shape_error naming the file and the tensor). The blocks are
    // copied out of the map (and its pages released).
    template <StorageFormat F, Dim Rows, Dim Cols>
    QuantizedMatrix<F, Rows, Cols> load_quantized(std::string_view name) const;

    // Drops the tensor's pages from the process's memory: what load, dequantize and
    // load_quantized do once they have copied a tensor out, so that a model loaded from the
    // file does not hold its weights twice, in the map and in its own storage, at the peak.
    // bytes(name) stays valid: its pages are read back from the file when touched again.
    void release(std::string_view name) const;

    // Where a message is about: `<path>: tensor "<name>"`, the name escaped.
    std::string where(std::string_view name) const;

private:
    struct state;
    std::shared_ptr<const state> state_;
};

// ---- writing -------------------------------------------------------------------------------

// One tensor to write: its bytes are read, not copied, so they must live until the write.
struct gguf_tensor_view {
    std::string name;
    ggml_type type;
    std::vector<std::uint64_t> ne;    // ggml order, as gguf_tensor_info's
    std::span<const std::byte> data;  // as ggml lays it out: exactly the type's bytes for ne
};

// Writes a GGUF version 3 file as llama.cpp writes one: the key/values in the order given, the
// tensor infos, padding to the alignment (`general.alignment` when `metadata` holds it, a
// uint32 power of two; else 32), then each tensor's data at the next aligned offset. The file
// is written beside `path` under a temporary name and renamed over it only when complete.
// io_error for an empty or repeated key, a repeated tensor name or one of 64 bytes or more
// (llama.cpp's limit), more than 4 dims, ne[0] not a whole number of blocks, data whose size
// does not match type x ne, or arrays nested deeper than the reader reads.
void write_gguf(const std::filesystem::path& path, std::span<const gguf_kv> metadata,
                std::span<const gguf_tensor_view> tensors);

// The ggml type that stores a shaped element type: f32, f64, i32 or i64 (none for uint8 or
// bool, which ggml has no type for).
std::optional<ggml_type> ggml_type_of(dtype type);

// Collects metadata and tensors, then writes them as one file:
//
//   shaped::io::gguf_writer out;
//   out.add("general.architecture", std::string("llama"));
//   out.add("llama.block_count", std::uint32_t{12});
//   out.add("tokenizer.ggml.scores", shaped::io::gguf_array(std::vector<float>{0, -1.5f}));
//   out.add_tensor("output_norm.weight", norm);       // any f32/f64/i32/i64 expression; ne reversed
//   out.add_tensor("blk.0.attn_q.weight", shaped::quantize<shaped::q8_0>(wq));  // a QuantizedMatrix
//   out.add_tensor("token_embd.weight", shaped::ggml_type::q8_0, {64, 512}, blocks);  // raw blocks
//   out.save("model.gguf");
class gguf_writer {
public:
    void add(std::string key, gguf_value value) { metadata_.push_back({std::move(key), std::move(value)}); }
    void add_tensor(std::string name, ggml_type type, std::vector<std::uint64_t> ne, std::vector<std::byte> data) {
        tensors_.push_back({std::move(name), type, std::move(ne), std::move(data)});
    }
    // The expression's values, evaluated and kept, under the ggml type of its element type.
    template <Expression E>
    void add_tensor(std::string name, const E& e);
    // A quantized matrix's blocks under its format's ggml type, ne = {cols, rows}.
    template <StorageFormat F, Dim Rows, Dim Cols>
    void add_tensor(std::string name, const QuantizedMatrix<F, Rows, Cols>& matrix);
    void save(const std::filesystem::path& path) const;

private:
    struct entry {
        std::string name;
        ggml_type type;
        std::vector<std::uint64_t> ne;
        std::vector<std::byte> data;
    };
    std::vector<gguf_kv> metadata_;
    std::vector<entry> tensors_;
};

// ---- implementation ------------------------------------------------------------------------

namespace detail {

template <class T, std::size_t I = 0>
constexpr std::size_t gguf_alternative() {
    static_assert(I < std::variant_size_v<gguf_value>, "shaped::io::gguf: not a GGUF value type");
    if constexpr (std::is_same_v<T, std::variant_alternative_t<I, gguf_value>>) return I;
    else return gguf_alternative<T, I + 1>();
}

// io_error: the value of `key` in `file` is not of the expected type (or there is none).
[[noreturn]] void gguf_wrong_type(const std::filesystem::path& file, std::string_view key, std::string_view expected,
                                  const gguf_value* found);

// `bytes`, rows of `row` elements of ggml type `type`, into floats; false when tensor/quantized.hpp
// has no format of that type.
bool dequantize_rows(ggml_type type, std::span<const std::byte> bytes, std::size_t row, std::span<float> out);

// io_error: the tensor (`where`) is of ggml type `found`, not the `expected` one; or has `rank`
// dims where a matrix has 2.
[[noreturn]] void gguf_wrong_tensor_type(const std::string& where, ggml_type expected, ggml_type found);
[[noreturn]] void gguf_not_a_matrix(const std::string& where, std::size_t rank);
[[noreturn]] void gguf_not_dequantizable(const std::string& where, ggml_type type);

// io_error: the writer's tensor `name` has elements of a type that ggml has none for.
[[noreturn]] void gguf_no_ggml_type(std::string_view name, dtype type);

}  // namespace detail

template <class T>
constexpr gguf_type gguf_type_of() {
    return static_cast<gguf_type>(detail::gguf_alternative<T>());
}

template <class T>
const T& gguf_file::get(std::string_view key) const {
    const gguf_value* found = find(key);
    if (found != nullptr)
        if (const T* typed = std::get_if<T>(found)) return *typed;
    detail::gguf_wrong_type(path(), key, gguf_type_name(gguf_type_of<T>()), found);
}

template <class T>
const std::vector<T>& gguf_file::get_array(std::string_view key) const {
    const gguf_value* found = find(key);
    if (found != nullptr)
        if (const auto* array = std::get_if<gguf_array>(found))
            if (const auto* typed = std::get_if<std::vector<T>>(&array->values)) return *typed;
    detail::gguf_wrong_type(path(), key, "array of " + std::string(gguf_type_name(gguf_type_of<T>())), found);
}

template <class T, Dim... Ds>
Tensor<T, Ds...> gguf_file::load(std::string_view name) const {
    const gguf_tensor_info& entry = info(name);
    const std::string context = "shaped::io::gguf_file::load: " + where(name);
    const std::vector<std::size_t> shape = entry.shape();
    std::optional<dtype> type;
    for (const dtype candidate : {dtype::f32, dtype::f64, dtype::i32, dtype::i64})
        if (ggml_type_of(candidate) == entry.type) type = candidate;
    const stored_tensor stored{context, ggml_traits(entry.type).name, type, shape};
    const std::span<const std::byte> stored_bytes = bytes(name);
    return typed_tensor<T, Ds...>(stored, [&](std::span<std::byte> out) {
        std::copy(stored_bytes.begin(), stored_bytes.end(), out.begin());  // the sizes agree: dtype and shape checked
        release(name);
    });
}

template <Dim... Ds>
Tensor<float, Ds...> gguf_file::dequantize(std::string_view name) const {
    const gguf_tensor_info& entry = info(name);
    const std::string context = "shaped::io::gguf_file::dequantize: " + where(name);
    const std::span<const std::byte> stored = bytes(name);
    const std::size_t row = entry.ne.empty() ? 1 : static_cast<std::size_t>(entry.ne[0]);
    const std::vector<std::size_t> shape = entry.shape();
    // Dequantized to floats, whose dtype the dims are then checked with.
    const stored_tensor as_floats{context, ggml_traits(entry.type).name, dtype::f32, shape};
    return typed_tensor<float, Ds...>(as_floats, [&](std::span<std::byte> out) {
        if (!detail::dequantize_rows(entry.type, stored, row,
                                     std::span<float>(reinterpret_cast<float*>(out.data()), out.size() / sizeof(float))))
            detail::gguf_not_dequantizable(where(name), entry.type);
        release(name);
    });
}

template <StorageFormat F, Dim Rows, Dim Cols>
QuantizedMatrix<F, Rows, Cols> gguf_file::load_quantized(std::string_view name) const {
    const gguf_tensor_info& entry = info(name);
    if (entry.type != F::type) detail::gguf_wrong_tensor_type(where(name), F::type, entry.type);
    const std::vector<std::size_t> shape = entry.shape();
    if (shape.size() != 2) detail::gguf_not_a_matrix(where(name), shape.size());
    const std::array<std::size_t, 2> extents{shape[0], shape[1]};
    shaped::detail::check_extents_fit("shaped::io::gguf_file::load_quantized: " + where(name), dims<Rows, Cols>{},
                                      extents);
    QuantizedMatrix<F, Rows, Cols> matrix(extents);
    const std::span<const std::byte> stored = bytes(name);  // the reader checked: rows x blocks a row
    std::memcpy(matrix.blocks().data(), stored.data(), stored.size());
    release(name);
    return matrix;
}

template <StorageFormat F, Dim Rows, Dim Cols>
void gguf_writer::add_tensor(std::string name, const QuantizedMatrix<F, Rows, Cols>& matrix) {
    const auto blocks = std::as_bytes(matrix.blocks());
    add_tensor(std::move(name), F::type, {matrix.cols(), matrix.rows()}, std::vector<std::byte>(blocks.begin(), blocks.end()));
}

template <Expression E>
void gguf_writer::add_tensor(std::string name, const E& e) {
    const auto t = eval(e);
    tensor_bytes bytes = bytes_of(std::move(name), t);
    const std::optional<ggml_type> type = ggml_type_of(bytes.type);
    if (!type) detail::gguf_no_ggml_type(bytes.name, bytes.type);
    std::vector<std::uint64_t> ne(bytes.shape.rbegin(), bytes.shape.rend());
    add_tensor(std::move(bytes.name), *type, std::move(ne), std::vector<std::byte>(bytes.data.begin(), bytes.data.end()));
}

}  // namespace shaped::io
