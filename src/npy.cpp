// The .npy format (NumPy Enhancement Proposal 1, and numpy/lib/format.py):
//
//   "\x93NUMPY" | major | minor | header length (u16 LE for 1.0, u32 LE for 2.0/3.0)
//   | header: a Python dict literal {'descr': ..., 'fortran_order': ..., 'shape': (...), }
//     padded with spaces and a final '\n' so the data starts on a 64-byte boundary
//   | data: the elements, in C or Fortran order, in the byte order the descr names.
//
// Every field comes from an untrusted file, so each is checked before it is used: sizes are
// compared with the bytes actually present before anything is allocated from them.

#include "shaped/io/npy_format.hpp"
#include "temporary_file.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <system_error>
#include <utility>

namespace shaped::io {

namespace {

constexpr std::array<unsigned char, 6> magic_string = {0x93, 'N', 'U', 'M', 'P', 'Y'};
constexpr std::size_t array_align = 64;             // numpy aligns the data to this many bytes
constexpr std::size_t growth_axis_max_digits = 21;  // numpy's spare room for growing the shape

using shaped::checked_byte_count;
using detail::fail_io;
using detail::format_shape;
using detail::printable_excerpt;

struct header_fields {
    std::optional<std::string> descr;
    std::optional<bool> fortran_order;
    std::optional<std::vector<std::size_t>> shape;
};

// A parser for exactly the Python literal subset numpy writes in a header: a dict of the three
// known keys with string, bool and tuple-of-int values. It is linear in the header length and
// never recurses, so a hostile header cannot make it slow or deep.
class header_parser {
public:
    header_parser(std::string_view text, std::string_view context)
        : text_(text), context_(context) {}

    header_fields parse() {
        header_fields fields;
        expect('{', "the header dictionary to open with '{'");
        while (!consume('}')) {
            const std::string key = parse_string("a key");
            expect(':', "':' after key '" + key + "'");
            if (key == "descr") {
                if (fields.descr) malformed("duplicate key 'descr'");
                skip_space();
                if (peek() == '[') {
                    fail_io(context_,
                         "unsupported dtype: structured (record) dtypes are not supported; "
                         "supported: float32, float64, int32, int64, uint8, bool");
                }
                fields.descr = parse_string("a dtype string for 'descr'");
            } else if (key == "fortran_order") {
                if (fields.fortran_order) malformed("duplicate key 'fortran_order'");
                fields.fortran_order = parse_bool();
            } else if (key == "shape") {
                if (fields.shape) malformed("duplicate key 'shape'");
                fields.shape = parse_shape();
            } else {
                malformed("unexpected key '" + key + "'");
            }
            if (!consume(',')) {
                expect('}', "',' or '}' after the value of '" + key + "'");
                break;
            }
        }
        skip_space();
        if (pos_ != text_.size()) malformed("unexpected text after the header dictionary");
        if (!fields.descr) malformed("missing key 'descr'");
        if (!fields.fortran_order) malformed("missing key 'fortran_order'");
        if (!fields.shape) malformed("missing key 'shape'");
        return fields;
    }

private:
    [[noreturn]] void malformed(const std::string& problem) const {
        fail_io(context_, "malformed header: " + problem + " (at byte " + std::to_string(pos_) +
                           " of header \"" + printable_excerpt(text_) + "\")");
    }

    char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }

