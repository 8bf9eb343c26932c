#pragma once
// A dim is a name plus an extent that is either static (dim<"C", 6>) or dynamic (dim<"T">, its
// extent a run-time value carried by an object of the dim type: T{5}).
//
// dim<"C", 6> names the type basic_dim<dim_name<'C'>, 6>: the name is kept as a pack of chars
// because that is how both compilers print it in a diagnostic (clang would print the string
// itself as {{67, 0}}).

#include <shaped/core/fixed_string.hpp>

#include <concepts>
#include <cstddef>
#include <string_view>
#include <type_traits>
#include <utility>

namespace shaped {

template <char... Chars>
struct dim_name {
    static constexpr fixed_string<sizeof...(Chars) + 1> value{{Chars..., '\0'}};
};

namespace detail {
template <fixed_string Str, std::size_t... I>
auto name_of(std::index_sequence<I...>) -> dim_name<Str.chars[I]...>;
}  // namespace detail

template <fixed_string Str>
using dim_name_of = decltype(detail::name_of<Str>(std::make_index_sequence<Str.length>{}));

template <class Name, std::size_t... Extent>
struct basic_dim;

// Dynamic extent: the object carries it.
template <char... Chars>
struct basic_dim<dim_name<Chars...>> {
    static constexpr auto name = shaped::dim_name<Chars...>::value;
    static constexpr bool is_static = false;

    std::size_t value;

    constexpr explicit basic_dim(std::size_t extent) : value(extent) {}
    constexpr std::size_t size() const { return value; }
};

// Static extent: the type carries it, objects are empty.
template <char... Chars, std::size_t Extent>
struct basic_dim<dim_name<Chars...>, Extent> {
    static constexpr auto name = shaped::dim_name<Chars...>::value;
    static constexpr bool is_static = true;
    static constexpr std::size_t extent = Extent;

    constexpr basic_dim() = default;
    constexpr std::size_t size() const { return Extent; }
};

template <fixed_string Name, std::size_t... Extent>
using dim = basic_dim<dim_name_of<Name>, Extent...>;

namespace detail {
template <class D>
struct is_dim : std::false_type {};
template <class Name, std::size_t... E>
struct is_dim<basic_dim<Name, E...>> : std::true_type {};
}  // namespace detail

template <class D>
concept Dim = detail::is_dim<D>::value;

template <class D>
concept StaticDim = Dim<D> && D::is_static;

template <class D>
concept DynamicDim = Dim<D> && !D::is_static;

template <Dim A, Dim B>
inline constexpr bool same_name = A::name.view() == B::name.view();

// Whether D's extent is statically known to be E.
template <Dim D, std::size_t E>
inline constexpr bool has_static_extent = [] {
    if constexpr (D::is_static) return D::extent == E;
    else return false;
}();

// Whether the extents of A and B are both static and differ.
template <Dim A, Dim B>
inline constexpr bool extents_differ = [] {
    if constexpr (A::is_static && B::is_static) return A::extent != B::extent;
    else return false;
}();

// Two dims can meet (as a product's inner dims, in a broadcast, an assignment) when their names
// agree and their extents do not provably differ; a dynamic extent is checked when it is known,
// at run time.
template <Dim A, Dim B>
inline constexpr bool can_meet = same_name<A, B> && !extents_differ<A, B>;

// The dim that results where A and B meet: static wherever either one is.
template <Dim A, Dim B>
using met_dim = std::conditional_t<A::is_static, A, B>;

namespace detail {
template <Dim D, fixed_string Name>
consteval auto renamed_of() {
    if constexpr (D::is_static) return std::type_identity<dim<Name, D::extent>>{};
    else return std::type_identity<dim<Name>>{};
}
}  // namespace detail

// D's extent under another name.
template <Dim D, fixed_string Name>
using renamed_dim = typename decltype(detail::renamed_of<D, Name>())::type;

// A dim of the same name with a dynamic extent.
template <Dim D>
using dynamic_of = dim<D::name>;

}  // namespace shaped
