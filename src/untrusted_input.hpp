#pragma once
// Private to the library's sources: what every io/ reader needs for fields that come from an
// untrusted file — an io_error with its context, an excerpt of bytes that may not be text, a
// shape as messages show it. Byte counts come from core/extents.hpp, which checks them.

#include "shaped/core/extents.hpp"
#include "shaped/io/core.hpp"

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace shaped::io::detail {

// Throws io_error with the message `context` followed by `problem`.
[[noreturn]] inline void fail_io(std::string_view context, std::string_view problem) {
    std::string message{context};
    message += problem;
    throw io_error(message);
}

// A reader opens only a regular file: a directory is refused, and so are a device, a FIFO or a
// socket, which could block the open or never end (/dev/zero).
inline void require_regular_file(std::string_view context, const std::filesystem::path& path, std::string_view format) {
    std::error_code error;
    const auto type = std::filesystem::status(path, error).type();
    if (type == std::filesystem::file_type::not_found) fail_io(context, "file not found");
    if (type == std::filesystem::file_type::directory) fail_io(context, "is a directory, not " + std::string(format));
    if (type != std::filesystem::file_type::regular) {
        if (error) fail_io(context, "cannot open: " + error.message());
        fail_io(context, "is not a regular file (a device, FIFO or socket), not " + std::string(format));
    }
}

// At most `limit` bytes of `text` for a message: printable ASCII as it is, a newline as \n, any
// other byte as \xNN, and "..." when there was more.
inline std::string printable_excerpt(std::string_view text, std::size_t limit = 120) {
    std::string shown;
    for (std::size_t i = 0; i < text.size() && i < limit; ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c == '\n') {
            shown += "\\n";
        } else if (c >= 0x20 && c < 0x7f) {
            shown += static_cast<char>(c);
        } else {
            constexpr char hex[] = "0123456789abcdef";
            shown += "\\x";
            shown += hex[c >> 4];
            shown += hex[c & 0xf];
        }
    }
    if (text.size() > limit) shown += "...";
    return shown;
}

// Python's repr of a tuple of ints, as numpy's header spells a shape and as torch and numpy
// print one: "()", "(5,)", "(2, 3)".
inline std::string format_shape(std::span<const std::size_t> shape) {
    std::string text = "(";
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (i > 0) text += ", ";
        text += std::to_string(shape[i]);
    }
    if (shape.size() == 1) text += ',';
    return text + ')';
}

}  // namespace shaped::io::detail
