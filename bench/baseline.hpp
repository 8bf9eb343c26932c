#pragma once
// The hand-written baselines: attention as one writes it without shaped, over plain arrays with
// cblas for the products and loops for the mask and the softmax. Row-major throughout.

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

namespace bench {

inline constexpr float minus_infinity = -std::numeric_limits<float>::infinity();

// row[0, n) = softmax(row[0, n)).
inline void softmax_row(float* row, std::size_t n) {
    float max = minus_infinity, sum = 0;
    for (std::size_t j = 0; j < n; ++j) max = std::max(max, row[j]);
    for (std::size_t j = 0; j < n; ++j) sum += row[j] = std::exp(row[j] - max);
    const float inv = 1.0f / sum;
    for (std::size_t j = 0; j < n; ++j) row[j] *= inv;
}

// One head's causal attention: scores = q @ k^T * scale into a T x T matrix, the mask and the
// softmax by rows, then out = scores @ v. Rows of q, k, v are ld_in apart, of out ld_out.
inline void baseline_attention(std::size_t t, std::size_t hs, float scale, const float* q, const float* k,
                               const float* v, std::size_t ld_in, float* out, std::size_t ld_out, float* scores) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, t, t, hs, scale, q, ld_in, k, ld_in, 0.0f, scores, t);
    for (std::size_t i = 0; i < t; ++i) {
        float* row = scores + i * t;
        std::fill(row + i + 1, row + t, minus_infinity);
        softmax_row(row, t);
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, t, hs, t, 1.0f, scores, t, v, ld_in, 0.0f, out, ld_out);
}

// out (rows x n) = bias + in (rows x k) @ weight^T, weight (n x k) as a Linear layer holds it.
inline void baseline_linear(std::size_t rows, std::size_t n, std::size_t k, const float* in, const float* weight,
                            const float* bias, float* out) {
    for (std::size_t r = 0; r < rows; ++r) std::copy(bias, bias + n, out + r * n);
    if (rows == 1) cblas_sgemv(CblasRowMajor, CblasNoTrans, n, k, 1.0f, weight, k, in, 1, 1.0f, out, 1);
    else cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, n, k, 1.0f, in, k, weight, k, 1.0f, out, n);
}

// nanoGPT's CausalSelfAttention by hand, for x (batch, t, c) with the parameters of
// nn::MultiHeadAttention (c_attn (3c, c) and its bias, c_proj (c, c) and its bias).
struct baseline_self_attention {
    const float* attn_weight;
    const float* attn_bias;
    const float* proj_weight;
    const float* proj_bias;
    std::size_t c, heads;
    std::vector<float> qkv, y, scores;

    void operator()(const float* x, std::size_t batch, std::size_t t, float* out) {
        const std::size_t hs = c / heads;
        const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
        qkv.resize(batch * t * 3 * c);
        y.resize(batch * t * c);
        scores.resize(t * t);
        baseline_linear(batch * t, 3 * c, c, x, attn_weight, attn_bias, qkv.data());
        for (std::size_t b = 0; b < batch; ++b)
            for (std::size_t h = 0; h < heads; ++h) {
                const float* q = qkv.data() + b * t * 3 * c + h * hs;
                baseline_attention(t, hs, scale, q, q + c, q + 2 * c, 3 * c, y.data() + b * t * c + h * hs, c,
                                   scores.data());
            }
        baseline_linear(batch * t, c, c, y.data(), proj_weight, proj_bias, out);
    }
};

}  // namespace bench
