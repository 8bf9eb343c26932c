#pragma once
// The checks of Tensor's, View's and the reshapes' rules, in the vocabulary of
// core/diagnostics.hpp.

#include <shaped/core/diagnostics.hpp>

namespace shaped::diag {

// The first argument names the reshape, split or merge (its run-time check: reshape.hpp).
#define SHAPED_RULE_RESHAPE_PRODUCT "the product of the new extents differs from the old extent"
template <class... Shown>
struct reshape_product : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::reshape: " SHAPED_RULE_RESHAPE_PRODUCT);
};

#define SHAPED_RULE_RESHAPE_NOT_ADJACENT "only two adjacent dims, in order, can merge"
template <class... Shown>
struct reshape_not_adjacent : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::merge: " SHAPED_RULE_RESHAPE_NOT_ADJACENT);
};

// reshape's old dims (found by name), then the tensor's dims.
#define SHAPED_RULE_RESHAPE_RUN "the dims reshaped must be adjacent dims of the tensor, in its order"
template <class... Shown>
struct reshape_not_a_run : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::reshape: " SHAPED_RULE_RESHAPE_RUN);
};

// reshape's new dims.
#define SHAPED_RULE_RESHAPE_DYNAMIC "at most one new dim may be dynamic, its extent what the product leaves"
template <class... Shown>
struct reshape_dynamic : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::reshape: " SHAPED_RULE_RESHAPE_DYNAMIC);
};

// unsqueeze's new dim, then the tensor's dims.
#define SHAPED_RULE_UNSQUEEZE_EXTENT "the new dim must have the static extent 1"
template <class... Shown>
struct unsqueeze_extent : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::unsqueeze: " SHAPED_RULE_UNSQUEEZE_EXTENT);
};

#define SHAPED_RULE_UNSQUEEZE_COLLISION "the new dim's name is already a dim of the tensor"
template <class... Shown>
struct unsqueeze_collision : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::unsqueeze: " SHAPED_RULE_UNSQUEEZE_COLLISION);
};

// The squeezed dim as the tensor has it, then the tensor's dims. (A dynamic extent is checked
// when it is known: reshape.hpp.)
#define SHAPED_RULE_SQUEEZE_EXTENT "only a dim of extent 1 can be squeezed"
template <class... Shown>
struct squeeze_extent : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::squeeze: " SHAPED_RULE_SQUEEZE_EXTENT);
};

// An assignment to a Tensor or View: the target's dims, then the expression's. (A Tensor's
// constructor asserts the same rule in place: tensor.hpp.)
template <class... Shown>
struct assign_dims : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::assign: " SHAPED_RULE_DECLARED_DIMS);
};

#define SHAPED_RULE_INDEX_COUNT "an element access takes one index per dim"
template <class... Shown>
struct index_count : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::Tensor: " SHAPED_RULE_INDEX_COUNT);
};

// ---- einsum (tensor/einsum.hpp) ----------------------------------------------------------------
// What the checks show: the pattern as its chars, a column of it, an operand by its place, the
// names a term of the pattern spells.
template <char... Chars>
struct pattern {};
template <std::size_t Column>
struct column {};
template <std::size_t Place>
struct operand {};
struct output {};
template <class... Names>
struct names {};

// The pattern, then the column where it stops reading.
#define SHAPED_RULE_EINSUM_PATTERN \
    "the pattern must read as A B, B C -> A C (one or two inputs, ->, the output; names of letters, digits or _ apart by spaces)"
template <class... Shown>
struct einsum_pattern : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::einsum: " SHAPED_RULE_EINSUM_PATTERN);
};

// The pattern, then how many operands were given.
#define SHAPED_RULE_EINSUM_OPERANDS "the pattern has one input per operand"
template <class... Shown>
struct einsum_operands : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::einsum: " SHAPED_RULE_EINSUM_OPERANDS);
};

// The operand (or the output), then the name it repeats.
#define SHAPED_RULE_EINSUM_REPEATED "a term names a dim twice (a trace or a diagonal, which einsum does not take)"
template <class... Shown>
struct einsum_repeated : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::einsum: " SHAPED_RULE_EINSUM_REPEATED);
};

// The operand, the names its input spells, then the operand's dims.
#define SHAPED_RULE_EINSUM_OPERAND_DIMS "an input of the pattern must name its operand's dims, in order"
template <class... Shown>
struct einsum_operand_dims : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::einsum: " SHAPED_RULE_EINSUM_OPERAND_DIMS);
};

// The dim as lhs has it, then as rhs has it.
#define SHAPED_RULE_EINSUM_EXTENT "a name's extent differs between the operands"
template <class... Shown>
struct einsum_extent : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::einsum: " SHAPED_RULE_EINSUM_EXTENT);
};

// The output's name, then the operands' dims.
#define SHAPED_RULE_EINSUM_UNKNOWN_OUTPUT "an output name must name a dim of an input"
template <class... Shown>
struct einsum_unknown_output : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::einsum: " SHAPED_RULE_EINSUM_UNKNOWN_OUTPUT);
};

}  // namespace shaped::diag
