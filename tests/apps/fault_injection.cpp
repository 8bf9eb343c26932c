// A preloaded library (LD_PRELOAD) that makes one file operation of the process under test fail
// the way the machine can make it fail: the process killed (SIGKILL, as `kill -9` or the OOM
// killer) or the disk full (ENOSPC). The apps tests use it to stop shaped-train at exact moments
// of writing a checkpoint or its log, which a timer outside the process cannot hit reliably.
//
//   SHAPED_FAULT=ACTION:FILE:OPERATION:N
//
// ACTION is `kill` or `full`; FILE a part of the path the operation is on (a temporary name
// contains its target's: ".checkpoint.safetensors.tmp-..."); OPERATION one of
//   open     fopen of such a path           write    fwrite to a FILE* opened on such a path
//   flush    fflush of such a FILE*         rename   rename from such a path, before it happens
//   renamed  the same rename, just after it has happened (kill only)
// and N which of those operations, counted from 1 over the whole process, fails.
//
// stdio's own calls inside the C library are not interposable, so the faults are on the calls
// the program itself makes: fopen, fwrite, fflush, rename.

#include <dlfcn.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_set>

namespace {

struct fault {
    bool active = false;
    bool kill = false;  // else: the disk is full
    std::string file;
    std::string operation;
    long nth = 0;
};

fault read_fault() {
    fault f;
    const char* spec = std::getenv("SHAPED_FAULT");
    if (!spec || !*spec) return f;
    const std::string text = spec;
    const auto a = text.find(':'), b = text.find(':', a + 1), c = text.find(':', b + 1);
    if (a == std::string::npos || b == std::string::npos || c == std::string::npos) {
        std::fprintf(stderr, "fault_injection: SHAPED_FAULT=%s is not ACTION:FILE:OPERATION:N\n", spec);
        std::abort();
    }
    f.active = true;
    f.kill = text.substr(0, a) == "kill";
    f.file = text.substr(a + 1, b - a - 1);
    f.operation = text.substr(b + 1, c - b - 1);
    f.nth = std::strtol(text.c_str() + c + 1, nullptr, 10);
    return f;
}

std::mutex guard;
const fault& the_fault() {
    static const fault f = read_fault();
    return f;
}
std::unordered_set<FILE*>& watched() {
    static std::unordered_set<FILE*> files;
    return files;
}
long seen = 0;

// Whether this operation is the one to fail; counts it when it matches.
bool strikes(const char* operation, bool on_watched_file) {
    const fault& f = the_fault();
    if (!f.active || !on_watched_file || f.operation != operation) return false;
    std::lock_guard lock(guard);
    return ++seen == f.nth;
}

bool names_watched(const char* path) { return path && std::strstr(path, the_fault().file.c_str()); }
bool is_watched(FILE* file) {
    std::lock_guard lock(guard);
    return watched().count(file) > 0;
}

// The fault, as the machine would deliver it: killed at once, or the call failing with ENOSPC.
bool fail_now() {
    if (the_fault().kill) std::raise(SIGKILL);
    errno = ENOSPC;
    return true;
}

template <class F>
F next(const char* name) {
    return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

}  // namespace

extern "C" {

FILE* fopen(const char* path, const char* mode) {
    static const auto real = next<FILE* (*)(const char*, const char*)>("fopen");
    if (strikes("open", names_watched(path)) && fail_now()) return nullptr;
    FILE* file = real(path, mode);
    if (file && names_watched(path)) {
        std::lock_guard lock(guard);
        watched().insert(file);
    }
    return file;
}

std::size_t fwrite(const void* data, std::size_t size, std::size_t count, FILE* file) {
    static const auto real = next<std::size_t (*)(const void*, std::size_t, std::size_t, FILE*)>("fwrite");
    if (strikes("write", is_watched(file))) {
        // Half the bytes reach the file, as when the process dies or the disk fills in the middle
        // of a write.
        const std::size_t written = count / 2 ? real(data, size, count / 2, file) : 0;
        if (the_fault().kill) {
            static const auto flush = next<int (*)(FILE*)>("fflush");
            flush(file);
        }
        fail_now();
        return written;
    }
    return real(data, size, count, file);
}

int fflush(FILE* file) {
    static const auto real = next<int (*)(FILE*)>("fflush");
    if (file && strikes("flush", is_watched(file)) && fail_now()) return EOF;
    return real(file);
}

int fclose(FILE* file) {
    static const auto real = next<int (*)(FILE*)>("fclose");
    {
        std::lock_guard lock(guard);
        watched().erase(file);
    }
    return real(file);
}

int rename(const char* from, const char* to) {
    static const auto real = next<int (*)(const char*, const char*)>("rename");
    const bool on_watched = names_watched(from);
    if (strikes("rename", on_watched) && fail_now()) return -1;
    const int result = real(from, to);
    if (the_fault().kill && the_fault().operation == "renamed" && on_watched) {
        std::lock_guard lock(guard);
        if (++seen == the_fault().nth) std::raise(SIGKILL);
    }
    return result;
}

}  // extern "C"
