#pragma once
// The checks of the layers' rules, in the vocabulary of core/diagnostics.hpp.

#include <shaped/core/diagnostics.hpp>

namespace shaped::diag {

// The KV cache.
// The KV cache's own dims, asserted in the rejected class itself (kv_cache.hpp).
#define SHAPED_RULE_CACHE_LAYOUT "a cache's dims are static, (B, S, HS) or (B, NH, S, HS), S the capacity"

// The cache's dims, then the new keys' or values'.
#define SHAPED_RULE_CACHE_APPEND_DIMS "the new keys' or values' dims do not meet the cache's (batch, heads, head size)"
template <class... Shown>
struct cache_append_dims : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::nn::KVCache::append: " SHAPED_RULE_CACHE_APPEND_DIMS);
};

// A layer's input: the first argument is the layer called, then its channel dim (in_features,
// for a Linear) and the input's dims.
#define SHAPED_RULE_LAYER_INPUT                                                                    \
    "the layer's input must be (..., C), C the layer's channel dim (a Linear's in_features); " \
    "attention and Block take (B, T, C)"
template <class... Shown>
struct layer_input : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::nn: " SHAPED_RULE_LAYER_INPUT);
};

// The attention layers; the first argument of a cache check names the layer.
// Asserted in the layer's class (attention.hpp), with the three dims in the condition.
#define SHAPED_RULE_HEADS_FILL_CHANNELS "heads x head size must equal the channel dim"

// Asserted in GroupedQueryAttention's class (grouped_query_attention.hpp), with both dims in the
// condition.
#define SHAPED_RULE_QUERY_GROUPS "the query heads must be a multiple of the key/value heads (NH % NKV == 0)"

// Asserted in rotary_encoding's class (rotary.hpp), with the head size and the rotated dims.
#define SHAPED_RULE_ROTARY_FITS_HEAD "the rotated dims must be pairs that fit the head: even, and at most HS"

#define SHAPED_RULE_ATTENTION_CACHE_HEADS                                   \
    "the cache's heads do not meet the layer's; a Head's cache is (B, S, HS), " \
    "a MultiHeadAttention's (B, NH, S, HS), a GroupedQueryAttention's (B, NKV, S, HS)"
template <class... Shown>
struct attention_cache_heads : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::nn::attention: " SHAPED_RULE_ATTENTION_CACHE_HEADS);
};

#define SHAPED_RULE_ATTENTION_CACHE_HEAD_SIZE "the cache's head size does not meet the layer's"
template <class... Shown>
struct attention_cache_head_size : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::nn::attention: " SHAPED_RULE_ATTENTION_CACHE_HEAD_SIZE);
};

#define SHAPED_RULE_ATTENTION_CACHE_BATCH "the cache's batch dim does not meet the input's"
template <class... Shown>
struct attention_cache_batch : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::nn::attention: " SHAPED_RULE_ATTENTION_CACHE_BATCH);
};

#define SHAPED_RULE_ATTENTION_CACHE_WINDOW                                                          \
    "a layer with a sliding window of W decodes with a RingKVCache whose capacity is W, " \
    "a layer without one with a KVCache"
template <class... Shown>
struct attention_cache_window : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::nn::attention: " SHAPED_RULE_ATTENTION_CACHE_WINDOW);
};

// What a layer hands the attention routine, checked by name: the layer, which part (one of
// heads_part), the dims the routine expects there, and the dims the layer gave.
#define SHAPED_RULE_ATTENTION_HEADS                                                                 \
    "the layer's heads do not meet the routine's dims: heads(project(x)) gives q, k and v, "        \
    "heads_of(merged) the merged heads, each (B, NH, T, HS) with heads_dim, keys and values "       \
    "(B, NKV, T, HS) with kv_heads_dim, (B, T, HS) for a layer of one head (no heads_dim)"
template <class... Shown>
struct attention_heads : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::nn::attention: " SHAPED_RULE_ATTENTION_HEADS);
};
namespace heads_part {
struct queries;
struct keys;
struct values;
struct merged;
}  // namespace heads_part

// A layer's own scale() (the factor of its scores): the layer, its value_type, what scale() returns.
#define SHAPED_RULE_ATTENTION_SCALE_TYPE "a layer's scale() returns its value_type, the factor of q @ k^T"
template <class... Shown>
struct attention_scale_type : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::nn::attention: " SHAPED_RULE_ATTENTION_SCALE_TYPE);
};

// A layer's own score_mod() or mask_mod() (expr/attention_modifiers.hpp): the layer, which one
// (modifier_part), what it returns.
#define SHAPED_RULE_ATTENTION_MODIFIER                                                               \
    "a layer's score_mod() returns a function score(value_type s, batch_index, head_index, "          \
    "query_position, key_position) -> value_type, its mask_mod() a function keeps(batch_index, "     \
    "head_index, query_position, key_position) -> bool"
template <class... Shown>
struct attention_modifier : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::nn::attention: " SHAPED_RULE_ATTENTION_MODIFIER);
};
namespace modifier_part {
struct score_mod;
struct mask_mod;
}  // namespace modifier_part

// Asserted in GroupedQueryAttention's class, with the window type in the condition.
#define SHAPED_RULE_LAYER_WINDOW "a layer's Window is shaped::window<W> (a sliding window of W) or nn::no_window"

// A module's members (module.hpp), asserted where a module is visited, counted or summarised,
// with the first member that is none of these in the condition: its name, then its type.
#define SHAPED_RULE_MODULE_MEMBER \
    "every member is a parameter (a Tensor of static dims), absent, a Stack or a module (BOOST_HANA_DEFINE_STRUCT)"

}  // namespace shaped::diag
