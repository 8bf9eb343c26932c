#pragma once
// Compile-time diagnostics: the vocabulary every layer's rules are written in. A static rule that
// fails instantiates its check, a struct template whose static_assert names the operation; the
// compiler then prints the check's name with the offending dims as template arguments. Names are
// spelled as packs of chars because clang prints those as 'H' where it would print a string
// argument as {{72, 0}}.
//
//   error: static assertion failed: shaped::<operation>: <the rule, in words>
//   In instantiation of 'struct shaped::diag::<rule><
//       shaped::diag::dim<shaped::diag::name<'H'>, 16>, shaped::diag::dim<shaped::diag::name<'T'>, 4> >'
//
// Here are the dims as shown, the placeholder a failed operation returns, and the rules of this
// layer's own dim lookup; each layer above keeps its rules in the diagnostics.hpp of its folder,
// in this namespace.

#include <shaped/core/dims.hpp>

#include <cstddef>
#include <type_traits>
#include <utility>

namespace shaped::diag {

template <char... Chars>
struct name {};

// A dim as a diagnostic shows it; a dynamic dim shows no extent.
template <class Name, std::size_t... Extent>
struct dim {};

// An axis as the user wrote it, and the rank it was checked against.
template <int Axis>
struct axis {};
template <std::size_t Rank>
struct rank {};

template <class... Shown>
struct dims {};

namespace detail {
template <auto Str, std::size_t... I>
auto chars_of(std::index_sequence<I...>) -> name<Str.chars[I]...>;

template <class D>
consteval auto show_one() {
    using N = decltype(chars_of<D::name>(std::make_index_sequence<D::name.length>{}));
    if constexpr (D::is_static) return std::type_identity<dim<N, D::extent>>{};
    else return std::type_identity<dim<N>>{};
}

template <class List>
struct show_list;
template <class... Ds>
struct show_list<shaped::dims<Ds...>> {
    using type = dims<typename decltype(show_one<Ds>())::type...>;
};
}  // namespace detail

template <Dim D>
using show = typename decltype(detail::show_one<D>())::type;

template <class List>
using show_dims = typename detail::show_list<List>::type;

// One check per rule. An operation instantiates a check only when its rule fails (always with
// the offending dims as arguments, so the assertion fires); a passing program pays nothing.
// The rules of finding a dim by name or by position (core/dims.hpp); the first argument names
// the operation that looked.
template <class... Shown>
struct dim_not_found {
    static_assert(sizeof...(Shown) == 0,
                  "shaped: the tensor has no dim of that name");
};

template <class... Shown>
struct ambiguous_dim {
    static_assert(sizeof...(Shown) == 0,
                  "shaped: the dim name appears more than once in the tensor; name it by position");
};

template <class... Shown>
struct axis_out_of_range {
    static_assert(sizeof...(Shown) == 0,
                  "shaped: axis out of range for the tensor's rank");
};

// The dynamic dims a list declares and the extents given for them (core/shape.hpp's
// make_extents), shown in the failed condition of its static_assert.
template <class Wanted, class Given>
inline constexpr bool dynamic_extents_agree = std::is_same_v<Wanted, Given>;

// What an operation returns after its check failed: it converts to anything, so that the one
// diagnostic that matters is not followed by a cascade of unrelated errors.
struct failed {
    template <class Any>
    operator Any() const;
};

}  // namespace shaped::diag