    void skip_space() {
        while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                       text_[pos_] == '\n' || text_[pos_] == '\r')) {
            ++pos_;
        }
    }

    bool consume(char c) {
        skip_space();
        if (pos_ < text_.size() && text_[pos_] == c) {
            ++pos_;
            return true;
        }
        return false;
    }

    void expect(char c, const std::string& what) {
        if (!consume(c)) malformed("expected " + what);
    }

    std::string parse_string(const std::string& what) {
        skip_space();
        const char quote = peek();
        if (quote != '\'' && quote != '"') malformed("expected " + what + " in quotes");
        const std::size_t start = ++pos_;
        while (pos_ < text_.size() && text_[pos_] != quote && text_[pos_] != '\n') {
            // Escapes never occur in the keys or dtype strings this reader accepts.
            if (text_[pos_] == '\\') malformed("unsupported escape in string");
            ++pos_;
        }
        if (peek() != quote) malformed("unterminated string");
        return std::string(text_.substr(start, pos_++ - start));
    }

    bool parse_bool() {
        skip_space();
        for (const auto& [word, value] : {std::pair{std::string_view{"True"}, true},
                                          std::pair{std::string_view{"False"}, false}}) {
            if (text_.substr(pos_, word.size()) == word &&
                !is_identifier_char(pos_ + word.size())) {
                pos_ += word.size();
                return value;
            }
        }
        malformed("expected True or False for 'fortran_order'");
    }

    bool is_identifier_char(std::size_t at) const {
        if (at >= text_.size()) return false;
        const char c = text_[at];
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_';
    }

    std::vector<std::size_t> parse_shape() {
        expect('(', "a tuple for 'shape'");
        std::vector<std::size_t> shape;
        bool trailing_comma = false;
        while (!consume(')')) {
            shape.push_back(parse_extent());
            trailing_comma = consume(',');
            if (!trailing_comma) {
                expect(')', "',' or ')' in 'shape'");
                break;
            }
        }
        // Python reads "(5)" as the int 5, not a tuple; numpy rejects it, and so do we.
        if (shape.size() == 1 && !trailing_comma) malformed("'shape' is not a tuple");
        return shape;
    }

    std::size_t parse_extent() {
        skip_space();
        if (peek() == '-') malformed("negative extent in 'shape'");
        if (peek() < '0' || peek() > '9') malformed("expected a non-negative integer in 'shape'");
        std::size_t value = 0;
        while (peek() >= '0' && peek() <= '9') {
            const auto digit = static_cast<std::size_t>(peek() - '0');
            if (value > (std::numeric_limits<std::size_t>::max() - digit) / 10) {
                malformed("extent in 'shape' overflows size_t");
            }
            value = value * 10 + digit;
            ++pos_;
        }
        if (peek() == 'L') ++pos_;  // Python 2 wrote long ints as 5L.
        return value;
    }

    std::string_view text_;
    std::string_view context_;
    std::size_t pos_ = 0;
};

// The descr of each dtype without its byte-order character, as numpy spells it.
struct dtype_code {
    std::string_view code;
    dtype type;
};
constexpr std::array<dtype_code, 6> dtype_codes = {{{"f4", dtype::f32},
                                                    {"f8", dtype::f64},
                                                    {"i4", dtype::i32},
                                                    {"i8", dtype::i64},
                                                    {"u1", dtype::u8},
                                                    {"b1", dtype::b1}}};

struct file_dtype {
    dtype type;
    bool needs_byte_swap;
};

constexpr char native_order_char = std::endian::native == std::endian::little ? '<' : '>';

file_dtype decode_descr(const std::string& descr, std::string_view context) {
    const std::string_view text{descr};
    const char order = text.empty() ? '\0' : text.front();
    if (order == '<' || order == '>' || order == '|' || order == '=') {
        const std::string_view code = text.substr(1);
        for (const dtype_code& candidate : dtype_codes) {
            if (code != candidate.code) continue;
            const std::size_t size = dtype_size(candidate.type);
            // '|' means "byte order does not apply", which is true only of one-byte types.
            if (order == '|' && size != 1) break;
            const bool file_is_native = order == '|' || order == '=' || order == native_order_char;
            return {candidate.type, size > 1 && !file_is_native};
        }
    }
    fail_io(context, "unsupported dtype '" + printable_excerpt(text) +
                      "'; supported: float32 ('<f4'), float64 ('<f8'), int32 ('<i4'), "
                      "int64 ('<i8'), uint8 ('|u1'), bool ('|b1'), in either byte order");
}

void byte_swap_elements(std::span<std::byte> data, std::size_t item_size) {
    for (std::size_t offset = 0; offset < data.size(); offset += item_size) {
        std::reverse(data.begin() + static_cast<std::ptrdiff_t>(offset),
                     data.begin() + static_cast<std::ptrdiff_t>(offset + item_size));
    }
}

