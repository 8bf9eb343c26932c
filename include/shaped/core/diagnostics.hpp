#pragma once
// Compile-time diagnostics: the vocabulary every layer's rules are written in. A static rule that
// fails instantiates its check, a struct template whose static_assert names the operation; the
// compiler then prints the check's name with the offending dims as template arguments (a dim's
// type spells its name as a pack of chars, core/dim.hpp):
//
//   error: static assertion failed: shaped::<operation>: <the rule, in words>
//   In instantiation of 'struct shaped::diag::<rule><
//       shaped::basic_dim<shaped::dim_name<'H'>, 16>, shaped::basic_dim<shaped::dim_name<'T'>, 4> >'
//
// Here are the placeholder a failed operation yields, and the rules of this layer's own dim
// lookup; each layer above keeps its rules in the diagnostics.hpp of its folder, in this
// namespace.

#include <shaped/core/dims.hpp>

#include <concepts>
#include <cstddef>
#include <type_traits>

namespace shaped {

// What an operation yields after its check failed: the check itself (every check derives from
// failed) or failed. Every operation and operator accepts it and yields failed again (found by
// argument-dependent lookup, as this namespace is the checks' base's), and it converts to
// anything, so that the one diagnostic that matters is not followed by a cascade of errors at the
// operations around it. Its members are declared only: a program holding one never compiles.
struct failed {
    template <class Any>
    operator Any() const;

    failed mT() const;
    template <class... Args>
    failed operator()(Args&&...) const;
    template <class Index>
    failed operator[](Index&&) const;
};

template <class E>
concept Failed = std::derived_from<std::remove_cvref_t<E>, failed>;

template <class... Es>
concept any_failed = (Failed<Es> || ...);

// Printing one (std::cout << failed_expression): the stream, with no second error.
template <class Stream, Failed E>
Stream& operator<<(Stream&, E&&);

}  // namespace shaped

namespace shaped::diag {

// An axis as the user wrote it, and the rank it was checked against.
template <int Axis>
struct axis {};
template <std::size_t Rank>
struct rank {};

// One check per rule. An operation instantiates a check only when its rule fails (always with
// the offending dims as arguments, so the assertion fires); a passing program pays nothing.
// The rules of finding a dim by name or by position (core/dims.hpp); the first argument names
// the operation that looked.
template <class... Shown>
struct dim_not_found : failed {
    static_assert(sizeof...(Shown) == 0,
                  "shaped: the tensor has no dim of that name");
};

template <class... Shown>
struct ambiguous_dim : failed {
    static_assert(sizeof...(Shown) == 0,
                  "shaped: the dim name appears more than once in the tensor; name it by position");
};

template <class... Shown>
struct axis_out_of_range : failed {
    static_assert(sizeof...(Shown) == 0,
                  "shaped: axis out of range for the tensor's rank");
};

// The dynamic dims a list declares and the extents given for them (core/shape.hpp's
// make_extents), shown in the failed condition of its static_assert.
template <class Wanted, class Given>
inline constexpr bool dynamic_extents_agree = std::is_same_v<Wanted, Given>;

}  // namespace shaped::diag
