#pragma once
// The checks of the expression nodes' rules, in the vocabulary of core/diagnostics.hpp: each
// rule's words, then its check. The first argument names the operation where several share a
// check.

#include <shaped/core/diagnostics.hpp>

namespace shaped::diag {

#define SHAPED_RULE_MATMUL_INNER_DIMS "the last dim of lhs does not meet the second-to-last dim of rhs"
template <class... Shown>
struct matmul_inner_dims : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::matmul: " SHAPED_RULE_MATMUL_INNER_DIMS);
};

#define SHAPED_RULE_MATMUL_BATCH_DIMS "the batch dims of lhs and rhs do not meet"
template <class... Shown>
struct matmul_batch_dims : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::matmul: " SHAPED_RULE_MATMUL_BATCH_DIMS);
};

#define SHAPED_RULE_MATMUL_RANK "each operand needs at least two dims"
template <class... Shown>
struct matmul_rank : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::matmul: " SHAPED_RULE_MATMUL_RANK);
};

#define SHAPED_RULE_ATTENTION_RANK "q, k and v each need at least two dims"
template <class... Shown>
struct attention_rank : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::causal_attention: " SHAPED_RULE_ATTENTION_RANK);
};

#define SHAPED_RULE_ATTENTION_DIMS \
    "q's last dim must meet k's, k's second-to-last v's, and the batch dims of q, k and v must meet"
template <class... Shown>
struct attention_dims : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::causal_attention: " SHAPED_RULE_ATTENTION_DIMS);
};

// Asserted in shaped::window's class (expr/window.hpp), with the size in the condition.
#define SHAPED_RULE_WINDOW_SIZE "a sliding window holds at least one position (W > 0)"

#define SHAPED_RULE_BROADCAST_DIMS "operands' aligned dims differ in name or extent"
template <class... Shown>
struct broadcast_dims : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::broadcast: " SHAPED_RULE_BROADCAST_DIMS);
};

// The input's dims, then the weight's or the bias's.
#define SHAPED_RULE_LAYER_NORM_PARAMETER "weight and bias must be (C), C the input's last dim"
template <class... Shown>
struct layer_norm_parameter : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::layer_norm: " SHAPED_RULE_LAYER_NORM_PARAMETER);
};

// The input's dims, then the weight's.
#define SHAPED_RULE_RMS_NORM_WEIGHT "weight must be (C), C the input's last dim"
template <class... Shown>
struct rms_norm_weight : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::rms_norm: " SHAPED_RULE_RMS_NORM_WEIGHT);
};

#define SHAPED_RULE_MASKED_FILL_MASK "the mask's dims do not broadcast to the tensor's dims"
template <class... Shown>
struct masked_fill_mask : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::masked_fill: " SHAPED_RULE_MASKED_FILL_MASK);
};

#define SHAPED_RULE_WHERE_DIMS "condition and values do not broadcast together"
template <class... Shown>
struct where_dims : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::where: " SHAPED_RULE_WHERE_DIMS);
};

#define SHAPED_RULE_RENAME_COLLISION "the new name is already a dim of the tensor"
template <class... Shown>
struct rename_collision : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::rename: " SHAPED_RULE_RENAME_COLLISION);
};

#define SHAPED_RULE_RENAME_EXTENT "the new dim's extent differs from the renamed dim's"
template <class... Shown>
struct rename_extent : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::rename: " SHAPED_RULE_RENAME_EXTENT);
};

#define SHAPED_RULE_NOT_A_PERMUTATION "the axes must name each dim exactly once"
template <class... Shown>
struct not_a_permutation : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::permute: " SHAPED_RULE_NOT_A_PERMUTATION);
};

}  // namespace shaped::diag
