#pragma once
// Score and mask modifiers of causal_attention: plain functions of a score and where it is,
// inlined into the one fused kernel (kernels/attention.hpp), as PyTorch's FlexAttention takes
// score_mod(score, b, h, q_idx, kv_idx) and mask_mod(b, h, q_idx, kv_idx):
//
//   score(s, b, h, q, kv) -> T      the score of query q for key kv, s = q . k * scale on entry
//                                   (ALiBi: s - slope(h) * (q - kv); soft-capping c tanh(s / c))
//   keeps(b, h, q, kv)    -> bool   whether q sees kv at all, on top of causality (a sliding
//                                   window<W>, a document mask, a prefix-LM; and_masks(...) of
//                                   several); a key block no query of a block keeps is skipped,
//                                   never computed, and a window is attended as the band it is
//
// Each coordinate has a type of its own, so that a modifier that swaps the query and the key, or
// the batch row and the head, is a compile error rather than a wrong number. Positions are
// absolute: a decoding step's query is at its place in the sequence, not at 0.

#include <algorithm>
#include <array>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <limits>
#include <tuple>
#include <type_traits>

namespace shaped {

// A batch row (the first batch dim), a head (the batch dims after it, flattened: query head
// kv_head * G + g for grouped heads), a query's position and a key's position.
struct batch_index {
    std::size_t value;
};
struct head_index {
    std::size_t value;
};
struct query_position {
    std::size_t value;
};
struct key_position {
    std::size_t value;
};

// How far the query is past the key (negative where the key is after it): ALiBi's distance.
constexpr std::ptrdiff_t operator-(query_position q, key_position kv) {
    return static_cast<std::ptrdiff_t>(q.value) - static_cast<std::ptrdiff_t>(kv.value);
}

// A score and its derivative with respect to the score the modifier was given: what the
// backward runs a score modifier written over any score type with (template <class S> S
// operator()(S s, ...), or a lambda taking auto s), so that its derivative needs no writing.
// Math functions reach it by argument-dependent lookup: call them unqualified, after using
// std::tanh and the like. A modifier may instead give its own derivative(s, b, h, q, kv).
template <class T>
struct dual {
    T value;
    T slope;
};
template <class T>
constexpr dual<T> operator+(dual<T> a, dual<T> b) { return {a.value + b.value, a.slope + b.slope}; }
template <class T>
constexpr dual<T> operator-(dual<T> a, dual<T> b) { return {a.value - b.value, a.slope - b.slope}; }
template <class T>
constexpr dual<T> operator*(dual<T> a, dual<T> b) { return {a.value * b.value, a.slope * b.value + a.value * b.slope}; }
template <class T>
constexpr dual<T> operator/(dual<T> a, dual<T> b) {
    return {a.value / b.value, (a.slope * b.value - a.value * b.slope) / (b.value * b.value)};
}
template <class T>
constexpr dual<T> operator-(dual<T> a) { return {-a.value, -a.slope}; }
// With a number that does not depend on the score.
template <class T, class U>
    requires std::is_arithmetic_v<U>
constexpr dual<T> operator+(dual<T> a, U b) { return {static_cast<T>(a.value + b), a.slope}; }
template <class T, class U>
    requires std::is_arithmetic_v<U>
constexpr dual<T> operator+(U a, dual<T> b) { return b + a; }
template <class T, class U>
    requires std::is_arithmetic_v<U>
constexpr dual<T> operator-(dual<T> a, U b) { return {static_cast<T>(a.value - b), a.slope}; }
template <class T, class U>
    requires std::is_arithmetic_v<U>
constexpr dual<T> operator-(U a, dual<T> b) { return {static_cast<T>(a - b.value), -b.slope}; }
template <class T, class U>
    requires std::is_arithmetic_v<U>
constexpr dual<T> operator*(dual<T> a, U b) { return {static_cast<T>(a.value * b), static_cast<T>(a.slope * b)}; }
template <class T, class U>
    requires std::is_arithmetic_v<U>
constexpr dual<T> operator*(U a, dual<T> b) { return b * a; }
template <class T, class U>
    requires std::is_arithmetic_v<U>
constexpr dual<T> operator/(dual<T> a, U b) { return {static_cast<T>(a.value / b), static_cast<T>(a.slope / b)}; }
template <class T, class U>
    requires std::is_arithmetic_v<U>
constexpr dual<T> operator/(U a, dual<T> b) {
    return {static_cast<T>(a / b.value), static_cast<T>(-a * b.slope / (b.value * b.value))};
}
template <class T>
dual<T> tanh(dual<T> a) {
    const T t = std::tanh(a.value);
    return {t, a.slope * (T{1} - t * t)};
}
template <class T>
dual<T> exp(dual<T> a) {
    const T e = std::exp(a.value);
    return {e, a.slope * e};
}
template <class T>
dual<T> log(dual<T> a) { return {std::log(a.value), a.slope / a.value}; }
template <class T>
dual<T> sqrt(dual<T> a) {
    const T r = std::sqrt(a.value);
    return {r, a.slope / (T{2} * r)};
}

// How many of a block's query-key pairs a mask keeps. A mask may answer for a whole block at once,
// block(b, h, q0, q1, k0, k1) for queries [q0, q1) and keys [k0, k1) (nn::same_document does, in
// O(block) rather than O(block^2)); otherwise the kernel asks keeps() pair by pair until it knows.
enum class keys_kept { none, some, all };

// The modifiers' defaults: the score as computed, every key kept.
struct unmodified_scores {
    template <class T>
    constexpr T operator()(T score, batch_index, head_index, query_position, key_position) const {
        return score;
    }
};
struct keep_every_key {
    constexpr bool operator()(batch_index, head_index, query_position, key_position) const { return true; }
};

// Causality as a mask: a query sees its own position and those before it. Attention is causal
// unless a mask replaces it (nn::prefix_lm), so this one adds nothing the kernel does not do:
// and_masks(causal_mask{}, m) is m, said as FlexAttention's and_masks(causal_mask, m) says it.
struct causal_mask {
    constexpr bool operator()(batch_index, head_index, query_position q, key_position kv) const {
        return kv.value <= q.value;
    }
    // Queries [q0, q1) against keys [k0, k1).
    constexpr keys_kept block(batch_index, head_index, query_position q0, query_position q1, key_position k0,
                              key_position k1) const {
        if (q1.value <= q0.value || k1.value <= k0.value || k0.value >= q1.value) return keys_kept::none;
        return k1.value - 1 <= q0.value ? keys_kept::all : keys_kept::some;
    }
};

// A sliding window of W positions, a mask (expr/window.hpp).
template <std::size_t W>
struct window;

template <class M>
inline constexpr bool is_window = false;
template <std::size_t W>
inline constexpr bool is_window<window<W>> = true;

// A mask declaring `static constexpr bool causal = false` replaces causality: a prefix-LM's
// prefix sees itself whole. Any other mask drops keys on top of causality (and a window).
template <class Mask>
consteval bool mask_is_causal() {
    if constexpr (requires { Mask::causal; }) return Mask::causal;
    else return true;
}

// A mask that answers for a block of queries and keys at once.
template <class Mask>
concept answers_blocks = requires(const Mask& mask, batch_index b, head_index h, query_position q, key_position kv) {
    { mask.block(b, h, q, q, kv, kv) } -> std::same_as<keys_kept>;
};

// Masks that each keep a key, all of them at once (FlexAttention's and_masks): a window and a
// document mask, say. A key block is skipped when one of them keeps none of it.
template <class... Masks>
struct masks_and {
    std::tuple<Masks...> masks;
    // Causality holds unless one of them replaces it (a prefix-LM).
    static constexpr bool causal = (mask_is_causal<Masks>() && ...);
    constexpr bool operator()(batch_index b, head_index h, query_position q, key_position kv) const {
        return std::apply([&](const auto&... mask) { return (mask(b, h, q, kv) && ...); }, masks);
    }
    // A block at once where each of them answers for blocks (else the kernel asks pair by pair).
    keys_kept block(batch_index b, head_index h, query_position q0, query_position q1, key_position k0,
                    key_position k1) const
        requires(answers_blocks<Masks> && ...)
    {
        const auto kept = std::apply([&](const auto&... mask) { return std::array{mask.block(b, h, q0, q1, k0, k1)...}; },
                                     masks);
        if (std::ranges::find(kept, keys_kept::none) != kept.end()) return keys_kept::none;
        return std::ranges::all_of(kept, [](keys_kept k) { return k == keys_kept::all; }) ? keys_kept::all
                                                                                          : keys_kept::some;
    }
};

template <class M>
inline constexpr bool is_masks_and = false;
template <class... Ms>
inline constexpr bool is_masks_and<masks_and<Ms...>> = true;

namespace detail {
// The masks as one, flattened: keep_every_key parts dropped, nested conjunctions opened, one mask
// left as itself, none as keep_every_key.
constexpr keep_every_key conjoin() { return {}; }
template <class M, class... Ms>
constexpr auto conjoin(const M& mask, const Ms&... rest) {
    if constexpr (is_masks_and<M>) {
        return std::apply([&](const auto&... parts) { return conjoin(parts..., rest...); }, mask.masks);
    } else {
        const auto others = conjoin(rest...);
        using Others = std::remove_cv_t<decltype(others)>;
        if constexpr (std::is_same_v<M, keep_every_key>) return others;
        else if constexpr (std::is_same_v<Others, keep_every_key>) return mask;
        else if constexpr (is_masks_and<Others>)
            return std::apply([&](const auto&... more) { return masks_and<M, std::remove_cvref_t<decltype(more)>...>{{mask, more...}}; },
                              others.masks);
        else return masks_and<M, Others>{{mask, others}};
    }
}
}  // namespace detail

// Whether Mask has the signature of a mask (below, key_mask).
template <class Mask>
concept key_mask = std::is_invocable_r_v<bool, const Mask&, batch_index, head_index, query_position, key_position>;

// The window a mask holds, itself or among and_masks' parts (the narrowest, where several):
// what the kernel attends as a band. 0 where there is none.
template <class Mask>
inline constexpr std::size_t window_in = 0;
template <std::size_t W>
inline constexpr std::size_t window_in<window<W>> = W;
template <class... Masks>
inline constexpr std::size_t window_in<masks_and<Masks...>> = [] {
    std::size_t narrowest = 0;
    for (const std::size_t w : {std::size_t{0}, window_in<Masks>...})
        if (w != 0 && (narrowest == 0 || w < narrowest)) narrowest = w;
    return narrowest;
}();

namespace detail {
// Causality and a window count from the causal diagonal: no mask beside them may replace it.
template <class Mask>
inline constexpr bool holds_band = is_window<Mask> || std::is_same_v<Mask, causal_mask>;
template <class... Masks>
inline constexpr bool holds_band<masks_and<Masks...>> = (holds_band<Masks> || ...);
template <class Mask>
inline constexpr bool band_is_causal = !holds_band<Mask> || mask_is_causal<Mask>();
}  // namespace detail

// and_masks(window<W>{}, nn::same_document{&ids}): a query sees a key where every mask keeps it.
template <class... Masks>
constexpr auto and_masks(const Masks&... masks) {
    static_assert((key_mask<Masks> && ...),
                  "shaped::and_masks: a mask is called as keeps(batch_index, head_index, query_position, "
                  "key_position) and returns whether the query sees the key, a bool");
    static_assert(detail::band_is_causal<decltype(detail::conjoin(masks...))>,
                  "shaped::and_masks: causality and a window count from the causal diagonal, so a mask that replaces "
                  "causality takes neither");
    return detail::conjoin(masks...);
}

// What of a mask is left once the kernel attends its band (causality and its window): nothing
// (keep_every_key) for causal_mask or a window alone.
template <class Mask>
constexpr auto beyond_band(const Mask& mask) {
    if constexpr (is_masks_and<Mask>)
        return std::apply([](const auto&... parts) { return and_masks(beyond_band(parts)...); }, mask.masks);
    else if constexpr (detail::holds_band<Mask>) return keep_every_key{};
    else return mask;
}

// A score modifier and a mask, with where the problem's first matrix, query and key lie: the
// matrix m of the problem (counted row-major over its batch dims) is batch row
// m / heads + batch_origin and head m % heads; key j is at position key_origin + j, and query i
// of Tq against Tk keys at key_origin + Tk - Tq + i (the queries are the last Tq positions).
// heads 0: every batch dim after the first is a head dim (one head where there is none).
template <class Score = unmodified_scores, class Mask = keep_every_key>
struct attention_modifiers {
    Score score{};
    Mask keeps{};
    std::size_t heads = 0;
    std::size_t batch_origin = 0;
    std::size_t key_origin = 0;