// Walks the C-order destination while tracking the matching Fortran-order source offset, as an
// odometer over the multi-index.
std::vector<std::byte> fortran_to_c_order(std::span<const std::byte> fortran_data,
                                          std::span<const std::size_t> shape,
                                          std::size_t item_size) {
    std::vector<std::byte> c_data(fortran_data.size());
    const std::size_t count = fortran_data.size() / item_size;
    std::vector<std::size_t> fortran_stride(shape.size());
    std::size_t stride = 1;
    for (std::size_t k = 0; k < shape.size(); ++k) {
        fortran_stride[k] = stride;
        stride *= shape[k];
    }
    std::vector<std::size_t> index(shape.size());
    std::size_t source = 0;
    for (std::size_t target = 0; target < count; ++target) {
        std::memcpy(c_data.data() + target * item_size, fortran_data.data() + source * item_size,
                    item_size);
        for (std::size_t k = shape.size(); k-- > 0;) {
            if (++index[k] < shape[k]) {
                source += fortran_stride[k];
                break;
            }
            source -= fortran_stride[k] * (shape[k] - 1);
            index[k] = 0;
        }
    }
    return c_data;
}

std::uint32_t read_little_endian(std::span<const std::byte> bytes) {
    std::uint32_t value = 0;
    for (std::size_t i = bytes.size(); i-- > 0;) {
        value = (value << 8) | std::to_integer<std::uint32_t>(bytes[i]);
    }
    return value;
}

npy_array parse_with_context(std::span<const std::byte> bytes, std::string_view context) {
    const std::size_t magic_size = magic_string.size();
    if (bytes.empty()) fail_io(context, "empty input, expected a .npy file");
    const std::size_t compared = std::min(bytes.size(), magic_size);
    for (std::size_t i = 0; i < compared; ++i) {
        if (std::to_integer<unsigned char>(bytes[i]) != magic_string[i]) {
            fail_io(context,
                 "bad magic string: not a .npy file (expected it to start with \\x93NUMPY)");
        }
    }
    if (bytes.size() < magic_size + 2) {
        fail_io(context, "truncated preamble: ends before the format version");
    }

    const auto major = std::to_integer<unsigned>(bytes[magic_size]);
    const auto minor = std::to_integer<unsigned>(bytes[magic_size + 1]);
    if (major < 1 || major > 3 || minor != 0) {
        fail_io(context, "unsupported .npy format version " + std::to_string(major) + "." +
                          std::to_string(minor) + " (supported: 1.0, 2.0, 3.0)");
    }
    const std::size_t length_size = major == 1 ? 2 : 4;
    const std::size_t header_start = magic_size + 2 + length_size;
    if (bytes.size() < header_start) {
        fail_io(context, "truncated preamble: ends inside the header length");
    }
    const std::size_t header_size = read_little_endian(bytes.subspan(magic_size + 2, length_size));
    const std::size_t after_preamble = bytes.size() - header_start;
    if (after_preamble < header_size) {
        fail_io(context, "truncated header: the preamble announces " + std::to_string(header_size) +
                          " header bytes but only " + std::to_string(after_preamble) + " follow");
    }

    const auto header_bytes = bytes.subspan(header_start, header_size);
    const std::string_view header_text{reinterpret_cast<const char*>(header_bytes.data()),
                                       header_bytes.size()};
    const header_fields fields = header_parser(header_text, context).parse();
    const file_dtype stored = decode_descr(*fields.descr, context);
    const std::size_t item_size = dtype_size(stored.type);

    npy_array array{stored.type, *fields.shape, {}};
    const auto byte_count = checked_byte_count(array.shape, item_size);
    if (!byte_count) {
        fail_io(context, "shape " + format_shape(array.shape) + " of " +
                          std::string(dtype_name(array.type)) +
                          " overflows: it spans more bytes than an array can address");
    }
    const auto data_bytes = bytes.subspan(header_start + header_size);
    if (data_bytes.size() != *byte_count) {
        const std::string sizes = "shape " + format_shape(array.shape) + " of " +
                                  std::string(dtype_name(array.type)) + " needs " +
                                  std::to_string(*byte_count) + " data bytes but there are " +
                                  std::to_string(data_bytes.size());
        if (data_bytes.size() < *byte_count) fail_io(context, "truncated data: " + sizes);
        fail_io(context, "data size does not match the shape: " + sizes + " (" +
                          std::to_string(data_bytes.size() - *byte_count) + " trailing bytes)");
    }

    array.data.assign(data_bytes.begin(), data_bytes.end());
    if (stored.needs_byte_swap) byte_swap_elements(array.data, item_size);
    // Any nonzero byte is true to numpy; C++ bool has only the values 0 and 1.
    if (array.type == dtype::b1) {
        for (std::byte& value : array.data) {
            if (value != std::byte{0}) value = std::byte{1};
        }
    }
    if (*fields.fortran_order && array.shape.size() > 1) {
        array.data = fortran_to_c_order(array.data, array.shape, item_size);
    }
    return array;
}

