// The GGUF format (llama.cpp's ggml/src/gguf.cpp and ggml/docs/gguf.md), versions 2 and 3:
//
//   "GGUF" | u32 version | u64 tensor_count | u64 kv_count
//   kv_count x   { string key | u32 type | value }
//   tensor_count x { string name | u32 n_dims | n_dims x u64 ne | u32 ggml type | u64 offset }
//   padding to the alignment | the data section, which the offsets point into
//
// All little-endian; a string is a u64 length and that many bytes; an array value is a u32
// element type, a u64 count and the elements (an element of type array is an array value
// again). Version 1 had 32-bit counts and lengths, and is refused.
//
// Every field comes from an untrusted file and is checked before anything is built from it:
// each read against the bytes left, each string length and array count against the bytes left
// before anything is allocated for it, each tensor's byte count for overflow, its bytes against
// the file's end and the other tensors'. The file is parsed in place in its read-only map.

#include "shaped/io/gguf.hpp"
#include "temporary_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <map>
#include <tuple>

namespace shaped::io {

// Values and tensor data are little-endian, and are read and handed out as they are.
static_assert(std::endian::native == std::endian::little,
              "shaped::io: GGUF data is little-endian; big-endian hosts are not supported");

namespace {

using detail::fail_io;
using detail::printable_excerpt;
using detail::quote_text;

constexpr std::string_view magic = "GGUF";
constexpr std::uint32_t newest_version = 3;
constexpr std::size_t max_dims = 4;                    // ggml's GGML_MAX_DIMS
constexpr std::size_t default_alignment = 32;          // ggml's GGUF_DEFAULT_ALIGNMENT
constexpr std::string_view alignment_key = "general.alignment";
constexpr std::size_t max_name_bytes = 63;             // ggml's GGML_MAX_NAME less its NUL
constexpr std::size_t max_array_depth = 16;            // arrays of arrays: deeper is refused, not recursed into
constexpr std::uint64_t max_ne = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());  // ggml's int64_t

// The fewest bytes a key/value and a tensor info can take: a bound on the counts a header may
// claim, checked before the entries are read.
constexpr std::size_t min_kv_bytes = 8 + 1 + 4 + 1;       // key length, a 1-byte key, type, a 1-byte value
constexpr std::size_t min_tensor_info_bytes = 8 + 4 + 4 + 8;  // name length, n_dims, type, offset

// ggml's type traits, by id (ggml.c's type_traits, gguf-py's GGML_QUANT_SIZES; QK_K = 256). An
// empty name is an id that ggml no longer has.
constexpr std::array<ggml_type_traits, 43> ggml_type_table = {{
    {"f32", 1, 4},        {"f16", 1, 2},       {"q4_0", 32, 18},    {"q4_1", 32, 20},     {"", 0, 0},
    {"", 0, 0},           {"q5_0", 32, 22},    {"q5_1", 32, 24},    {"q8_0", 32, 34},     {"q8_1", 32, 36},
    {"q2_K", 256, 84},    {"q3_K", 256, 110},  {"q4_K", 256, 144},  {"q5_K", 256, 176},   {"q6_K", 256, 210},
    {"q8_K", 256, 292},   {"iq2_xxs", 256, 66}, {"iq2_xs", 256, 74}, {"iq3_xxs", 256, 98}, {"iq1_s", 256, 50},
    {"iq4_nl", 32, 18},   {"iq3_s", 256, 110}, {"iq2_s", 256, 82},  {"iq4_xs", 256, 136}, {"i8", 1, 1},
    {"i16", 1, 2},        {"i32", 1, 4},       {"i64", 1, 8},       {"f64", 1, 8},        {"iq1_m", 256, 56},
    {"bf16", 1, 2},       {"", 0, 0},          {"", 0, 0},          {"", 0, 0},           {"tq1_0", 256, 54},
    {"tq2_0", 256, 66},   {"", 0, 0},          {"", 0, 0},          {"", 0, 0},           {"mxfp4", 32, 17},
    {"nvfp4", 64, 36},    {"q1_0", 128, 18},   {"q2_0", 64, 18},
}};

// The formats shaped computes with (tensor/quantized.hpp): the ones dequantize reads, which say
// their own blocks, and the table agrees with them.
using shaped_formats = std::tuple<f32, f16, bf16, q8_0, q4_0, q4_K, q6_K>;

template <StorageFormat F>
constexpr bool table_agrees_with = ggml_type_table[static_cast<std::size_t>(F::type)].name == F::name &&
                                   ggml_type_table[static_cast<std::size_t>(F::type)].block_size == F::block_width &&
                                   ggml_type_table[static_cast<std::size_t>(F::type)].block_bytes == F::bytes_per_block;
static_assert(std::apply([](auto... format) { return (table_agrees_with<decltype(format)> && ...); }, shaped_formats{}));

std::string key_label(std::string_view key) { return "key " + quote_text(key); }
std::string tensor_label(std::string_view name) { return "tensor " + quote_text(name); }

std::string format_ne(std::span<const std::uint64_t> ne) {
    std::string text = "ne (";
    for (std::size_t i = 0; i < ne.size(); ++i) text += (i > 0 ? ", " : "") + std::to_string(ne[i]);
    return text + ")";
}

// "[begin, begin + size)", which a corrupt offset may push past what a uint64_t holds.
std::string format_range(std::uint64_t begin, std::uint64_t size) {
    std::uint64_t end = 0;
    const bool wraps = __builtin_add_overflow(begin, size, &end);
    return "[" + std::to_string(begin) + ", " + (wraps ? std::to_string(begin) + " + " + std::to_string(size) : std::to_string(end)) + ")";
}

// The byte count of a `type` tensor of extents `ne` (ggml order), or io_error naming the
// tensor: more than 4 dims, rows that are not whole blocks, more elements than ggml's int64_t
// counts, more bytes than an array can address. The reader and the writer check alike.
std::size_t tensor_size(std::string_view context, const std::string& label, ggml_type type,
                        std::span<const std::uint64_t> ne) {
    if (ne.size() > max_dims)
        fail_io(context, label + " has " + std::to_string(ne.size()) + " dims, more than ggml's " + std::to_string(max_dims));
    for (std::size_t i = 0; i < ne.size(); ++i)
        if (ne[i] > max_ne)
            fail_io(context, label + ": ne[" + std::to_string(i) + "] is " + std::to_string(ne[i]) +
                                 ", more than ggml's int64_t extents hold");
    const ggml_type_traits& traits = ggml_traits(type);
    const std::uint64_t row = ne.empty() ? 1 : ne[0];
    if (row % traits.block_size != 0)
        fail_io(context, label + ": ne[0] = " + std::to_string(row) + " is not a multiple of " + std::string(traits.name) +
                             "'s block of " + std::to_string(traits.block_size) + " elements");
    // As ggml counts them: every extent, an empty one as 1, multiplies to less than 2^63.
    std::uint64_t elements = 1;
    for (const std::uint64_t extent : ne)
        if (__builtin_mul_overflow(elements, std::max<std::uint64_t>(extent, 1), &elements) || elements > max_ne)
            fail_io(context, label + ": " + format_ne(ne) + " holds more elements than ggml's int64_t counts");
    std::vector<std::size_t> blocks(ne.begin(), ne.end());
    if (!blocks.empty()) blocks[0] /= traits.block_size;
    const auto bytes = checked_byte_count(blocks, traits.block_bytes);
    if (!bytes)
        fail_io(context, label + ": " + std::string(traits.name) + " " + format_ne(ne) +
                             " spans more bytes than an array can address");
    return *bytes;
}

std::size_t align_up(std::size_t offset, std::size_t alignment) { return (offset + alignment - 1) / alignment * alignment; }

// The alignment `general.alignment` asks for, or 32 without it: a uint32 that is a nonzero
// power of two, else io_error.
std::size_t alignment_of(std::string_view context, const gguf_value* value) {
    if (value == nullptr) return default_alignment;
    const auto* alignment = std::get_if<std::uint32_t>(value);
    if (alignment == nullptr)
        fail_io(context, key_label(alignment_key) + " is " + describe_type(*value) + ", expected uint32");
    if (!std::has_single_bit(*alignment))
        fail_io(context, key_label(alignment_key) + " is " + std::to_string(*alignment) + ", not a power of two");
    return *alignment;
}

// ---- reading ---------------------------------------------------------------------------------

// The file, mapped read-only; unmapped with the last gguf_file that shares it.
class mapped_file {
public:
    mapped_file(std::string_view context, const std::filesystem::path& path) {
        detail::require_regular_file(context, path, "a GGUF file");
        const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) fail_io(context, std::string("cannot open: ") + std::strerror(errno));
        struct stat status {};
        if (::fstat(fd, &status) != 0) {
            const int error = errno;
            ::close(fd);
            fail_io(context, std::string("cannot find the file's size: ") + std::strerror(error));
        }
        size_ = static_cast<std::size_t>(status.st_size);
        if (size_ > 0) {  // mmap refuses an empty mapping; an empty file fails as too short
            void* pages = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
            const int error = errno;
            ::close(fd);
            if (pages == MAP_FAILED) fail_io(context, std::string("cannot map the file: ") + std::strerror(error));
            data_ = static_cast<const std::byte*>(pages);
        } else {
            ::close(fd);
        }
    }
    mapped_file(const mapped_file&) = delete;
    mapped_file& operator=(const mapped_file&) = delete;
    ~mapped_file() {
        if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
    }
    std::span<const std::byte> bytes() const { return {data_, size_}; }
    // Drops the whole pages inside [offset, offset + size) from the process's memory; they are
    // read back from the file if touched again. A hint: a refusal changes nothing.
    void release(std::size_t offset, std::size_t size) const {
        const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
        const std::size_t first = (offset + page - 1) / page * page, end = (offset + size) / page * page;
        if (data_ != nullptr && first < end) ::madvise(const_cast<std::byte*>(data_) + first, end - first, MADV_DONTNEED);
    }

private:
    const std::byte* data_ = nullptr;
    std::size_t size_ = 0;
};

