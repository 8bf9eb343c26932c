#pragma once
// The checks of the layers' rules, in the vocabulary of core/diagnostics.hpp.

#include <shaped/core/diagnostics.hpp>

namespace shaped::diag {

// The KV cache.
template <class... Shown>
struct cache_layout : failed {
    static_assert(sizeof...(Shown) == 0,
                  "shaped::nn::KVCache: a cache's dims are static, (B, S, HS) or (B, NH, S, HS), S the capacity");
};

template <class... Shown>
struct cache_append_dims : failed {
    static_assert(sizeof...(Shown) == 0,
                  "shaped::nn::KVCache::append: the new keys' or values' dims do not meet the cache's "
                  "(batch, heads, head size)");
};

// A layer's input: the first argument is the layer called, then its channel dim (in_features,
// for a Linear) and the input's dims.
template <class... Shown>
struct layer_input : failed {
    static_assert(sizeof...(Shown) == 0,
                  "shaped::nn: the layer's input must be (..., C), C the layer's channel dim (a Linear's in_features); "
                  "attention and Block take (B, T, C)");
};

// The attention layers; the first argument of a cache check names the layer.
template <class... Shown>
struct attention_heads_product : failed {
    static_assert(sizeof...(Shown) == 0,
                  "shaped::nn::MultiHeadAttention: heads x head size must equal the channel dim");
};

template <class... Shown>
struct attention_cache_heads : failed {
    static_assert(sizeof...(Shown) == 0,
                  "shaped::nn::attention: the cache's heads do not meet the layer's; a Head's cache is "
                  "(B, S, HS), a MultiHeadAttention's (B, NH, S, HS)");
};

template <class... Shown>
struct attention_cache_head_size : failed {
    static_assert(sizeof...(Shown) == 0,
                  "shaped::nn::attention: the cache's head size does not meet the layer's");
};

template <class... Shown>
struct attention_cache_batch : failed {
    static_assert(sizeof...(Shown) == 0,
                  "shaped::nn::attention: the cache's batch dim does not meet the input's");
};

}  // namespace shaped::diag
