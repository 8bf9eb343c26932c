#pragma once
// RingKVCache<T, B, NH, W, HS> (or <T, B, W, HS> for a single head): the KV cache of a layer
// with a sliding window of W positions (Mistral's rolling buffer), nn/kv_cache.hpp's one cache
// over ring storage. It holds each batch row's last
// W positions, position p in slot p % W, so that decoding goes on past W positions in W slots:
// an append never overflows, it overwrites the positions that have left the window.
//
// As in KVCache, every dim is static and the storage allocated once (RingKVCache::bytes), and
// each batch row keeps its own run-time length (a ragged batch). lengths() counts every position
// a row has seen, not only those held: it is where the row's next position stands, the start
// rotary positions are encoded from. Keys are cached as the layer hands them over, already
// rotated at their absolute positions, so they stay right wherever their slot is.
//
//   shaped::nn::RingKVCache<float, B, NKV, dim<"W", 4096>, HS> cache;
//   cache.append(k, v);                 // k, v: (B, NKV, n, HS), any n
//   auto keys = cache.keys();           // (B, NKV, W, HS), W dynamic: the slots held, in slot order

#include <shaped/nn/kv_cache.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <string_view>

namespace shaped::nn {

// Position p in slot p % W, the last W of a row's positions kept: an append never overflows.
template <std::size_t W>
struct ring_positions {
    static constexpr bool wraps = true;
    static constexpr std::string_view name = "nn::RingKVCache";
    static constexpr std::size_t held(std::size_t length) { return std::min(length, W); }
    // The slots of positions [from, to), to - from <= W, in position order.
    static constexpr std::array<slot_run, 2> runs(std::size_t from, std::size_t to) {
        const std::size_t first = from % W, count = to - from;
        if (first + count <= W) return {slot_run{first, first + count}, slot_run{0, 0}};
        return {slot_run{first, W}, slot_run{0, first + count - W}};
    }
};

// Any other dims stop the compile here, as KVCache's do.
template <class T, class... Ds>
class RingKVCache : public failed {
    static_assert(detail::cache_layout<Ds...>, "shaped::nn::RingKVCache: " SHAPED_RULE_CACHE_LAYOUT);
};

template <class T, Dim... Ds>
    requires detail::cache_layout<Ds...>
class RingKVCache<T, Ds...> : public basic_kv_cache<ring_positions, T, Ds...> {};

}  // namespace shaped::nn
