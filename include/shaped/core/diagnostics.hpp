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
// An operation's check is the return type of an overload that is only declared, so the compiler
// instantiates it at the caller's line. Where nothing has a return type to carry it (a
// constructor, a class), the rule's condition itself is asserted in place, a variable template
// of the offending dims, which both compilers print.
//
// A rule's words are a macro, SHAPED_RULE_<RULE>, since C++20's static_assert takes only a
// literal: the static check says "shaped::<operation>: " SHAPED_RULE_<RULE>, and the run-time one
// (core/shape_error.hpp's throw_rule) says the same words, then the extents it found.
//
// Here are the placeholder a failed operation yields, and the rules of this layer's own dim
// lookup and extents; each layer above keeps its rules in the diagnostics.hpp of its folder, in
// this namespace.

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
#define SHAPED_RULE_DIM_NOT_FOUND "the tensor has no dim of that name"
template <class... Shown>
struct dim_not_found : failed {
    static_assert(sizeof...(Shown) == 0, "shaped: " SHAPED_RULE_DIM_NOT_FOUND);
};

#define SHAPED_RULE_AMBIGUOUS_DIM "the dim name appears more than once in the tensor; name it by position"
template <class... Shown>
struct ambiguous_dim : failed {
    static_assert(sizeof...(Shown) == 0, "shaped: " SHAPED_RULE_AMBIGUOUS_DIM);
};

#define SHAPED_RULE_AXIS_OUT_OF_RANGE "axis out of range for the tensor's rank"
template <class... Shown>
struct axis_out_of_range : failed {
    static_assert(sizeof...(Shown) == 0, "shaped: " SHAPED_RULE_AXIS_OUT_OF_RANGE);
};

// The extents of a value's dynamic dims are given as values of those dims, in order
// (core/shape.hpp): the function called, the wanted dims, then the arguments given.
#define SHAPED_RULE_DYNAMIC_EXTENTS "give one extent per dynamic dim, as values of those dims, in order"
template <class... Shown>
struct dynamic_extents : failed {
    static_assert(sizeof...(Shown) == 0, "shaped: " SHAPED_RULE_DYNAMIC_EXTENTS);
};

// A value's extents meet the dims its type declares: the declared dims, then the given ones.
#define SHAPED_RULE_DECLARED_DIMS "the dims given do not meet the dims declared"

// A value's element count fits in memory (core/extents.hpp).
#define SHAPED_RULE_EXTENTS_OVERFLOW "the extents' element count does not fit in memory"

}  // namespace shaped::diag
