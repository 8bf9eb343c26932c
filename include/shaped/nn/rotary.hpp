#pragma once
// Rotary position embedding (RoPE, Su et al.), the position encoding of the Llama family: each
// query and key is rotated, pair of channels by pair, by an angle proportional to its absolute
// position, so that q . k depends on the positions only through their difference.
//
//   nn::rotary_encoding<HS, nn::rotary_pairing::adjacent> rope{.theta = 10000};
//   rope(q, k, starts);    // q (B, NH, T, HS), k (B, NKV, T, HS), rotated in place
//   rope.backward(dq, dk, starts);   // training: the gradients turned back, in place
//
// Pair i (0 <= i < R/2, R the rotated dims, HS by default) turns by pos * theta^(-2i/R) at
// position pos = starts[b] + t, t the position's index in q and k: in decoding, starts[b] is the
// length batch row b's cache had reached, so ragged rows turn each by its own positions. The
// angles are computed in float as llama2.c's run.c and Hugging Face compute them. The pairs are
// one of two layouts in use:
//
//   adjacent   channels (2i, 2i + 1): Meta's reference code and llama2.c
//   halves     channels (i, i + R/2): Hugging Face's rotate_half, whose checkpoints store q and
//              k permuted to match
//
// Channels past R (a partial rotary, as GPT-NeoX's rotary_pct) are left as they are.

#include <shaped/expr/expression.hpp>
#include <shaped/nn/diagnostics.hpp>

#include <array>
#include <cmath>
#include <cstddef>
#include <span>
#include <type_traits>

namespace shaped::nn {

enum class rotary_pairing { adjacent, halves };

namespace detail {
// The rotated dims R are pairs that fit the head: R even, and at most HS.
template <Dim HS, std::size_t R>
inline constexpr bool rotary_fits_head = R % 2 == 0 && R > 0 && R <= HS::extent;
}  // namespace detail

template <StaticDim HS, rotary_pairing Pairing = rotary_pairing::adjacent, std::size_t R = HS::extent>
struct rotary_encoding {
    static_assert(detail::rotary_fits_head<HS, R>,
                  "shaped::nn::rotary_encoding: " SHAPED_RULE_ROTARY_FITS_HEAD);

    using head_size_dim = HS;
    static constexpr rotary_pairing pairing = Pairing;
    static constexpr std::size_t rotated = R;

    // The base of the angles' frequencies (Llama 2: 10000; Llama 3: 500000).
    double theta = 10000.0;

    // Rotates q and k (B, heads, T, HS) in place; starts[b] is batch row b's first position.
    template <class Q, class K>
    void operator()(const Q& q, const K& k, std::span<const std::size_t> starts) const {
        turn(q, k, starts, false);
    }

    // The backward of the rotation: given the gradients of the rotated q and k (B, heads, T, HS),
    // those of q and k as they were, in place. A rotation's transpose is its inverse: each pair
    // turns back by its angle.
    template <class Q, class K>
    void backward(const Q& dq, const K& dk, std::span<const std::size_t> starts) const {
        turn(dq, dk, starts, true);
    }
    // The same, of one operand (B, heads, T, HS): rotated, or its gradient turned back.
    template <class X>
    void rotate(const X& x, std::span<const std::size_t> starts) const {
        turn(x, x, starts, false, false);
    }
    template <class X>
    void rotate_backward(const X& dx, std::span<const std::size_t> starts) const {
        turn(dx, dx, starts, true, false);
    }

    // cos and sin of every pair's angle at position pos, in float as run.c computes them (double
    // for a double model).
    template <class T>
    void angles(std::size_t pos, std::span<T> cos, std::span<T> sin) const {
        using F = std::conditional_t<std::is_same_v<T, double>, double, float>;
        for (std::size_t i = 0; i < R / 2; ++i) {
            const F frequency = F(1) / std::pow(static_cast<F>(theta), static_cast<F>(2 * i) / static_cast<F>(R));
            const F angle = static_cast<F>(pos) * frequency;
            cos[i] = static_cast<T>(std::cos(angle));
            sin[i] = static_cast<T>(std::sin(angle));
        }
    }

private:
    // Turns q and k; with both false, q alone (k is not read).
    template <class Q, class K>
    void turn(const Q& q, const K& k, std::span<const std::size_t> starts, bool back, bool both = true) const {
        using T = value_type_of<Q>;
        const std::size_t batch = q.extents()[0], positions = q.extents()[2];
        // On the stack: the rotation runs in every attention call of a decoding step.
        std::array<T, R / 2> cos{}, sin{};
        for (std::size_t b = 0; b < batch; ++b)
            for (std::size_t t = 0; t < positions; ++t) {
                angles(starts[b] + t, std::span<T>(cos), std::span<T>(sin));
                if (back)
                    for (T& s : sin) s = -s;
                rotate_at(q, b, t, cos, sin);
                if (both) rotate_at(k, b, t, cos, sin);
            }
    }

    // Every head of x at (b, t), through x's strides.
    template <class X, class T>
    static void rotate_at(const X& x, std::size_t b, std::size_t t, const std::array<T, R / 2>& cos,
                       const std::array<T, R / 2>& sin) {
        const auto strides = x.strides();
        const std::size_t heads = x.extents()[1];
        const std::ptrdiff_t step = strides[3];
        constexpr std::size_t half = R / 2;
        for (std::size_t h = 0; h < heads; ++h) {
            T* row = x.data() + static_cast<std::ptrdiff_t>(b) * strides[0] + static_cast<std::ptrdiff_t>(h) * strides[1] +
                     static_cast<std::ptrdiff_t>(t) * strides[2];
            for (std::size_t i = 0; i < half; ++i) {
                const std::size_t first = Pairing == rotary_pairing::adjacent ? 2 * i : i;
                const std::size_t second = Pairing == rotary_pairing::adjacent ? 2 * i + 1 : i + half;
                T& x0 = row[static_cast<std::ptrdiff_t>(first) * step];
                T& x1 = row[static_cast<std::ptrdiff_t>(second) * step];
                const T a = x0, c = x1;
                x0 = a * cos[i] - c * sin[i];
                x1 = a * sin[i] + c * cos[i];
            }
        }
    }
};

}  // namespace shaped::nn
