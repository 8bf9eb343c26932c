#pragma once
// A string usable as a template argument: the name of a dim.

#include <algorithm>
#include <cstddef>
#include <string_view>

namespace shaped {

template <std::size_t N>
struct fixed_string {
    char chars[N]{};

    constexpr fixed_string(const char (&s)[N]) { std::copy_n(s, N, chars); }

    constexpr std::string_view view() const { return {chars, N - 1}; }
    static constexpr std::size_t length = N - 1;

    template <std::size_t M>
    constexpr bool operator==(const fixed_string<M>& other) const {
        return view() == other.view();
    }
};

}  // namespace shaped