// Reads the header's fields in order, each checked against the bytes left. `what` names the
// field for the message when the file ends inside it.
class field_reader {
public:
    field_reader(std::span<const std::byte> bytes, std::string_view context) : bytes_(bytes), context_(context) {}

    std::size_t position() const { return at_; }
    std::size_t left() const { return bytes_.size() - at_; }
    std::string_view context() const { return context_; }

    template <class T>
    T read(const std::string& what) {
        require(sizeof(T), what);
        T value;
        std::memcpy(&value, bytes_.data() + at_, sizeof(T));
        at_ += sizeof(T);
        return value;
    }

    void skip(std::size_t size, const std::string& what) {
        require(size, what);
        at_ += size;
    }

    // `size` bytes, in place.
    std::span<const std::byte> read_bytes(std::size_t size, const std::string& what) {
        require(size, what);
        at_ += size;
        return bytes_.subspan(at_ - size, size);
    }

    std::string read_string(const std::string& what) {
        const auto length = read<std::uint64_t>(what);
        if (length > left())
            fail_io(context_, what + ": a string of " + std::to_string(length) + " bytes runs past the end of the file, which has " +
                                  std::to_string(left()) + " bytes left (is it truncated?)");
        std::string text(reinterpret_cast<const char*>(bytes_.data() + at_), static_cast<std::size_t>(length));
        at_ += static_cast<std::size_t>(length);
        return text;
    }

private:
    void require(std::size_t size, const std::string& what) const {
        if (size > left())
            fail_io(context_, "the file ends inside " + what + " (at byte " + std::to_string(bytes_.size()) + "; is it truncated?)");
    }

