#pragma once
// Private to the library's sources: the atomic writing that every io/ writer shares. A file is
// written beside its target under a temporary name and renamed over the target only when it is
// complete, so a failed write leaves any existing file untouched.

#include "untrusted_input.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#if __has_include(<unistd.h>)
#include <unistd.h>
#define SHAPED_IO_HAVE_FSYNC 1
#endif

namespace shaped::io::detail {

// A temporary file beside the target; removed on destruction unless it was renamed into place.
class temporary_file {
public:
    temporary_file(const std::filesystem::path& target, std::string_view context)
        : context_(context) {
        std::random_device entropy;
        for (int attempt = 0; attempt < 16 && file_ == nullptr; ++attempt) {
            // Appended piece by piece: GCC 12's -Wrestrict misfires on "." + std::string&&.
            std::string name = ".";
            name += target.filename().string();
            name += ".tmp-";
            name += std::to_string(entropy());
            name += std::to_string(entropy());
            path_ = target.parent_path() / name;
            errno = 0;
            file_ = std::fopen(path_.string().c_str(), "wbx");  // 'x': never reuse an existing file
            if (file_ == nullptr && errno != EEXIST) break;
        }
        if (file_ == nullptr) {
            fail_io(context_,
                    "cannot create temporary file '" + path_.string() + "': " + std::strerror(errno));
        }
    }
    temporary_file(const temporary_file&) = delete;
    temporary_file& operator=(const temporary_file&) = delete;
    ~temporary_file() {
        if (file_ != nullptr) std::fclose(file_);
        if (!renamed_) {
            std::error_code ignored;
            std::filesystem::remove(path_, ignored);
        }
    }

    void write(std::span<const std::byte> bytes) {
        if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size()) {
            fail_io(context_, "write to '" + path_.string() + "' failed: " + std::strerror(errno));
        }
    }

    // Flushes to the disk before the rename, so a crash cannot leave a renamed but empty file.
    void commit_as(const std::filesystem::path& target) {
        bool flushed = std::fflush(file_) == 0;
#ifdef SHAPED_IO_HAVE_FSYNC
        flushed = flushed && ::fsync(::fileno(file_)) == 0;
#endif
        const int flush_errno = errno;
        const bool closed = std::fclose(std::exchange(file_, nullptr)) == 0;
        if (!flushed || !closed) {
            fail_io(context_, "write to '" + path_.string() +
                                  "' failed: " + std::strerror(flushed ? errno : flush_errno));
        }
        std::error_code error;
        std::filesystem::rename(path_, target, error);
        if (error) fail_io(context_, "cannot replace the file: " + error.message());
        renamed_ = true;
    }

private:
    std::string context_;
    std::filesystem::path path_;
    std::FILE* file_ = nullptr;
    bool renamed_ = false;
};

}  // namespace shaped::io::detail
