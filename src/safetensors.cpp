// The safetensors format (https://github.com/huggingface/safetensors, safetensors/src/tensor.rs):
//
//   N: u64 little-endian | N bytes of UTF-8 JSON (may end in padding spaces) | the data buffer
//
// The header is an object mapping each tensor's name to
//   {"dtype": "F32", "shape": [8, 6], "data_offsets": [begin, end]}
// (offsets into the data buffer), plus an optional "__metadata__": {string: string}.
//
// Every field comes from an untrusted file, and is checked as the reference implementation
// checks it before anything is read or allocated from it: the header length against a limit
// and the file, the JSON's types, each entry's byte count against its dtype and shape, and the
// entries' byte ranges, which must tile the data buffer exactly.

#include "shaped/io/safetensors.hpp"
#include "temporary_file.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <mutex>
#include <optional>
#include <set>
#include <utility>

namespace shaped::io {

// The data is little-endian and is copied into tensors as it is.
static_assert(std::endian::native == std::endian::little,
              "shaped::io: safetensors data is little-endian; big-endian hosts are not supported");

namespace {

using json = nlohmann::json;
using shaped::checked_byte_count;
using detail::fail_io;
using detail::format_shape;
using detail::printable_excerpt;
using detail::quote_text;

constexpr std::size_t length_size = 8;                  // the u64 header length
constexpr std::uint64_t max_header_size = 100'000'000;  // the reference's MAX_HEADER_SIZE
constexpr std::size_t header_alignment = 8;             // writers pad the header to this
constexpr std::string_view metadata_key = "__metadata__";

struct dtype_entry {
    std::string_view name;
    std::size_t size;  // bytes per element; 0 for the sub-byte types
};

// The reference's dtypes. Sub-byte ones (F4, F6_*) are known but not supported.
constexpr std::array<dtype_entry, 20> dtype_table = {{
    {"BOOL", 1},    {"U8", 1},          {"I8", 1},          {"F8_E5M2", 1}, {"F8_E4M3", 1},
    {"F8_E8M0", 1}, {"I16", 2},         {"U16", 2},         {"F16", 2},     {"BF16", 2},
    {"I32", 4},     {"U32", 4},         {"F32", 4},         {"C64", 8},     {"F64", 8},
    {"I64", 8},     {"U64", 8},         {"F4", 0},          {"F6_E2M3", 0}, {"F6_E3M2", 0},
}};

std::optional<std::size_t> dtype_size_of(std::string_view name) {
    for (const auto& entry : dtype_table)
        if (entry.name == name) return entry.size;
    return std::nullopt;
}

std::string tensor_label(std::string_view name) { return "tensor " + quote_text(name); }

std::string format_range(std::size_t begin, std::size_t end) {
    return "[" + std::to_string(begin) + ", " + std::to_string(end) + "]";
}

std::string_view json_type_name(const json& value) {
    if (value.is_number_unsigned()) return "a non-negative integer";
    if (value.is_number_integer()) return "a negative integer";
    if (value.is_number_float()) return "a non-integer number";
    if (value.is_object()) return "an object";
    if (value.is_array()) return "an array";
    if (value.is_string()) return "a string";
    if (value.is_boolean()) return "a boolean";
    return "null";
}

// A non-negative integer that fits in size_t.
std::size_t to_size(const json& value, std::string_view context, const std::string& what) {
    if (!value.is_number_unsigned())
        fail_io(context, what + " is " + std::string(json_type_name(value)) + ", expected a non-negative integer");
    const auto number = value.get<std::uint64_t>();
    if (number > std::numeric_limits<std::size_t>::max()) fail_io(context, what + " does not fit in size_t");
    return static_cast<std::size_t>(number);
}

// One header entry, {"dtype": ..., "shape": [...], "data_offsets": [begin, end]}, as parsed. Its
// byte count and place in the buffer are checked later, with all the entries.
safetensors_info parse_entry(const json& object, std::string_view context, std::string_view name) {
    const std::string label = tensor_label(name);
    const auto field = [&](const char* key) -> const json& {
        const auto found = object.find(key);
        if (found == object.end()) fail_io(context, label + ": its entry has no \"" + std::string(key) + "\"");
        return *found;
    };
    safetensors_info info;

    const json& dtype = field("dtype");
    if (!dtype.is_string())
        fail_io(context, label + ": \"dtype\" is " + std::string(json_type_name(dtype)) + ", expected a string");
    info.dtype = dtype.get<std::string>();
    const auto size = dtype_size_of(info.dtype);
    if (!size) {
        std::string known;
        for (const auto& entry : dtype_table)
            if (entry.size != 0) known += (known.empty() ? "" : ", ") + std::string(entry.name);
        fail_io(context, label + ": unknown dtype " + quote_text(info.dtype) + " (known: " + known + ")");
    }
    if (*size == 0) fail_io(context, label + ": dtype " + info.dtype + " packs elements in fewer than 8 bits, "
                                              "which shaped does not read");

    const json& shape = field("shape");
    if (!shape.is_array())
        fail_io(context, label + ": \"shape\" is " + std::string(json_type_name(shape)) + ", expected an array");
    for (std::size_t i = 0; i < shape.size(); ++i)
        info.shape.push_back(to_size(shape[i], context, label + ": \"shape\"[" + std::to_string(i) + "]"));

    const json& offsets = field("data_offsets");
    if (!offsets.is_array() || offsets.size() != 2)
        fail_io(context, label + ": \"data_offsets\" is " +
                             (offsets.is_array() ? "an array of " + std::to_string(offsets.size()) + " values"
                                                 : std::string(json_type_name(offsets))) +
                             ", expected [begin, end]");
    info.data_begin = to_size(offsets[0], context, label + ": \"data_offsets\"[0]");
    info.data_end = to_size(offsets[1], context, label + ": \"data_offsets\"[1]");
    return info;
}

struct parsed_header {
    std::map<std::string, safetensors_info, std::less<>> tensors;
    safetensors_metadata metadata;
};

// Parses the JSON header. Entries are converted and dropped from the DOM as each one closes,
// so memory stays proportional to what the file really holds; containers may nest only as
// deep as a header's do (root / entry / shape), and no object may repeat a key (a JSON parser
// would silently keep the last one).
parsed_header parse_header(std::string_view text, std::string_view context) {
    parsed_header header;
    std::vector<std::set<std::string, std::less<>>> keys;  // of each open object
    std::string entry_name;                                // the root's current key
    // Where inside the header a problem is, once inside an entry.
    const auto at = [&] { return keys.size() >= 2 ? " (in " + tensor_label(entry_name) + ")" : std::string(); };

    const json::parser_callback_t callback = [&](int depth, json::parse_event_t event, json& parsed) -> bool {
        switch (event) {
            case json::parse_event_t::object_start:
            case json::parse_event_t::array_start:
                if (depth >= 3) fail_io(context, "malformed header: nested deeper than a safetensors header" + at());
                if (depth == 1 && event == json::parse_event_t::array_start) {
                    fail_io(context, entry_name == metadata_key
                                         ? "\"__metadata__\" is an array, expected an object of strings"
                                         : tensor_label(entry_name) + ": its entry is an array, expected an object");
                }
                if (event == json::parse_event_t::object_start) keys.emplace_back();
                return true;
            case json::parse_event_t::key: {
                const auto& key = parsed.get_ref<const std::string&>();
                if (keys.empty()) return true;  // cannot happen: a key is always inside an object
                if (!keys.back().insert(key).second) {
                    fail_io(context, depth == 1 ? "malformed header: " + tensor_label(key) + " appears twice"
                                                : "malformed header: key " + quote_text(key) + " appears twice" + at());
                }
                if (depth == 1) entry_name = key;
                return true;
            }
            case json::parse_event_t::value:
                if (depth == 1) {
                    fail_io(context, entry_name == metadata_key
                                         ? "\"__metadata__\" is " + std::string(json_type_name(parsed)) +
                                               ", expected an object of strings"
                                         : tensor_label(entry_name) + ": its entry is " +
                                               std::string(json_type_name(parsed)) + ", expected an object");
                }
                return true;
            case json::parse_event_t::object_end:
                if (!keys.empty()) keys.pop_back();
                if (depth != 1) return true;
                if (entry_name == metadata_key) {
                    for (const auto& [key, value] : parsed.items()) {
                        if (!value.is_string())
                            fail_io(context, "\"__metadata__\"[" + quote_text(key) + "] is " +
                                                 std::string(json_type_name(value)) + ", expected a string");
                        header.metadata.emplace(key, value.get<std::string>());
                    }
                } else {
                    header.tensors.emplace(entry_name, parse_entry(parsed, context, entry_name));
                }
                return false;  // converted: drop it from the DOM
            case json::parse_event_t::array_end:
                return true;
        }
        return true;
    };

    try {
        const json root = json::parse(text.begin(), text.end(), callback);
        if (!root.is_object()) fail_io(context, "malformed header: not a JSON object");
    } catch (const json::exception& e) {
        // nlohmann's message quotes the bytes it read last, which may be anything.
        std::string message = e.what();
        if (const auto close = message.find("] "); message.starts_with("[json.exception") && close != std::string::npos)
            message.erase(0, close + 2);
        fail_io(context, "malformed header: not valid JSON: " + printable_excerpt(message));
    }
    return header;
}

// Each entry's byte count must be its dtype x shape, inside the buffer; together the entries
// must tile the buffer from 0 to its end, in some order, without overlap or hole.
void check_layout(const parsed_header& header, std::size_t buffer_size, std::string_view context) {
    for (const auto& [name, info] : header.tensors) {
        const std::string label = tensor_label(name);
        const std::string range = format_range(info.data_begin, info.data_end);
        if (info.data_end < info.data_begin) fail_io(context, label + ": data_offsets " + range + " end before they begin");
        const std::size_t item_size = *dtype_size_of(info.dtype);
        const auto needed = checked_byte_count(info.shape, item_size);
        if (!needed)
            fail_io(context, label + ": " + info.dtype + " " + format_shape(info.shape) + " overflows: it spans more bytes than an array can address");
        const std::size_t held = info.data_end - info.data_begin;
        if (held != *needed)
            fail_io(context, label + ": data_offsets " + range + " hold " + std::to_string(held) + " bytes, but " + info.dtype +
                                 " " + format_shape(info.shape) + " needs " + std::to_string(*needed));
        if (info.data_end > buffer_size)
            fail_io(context, label + ": data_offsets " + range + " reach past the end of the data buffer, which holds " +
                                 std::to_string(buffer_size) + " bytes (is the file truncated?)");
    }

    std::vector<std::pair<const std::string*, const safetensors_info*>> order;
    for (const auto& [name, info] : header.tensors) order.emplace_back(&name, &info);
    std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
        return std::pair{a.second->data_begin, a.second->data_end} < std::pair{b.second->data_begin, b.second->data_end};
    });
    std::size_t covered = 0;
    const std::pair<const std::string*, const safetensors_info*>* previous = nullptr;
    for (const auto& entry : order) {
        const auto& [name, info] = entry;
        if (info->data_begin < covered)
            fail_io(context, tensor_label(*previous->first) + " " + format_range(previous->second->data_begin, previous->second->data_end) +
                                 " and " + tensor_label(*name) + " " + format_range(info->data_begin, info->data_end) +
                                 " overlap in the data buffer");
        if (info->data_begin > covered)
            fail_io(context, "bytes [" + std::to_string(covered) + ", " + std::to_string(info->data_begin) +
                                 ") of the data buffer belong to no tensor (a hole before " + tensor_label(*name) + ")");
        covered = info->data_end;
        previous = &entry;
    }
    if (covered != buffer_size)
        fail_io(context, "the data buffer holds " + std::to_string(buffer_size) + " bytes, but its tensors end at byte " +
                             std::to_string(covered) + ": bytes [" + std::to_string(covered) + ", " + std::to_string(buffer_size) +
                             ") belong to no tensor");
}

