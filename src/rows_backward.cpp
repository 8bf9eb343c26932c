// The backward passes of the row kernels (see kernels/rows_backward.hpp), compiled once for float
// and double. Each elementwise derivative is written once, for a scalar and an xsimd batch alike,
// so that a loop's vector body and its scalar tail compute the same formula. Sums over a row or
// over rows are accumulated in double.
#include <shaped/kernels/rows_backward.hpp>

#include "layer_norm_rows.hpp"

#include <xsimd/xsimd.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

namespace shaped::kernels {

namespace {

template <class T>
using vec = xsimd::batch<T>;

// ---- Elementwise: one formula for scalars and vectors ----------------------------------------

// Named apart from xsimd's load and store, which argument-dependent lookup would otherwise pick
// for a batch, and which are aligned.
template <class V, class T>
V load_at(const T* p) {
    if constexpr (std::is_same_v<V, T>)
        return *p;
    else
        return V::load_unaligned(p);
}

template <class V, class T>
void store_at(T* p, const V& v) {
    if constexpr (std::is_same_v<V, T>)
        *p = v;
    else
        v.store_unaligned(p);
}

// step(i, V{}) for every i in [0, n): whole vectors first, then the tail one element at a time.
template <class T, class Step>
void for_each_element(std::size_t n, Step step) {
    constexpr std::size_t lanes = vec<T>::size;
    std::size_t i = 0;
    for (; i + lanes <= n; i += lanes) step(i, vec<T>{});
    for (; i < n; ++i) step(i, T{});
}

// The derivatives below are of the forwards in kernels/lower.hpp. xsimd's functions take
// scalars too (they forward to std's).
constexpr double inv_sqrt2 = 0.70710678118654752440;
constexpr double inv_sqrt_2pi = 0.39894228040143267794;
constexpr double sqrt_2_over_pi = 0.79788456080286535588;
constexpr double gelu_tanh_cubic = 0.044715;

// GELU is x Phi(x), so its derivative is Phi(x) + x phi(x): the normal CDF and density.
template <class V>
V gelu_derivative(const V& x) {
    const V cdf = V(0.5) * (V(1) + xsimd::erf(x * V(inv_sqrt2)));
    const V pdf = V(inv_sqrt_2pi) * xsimd::exp(V(-0.5) * x * x);
    return cdf + x * pdf;
}

// f = x (1 + tanh u) / 2 with u = k (x + c x^3): f' = (1 + tanh u) / 2 + x (1 - tanh^2 u) u' / 2,
// u' = k (1 + 3 c x^2).
template <class V>
V gelu_tanh_derivative(const V& x) {
    const V x2 = x * x;
    const V t = xsimd::tanh(V(sqrt_2_over_pi) * (x + V(gelu_tanh_cubic) * x2 * x));
    const V du = V(sqrt_2_over_pi) * (V(1) + V(3 * gelu_tanh_cubic) * x2);
    return V(0.5) * (V(1) + t) + V(0.5) * x * (V(1) - t * t) * du;
}

// 1 / (1 + e^-x): saturates to 0 or 1 (e^-x overflowing to inf is harmless).
template <class V>
V sigmoid(const V& x) {
    return V(1) / (V(1) + xsimd::exp(-x));
}

// SiLU is x s(x), s the sigmoid, and s' = s (1 - s): silu' = s (1 + x (1 - s)).
template <class V>
V silu_derivative_given(const V& x, const V& s) {
    return s * (V(1) + x * (V(1) - s));
}

template <class V>
V silu_derivative(const V& x) {
    return silu_derivative_given(x, sigmoid(x));
}

// din = dout * f'(x), or (Add) din += that: din is read only then, as an unfilled one holds
// anything.
template <bool Add, class T, class Derivative>
void dout_times(const T* x, const T* dout, T* din, std::size_t n, Derivative derivative) {
    for_each_element<T>(n, [=](std::size_t i, auto v) {
        using V = decltype(v);
        V product = load_at<V>(dout + i) * derivative(load_at<V>(x + i));
        if constexpr (Add) product += load_at<V>(din + i);
        store_at(din + i, product);
    });
}
template <class T, class Derivative>
void dout_times(const T* x, const T* dout, T* din, std::size_t n, gradient_write write, Derivative derivative) {
    if (write == gradient_write::add) dout_times<true>(x, dout, din, n, derivative);
    else dout_times<false>(x, dout, din, n, derivative);
}

template <class T>
void activation_backward_impl(activation_kind f, const T* x, const T* dout, T* din, std::size_t n,
                              gradient_write write) {
    switch (f) {
    case activation_kind::gelu:
        return dout_times(x, dout, din, n, write, [](const auto& v) { return gelu_derivative(v); });
    case activation_kind::gelu_tanh:
        return dout_times(x, dout, din, n, write, [](const auto& v) { return gelu_tanh_derivative(v); });
    case activation_kind::silu:
        return dout_times(x, dout, din, n, write, [](const auto& v) { return silu_derivative(v); });
    }
}

// ---- Layer norm --------------------------------------------------------------------------------

// llm.c's layernorm_backward, in double: with xhat = (x - mean) rstd and dnorm = dout weight,
//   din     += rstd (dnorm - mean(dnorm) - xhat mean(dnorm xhat))
//   dweight += sum over rows of dout xhat,   dbias += sum over rows of dout.
// RMSNorm is the same with a mean of 0 that does not depend on x: no mean(dnorm) term.
template <class T>
void layer_norm_rows_backward_impl(const T* dout, const T* in, std::size_t rows, std::size_t n, const T* weight,
                                   const T* mean, const T* rstd, bool centered, T* din, T* dweight, T* dbias,
                                   gradient_write write) {
    if (n == 0 || rows == 0) return;
    // The parameters' gradients add up over rows: in double here, added to the caller's once.
    std::vector<double> dweight_sum(n, 0.0);
    std::vector<double> dbias_sum(dbias ? n : 0, 0.0);
    const double inv_n = 1.0 / static_cast<double>(n);
    for (std::size_t r = 0; r < rows; ++r) {
        const T* x = in + r * n;
        const T* dy = dout + r * n;
        T* dx = din + r * n;
        const double m = centered ? static_cast<double>(mean[r]) : 0.0;
        const double s = rstd[r];
        const auto xhat = [=](std::size_t i) { return (static_cast<double>(x[i]) - m) * s; };
        const auto dnorm = [=](std::size_t i) { return static_cast<double>(dy[i]) * weight[i]; };
        // Pass 1: the row's two means.
        const double mean_dnorm = centered ? detail::sum_of(n, dnorm) * inv_n : 0.0;
        const double mean_dnorm_xhat = detail::sum_of(n, [=](std::size_t i) { return dnorm(i) * xhat(i); }) * inv_n;
        // Pass 2: the input's gradient, and the parameters' terms of this row.
        for (std::size_t i = 0; i < n; ++i) {
            const double xh = xhat(i);
            const auto d = static_cast<T>(s * (dnorm(i) - mean_dnorm - xh * mean_dnorm_xhat));
            dx[i] = write == gradient_write::overwrite ? d : dx[i] + d;
            dweight_sum[i] += dy[i] * xh;
            if (dbias) dbias_sum[i] += dy[i];
        }
    }
    for (std::size_t i = 0; i < n; ++i) dweight[i] += static_cast<T>(dweight_sum[i]);
    if (dbias)
        for (std::size_t i = 0; i < n; ++i) dbias[i] += static_cast<T>(dbias_sum[i]);
}

// ---- Cross-entropy -----------------------------------------------------------------------------

// Vectors of one block are summed in T, blocks in double: a T sum of at most this many terms
// keeps float's error near its epsilon, and the double sum over blocks keeps a long row's.
constexpr std::size_t vectors_per_block = 16;

template <class T>
T row_max(const T* x, std::size_t n) {
    constexpr std::size_t lanes = vec<T>::size;
    T max = -std::numeric_limits<T>::infinity();
    std::size_t i = 0;
    if (n >= lanes) {
        vec<T> m = vec<T>::load_unaligned(x);
        for (i = lanes; i + lanes <= n; i += lanes) m = xsimd::max(m, vec<T>::load_unaligned(x + i));
        alignas(64) T lane[lanes];
        m.store_aligned(lane);
        for (T v : lane) max = std::max(max, v);
    }
    for (; i < n; ++i) max = std::max(max, x[i]);
    return max;
}

// The sum of exp(x[i] - max), in double over blocks; each exponential is kept in e[i] when e is
// not null (e may be x: each element is read before it is written).
template <class T>
double exp_sum(const T* x, T max, T* e, std::size_t n) {
    constexpr std::size_t lanes = vec<T>::size;
    constexpr std::size_t block = lanes * vectors_per_block;
    const vec<T> shift(max);
    double sum = 0;
    std::size_t i = 0;
    while (i + lanes <= n) {
        const std::size_t end = std::min(n - n % lanes, i + block);
        vec<T> block_sum(T{0});
        for (; i < end; i += lanes) {
            const vec<T> ex = xsimd::exp(vec<T>::load_unaligned(x + i) - shift);
            if (e) ex.store_unaligned(e + i);
            block_sum += ex;
        }
        sum += static_cast<double>(xsimd::hadd(block_sum));
    }
    for (; i < n; ++i) {
        const T ex = std::exp(x[i] - max);
        if (e) e[i] = ex;
        sum += ex;
    }
    return sum;
}

// Per row: pass 1 the max (subtracted so that exp cannot overflow), pass 2 the exponentials and
// their sum, pass 3 the gradient: softmax = exp / sum, less 1 at the target, times grad_scale.
template <class T>
cross_entropy_sum cross_entropy_rows_impl(const T* logits, const std::int64_t* targets, std::size_t rows,
                                          std::size_t vocab, T* dlogits, double grad_scale) {
    cross_entropy_sum total{0.0, 0};
    for (std::size_t r = 0; r < rows; ++r) {
        const T* x = logits + r * vocab;
        T* d = dlogits ? dlogits + r * vocab : nullptr;
        if (targets[r] == -1) {
            if (d) std::fill(d, d + vocab, T{0});
            continue;
        }
        const auto target = static_cast<std::size_t>(targets[r]);
        const T max = row_max(x, vocab);
        const double target_logit = x[target];  // read before d (perhaps x) is written
        const double sum = exp_sum(x, max, d, vocab);
        total.loss += static_cast<double>(max) + std::log(sum) - target_logit;
        ++total.counted;
        if (!d) continue;
        const double target_exp = d[target];
        const T scale = static_cast<T>(grad_scale / sum);
        for_each_element<T>(vocab, [=](std::size_t i, auto v) {
            using V = decltype(v);
            store_at(d + i, load_at<V>(d + i) * V(scale));
        });
        d[target] = static_cast<T>((target_exp / sum - 1.0) * grad_scale);
    }
    return total;
}

// ---- AdamW -------------------------------------------------------------------------------------

template <class T>
void adamw_update_impl(T* p, const T* g, T* m, T* v, std::size_t n, const adamw_constants& c) {
    const T decay = static_cast<T>(c.decay), beta1 = static_cast<T>(c.beta1), beta2 = static_cast<T>(c.beta2);
    const T keep1 = static_cast<T>(1 - c.beta1), keep2 = static_cast<T>(1 - c.beta2);
    const T eps = static_cast<T>(c.eps), size = static_cast<T>(c.step_size), correction = static_cast<T>(c.correction);
    for_each_element<T>(n, [=](std::size_t i, auto lanes) {
        using V = decltype(lanes);
        const V grad = load_at<V>(g + i);
        const V mean = load_at<V>(m + i) * V(beta1) + grad * V(keep1);
        const V square = load_at<V>(v + i) * V(beta2) + V(keep2) * grad * grad;
        store_at(m + i, mean);
        store_at(v + i, square);
        const V decayed = load_at<V>(p + i) * V(decay);
        store_at(p + i, decayed - V(size) * mean / (xsimd::sqrt(square) / V(correction) + V(eps)));
    });
}

}  // namespace

void layer_norm_rows_saving(const float* in, float* out, std::size_t rows, std::size_t n, const float* weight,
                            const float* bias, double eps, bool centered, float* mean, float* rstd) {
    const auto stride = static_cast<std::ptrdiff_t>(n);
    detail::layer_norm_rows(in, stride, out, stride, rows, n, weight, bias, eps, centered, mean, rstd);
}
void layer_norm_rows_saving(const double* in, double* out, std::size_t rows, std::size_t n, const double* weight,
                            const double* bias, double eps, bool centered, double* mean, double* rstd) {
    const auto stride = static_cast<std::ptrdiff_t>(n);
    detail::layer_norm_rows(in, stride, out, stride, rows, n, weight, bias, eps, centered, mean, rstd);
}

void layer_norm_rows_backward(const float* dout, const float* in, std::size_t rows, std::size_t n,
                              const float* weight, const float* mean, const float* rstd, bool centered, float* din,
                              float* dweight, float* dbias, gradient_write write) {
    layer_norm_rows_backward_impl(dout, in, rows, n, weight, mean, rstd, centered, din, dweight, dbias, write);
}
void layer_norm_rows_backward(const double* dout, const double* in, std::size_t rows, std::size_t n,
                              const double* weight, const double* mean, const double* rstd, bool centered,
                              double* din, double* dweight, double* dbias, gradient_write write) {
    layer_norm_rows_backward_impl(dout, in, rows, n, weight, mean, rstd, centered, din, dweight, dbias, write);
}

void activation_backward(activation_kind f, const float* x, const float* dout, float* din, std::size_t n,
                         gradient_write write) {
    activation_backward_impl(f, x, dout, din, n, write);
}
void activation_backward(activation_kind f, const double* x, const double* dout, double* din, std::size_t n,
                         gradient_write write) {
    activation_backward_impl(f, x, dout, din, n, write);
}

void adamw_update(float* p, const float* g, float* m, float* v, std::size_t n, const adamw_constants& c) {
    adamw_update_impl(p, g, m, v, n, c);
}
void adamw_update(double* p, const double* g, double* m, double* v, std::size_t n, const adamw_constants& c) {
    adamw_update_impl(p, g, m, v, n, c);
}

namespace {
template <class T>
void add_broadcast_impl(T* acc, const T* g, std::span<const std::size_t> extents,
                        std::span<const std::ptrdiff_t> acc_strides, std::span<const std::ptrdiff_t> g_strides) {
    const std::size_t r = extents.size();
    if (r == 0) {
        *acc += *g;
        return;
    }
    std::size_t rows = 1;
    for (std::size_t d = 0; d + 1 < r; ++d) rows *= extents[d];
    const std::size_t n = extents[r - 1];
    if (rows == 0 || n == 0) return;
    const std::ptrdiff_t a_last = acc_strides[r - 1], g_last = g_strides[r - 1];
    std::array<std::size_t, max_add_rank> at{};
    std::ptrdiff_t a_offset = 0, g_offset = 0;
    for (std::size_t row = 0; row < rows; ++row) {
        // Contiguous rows (a gradient of the value's own extents, a bias's summed over rows) as
        // plain loops the compiler vectorises.
        T* out = acc + a_offset;
        const T* in = g + g_offset;
        if (a_last == 1 && g_last == 1)
            for (std::size_t j = 0; j < n; ++j) out[j] += in[j];
        else if (a_last == 0 && g_last == 1)
            for (std::size_t j = 0; j < n; ++j) *out += in[j];
        else
            for (std::size_t j = 0; j < n; ++j)
                out[static_cast<std::ptrdiff_t>(j) * a_last] += in[static_cast<std::ptrdiff_t>(j) * g_last];
        // The next row: the dims before the last counted like an odometer, the last of them fastest.
        for (std::size_t d = r - 1; d-- > 0;) {
            if (++at[d] < extents[d]) {
                a_offset += acc_strides[d];
                g_offset += g_strides[d];
                break;
            }
            at[d] = 0;
            a_offset -= acc_strides[d] * static_cast<std::ptrdiff_t>(extents[d] - 1);
            g_offset -= g_strides[d] * static_cast<std::ptrdiff_t>(extents[d] - 1);
        }
    }
}
}  // namespace

void add_broadcast(float* acc, const float* g, std::span<const std::size_t> extents,
                   std::span<const std::ptrdiff_t> acc_strides, std::span<const std::ptrdiff_t> g_strides) {
    add_broadcast_impl(acc, g, extents, acc_strides, g_strides);
}
void add_broadcast(double* acc, const double* g, std::span<const std::size_t> extents,
                   std::span<const std::ptrdiff_t> acc_strides, std::span<const std::ptrdiff_t> g_strides) {
    add_broadcast_impl(acc, g, extents, acc_strides, g_strides);
}

double sum_of_squares(const float* x, std::size_t n) {
    return detail::sum_of(n, [x](std::size_t i) { return static_cast<double>(x[i]) * static_cast<double>(x[i]); });
}
double sum_of_squares(const double* x, std::size_t n) {
    return detail::sum_of(n, [x](std::size_t i) { return x[i] * x[i]; });
}

cross_entropy_sum cross_entropy_rows(const float* logits, const std::int64_t* targets, std::size_t rows,
                                     std::size_t vocab, float* dlogits, double grad_scale) {
    return cross_entropy_rows_impl(logits, targets, rows, vocab, dlogits, grad_scale);
}
cross_entropy_sum cross_entropy_rows(const double* logits, const std::int64_t* targets, std::size_t rows,
                                     std::size_t vocab, double* dlogits, double grad_scale) {
    return cross_entropy_rows_impl(logits, targets, rows, vocab, dlogits, grad_scale);
}

}  // namespace shaped::kernels
