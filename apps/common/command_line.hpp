#pragma once
// How shaped's executables read their command lines. A tool declares its flags once, in a table:
// each flag's name, its value's name, what it is for, and a typed target that knows its range and
// its default. Parsing and the -h text both come from that table, so they cannot disagree.
//
//   options o;
//   const shaped_apps::command_line line{"shaped-run", {
//       {"CHECKPOINT", "", "the model", shaped_apps::file_or_directory(o.checkpoint)},
//       {"-n", "STEPS", "most tokens to generate", shaped_apps::whole(o.steps, 1)},
//       {"--ids", "", "print ids", shaped_apps::on(o.print_ids)}}};
//   const shaped_apps::given_flags given = line.parse(argc, argv);  // -h prints the usage, exits 0
//
// The rules, the same in both tools:
// - a whole number is digits only: "-1", "-0", "+1", " 1" and one past 2^64 - 1 are refused;
// - a number is finite (no nan, no inf), in strtod's spelling ("1e-3", "-0.5"), within its range;
// - a flag's value is the argument after it, whatever it looks like ("-n -1" gives -n "-1");
// - a flag given twice is refused: a repeated flag is more often a mistake than a wish;
// - a path is checked as it is read: it exists, is of the kind the flag takes (a regular file --
//   not a directory, a FIFO or a device -- or a directory), and can be read;
// - what is wrong is a usage_error, one line naming the flag; the tool prints it, then
//   "(TOOL -h for the flags)", and exits with status 1 having written nothing.
// A tool's standard output that cannot be written is an error too (stop_on_output_error), exit 1.

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <concepts>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace shaped_apps {

namespace fs = std::filesystem;

// A command line that cannot run: the tool prints the message and a pointer to -h, exit status 1.
struct usage_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// `flag takes what, not "given" (why)` -- a positional's: `TEXT must be what, ...`. The one form of
// every value refused.
inline usage_error refused(std::string_view flag, std::string_view what, std::string_view given, std::string_view why = {}) {
    std::string message(flag);
    message += flag.starts_with('-') ? " takes " : " must be ";
    message += std::string(what) + ", not \"" + std::string(given) + "\"";
    if (!why.empty()) message += " (" + std::string(why) + ")";
    return usage_error(message);
}

// `flag has no effect why`: a flag given where it would change nothing is refused, not ignored.
inline usage_error no_effect(std::string_view flag, std::string_view why) {
    return usage_error(std::string(flag) + " has no effect " + std::string(why));
}

// ---- values: what a flag takes, in words, and how it is read -----------------------------------

// What a flag's value is: its kind in words ("a whole number >= 1", shown by -h and in the
// messages), its default as -h shows it, and how it is read (parsed, checked, stored; else a
// usage_error). A switch takes no value.
struct value {
    std::string kind;
    std::string fallback;
    std::function<void(std::string_view flag, const std::string& text)> read;
    bool is_switch = false;
};

// A number as the messages show it: the shortest spelling that reads back as it ("0.001").
inline std::string spelled(double x) {
    char buffer[32];
    const auto end = std::to_chars(buffer, buffer + sizeof buffer, x).ptr;
    return std::string(buffer, end);
}

namespace detail {

template <std::unsigned_integral N>
N read_whole(std::string_view flag, std::string_view kind, const std::string& text, N min) {
    const bool digits = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits) throw refused(flag, kind, text);
    N n{};
    if (std::from_chars(text.data(), text.data() + text.size(), n).ec == std::errc::result_out_of_range)
        throw refused(flag, kind, text, "more than " + std::to_string(std::numeric_limits<N>::max()));
    if (n < min) throw refused(flag, kind, text);
    return n;
}

}  // namespace detail

// A whole number >= min.
template <std::unsigned_integral N>
value whole(N& to, std::type_identity_t<N> min) {
    std::string kind = "a whole number >= " + std::to_string(min);
    return {kind, std::to_string(to), [&to, min, kind](std::string_view flag, const std::string& text) {
                to = detail::read_whole(flag, kind, text, min);
            }};
}
// The same, for a flag whose default is another's value or none: `fallback` says what it is.
template <std::unsigned_integral N>
value whole(std::optional<N>& to, std::type_identity_t<N> min, std::string fallback) {
    std::string kind = "a whole number >= " + std::to_string(min);
    return {kind, std::move(fallback), [&to, min, kind](std::string_view flag, const std::string& text) {
                to = detail::read_whole(flag, kind, text, min);
            }};
}

// One end of a number's range: `at` with its comparison (">", ">=", "<", "<=").
struct bound {
    std::string_view op;
    double at;
    bool holds(double x) const { return op == ">" ? x > at : op == ">=" ? x >= at : op == "<" ? x < at : x <= at; }
    std::string words() const { return std::string(op) + " " + spelled(at); }
};
inline bound greater_than(double at) { return {">", at}; }
inline bound at_least(double at) { return {">=", at}; }
inline bound less_than(double at) { return {"<", at}; }
inline bound at_most(double at) { return {"<=", at}; }

