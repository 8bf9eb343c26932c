#pragma once
// What the file-format tests (npy_test.cpp, safetensors_test.cpp) share: a scratch directory,
// whole files as bytes, a float written into a stored tensor, and the message of the exception an
// action must throw (which extents_test.cpp and the apps tests use too).

#include <shaped/io/safetensors.hpp>

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <span>
#include <string>
#include <system_error>
#include <vector>

namespace file_support {

namespace fs = std::filesystem;

// A fresh directory under the system temp directory, removed with everything in it.
class scratch_dir {
public:
    scratch_dir() {
        std::random_device entropy;
        path_ = fs::temp_directory_path() / ("shaped_test_" + std::to_string(entropy()) + std::to_string(entropy()));
        fs::create_directories(path_);
    }
    scratch_dir(const scratch_dir&) = delete;
    scratch_dir& operator=(const scratch_dir&) = delete;
    ~scratch_dir() {
        std::error_code ignored;
        fs::remove_all(path_, ignored);
    }
    fs::path operator/(const std::string& name) const { return path_ / name; }
    std::size_t entry_count() const {
        return static_cast<std::size_t>(std::distance(fs::directory_iterator(path_), fs::directory_iterator()));
    }

private:
    fs::path path_;
};

inline std::vector<std::byte> file_bytes(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    REQUIRE(in);
    std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<std::byte> bytes(chars.size());
    if (!chars.empty()) std::memcpy(bytes.data(), chars.data(), chars.size());
    return bytes;
}

inline void write_file(const fs::path& path, std::span<const std::byte> bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    REQUIRE(out);
}

template <class V>
std::vector<std::byte> to_bytes(const std::vector<V>& values) {
    std::vector<std::byte> bytes(values.size() * sizeof(V));
    if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
    return bytes;
}

// Writes `value` over float element `element` of tensor `name` in the safetensors file at `path`,
// where the file's own header places it.
inline void poke_float(const fs::path& path, const std::string& name, std::size_t element, float value) {
    const std::size_t begin = shaped::io::safetensors_file(path).info(name).data_begin;
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    std::uint64_t header = 0;
    file.read(reinterpret_cast<char*>(&header), sizeof header);
    file.seekp(static_cast<std::streamoff>(sizeof header + header + begin + element * sizeof(float)));
    file.write(reinterpret_cast<const char*>(&value), sizeof value);
    REQUIRE(file);
}

// The message of the exception E that `action` must throw.
template <class E>
std::string error_message(const auto& action) {
    try {
        action();
    } catch (const E& error) {
        return error.what();
    }
    FAIL("expected the action to throw");
    return {};
}

}  // namespace file_support
