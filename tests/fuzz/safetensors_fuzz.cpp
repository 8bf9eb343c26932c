// libFuzzer target for the safetensors reader. It reads from a path, so each input is written to
// a file of this process's own on a memory filesystem and opened; then every tensor is looked up,
// read and loaded as a user would. io_error and shape_error are the reader's answers to bad
// input; any other exception, a broken invariant or a sanitizer report is a bug.

#include <shaped/io/safetensors.hpp>

#include "fuzz_support.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace {

using fuzz_support::byte_count;
using fuzz_support::require;

using A = shaped::dim<"A">;
using B = shaped::dim<"B">;
using C = shaped::dim<"C">;

// Per process, so that the jobs of -fork or -jobs never share a file; in memory, so that the
// write per input costs no disk I/O.
const std::filesystem::path& input_path() {
    static const std::filesystem::path path = [] {
        const std::filesystem::path shm = "/dev/shm";
        std::error_code error;
        const auto dir = std::filesystem::is_directory(shm, error) ? shm : std::filesystem::temp_directory_path();
        return dir / ("shaped_safetensors_fuzz." + std::to_string(::getpid()));
    }();
    return path;
}

void remove_input() {
    std::error_code ignored;
    std::filesystem::remove(input_path(), ignored);
}

void write_input(std::span<const std::uint8_t> bytes) {
    std::FILE* file = std::fopen(input_path().c_str(), "wb");
    require(file != nullptr, "the fuzz input file can be created");
    const bool written = bytes.empty() || std::fwrite(bytes.data(), 1, bytes.size(), file) == bytes.size();
    require(std::fclose(file) == 0 && written, "the fuzz input file can be written");
}

// Bytes per element of the dtypes the reader accepts (it refuses the sub-byte ones).
std::optional<std::size_t> element_size(std::string_view dtype) {
    constexpr std::pair<std::string_view, std::size_t> sizes[] = {
        {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"F8_E8M0", 1},
        {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},     {"U32", 4},
        {"F32", 4},  {"C64", 8}, {"F64", 8}, {"I64", 8},     {"U64", 8}};
    for (const auto& [name, size] : sizes)
        if (name == dtype) return size;
    return std::nullopt;
}

// load<T, Ds...>, which may refuse only with io_error or shape_error; a loaded tensor must hold
// the bytes read() gave (BOOL alike: both normalise to 0 or 1).
template <class T, class... Ds>
bool try_load(const shaped::io::safetensors_file& file, const std::string& name, std::span<const std::byte> raw) {
    try {
        const auto tensor = file.load<T, Ds...>(name);
        fuzz_support::require_loaded_as(tensor, file.info(name).shape, raw);
        return true;
    } catch (const shaped::io::io_error&) {
    } catch (const shaped::shape_error&) {
    }
    return false;
}

// Every rank 0..3 with dynamic dims, of which exactly the entry's own rank loads (none, for a
// higher rank).
template <class T>
void load_as(const shaped::io::safetensors_file& file, const std::string& name, std::span<const std::byte> raw) {
    const std::size_t rank = file.info(name).shape.size();
    require(try_load<T>(file, name, raw) == (rank == 0), "a 0-d tensor loads exactly a 0-d entry");
    require(try_load<T, A>(file, name, raw) == (rank == 1), "a rank-1 tensor loads exactly a rank-1 entry");
    require(try_load<T, A, B>(file, name, raw) == (rank == 2), "a rank-2 tensor loads exactly a rank-2 entry");
    require(try_load<T, A, B, C>(file, name, raw) == (rank == 3), "a rank-3 tensor loads exactly a rank-3 entry");
}

// Another element type than the entry's: refused with io_error, converting nothing.
template <class T>
void refuse_as(const shaped::io::safetensors_file& file, const std::string& name) {
    try {
        (void)file.load<T, A>(name);
    } catch (const shaped::io::io_error&) {
        return;
    }
    require(false, "load refuses an element type the tensor does not hold");
}