// "a finite number >= 0 and < 1": a number's kind, from its bounds.
inline std::string number_kind(std::optional<bound> low, std::optional<bound> high) {
    std::string kind = "a finite number";
    if (low) kind += " " + low->words();
    if (high) kind += (low ? " and " : " ") + high->words();
    return kind;
}

namespace detail {

inline double read_real(std::string_view flag, std::string_view kind, const std::string& text, std::optional<bound> low,
                        std::optional<bound> high) {
    double x = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), x);
    if (text.empty() || end != text.data() + text.size()) throw refused(flag, kind, text);
    if (error == std::errc::result_out_of_range) throw refused(flag, kind, text, "out of a double's range");
    if (error != std::errc() || !std::isfinite(x) || (low && !low->holds(x)) || (high && !high->holds(x)))
        throw refused(flag, kind, text);
    return x;
}

}  // namespace detail

// A finite number within its bounds, if any.
inline value real(double& to, std::optional<bound> low = {}, std::optional<bound> high = {}) {
    std::string kind = number_kind(low, high);
    return {kind, spelled(to), [&to, low, high, kind](std::string_view flag, const std::string& text) {
                to = detail::read_real(flag, kind, text, low, high);
            }};
}
inline value real(std::optional<double>& to, std::optional<bound> low, std::optional<bound> high, std::string fallback) {
    std::string kind = number_kind(low, high);
    return {kind, std::move(fallback), [&to, low, high, kind](std::string_view flag, const std::string& text) {
                to = detail::read_real(flag, kind, text, low, high);
            }};
}

// Any text.
inline value text(std::string& to) {
    return {"", to, [&to](std::string_view, const std::string& text) { to = text; }};
}
inline value text(std::optional<std::string>& to) {
    return {"", "", [&to](std::string_view, const std::string& text) { to = text; }};
}

// One of `names`.
inline value one_of(std::string& to, std::vector<std::string> names) {
    std::string kind = "one of ";
    for (std::size_t i = 0; i < names.size(); ++i) kind += (i ? ", " : "") + names[i];
    return {kind, to, [&to, names, kind](std::string_view flag, const std::string& text) {
                if (std::find(names.begin(), names.end(), text) == names.end()) throw refused(flag, kind, text);
                to = text;
            }};
}

// A flag without a value: given, it is on.
inline value on(bool& to) {
    return {"", "", [&to](std::string_view, const std::string&) { to = true; }, true};
}

// ---- paths --------------------------------------------------------------------------------------

enum class path_kind { file, directory, file_or_directory };

// Why `path` is not a readable `kind`; empty when it is one. Symbolic links are followed.
inline std::string unreadable(const fs::path& path, path_kind kind) {
    std::error_code error;
    const fs::file_type type = fs::status(path, error).type();
    if (type == fs::file_type::not_found) return "no such file or directory";
    if (error) return error.message();
    const bool is_file = type == fs::file_type::regular, is_directory = type == fs::file_type::directory;
    if (!(is_file && kind != path_kind::directory) && !(is_directory && kind != path_kind::file)) {
        switch (type) {
            case fs::file_type::regular: return "a regular file";
            case fs::file_type::directory: return "a directory";
            case fs::file_type::fifo: return "a FIFO";
            case fs::file_type::character: return "a character device";
            case fs::file_type::block: return "a block device";
            case fs::file_type::socket: return "a socket";
            default: return "not a regular file";
        }
    }
    // A directory is read by listing it and opening what it holds.
    if (access(path.c_str(), is_directory ? R_OK | X_OK : R_OK) != 0) return std::string("cannot be read: ") + std::strerror(errno);
    return {};
}

namespace detail {

inline value path_value(std::string kind, std::string fallback, path_kind want, std::function<void(fs::path)> store) {
    return {kind, std::move(fallback), [kind, want, store](std::string_view flag, const std::string& text) {
                if (const std::string why = unreadable(text, want); !why.empty()) throw refused(flag, kind, text, why);
                store(text);
            }};
}

}  // namespace detail

// A regular file that can be read (not a directory, a FIFO or a device).
inline value file(fs::path& to) {
    return detail::path_value("a readable regular file", "", path_kind::file, [&to](fs::path p) { to = std::move(p); });
}
inline value file(std::optional<fs::path>& to, std::string fallback) {
    return detail::path_value("a readable regular file", std::move(fallback), path_kind::file,
                              [&to](fs::path p) { to = std::move(p); });
}
// A regular file or a directory that can be read.
inline value file_or_directory(fs::path& to) {
    return detail::path_value("a readable file or directory", "", path_kind::file_or_directory,
                              [&to](fs::path p) { to = std::move(p); });
}