// The Levenshtein distance, for suggesting names.
std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diagonal = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t substitute = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
            diagonal = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, substitute});
        }
    }
    return row[b.size()];
}

}  // namespace

std::string_view safetensors_dtype_name(dtype type) {
    switch (type) {
        case dtype::f32: return "F32";
        case dtype::f64: return "F64";
        case dtype::i32: return "I32";
        case dtype::i64: return "I64";
        case dtype::u8: return "U8";
        case dtype::b1: return "BOOL";
    }
    return "unknown dtype";
}

std::optional<dtype> dtype_from_safetensors(std::string_view name) {
    for (const dtype type : {dtype::f32, dtype::f64, dtype::i32, dtype::i64, dtype::u8, dtype::b1})
        if (safetensors_dtype_name(type) == name) return type;
    return std::nullopt;
}

struct safetensors_file::state {
    std::filesystem::path path;
    std::map<std::string, safetensors_info, std::less<>> tensors;
    safetensors_metadata metadata;
    std::uint64_t data_start = 0;  // the data buffer's offset in the file
    std::mutex reading;            // guards `in`: a seek and a read go together
    std::ifstream in;
};

safetensors_file::safetensors_file(const std::filesystem::path& path) : state_(std::make_shared<state>()) {
    state& s = *state_;
    s.path = path;
    const std::string context = "shaped::io::safetensors_file: " + path.string() + ": ";
    detail::require_regular_file(context, path, "a safetensors file");

    s.in.open(path, std::ios::binary);
    if (!s.in) fail_io(context, std::string("cannot open: ") + std::strerror(errno));
    s.in.seekg(0, std::ios::end);
    const std::streamoff end = s.in.tellg();
    s.in.seekg(0, std::ios::beg);
    if (end < 0 || !s.in) fail_io(context, "cannot find the file's size");
    const auto file_size = static_cast<std::uint64_t>(end);

    if (file_size < length_size)
        fail_io(context, "a file of " + std::to_string(file_size) +
                             " bytes is too short for the 8-byte header length (is it a safetensors file?)");
    std::array<unsigned char, length_size> length_bytes{};
    s.in.read(reinterpret_cast<char*>(length_bytes.data()), length_size);
    if (!s.in) fail_io(context, "read error in the header length");
    std::uint64_t header_size = 0;
    for (std::size_t i = length_size; i-- > 0;) header_size = (header_size << 8) | length_bytes[i];
    if (header_size > max_header_size)
        fail_io(context, "header length " + std::to_string(header_size) + " exceeds the limit of " +
                             std::to_string(max_header_size) + " bytes (is it a safetensors file?)");
    if (header_size > file_size - length_size)
        fail_io(context, "header length " + std::to_string(header_size) + " runs past the end of the file, which has " +
                             std::to_string(file_size - length_size) + " bytes after the length (is it truncated?)");
    if (header_size == 0) fail_io(context, "the header is empty, expected a JSON object");

    std::string header(static_cast<std::size_t>(header_size), '\0');
    s.in.read(header.data(), static_cast<std::streamsize>(header.size()));
    if (!s.in) fail_io(context, "read error in the header");
    if (header.front() != '{')
        fail_io(context, "the header does not start with '{' (it starts \"" + printable_excerpt(header.substr(0, 16)) +
                             "\"; is it a safetensors file?)");

    // JSON text never holds a NUL byte (a string spells it \u0000), and nlohmann's parser
    // would take one as the end of its input, ignoring whatever follows.
    if (const auto nul = header.find('\0'); nul != std::string::npos)
        fail_io(context, "malformed header: a NUL byte at header byte " + std::to_string(nul) + ", which JSON text cannot hold");
    parsed_header parsed = parse_header(header, context);
    s.data_start = length_size + header_size;
    check_layout(parsed, static_cast<std::size_t>(file_size - s.data_start), context);
    s.tensors = std::move(parsed.tensors);
    s.metadata = std::move(parsed.metadata);
}