void exercise_tensor(const shaped::io::safetensors_file& file, const std::string& name,
                     std::span<const std::uint8_t> data_buffer) {
    require(file.contains(name), "contains() every name names() gives");
    const shaped::io::safetensors_info& info = file.info(name);
    const auto item_size = element_size(info.dtype);
    require(item_size.has_value(), "an opened file's dtypes are known and whole bytes");
    require(info.data_begin <= info.data_end && info.data_end <= data_buffer.size(),
            "a tensor's bytes lie inside the data buffer");
    const std::size_t size = info.data_end - info.data_begin;
    require(byte_count(info.shape, *item_size) == size, "a tensor's byte range is its dtype x shape");

    std::vector<std::byte> raw(size);
    file.read(name, raw);
    const auto stored = data_buffer.subspan(info.data_begin, size);
    if (info.dtype == "BOOL") {
        for (std::size_t i = 0; i < size; ++i)
            require(raw[i] == std::byte{stored[i] != 0}, "BOOL reads as 0 or 1, nonzero as 1");
    } else {
        require(size == 0 || std::memcmp(raw.data(), stored.data(), size) == 0, "read() gives the file's bytes");
    }
    std::vector<std::byte> wrong_size(size + 1);
    try {
        file.read(name, wrong_size);
        require(false, "read() refuses a destination of the wrong size");
    } catch (const shaped::io::io_error&) {
    }

    if (info.dtype == "F32") { load_as<float>(file, name, raw); refuse_as<double>(file, name); }
    else if (info.dtype == "F64") { load_as<double>(file, name, raw); refuse_as<float>(file, name); }
    else if (info.dtype == "I32") { load_as<std::int32_t>(file, name, raw); refuse_as<std::int64_t>(file, name); }
    else if (info.dtype == "I64") { load_as<std::int64_t>(file, name, raw); refuse_as<std::int32_t>(file, name); }
    else if (info.dtype == "U8") { load_as<std::uint8_t>(file, name, raw); refuse_as<bool>(file, name); }
    else if (info.dtype == "BOOL") { load_as<bool>(file, name, raw); refuse_as<std::uint8_t>(file, name); }
    else refuse_as<float>(file, name);
}

void exercise(const shaped::io::safetensors_file& file, std::span<const std::uint8_t> bytes) {
    // The reader accepted the file, so it has the 8-byte length and that many header bytes.
    std::uint64_t header_size = 0;
    for (std::size_t i = 8; i-- > 0;) header_size = (header_size << 8) | bytes[i];
    require(header_size <= bytes.size() - 8, "an opened file holds its header");
    const auto data_buffer = bytes.subspan(8 + header_size);

    const std::vector<std::string> names = file.names();
    require(std::adjacent_find(names.begin(), names.end(), std::greater_equal<>()) == names.end(),
            "names() are sorted and distinct");
    std::vector<std::pair<std::size_t, std::size_t>> ranges;
    for (const std::string& name : names) {
        exercise_tensor(file, name, data_buffer);
        ranges.emplace_back(file.info(name).data_begin, file.info(name).data_end);
    }
    std::sort(ranges.begin(), ranges.end());
    std::size_t covered = 0;
    for (const auto& [begin, end] : ranges) {
        require(begin == covered, "the tensors tile the data buffer without hole or overlap");
        covered = end;
    }
    require(covered == data_buffer.size(), "the tensors cover the whole data buffer");

    // A name the file does not hold, near its own names so that the suggestions are computed.
    const std::string missing = names.empty() ? std::string("missing") : names.front() + "~";
    if (!file.contains(missing)) {
        try {
            (void)file.info(missing);
            require(false, "info() refuses a name the file does not hold");
        } catch (const shaped::io::io_error&) {
        }
    }
    std::size_t metadata_size = 0;
    for (const auto& [key, value] : file.metadata()) metadata_size += key.size() + value.size();
    require(metadata_size <= header_size, "the metadata is no larger than the header it came from");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::span<const std::uint8_t> bytes(data, size);
    write_input(bytes);
    std::optional<shaped::io::safetensors_file> file;
    try {
        file.emplace(input_path());
    } catch (const shaped::io::io_error&) {
        remove_input();
        return 0;
    }
    // Removed at once, since libFuzzer's exit runs no atexit handlers; the reader reads tensors
    // through the stream it opened, not the path.
    remove_input();
    exercise(*file, bytes);
    return 0;
}
