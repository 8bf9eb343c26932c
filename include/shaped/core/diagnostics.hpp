#pragma once
// Compile-time diagnostics. A static rule that fails instantiates one of the checks below; the
// compiler then prints the check's name with the offending dims as template arguments, and the
// static_assert's message naming the operation. Names are spelled as packs of chars because
// clang prints those as 'H' where it would print a string argument as {{72, 0}}.
//
//   error: static assertion failed: shaped::matmul: lhs dim does not meet rhs dim
//   In instantiation of 'struct shaped::diag::matmul_inner_dims<
//       shaped::diag::dim<shaped::diag::name<'H'>, 16>, shaped::diag::dim<shaped::diag::name<'T'>, 4> >'

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
template <class... Shown>
struct matmul_inner_dims {
    static_assert(sizeof...(Shown) == 0,
                  "shaped::matmul: the last dim of lhs does not meet the second-to-last dim of rhs");
};

template <class... Shown>
struct matmul_batch_dims {
    static_assert(sizeof...(Shown) == 0,
                  "shaped::matmul: the batch dims of lhs and rhs do not meet");
};

template <class... Shown>
struct matmul_rank {
    static_assert(sizeof...(Shown) == 0,
                  "shaped::matmul: each operand needs at least two dims");
};

template <class... Shown>
struct broadcast_dims {
    static_assert(sizeof...(Shown) == 0,
                  "shaped::broadcast: operands' aligned dims differ in name or extent");
};

template <class... Shown>
struct masked_fill_mask {
    static_assert(sizeof...(Shown) == 0,
                  "shaped::masked_fill: the mask's dims do not broadcast to the tensor's dims");
};

template <class... Shown>
struct where_dims {
    static_assert(sizeof...(Shown) == 0,
                  "shaped::where: condition and values do not broadcast together");
};

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

template <class... Shown>
struct reshape_product {
    static_assert(sizeof...(Shown) == 0,
                  "shaped::reshape: the product of the new extents differs from the old extent");
};

template <class... Shown>
struct reshape_not_adjacent {
    static_assert(sizeof...(Shown) == 0,
                  "shaped::merge: only two adjacent dims, in order, can merge");
};

template <class... Shown>
struct assign_dims {
    static_assert(sizeof...(Shown) == 0,
                  "shaped::Tensor: the assigned expression's dims differ from the tensor's declared dims");
};

template <class... Shown>
struct rename_collision {
    static_assert(sizeof...(Shown) == 0,
                  "shaped::rename: the new name is already a dim of the tensor");
};

template <class... Shown>
struct rename_extent {
    static_assert(sizeof...(Shown) == 0,
                  "shaped::rename: the new dim's extent differs from the renamed dim's");
};

template <class... Shown>
struct concat_dims {
    static_assert(sizeof...(Shown) == 0,
                  "shaped::concat: the operands differ in a dim other than the one joined");
};

template <class... Shown>
struct not_a_permutation {
    static_assert(sizeof...(Shown) == 0,
                  "shaped::permute: the axes must name each dim exactly once");
};

// The dynamic dims a factory wants and the extents it was given, shown in the failed condition
// of the factory's static_assert.
template <class Wanted, class Given>
inline constexpr bool dynamic_extents_agree = std::is_same_v<Wanted, Given>;

template <class... Shown>
struct extents_overflow {
    static_assert(sizeof...(Shown) == 0,
                  "shaped::Tensor: the static extents' element count does not fit in memory");
};

template <class... Shown>
struct index_count {
    static_assert(sizeof...(Shown) == 0,
                  "shaped::Tensor: an element access takes one index per dim");
};

}  // namespace shaped::diag

namespace shaped::diag {

// What an operation returns after its check failed: it converts to anything, so that the one
// diagnostic that matters is not followed by a cascade of unrelated errors.
struct failed {
    template <class Any>
    operator Any() const;
};

}  // namespace shaped::diag

namespace shaped::diag {

// The KV cache and the attention layers (nn/). The first argument names the layer or operation.
template <class... Shown>
struct cache_layout {
    static_assert(sizeof...(Shown) == 0,
                  "shaped::nn::KVCache: a cache's dims are static, (B, S, HS) or (B, NH, S, HS), S the capacity");
};

template <class... Shown>
struct cache_append_dims {
    static_assert(sizeof...(Shown) == 0,
                  "shaped::nn::KVCache::append: the new keys' or values' dims do not meet the cache's "
                  "(batch, heads, head size)");
};

// A layer's input (nn/): the first argument names the layer, then its channel dim and the input's dims.
template <class... Shown>
struct layer_input {
    static_assert(sizeof...(Shown) == 0,
                  "shaped::nn: the input must be (..., C), C the layer's channel dim; attention and Block take (B, T, C)");
};

template <class... Shown>
struct attention_heads_product {
    static_assert(sizeof...(Shown) == 0,
                  "shaped::nn::MultiHeadAttention: heads x head size must equal the channel dim");
};

template <class... Shown>
struct attention_cache_heads {
    static_assert(sizeof...(Shown) == 0,
                  "shaped::nn::attention: the cache's heads do not meet the layer's; a Head's cache is "
                  "(B, S, HS), a MultiHeadAttention's (B, NH, S, HS)");
};

template <class... Shown>
struct attention_cache_head_size {
    static_assert(sizeof...(Shown) == 0,
                  "shaped::nn::attention: the cache's head size does not meet the layer's");
};

template <class... Shown>
struct attention_cache_batch {
    static_assert(sizeof...(Shown) == 0,
                  "shaped::nn::attention: the cache's batch dim does not meet the input's");
};

}  // namespace shaped::diag
