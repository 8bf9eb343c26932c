#pragma once
// shaped::window<W>: a sliding window of W positions, as a type, for causal_attention and the
// attention layers. Its own header, included early by shaped.hpp, so that a window that breaks
// its rule is reported under the shortest chain of includes.

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
template <std::size_t W>
struct window {
    static_assert(detail::window_holds_a_position<W>, "shaped::window: " SHAPED_RULE_WINDOW_SIZE);
    static constexpr std::size_t size = W;
};

}  // namespace shaped