const std::filesystem::path& safetensors_file::path() const { return state_->path; }

std::vector<std::string> safetensors_file::names() const {
    std::vector<std::string> names;
    names.reserve(state_->tensors.size());
    for (const auto& [name, info] : state_->tensors) names.push_back(name);
    return names;
}

bool safetensors_file::contains(std::string_view name) const { return state_->tensors.find(name) != state_->tensors.end(); }

const safetensors_metadata& safetensors_file::metadata() const { return state_->metadata; }

std::string safetensors_file::where(std::string_view name) const {
    return state_->path.string() + ": " + tensor_label(name);
}

const safetensors_info& safetensors_file::info(std::string_view name) const {
    const auto found = state_->tensors.find(name);
    if (found != state_->tensors.end()) return found->second;

    std::string message = "shaped::io::safetensors_file: " + state_->path.string() + ": no tensor named " + quote_text(name);
    if (state_->tensors.empty()) throw io_error(message + "; the file holds no tensors");
    // A name the file holds under a prefix ("transformer.h.0." + name) is the likeliest meant;
    // otherwise the nearest by edit distance, if near at all.
    std::vector<std::pair<std::size_t, const std::string*>> scored;
    for (const auto& [candidate, info] : state_->tensors) {
        const bool contains_it = !name.empty() && candidate.find(name) != std::string::npos;
        const std::size_t score = contains_it ? 0 : edit_distance(name.substr(0, 256), std::string_view(candidate).substr(0, 256));
        if (contains_it || score <= std::max<std::size_t>(2, name.size() / 3)) scored.emplace_back(score, &candidate);
    }
    std::sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) { return std::pair{a.first, *a.second} < std::pair{b.first, *b.second}; });
    message += "; the file holds " + std::to_string(state_->tensors.size()) + " tensors";
    for (std::size_t i = 0; i < scored.size() && i < 3; ++i) message += (i == 0 ? "; did you mean " : " or ") + quote_text(*scored[i].second);
    if (!scored.empty()) message += "?";
    throw io_error(message);
}