    std::span<const std::byte> bytes_;
    std::size_t at_ = 0;
    std::string_view context_;
};

gguf_value read_value(field_reader& in, std::uint32_t type_id, const std::string& what, std::size_t depth);

// `count` elements of type T, after checking that the file holds at least `min_bytes` for each
// (their exact size for a number; a string's length field; an array's type and count).
template <class T>
std::vector<T> read_elements(field_reader& in, std::uint64_t count, std::size_t min_bytes, const std::string& what,
                             std::size_t depth) {
    if (count > in.left() / min_bytes)
        fail_io(in.context(), what + ": an array of " + std::to_string(count) + " " +
                                  std::string(gguf_type_name(gguf_type_of<T>())) + " elements cannot fit in the " +
                                  std::to_string(in.left()) + " bytes left (is it truncated?)");
    std::vector<T> elements;
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
        // Numbers are copied whole: the file's bytes are their values.
        elements.resize(static_cast<std::size_t>(count));
        const auto bytes = in.read_bytes(elements.size() * sizeof(T), what);
        if (!bytes.empty()) std::memcpy(elements.data(), bytes.data(), bytes.size());
    } else {
        elements.reserve(static_cast<std::size_t>(count));
        constexpr auto type_id = static_cast<std::uint32_t>(gguf_type_of<T>());
        for (std::uint64_t i = 0; i < count; ++i) {
            gguf_value element = read_value(in, type_id, what, depth);
            elements.push_back(std::move(std::get<T>(element)));
        }
    }
    return elements;
}