    static constexpr bool modifies_scores = !std::is_same_v<Score, unmodified_scores>;
    static constexpr bool masks_keys = !std::is_same_v<Mask, keep_every_key>;
    static constexpr bool causal = mask_is_causal<Mask>();
};

template <class M>
inline constexpr bool is_attention_modifiers = false;
template <class S, class M>
inline constexpr bool is_attention_modifiers<attention_modifiers<S, M>> = true;

// The node of causal_attention without modifiers.
struct no_modifiers {};

// A score modifier the model learns: score(s, ...) = then(s + table()(element(b, h, q, kv)...)),
// a bias read from a parameter and added to the score before anything else is made of it
// (nn::learned_bias), so that the bias's gradient is the score's, summed per element.
template <class Score>
concept learned_score_modifier = requires(const Score& score) {
    score.table();
    score.element(batch_index{}, head_index{}, query_position{}, key_position{});
};

// Whether Score and Mask have the signatures above for scores of type T.
template <class Score, class T>
concept score_modifier_for = std::is_invocable_r_v<T, const Score&, T, batch_index, head_index, query_position, key_position>;
// Whether the backward can take Score's derivative: its own derivative(s, b, h, q, kv), or Score
// run over dual numbers.
template <class Score, class T>
concept differentiable_score_modifier =
    requires(const Score& score, T s) {
        { score.derivative(s, batch_index{}, head_index{}, query_position{}, key_position{}) } -> std::convertible_to<T>;
    } ||
    requires(const Score& score, dual<T> s) {
        { score(s, batch_index{}, head_index{}, query_position{}, key_position{}) } -> std::convertible_to<dual<T>>;
    };
}  // namespace shaped
