#pragma once
// Private to the library's sources: what every reader of io/ and text/ needs for fields that
// come from an untrusted file — an io_error with its context, the file's bytes, an excerpt of
// bytes that may not be text, text quoted, a shape as messages show it. Byte counts come from
// core/extents.hpp, which checks them.

#include "shaped/core/extents.hpp"
#include "shaped/io/core.hpp"

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
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

// read_whole_file's limit for a file that has none but memory's (a .npy file is one tensor, as
// large as the caller's dims make it).
inline constexpr std::size_t no_size_limit = std::numeric_limits<std::size_t>::max();

// The whole of a regular file (see require_regular_file), at most `max_bytes` of it: its size
// is checked before it is read, and the chunked read stops as soon as it passes the limit, so a
// file that grows while it is read cannot exhaust memory either. `format` says what the file is
// for messages: "<file>: is N bytes, more than the 16 MiB a config.json may be".
inline std::string read_whole_file(std::string_view context, const std::filesystem::path& path, std::string_view format,
                                   std::size_t max_bytes) {
    require_regular_file(context, path, format);
    const std::string limit = "the " + describe_bytes(max_bytes) + " " + std::string(format) + " may be";
    std::error_code error;
    const auto size = std::filesystem::file_size(path, error);
    if (!error && size > max_bytes) fail_io(context, "is " + std::to_string(size) + " bytes, more than " + limit);
    std::ifstream in(path, std::ios::binary);
    if (!in) fail_io(context, std::string("cannot open: ") + std::strerror(errno));
    std::string bytes;
    if (!error) bytes.reserve(static_cast<std::size_t>(size));
    constexpr std::size_t chunk_size = std::size_t{1} << 16;
    while (in) {
        const std::size_t filled = bytes.size();
        bytes.resize(filled + chunk_size);
        in.read(bytes.data() + filled, chunk_size);
        bytes.resize(filled + static_cast<std::size_t>(in.gcount()));
        if (bytes.size() > max_bytes) fail_io(context, "grew while it was read to more than " + limit);
    }
    if (in.bad()) fail_io(context, "read error");
    return bytes;
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

// Text from a file, quoted, with quotes, backslashes and anything unprintable escaped and
// long text cut short (at a UTF-8 character boundary).
inline std::string quote_text(std::string_view text, std::size_t limit = 120) {
    std::string shown = "\"";
    std::size_t end = std::min(text.size(), limit);
    while (end < text.size() && end > 0 && (static_cast<unsigned char>(text[end]) & 0xc0) == 0x80) --end;
    for (std::size_t i = 0; i < end; ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c == '"' || c == '\\') {
            shown += '\\';
            shown += static_cast<char>(c);
        } else if (c < 0x20 || c == 0x7f) {
            constexpr char hex[] = "0123456789abcdef";
            shown += "\\x";
            shown += hex[c >> 4];
            shown += hex[c & 0xf];
        } else {
            shown += static_cast<char>(c);
        }
    }
    if (end < text.size()) shown += "...";
    return shown + "\"";
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