gguf_array read_array(field_reader& in, const std::string& what, std::size_t depth) {
    if (depth >= max_array_depth)
        fail_io(in.context(), what + ": arrays nested more than " + std::to_string(max_array_depth) + " deep");
    const auto type = in.read<std::uint32_t>(what + "'s array type");
    const auto count = in.read<std::uint64_t>(what + "'s array count");
    switch (static_cast<gguf_type>(type)) {
        case gguf_type::uint8: return read_elements<std::uint8_t>(in, count, 1, what, depth);
        case gguf_type::int8: return read_elements<std::int8_t>(in, count, 1, what, depth);
        case gguf_type::uint16: return read_elements<std::uint16_t>(in, count, 2, what, depth);
        case gguf_type::int16: return read_elements<std::int16_t>(in, count, 2, what, depth);
        case gguf_type::uint32: return read_elements<std::uint32_t>(in, count, 4, what, depth);
        case gguf_type::int32: return read_elements<std::int32_t>(in, count, 4, what, depth);
        case gguf_type::float32: return read_elements<float>(in, count, 4, what, depth);
        case gguf_type::boolean: return read_elements<bool>(in, count, 1, what, depth);
        case gguf_type::string: return read_elements<std::string>(in, count, 8, what, depth);
        case gguf_type::array: return read_elements<gguf_array>(in, count, 12, what, depth + 1);
        case gguf_type::uint64: return read_elements<std::uint64_t>(in, count, 8, what, depth);
        case gguf_type::int64: return read_elements<std::int64_t>(in, count, 8, what, depth);
        case gguf_type::float64: return read_elements<double>(in, count, 8, what, depth);
    }
    fail_io(in.context(), what + ": an array of unknown value type id " + std::to_string(type));
}

gguf_value read_value(field_reader& in, std::uint32_t type_id, const std::string& what, std::size_t depth) {
    switch (static_cast<gguf_type>(type_id)) {
        case gguf_type::uint8: return in.read<std::uint8_t>(what);
        case gguf_type::int8: return in.read<std::int8_t>(what);
        case gguf_type::uint16: return in.read<std::uint16_t>(what);
        case gguf_type::int16: return in.read<std::int16_t>(what);
        case gguf_type::uint32: return in.read<std::uint32_t>(what);
        case gguf_type::int32: return in.read<std::int32_t>(what);
        case gguf_type::float32: return in.read<float>(what);
        case gguf_type::boolean: {
            // Read as a byte: a C++ bool may hold only 0 or 1.
            const auto byte = in.read<std::uint8_t>(what);
            if (byte > 1) fail_io(in.context(), what + ": a bool of byte value " + std::to_string(byte) + ", neither 0 nor 1");
            return byte == 1;
        }
        case gguf_type::string: return in.read_string(what);
        case gguf_type::array: return read_array(in, what, depth);
        case gguf_type::uint64: return in.read<std::uint64_t>(what);
        case gguf_type::int64: return in.read<std::int64_t>(what);
        case gguf_type::float64: return in.read<double>(what);
    }
    fail_io(in.context(), what + ": unknown value type id " + std::to_string(type_id));
}

// io_error unless a count the header claims could fit in the bytes left, at `min_bytes` each.
void check_count(field_reader& in, std::uint64_t count, std::size_t min_bytes, std::string_view what) {
    if (count > in.left() / min_bytes)
        fail_io(in.context(), "the header claims " + std::to_string(count) + " " + std::string(what) + ", more than the " +
                                  std::to_string(in.left()) + " bytes left can hold (is it truncated or corrupt?)");
}

// io_error unless the tensors' bytes, each inside the file, overlap no other's.
void check_no_overlap(std::string_view context, const std::vector<gguf_tensor_info>& tensors) {
    std::vector<const gguf_tensor_info*> order;
    for (const auto& tensor : tensors)
        if (tensor.size > 0) order.push_back(&tensor);  // an empty tensor overlaps nothing
    std::sort(order.begin(), order.end(), [](const auto* a, const auto* b) { return a->offset < b->offset; });
    for (std::size_t i = 1; i < order.size(); ++i) {
        const gguf_tensor_info& before = *order[i - 1];
        const gguf_tensor_info& after = *order[i];
        if (after.offset < before.offset + before.size)
            fail_io(context, tensor_label(before.name) + " " + format_range(before.offset, before.size) + " and " +
                                 tensor_label(after.name) + " " + format_range(after.offset, after.size) +
                                 " overlap in the data section");
    }
}

// ---- writing ---------------------------------------------------------------------------------

// The bytes of a file, as they are appended.
class byte_writer {
public:
    template <class T>
    void write(T value) {
        const auto* bytes = reinterpret_cast<const std::byte*>(&value);
        bytes_.insert(bytes_.end(), bytes, bytes + sizeof(T));
    }
    void write_string(std::string_view text) {
        write<std::uint64_t>(text.size());
        const auto* bytes = reinterpret_cast<const std::byte*>(text.data());
        bytes_.insert(bytes_.end(), bytes, bytes + text.size());
    }
    void pad_to(std::size_t alignment) { bytes_.resize(align_up(bytes_.size(), alignment), std::byte{0}); }
    const std::vector<std::byte>& bytes() const { return bytes_; }

private:
    std::vector<std::byte> bytes_;
};

