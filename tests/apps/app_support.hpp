#pragma once
// Running an executable as a user runs it, for the apps tests: its exit status and both streams.

#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <sys/wait.h>

namespace apps_support {

namespace fs = std::filesystem;

struct result {
    int status = -1;
    std::string out;  // stdout
    std::string err;  // stderr
};

// Runs `program` with `args` (a shell-quoted string), capturing both streams; stderr goes
// through a file in `scratch`.
inline result run_program(const std::string& program, const std::string& args, const fs::path& scratch) {
    const fs::path err_file = scratch / "stderr.txt";
    const std::string command = program + " " + args + " 2>" + err_file.string();
    result r;
    FILE* pipe = popen(command.c_str(), "r");
    REQUIRE(pipe != nullptr);
    char buffer[4096];
    for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) r.out.append(buffer, n);
    const int raw = pclose(pipe);
    r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    std::ifstream err(err_file);
    r.err.assign(std::istreambuf_iterator<char>(err), std::istreambuf_iterator<char>());
    return r;
}

// A folder of its own under the system's temporary directory, removed with everything in it.
struct scratch_dir {
    fs::path path = fs::temp_directory_path() / ("shaped_apps_test_" + std::to_string(std::random_device{}()));
    scratch_dir() { fs::create_directories(path); }
    ~scratch_dir() { fs::remove_all(path); }
};

inline std::size_t lines_of(const std::string& text) {
    std::size_t n = 0;
    for (char c : text) n += c == '\n';
    return n;
}

}  // namespace apps_support
