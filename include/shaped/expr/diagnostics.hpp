#pragma once
// The checks of the expression nodes' rules, in the vocabulary of core/diagnostics.hpp. The first
// argument names the operation where several share a check.

#include <shaped/core/diagnostics.hpp>

namespace shaped::diag {

template <class... Shown>
struct matmul_inner_dims : failed {
    static_assert(sizeof...(Shown) == 0,
                  "shaped::matmul: the last dim of lhs does not meet the second-to-last dim of rhs");
};

template <class... Shown>
struct matmul_batch_dims : failed {
    static_assert(sizeof...(Shown) == 0,
                  "shaped::matmul: the batch dims of lhs and rhs do not meet");
};

template <class... Shown>
struct matmul_rank : failed {
    static_assert(sizeof...(Shown) == 0,
                  "shaped::matmul: each operand needs at least two dims");
};

template <class... Shown>
struct attention_rank : failed {
    static_assert(sizeof...(Shown) == 0,
                  "shaped::causal_attention: q, k and v each need at least two dims");
};

template <class... Shown>
struct attention_dims : failed {
    static_assert(sizeof...(Shown) == 0,
                  "shaped::causal_attention: q's last dim must meet k's, k's second-to-last v's, and the batch dims "
                  "of q, k and v must meet");
};

template <class... Shown>
struct broadcast_dims : failed {
    static_assert(sizeof...(Shown) == 0,
                  "shaped::broadcast: operands' aligned dims differ in name or extent");
};

// The input's dims, then the weight's or the bias's.
template <class... Shown>
struct layer_norm_parameter : failed {
    static_assert(sizeof...(Shown) == 0,
                  "shaped::layer_norm: weight and bias must be (C), C the input's last dim");
};

template <class... Shown>
struct masked_fill_mask : failed {
    static_assert(sizeof...(Shown) == 0,
                  "shaped::masked_fill: the mask's dims do not broadcast to the tensor's dims");
};

template <class... Shown>
struct where_dims : failed {
    static_assert(sizeof...(Shown) == 0,
                  "shaped::where: condition and values do not broadcast together");
};

template <class... Shown>
struct rename_collision : failed {
    static_assert(sizeof...(Shown) == 0,
                  "shaped::rename: the new name is already a dim of the tensor");
};

template <class... Shown>
struct rename_extent : failed {
    static_assert(sizeof...(Shown) == 0,
                  "shaped::rename: the new dim's extent differs from the renamed dim's");
};

template <class... Shown>
struct not_a_permutation : failed {
    static_assert(sizeof...(Shown) == 0,
                  "shaped::permute: the axes must name each dim exactly once");
};

}  // namespace shaped::diag