void write_array(byte_writer& out, const gguf_array& array);

// A value without its type id (an array's elements are written so).
void write_payload(byte_writer& out, const gguf_value& value) {
    std::visit(
        [&](const auto& held) {
            using T = std::decay_t<decltype(held)>;
            if constexpr (std::is_same_v<T, std::string>) out.write_string(held);
            else if constexpr (std::is_same_v<T, gguf_array>) write_array(out, held);
            else if constexpr (std::is_same_v<T, bool>) out.write<std::uint8_t>(held ? 1 : 0);
            else out.write(held);
        },
        value);
}

void write_array(byte_writer& out, const gguf_array& array) {
    out.write(static_cast<std::uint32_t>(array.element_type()));
    out.write<std::uint64_t>(array.size());
    std::visit(
        [&](const auto& elements) {
            using T = typename std::decay_t<decltype(elements)>::value_type;
            for (const auto& element : elements) {
                if constexpr (std::is_same_v<T, gguf_array>) write_array(out, element);
                else if constexpr (std::is_same_v<T, std::string>) out.write_string(element);
                else if constexpr (std::is_same_v<T, bool>) out.write<std::uint8_t>(element ? 1 : 0);  // a vector<bool>'s proxy
                else out.write(element);
            }
        },
        array.values);
}

// How deep arrays nest in `array`: 1 for an array of scalars.
std::size_t array_depth(const gguf_array& array) {
    std::size_t deepest = 0;
    if (const auto* nested = std::get_if<std::vector<gguf_array>>(&array.values))
        for (const gguf_array& element : *nested) deepest = std::max(deepest, array_depth(element));
    return 1 + deepest;
}

}  // namespace

std::string_view gguf_type_name(gguf_type type) {
    switch (type) {
        case gguf_type::uint8: return "uint8";
        case gguf_type::int8: return "int8";
        case gguf_type::uint16: return "uint16";
        case gguf_type::int16: return "int16";
        case gguf_type::uint32: return "uint32";
        case gguf_type::int32: return "int32";
        case gguf_type::float32: return "float32";
        case gguf_type::boolean: return "bool";
        case gguf_type::string: return "string";
        case gguf_type::array: return "array";
        case gguf_type::uint64: return "uint64";
        case gguf_type::int64: return "int64";
        case gguf_type::float64: return "float64";
    }
    return "unknown type";
}

std::size_t gguf_array::size() const {
    return std::visit([](const auto& elements) { return elements.size(); }, values);
}

std::string describe_type(const gguf_value& value) {
    const auto* array = std::get_if<gguf_array>(&value);
    if (array == nullptr) return std::string(gguf_type_name(type_of(value)));
    std::string text;
    for (;;) {
        text += "array of ";
        const auto* nested = std::get_if<std::vector<gguf_array>>(&array->values);
        if (nested == nullptr || nested->empty()) return text + std::string(gguf_type_name(array->element_type()));
        array = &nested->front();  // an array's arrays need not share an element type: the first names them
    }
}

const ggml_type_traits& ggml_traits(ggml_type type) { return ggml_type_table.at(static_cast<std::size_t>(type)); }

std::optional<ggml_type> ggml_type_from_id(std::uint32_t id) {
    if (id >= ggml_type_table.size() || ggml_type_table[id].name.empty()) return std::nullopt;
    return static_cast<ggml_type>(id);
}

std::optional<ggml_type> ggml_type_of(dtype type) {
    switch (type) {
        case dtype::f32: return ggml_type::f32;
        case dtype::f64: return ggml_type::f64;
        case dtype::i32: return ggml_type::i32;
        case dtype::i64: return ggml_type::i64;
        case dtype::u8:
        case dtype::b1: return std::nullopt;
    }
    return std::nullopt;
}

std::vector<std::size_t> gguf_tensor_info::shape() const { return {ne.rbegin(), ne.rend()}; }

struct gguf_file::state {
    std::filesystem::path path;
    std::unique_ptr<mapped_file> map;
    std::uint32_t version = 0;
    std::size_t alignment = default_alignment;
    std::size_t data_offset = 0;
    std::vector<gguf_kv> metadata;
    std::map<std::string, std::size_t, std::less<>> key_index;   // into metadata
    std::vector<gguf_tensor_info> tensors;
    std::map<std::string, std::size_t, std::less<>> name_index;  // into tensors
};