// A directory holding one of `sets` of readable regular files (the same data under other names).
inline value directory_holding(std::optional<fs::path>& to, std::vector<std::vector<std::string>> sets) {
    std::string kind = "a directory holding ";
    for (std::size_t s = 0; s < sets.size(); ++s) {
        kind += s == 0 ? "" : ", or ";
        for (std::size_t i = 0; i < sets[s].size(); ++i) kind += (i == 0 ? "" : i + 1 == sets[s].size() ? " and " : ", ") + sets[s][i];
    }
    return {kind, "", [&to, sets, kind](std::string_view flag, const std::string& text) {
                if (const std::string why = unreadable(text, path_kind::directory); !why.empty()) throw refused(flag, kind, text, why);
                // What is wrong with the set nearest to complete, if none is.
                std::string why;
                std::size_t most_found = 0;
                for (const auto& set : sets) {
                    std::size_t found = 0;
                    std::string first_problem;
                    for (const std::string& name : set) {
                        const std::string problem = unreadable(fs::path(text) / name, path_kind::file);
                        if (problem.empty()) ++found;
                        else if (first_problem.empty()) first_problem = "its " + name + ": " + problem;
                    }
                    if (first_problem.empty()) {
                        to = text;
                        return;
                    }
                    if (why.empty() || found > most_found) why = first_problem, most_found = found;
                }
                throw refused(flag, kind, text, why);
            }};
}

// A directory to write in: made if it is missing; if it is there, a directory that can be written.
inline value out_directory(fs::path& to) {
    std::string kind = "a directory (made if missing)";
    return {kind, "", [&to, kind](std::string_view flag, const std::string& text) {
                std::error_code error;
                const fs::file_type type = fs::status(text, error).type();
                if (type != fs::file_type::not_found) {
                    if (const std::string why = unreadable(text, path_kind::directory); !why.empty()) throw refused(flag, kind, text, why);
                    if (access(text.c_str(), W_OK | X_OK) != 0)
                        throw refused(flag, kind, text, std::string("cannot be written: ") + std::strerror(errno));
                }
                to = text;
            }};
}

// ---- standard output ----------------------------------------------------------------------------

// Standard output that cannot be written (a full disk, /dev/full): the tool fails, exit status 1.
struct output_error : std::runtime_error {
    explicit output_error(int error)
        : std::runtime_error(std::string("cannot write to standard output") + (error ? std::string(": ") + std::strerror(error) : "")) {}
};

// From here on, a write to std::cout that fails throws where it fails (std::ios_base::failure), so
// a tool stops there rather than running on to its end; message_of says it as an output_error.
// std::cout is synced with stdio: its writes go through stdout's buffer, and fail when it does.
inline void stop_on_output_error() { std::cout.exceptions(std::ios::badbit); }

// Everything written to standard output flushed, else an error: call it before returning 0, and
// before a last word on stderr.
inline void finish_output() {
    errno = 0;
    std::cout.flush();
    if (std::fflush(stdout) != 0 || std::ferror(stdout)) throw output_error(errno);
}

// An error's message as the one line a tool prints: a failed write to standard output says why.
// Call it before writing to std::cerr, and at any error: std::cerr flushes std::cout before it
// writes, and so does exit, where a failure must now pass quietly.
inline std::string message_of(const std::exception& error) {
    const int cause = errno;  // the failed write's, while nothing since has changed it
    std::cout.exceptions(std::ios::goodbit);
    std::string message = dynamic_cast<const std::ios_base::failure*>(&error) ? output_error(cause).what() : error.what();
    std::replace(message.begin(), message.end(), '\n', ' ');
    return message;
}

// ---- the table ----------------------------------------------------------------------------------

// One row of a tool's table. A name without a leading '-' is a positional argument's placeholder
// ("TEXT"), which is required; a flag can be too.
struct flag {
    std::string_view name;        // "-n", "--steps", or a placeholder: "CHECKPOINT"
    std::string_view value_name;  // "STEPS"; empty for a switch and a positional
    std::string_view help;        // what it is for; its kind and default are added from `to`
    value to;
    bool required = false;
    bool positional() const { return !name.starts_with('-'); }
};
inline constexpr bool required = true;

// The flags given, with the text each was given (a switch's is empty).
class given_flags {
public:
    bool contains(std::string_view name) const { return texts_.find(name) != texts_.end(); }
    const std::string& text(std::string_view name) const { return texts_.find(name)->second; }
    void add(std::string_view name, std::string text) { texts_.emplace(std::string(name), std::move(text)); }

private:
    std::map<std::string, std::string, std::less<>> texts_;
};

