#pragma once
// What shaped's executables share in reading their command lines: the error for one that cannot
// run (its message, then a pointer to -h; exit status 1), and a flag's number.

#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace shaped_apps {

struct usage_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// The number `text` spells, whole, else a usage_error naming the flag.
template <class Number>
Number parse_number(std::string_view flag, const std::string& text) {
    std::istringstream in(text);
    Number value{};
    if (!(in >> value) || !in.eof()) throw usage_error(std::string(flag) + " takes a number, not \"" + text + "\"");
    return value;
}

}  // namespace shaped_apps