gguf_file::gguf_file(const std::filesystem::path& path) {
    auto s = std::make_shared<state>();
    s->path = path;
    const std::string context = "shaped::io::gguf_file: " + path.string() + ": ";
    s->map = std::make_unique<mapped_file>(context, path);
    const std::span<const std::byte> file = s->map->bytes();

    if (file.size() < magic.size() || std::memcmp(file.data(), magic.data(), magic.size()) != 0) {
        const std::string_view start(reinterpret_cast<const char*>(file.data()), std::min<std::size_t>(file.size(), 4));
        fail_io(context, "does not start with the magic \"GGUF\" (it starts \"" + printable_excerpt(start) +
                             "\"; is it a GGUF file?)");
    }
    field_reader in(file, context);
    in.skip(magic.size(), "the magic");
    s->version = in.read<std::uint32_t>("the header's version");
    if (s->version == 0) fail_io(context, "GGUF version 0 is no version GGUF has had (is the file corrupt?)");
    if (s->version == 1)
        fail_io(context, "GGUF version 1 is not supported (its counts are 32-bit): re-save it with a current llama.cpp");
    if ((s->version & 0xffff) == 0)
        fail_io(context, "GGUF version " + std::to_string(s->version) +
                             " reads as a byte-swapped small number: a big-endian GGUF file, which shaped does not read");
    if (s->version > newest_version)
        fail_io(context, "GGUF version " + std::to_string(s->version) + " is not supported (shaped reads versions 2 and 3)");
    const auto tensor_count = in.read<std::uint64_t>("the header's tensor count");
    const auto kv_count = in.read<std::uint64_t>("the header's key/value count");
    check_count(in, kv_count, min_kv_bytes, "key/values");

    for (std::uint64_t i = 0; i < kv_count; ++i) {
        std::string key = in.read_string("key " + std::to_string(i) + "'s name");
        if (key.empty()) fail_io(context, "key " + std::to_string(i) + " has an empty name");
        const std::string label = key_label(key);
        if (!s->key_index.emplace(key, s->metadata.size()).second) fail_io(context, label + " appears twice");
        const auto type = in.read<std::uint32_t>(label + "'s type");
        gguf_value value = read_value(in, type, label, 0);
        s->metadata.push_back({std::move(key), std::move(value)});
    }
    const auto alignment = s->key_index.find(alignment_key);
    s->alignment = alignment_of(context, alignment == s->key_index.end() ? nullptr : &s->metadata[alignment->second].value);

    check_count(in, tensor_count, min_tensor_info_bytes, "tensors");
    for (std::uint64_t i = 0; i < tensor_count; ++i) {
        gguf_tensor_info tensor;
        tensor.name = in.read_string("tensor " + std::to_string(i) + "'s name");
        const std::string label = tensor_label(tensor.name);
        if (!s->name_index.emplace(tensor.name, s->tensors.size()).second) fail_io(context, label + " appears twice");
        const auto n_dims = in.read<std::uint32_t>(label + "'s dim count");
        if (n_dims > max_dims)
            fail_io(context, label + " has " + std::to_string(n_dims) + " dims, more than ggml's " + std::to_string(max_dims));
        for (std::uint32_t d = 0; d < n_dims; ++d) tensor.ne.push_back(in.read<std::uint64_t>(label + "'s ne"));
        const auto type_id = in.read<std::uint32_t>(label + "'s ggml type");
        const std::optional<ggml_type> type = ggml_type_from_id(type_id);
        if (!type) fail_io(context, label + ": unknown ggml type id " + std::to_string(type_id));
        tensor.type = *type;
        tensor.size = tensor_size(context, label, tensor.type, tensor.ne);
        tensor.offset = in.read<std::uint64_t>(label + "'s offset");
        if (tensor.offset % s->alignment != 0)
            fail_io(context, label + ": offset " + std::to_string(tensor.offset) + " is not a multiple of the alignment " +
                                 std::to_string(s->alignment));
        s->tensors.push_back(std::move(tensor));
    }

    // The data section starts at the next aligned byte. A file without tensors has none: as
    // llama.cpp does, it may end before that byte, and its data offset is where its infos end.
    s->data_offset = s->tensors.empty() ? in.position() : align_up(in.position(), s->alignment);
    if (!s->tensors.empty() && s->data_offset > file.size())
        fail_io(context, "the data section would start at byte " + std::to_string(s->data_offset) +
                             ", past the end of the file at byte " + std::to_string(file.size()) + " (is it truncated?)");
    const std::size_t data_size = s->tensors.empty() ? 0 : file.size() - s->data_offset;
    for (const gguf_tensor_info& tensor : s->tensors)
        if (tensor.offset > data_size || tensor.size > data_size - tensor.offset)
            fail_io(context, tensor_label(tensor.name) + ": bytes " + format_range(tensor.offset, tensor.size) +
                                 " of the data section reach past the end of the file, which holds " + std::to_string(data_size) +
                                 " bytes of data (is it truncated?)");
    check_no_overlap(context, s->tensors);
    state_ = std::move(s);
}