void safetensors_file::read(std::string_view name, std::span<std::byte> out) const {
    const safetensors_info& entry = info(name);
    const std::size_t size = entry.data_end - entry.data_begin;
    if (out.size() != size)
        throw io_error("shaped::io::safetensors_file::read: " + where(name) + ": holds " + std::to_string(size) +
                       " bytes, but the destination has " + std::to_string(out.size()));
    if (size == 0) return;
    {
        const std::lock_guard lock(state_->reading);
        std::ifstream& in = state_->in;
        in.clear();
        in.seekg(static_cast<std::streamoff>(state_->data_start + entry.data_begin), std::ios::beg);
        in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(size));
        if (!in || static_cast<std::size_t>(in.gcount()) != size) {
            in.clear();
            throw io_error("shaped::io::safetensors_file::read: " + where(name) +
                           ": the file ended or could not be read within the tensor's bytes (was it changed after it was opened?)");
        }
    }
    // Any nonzero byte is true; C++ bool has only the values 0 and 1.
    if (entry.dtype == "BOOL")
        for (std::byte& value : out)
            if (value != std::byte{0}) value = std::byte{1};
}

void write_safetensors(const std::filesystem::path& path, std::span<const safetensors_view> tensors,
                       const safetensors_metadata& metadata) {
    const std::string context = "shaped::io::write_safetensors: " + path.string() + ": ";
    std::vector<const safetensors_view*> order;
    for (const auto& tensor : tensors) order.push_back(&tensor);
    std::sort(order.begin(), order.end(), [](const auto* a, const auto* b) { return a->name < b->name; });
    for (std::size_t i = 0; i < order.size(); ++i) {
        const safetensors_view& tensor = *order[i];
        const std::string label = tensor_label(tensor.name);
        if (tensor.name == metadata_key) fail_io(context, "the name \"__metadata__\" is reserved for the file's metadata");
        if (i > 0 && order[i - 1]->name == tensor.name) fail_io(context, label + " is given twice");
        const auto size = dtype_size_of(tensor.dtype);
        if (!size || *size == 0) fail_io(context, label + ": unsupported dtype " + quote_text(tensor.dtype));
        const auto needed = checked_byte_count(tensor.shape, *size);
        if (!needed || *needed != tensor.data.size())
            fail_io(context, label + ": " + std::to_string(tensor.data.size()) + " bytes of data, but " + tensor.dtype + " " +
                                 format_shape(tensor.shape) + " needs " + (needed ? std::to_string(*needed) : "more bytes than an array can address"));
    }

    // As the reference writes it: compact JSON, "__metadata__" first, each entry's fields in the
    // order dtype, shape, data_offsets.
    nlohmann::ordered_json header = nlohmann::ordered_json::object();
    if (!metadata.empty()) {
        auto& meta = header[std::string(metadata_key)] = nlohmann::ordered_json::object();
        for (const auto& [key, value] : metadata) meta[key] = value;
    }
    std::size_t offset = 0;
    for (const safetensors_view* tensor : order) {
        nlohmann::ordered_json entry = nlohmann::ordered_json::object();
        entry["dtype"] = tensor->dtype;
        entry["shape"] = tensor->shape;
        entry["data_offsets"] = {offset, offset + tensor->data.size()};
        header[tensor->name] = std::move(entry);
        offset += tensor->data.size();
    }
    std::string text;
    try {
        text = header.dump();
    } catch (const nlohmann::ordered_json::exception&) {
        fail_io(context, "a tensor name or metadata string is not valid UTF-8");
    }
    text.append((header_alignment - text.size() % header_alignment) % header_alignment, ' ');

    std::array<std::byte, length_size> length{};
    const std::uint64_t header_size = text.size();
    for (std::size_t i = 0; i < length_size; ++i) length[i] = static_cast<std::byte>((header_size >> (8 * i)) & 0xff);

    detail::temporary_file file(path, context);
    file.write(length);
    file.write(std::as_bytes(std::span(text.data(), text.size())));
    for (const safetensors_view* tensor : order) file.write(tensor->data);
    file.commit_as(path);
}

void safetensors_writer::save(const std::filesystem::path& path) const {
    std::vector<safetensors_view> views;
    views.reserve(entries_.size());
    for (const auto& tensor : entries_) views.push_back({tensor.name, tensor.dtype, tensor.shape, tensor.data});
    write_safetensors(path, views, metadata_);
}

}  // namespace shaped::io