// `flag`'s value refused by a rule between flags (`what` says it: "a whole number < --steps
// (30)"): as the user gave it, or as its default, when they did not.
[[noreturn]] inline void refuse(const given_flags& given, std::string_view flag, std::string_view what, std::string_view default_text) {
    if (given.contains(flag)) throw refused(flag, what, given.text(flag));
    throw refused(flag, what, default_text, "its default");
}

class command_line {
public:
    command_line(std::string_view program, std::vector<flag> flags) : program_(program), flags_(std::move(flags)) {}

    // Reads argv into the flags' targets, in order, and says which were given; a usage_error for
    // anything wrong. -h or --help prints the usage and exits (0, or 1 if it cannot be written).
    given_flags parse(int argc, char** argv) const {
        given_flags given;
        std::vector<const flag*> positionals;
        for (const flag& f : flags_)
            if (f.positional()) positionals.push_back(&f);
        std::size_t next_positional = 0;
        for (int i = 1; i < argc; ++i) {
            const std::string arg = argv[i];
            if (arg == "-h" || arg == "--help") {
                std::cout << usage();
                finish_output();
                std::exit(0);
            }
            if (arg.size() < 2 || !arg.starts_with('-')) {
                if (positionals.empty()) throw usage_error("unexpected argument \"" + arg + "\"");
                // One past the last is that one again.
                const flag& f = *positionals[std::min(next_positional++, positionals.size() - 1)];
                if (given.contains(f.name))
                    throw usage_error(std::string(f.name) + " is given twice (\"" + given.text(f.name) + "\", then \"" + arg + "\")");
                f.to.read(f.name, arg);
                given.add(f.name, arg);
                continue;
            }
            const auto named = std::find_if(flags_.begin(), flags_.end(), [&](const flag& f) { return !f.positional() && f.name == arg; });
            if (named == flags_.end()) throw usage_error("unknown flag \"" + arg + "\"");
            const flag& f = *named;
            if (given.contains(f.name) && f.to.is_switch) throw usage_error(std::string(f.name) + " is given twice");
            if (f.to.is_switch) {
                f.to.read(f.name, "");
                given.add(f.name, "");
                continue;
            }
            if (i + 1 >= argc)
                throw usage_error(std::string(f.name) + " needs a value" + (f.to.kind.empty() ? "" : ": " + f.to.kind));
            const std::string text = argv[++i];
            if (given.contains(f.name))
                throw usage_error(std::string(f.name) + " is given twice (\"" + given.text(f.name) + "\", then \"" + text + "\")");
            f.to.read(f.name, text);
            given.add(f.name, text);
        }
        for (const flag& f : flags_)
            if ((f.positional() || f.required) && !given.contains(f.name))
                throw usage_error("no " + std::string(f.name) + (f.value_name.empty() ? "" : " " + std::string(f.value_name)) + " given");
        return given;
    }

    // The -h text: the synopsis, then a line for each flag -- what it is for, its kind, its default.
    std::string usage() const {
        constexpr std::size_t width = 100;
        std::string out = "usage: " + program_;
        std::size_t column = out.size();
        const std::size_t indent = column + 1;
        for (const flag& f : flags_) {
            std::string word(f.name);
            if (!f.value_name.empty()) word += " " + std::string(f.value_name);
            if (!f.positional() && !f.required) word = "[" + word + "]";
            if (column + 1 + word.size() > width) {
                out += "\n" + std::string(indent - 1, ' ');
                column = indent - 1;
            }
            out += " " + word;
            column += 1 + word.size();
        }
        out += "\n";
        std::size_t left = 0;
        for (const flag& f : flags_) left = std::max(left, label(f).size());
        left += 4;
        for (const flag& f : flags_) {
            std::string about(f.help);
            if (!f.to.kind.empty()) about += "; " + f.to.kind;
            if (!f.to.fallback.empty()) about += " (default: " + f.to.fallback + ")";
            std::string line = "  " + label(f);
            line.resize(left, ' ');
            out += wrapped(line, about, left, width);
        }
        return out;
    }

private:
    static std::string label(const flag& f) {
        return std::string(f.name) + (f.value_name.empty() ? "" : " " + std::string(f.value_name));
    }

    // `text` word by word after `line`, continued on lines indented by `indent`.
    static std::string wrapped(std::string line, const std::string& text, std::size_t indent, std::size_t width) {
        std::string out;
        std::istringstream words(text);
        bool first = true;
        for (std::string word; words >> word; first = false) {
            if (!first && line.size() + 1 + word.size() > width) {
                out += line + "\n";
                line = std::string(indent, ' ') + word;
            } else {
                line += (first ? "" : " ") + word;
            }
        }
        return out + line + "\n";
    }

    std::string program_;
    std::vector<flag> flags_;
};

}  // namespace shaped_apps