const std::filesystem::path& gguf_file::path() const { return state_->path; }
std::uint32_t gguf_file::version() const { return state_->version; }
std::size_t gguf_file::alignment() const { return state_->alignment; }
std::size_t gguf_file::data_offset() const { return state_->data_offset; }
const std::vector<gguf_kv>& gguf_file::metadata() const { return state_->metadata; }
bool gguf_file::has_key(std::string_view key) const { return find(key) != nullptr; }

const gguf_value* gguf_file::find(std::string_view key) const {
    const auto found = state_->key_index.find(key);
    return found == state_->key_index.end() ? nullptr : &state_->metadata[found->second].value;
}

const gguf_value& gguf_file::value(std::string_view key) const {
    if (const gguf_value* found = find(key)) return *found;
    throw io_error("shaped::io::gguf_file: " + state_->path.string() + ": no " + key_label(key));
}

const std::vector<gguf_tensor_info>& gguf_file::tensors() const { return state_->tensors; }

std::vector<std::string> gguf_file::names() const {
    std::vector<std::string> names;
    names.reserve(state_->tensors.size());
    for (const gguf_tensor_info& tensor : state_->tensors) names.push_back(tensor.name);
    return names;
}

bool gguf_file::contains(std::string_view name) const { return state_->name_index.find(name) != state_->name_index.end(); }

const gguf_tensor_info& gguf_file::info(std::string_view name) const {
    const auto found = state_->name_index.find(name);
    if (found != state_->name_index.end()) return state_->tensors[found->second];
    throw io_error("shaped::io::gguf_file: " + state_->path.string() + ": no tensor named " + quote_text(name) +
                   "; the file holds " + std::to_string(state_->tensors.size()) + " tensors");
}

std::span<const std::byte> gguf_file::bytes(std::string_view name) const {
    const gguf_tensor_info& tensor = info(name);
    return state_->map->bytes().subspan(state_->data_offset + static_cast<std::size_t>(tensor.offset), tensor.size);
}

void gguf_file::release(std::string_view name) const {
    const gguf_tensor_info& tensor = info(name);
    state_->map->release(state_->data_offset + static_cast<std::size_t>(tensor.offset), tensor.size);
}

std::string gguf_file::where(std::string_view name) const { return state_->path.string() + ": " + tensor_label(name); }

namespace detail {

void gguf_wrong_type(const std::filesystem::path& file, std::string_view key, std::string_view expected, const gguf_value* found) {
    const std::string context = "shaped::io::gguf_file: " + file.string() + ": ";
    if (found == nullptr) fail_io(context, "no " + key_label(key) + " (expected " + std::string(expected) + ")");
    fail_io(context, key_label(key) + " is " + describe_type(*found) + ", expected " + std::string(expected));
}

void gguf_wrong_tensor_type(const std::string& where, ggml_type expected, ggml_type found) {
    throw io_error("shaped::io::gguf_file::load_quantized: " + where + " is " + std::string(ggml_traits(found).name) +
                   ", expected " + std::string(ggml_traits(expected).name));
}

void gguf_not_dequantizable(const std::string& where, ggml_type type) {
    const std::string readable = std::apply(
        [](auto... format) {
            std::string names;
            ((names += (names.empty() ? "" : ", ") + std::string(decltype(format)::name)), ...);
            return names;
        },
        shaped_formats{});
    throw io_error("shaped::io::gguf_file::dequantize: " + where + " is " + std::string(ggml_traits(type).name) +
                   ", which shaped cannot dequantize (it reads " + readable + ")");
}

namespace {
// Rows of format F's blocks, copied out of the map a row at a time (the map's bytes are not
// block objects), to floats.
template <StorageFormat F>
void dequantize_rows_of(std::span<const std::byte> bytes, std::size_t row, std::span<float> out) {
    // No rows, no row buffer: a tensor of extents {huge, 0} holds no bytes to size one by.
    if (out.empty()) return;
    const std::size_t blocks = row / F::block_width, row_bytes = blocks * F::bytes_per_block;
    std::vector<typename F::block_type> staged(blocks);  // one row, which the tensor's bytes hold
    for (std::size_t r = 0; r * row < out.size(); ++r) {
        std::memcpy(staged.data(), bytes.data() + r * row_bytes, row_bytes);
        F::dequantize_row(staged, out.subspan(r * row, row));
    }
}
}  // namespace

bool dequantize_rows(ggml_type type, std::span<const std::byte> bytes, std::size_t row, std::span<float> out) {
    bool known = false;
    const auto try_format = [&]<class F>(F) {
        if (known || type != F::type) return;
        known = true;
        dequantize_rows_of<F>(bytes, row, out);
    };
    std::apply([&](auto... format) { (try_format(format), ...); }, shaped_formats{});
    return known;
}

void gguf_not_a_matrix(const std::string& where, std::size_t rank) {
    throw io_error("shaped::io::gguf_file::load_quantized: " + where + " has " + std::to_string(rank) +
                   " dims, a matrix 2");
}

void gguf_no_ggml_type(std::string_view name, dtype type) {
    fail_io("shaped::io::gguf_writer::add_tensor: ", tensor_label(name) + ": ggml has no type for " +
                                                         std::string(dtype_name(type)) + " elements");
}

}  // namespace detail

