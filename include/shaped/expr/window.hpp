#pragma once
// shaped::window<W>: a sliding window of W positions, as a type, for causal_attention and the
// attention layers. Its own header, included early by shaped.hpp, so that a window that breaks
// its rule is reported under the shortest chain of includes.

#include <shaped/expr/attention_modifiers.hpp>
#include <shaped/expr/diagnostics.hpp>

#include <cstddef>

namespace shaped {

namespace detail {
template <std::size_t W>
inline constexpr bool window_holds_a_position = W > 0;
}  // namespace detail

// A sliding window of W positions, as a type: a query at position i sees the positions
// i - W + 1 .. i (those that exist), W in all with itself. This is Hugging Face's
// sliding_window (kv_idx > q_idx - sliding_window) and Mistral's inference code's (xformers'
// local attention, a ring-buffer cache of W positions); Mistral's first reference,
// one_file_ref.py, masked its prefill with triu(-W), one position more, W + 1.
//
// It is a mask like any other (expr/attention_modifiers.hpp): causal_attention's, a layer's
// mask_mod(), one of and_masks(...). The kernel sees it for the band it is, each query's keys one
// range, and visits no key block wholly before a query block's window: O(T x W) work.
template <std::size_t W>
struct window {
    static_assert(detail::window_holds_a_position<W>, "shaped::window: " SHAPED_RULE_WINDOW_SIZE);
    static constexpr std::size_t size = W;

    constexpr bool operator()(batch_index, head_index, query_position q, key_position kv) const {
        return kv.value <= q.value && q.value - kv.value < W;
    }
    // Queries [q0, q1) against keys [k0, k1).
    constexpr keys_kept block(batch_index, head_index, query_position q0, query_position q1, key_position k0,
                              key_position k1) const {
        if (q1.value <= q0.value || k1.value <= k0.value) return keys_kept::none;
        const std::size_t last_query = q1.value - 1, last_key = k1.value - 1;
        if (k0.value > last_query || q0.value >= last_key + W) return keys_kept::none;
        if (last_key <= q0.value && last_query < k0.value + W) return keys_kept::all;
        return keys_kept::some;
    }
};

}  // namespace shaped