std::string quoted_path_context(std::string_view function, const std::filesystem::path& path) {
    return std::string(function) + ": '" + path.string() + "': ";
}

// The header numpy.save writes for a C-order array of this dtype and shape, byte for byte.
std::vector<std::byte> make_header(dtype type, std::span<const std::size_t> shape,
                                   std::string_view context) {
    const auto code = std::find_if(dtype_codes.begin(), dtype_codes.end(),
                                   [&](const dtype_code& entry) { return entry.type == type; });
    std::string dict = "{'descr': '";
    dict += dtype_size(type) == 1 ? '|' : native_order_char;
    dict += code->code;
    dict += "', 'fortran_order': False, 'shape': " + format_shape(shape) + ", }";
    if (!shape.empty()) {
        const std::size_t digits = std::to_string(shape.front()).size();
        dict.append(growth_axis_max_digits - std::min(digits, growth_axis_max_digits), ' ');
    }

    const std::size_t text_size = dict.size() + 1;  // with the final '\n'
    std::size_t length_size = 2;
    std::size_t padding =
        array_align - (magic_string.size() + 2 + length_size + text_size) % array_align;
    if (text_size + padding > std::numeric_limits<std::uint16_t>::max()) {
        length_size = 4;
        padding = array_align - (magic_string.size() + 2 + length_size + text_size) % array_align;
    }
    if (text_size + padding > std::numeric_limits<std::uint32_t>::max()) {
        fail_io(context, "header for shape with " + std::to_string(shape.size()) +
                          " dims does not fit the .npy format");
    }
    const auto header_size = static_cast<std::uint32_t>(text_size + padding);

    std::vector<std::byte> header;
    header.reserve(magic_string.size() + 2 + length_size + header_size);
    for (const unsigned char c : magic_string) header.push_back(std::byte{c});
    header.push_back(std::byte{static_cast<unsigned char>(length_size == 2 ? 1 : 2)});
    header.push_back(std::byte{0});
    for (std::size_t i = 0; i < length_size; ++i) {
        header.push_back(std::byte{static_cast<unsigned char>((header_size >> (8 * i)) & 0xff)});
    }
    for (const char c : dict) header.push_back(std::byte{static_cast<unsigned char>(c)});
    header.insert(header.end(), padding, std::byte{' '});
    header.push_back(std::byte{'\n'});
    return header;
}

}  // namespace

npy_array parse_npy(std::span<const std::byte> bytes, std::string_view what) {
    return parse_with_context(bytes, "parse_npy: " + std::string(what) + ": ");
}

npy_array read_npy(const std::filesystem::path& path) {
    const std::string context = quoted_path_context("read_npy", path);
    // A .npy file is one tensor, as large as the caller's dims make it: no limit but memory's.
    const std::string bytes = detail::read_whole_file(context, path, "a .npy file", detail::no_size_limit);
    return parse_with_context(std::as_bytes(std::span(bytes)), context);
}

void write_npy(const std::filesystem::path& path, dtype type, std::span<const std::size_t> shape,
               std::span<const std::byte> data) {
    const std::string context = quoted_path_context("write_npy", path);
    if (dtype_size(type) == 0) {
        fail_io(context, "invalid dtype value " + std::to_string(static_cast<int>(type)));
    }
    const auto byte_count = checked_byte_count(shape, dtype_size(type));
    if (!byte_count) {
        fail_io(context, "shape " + format_shape(shape) + " of " + std::string(dtype_name(type)) +
                          " overflows: it spans more bytes than an array can address");
    }
    if (data.size() != *byte_count) {
        fail_io(context, "data has " + std::to_string(data.size()) + " bytes but shape " +
                          format_shape(shape) + " of " + std::string(dtype_name(type)) + " needs " +
                          std::to_string(*byte_count));
    }
    const std::vector<std::byte> header = make_header(type, shape, context);
    detail::temporary_file file(path, context);
    file.write(header);
    file.write(data);
    file.commit_as(path);
}

}  // namespace shaped::io