void write_gguf(const std::filesystem::path& path, std::span<const gguf_kv> metadata, std::span<const gguf_tensor_view> tensors) {
    const std::string context = "shaped::io::write_gguf: " + path.string() + ": ";
    std::map<std::string_view, const gguf_value*> keys;
    for (const gguf_kv& kv : metadata) {
        if (kv.key.empty()) fail_io(context, "a key is empty");
        if (!keys.emplace(kv.key, &kv.value).second) fail_io(context, key_label(kv.key) + " is given twice");
        const auto* array = std::get_if<gguf_array>(&kv.value);
        if (array != nullptr && array_depth(*array) > max_array_depth)
            fail_io(context, key_label(kv.key) + ": arrays nested more than " + std::to_string(max_array_depth) + " deep");
    }
    const auto alignment_entry = keys.find(alignment_key);
    const std::size_t alignment = alignment_of(context, alignment_entry == keys.end() ? nullptr : alignment_entry->second);

    std::map<std::string_view, std::size_t> names;
    std::vector<std::uint64_t> offsets;
    std::size_t data_size = 0;
    for (const gguf_tensor_view& tensor : tensors) {
        const std::string label = tensor_label(tensor.name);
        if (!names.emplace(tensor.name, offsets.size()).second) fail_io(context, label + " is given twice");
        if (tensor.name.size() > max_name_bytes)
            fail_io(context, label + ": a name of " + std::to_string(tensor.name.size()) + " bytes, more than llama.cpp's " +
                                 std::to_string(max_name_bytes));
        const std::size_t size = tensor_size(context, label, tensor.type, tensor.ne);
        if (size != tensor.data.size())
            fail_io(context, label + ": " + std::to_string(tensor.data.size()) + " bytes of data, but " +
                                 std::string(ggml_traits(tensor.type).name) + " " + format_ne(tensor.ne) + " needs " +
                                 std::to_string(size));
        offsets.push_back(data_size);
        const auto end = checked_sum(data_size, align_up(size, alignment));
        if (!end) fail_io(context, "the tensors together span more bytes than a file can address");
        data_size = *end;
    }

    byte_writer header;
    for (const char c : magic) header.write(c);
    header.write(newest_version);
    header.write<std::uint64_t>(tensors.size());
    header.write<std::uint64_t>(metadata.size());
    for (const gguf_kv& kv : metadata) {
        header.write_string(kv.key);
        header.write(static_cast<std::uint32_t>(type_of(kv.value)));
        write_payload(header, kv.value);
    }
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        header.write_string(tensors[i].name);
        header.write(static_cast<std::uint32_t>(tensors[i].ne.size()));
        for (const std::uint64_t extent : tensors[i].ne) header.write(extent);
        header.write(static_cast<std::uint32_t>(tensors[i].type));
        header.write(offsets[i]);
    }
    header.pad_to(alignment);

    detail::temporary_file file(path, context);
    file.write(header.bytes());
    const std::vector<std::byte> padding(alignment, std::byte{0});
    for (const gguf_tensor_view& tensor : tensors) {
        file.write(tensor.data);
        file.write(std::span(padding).first(align_up(tensor.data.size(), alignment) - tensor.data.size()));
    }
    file.commit_as(path);
}

void gguf_writer::save(const std::filesystem::path& path) const {
    std::vector<gguf_tensor_view> views;
    views.reserve(tensors_.size());
    for (const entry& tensor : tensors_) views.push_back({tensor.name, tensor.type, tensor.ne, tensor.data});
    write_gguf(path, metadata_, views);
}

}  // namespace shaped::io
