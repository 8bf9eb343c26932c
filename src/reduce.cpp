// Row softmax, row layer norm and whole-array moments, compiled once for float and double.
#include <shaped/kernels/rows.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

namespace shaped::kernels {

namespace {

template <class T>
void softmax_rows_impl(const T* in, std::ptrdiff_t in_stride, T* out, std::ptrdiff_t out_stride, std::size_t rows,
                       std::size_t n, bool log) {
    for (std::size_t r = 0; r < rows; ++r) {
        const T* x = in + static_cast<std::ptrdiff_t>(r) * in_stride;
        T* y = out + static_cast<std::ptrdiff_t>(r) * out_stride;
        // Pass 1: the row's max, subtracted so that exp cannot overflow.
        T max = -std::numeric_limits<T>::infinity();
        for (std::size_t i = 0; i < n; ++i) max = std::max(max, x[i]);
        // Pass 2: exponentials and their sum (accumulated in double for long rows).
        double sum = 0;
        for (std::size_t i = 0; i < n; ++i) {
            const T e = std::exp(x[i] - max);
            sum += e;
            if (!log) y[i] = e;
        }
        // Pass 3: normalise. A row that is all -inf has no distribution: NaN, as in torch.
        if (log) {
            const T log_sum = static_cast<T>(std::log(sum));
            for (std::size_t i = 0; i < n; ++i) y[i] = x[i] - max - log_sum;
        } else {
            const T inv = static_cast<T>(1.0 / sum);
            for (std::size_t i = 0; i < n; ++i) y[i] *= inv;
        }
    }
}

// The sum of n elements, in double, over eight independent partial sums: the compiler can keep
// them in vector registers (a single running sum is a dependency chain it may not reorder).
template <class T, class F>
double sum_of(std::size_t n, F term) {
    constexpr std::size_t lanes = 8;
    double partial[lanes] = {};
    std::size_t i = 0;
    for (; i + lanes <= n; i += lanes)
        for (std::size_t l = 0; l < lanes; ++l) partial[l] += term(i + l);
    for (; i < n; ++i) partial[0] += term(i);
    double sum = 0;
    for (double p : partial) sum += p;
    return sum;
}

template <class T>
void layer_norm_rows_impl(const T* in, std::ptrdiff_t in_stride, T* out, std::ptrdiff_t out_stride, std::size_t rows,
                          std::size_t n, const T* weight, const T* bias, double eps, bool centered) {
    if (n == 0) return;
    const double inv_n = 1.0 / static_cast<double>(n);
    for (std::size_t r = 0; r < rows; ++r) {
        const T* x = in + static_cast<std::ptrdiff_t>(r) * in_stride;
        T* y = out + static_cast<std::ptrdiff_t>(r) * out_stride;
        // Pass 1: the mean. Pass 2: the biased variance about it (two passes, not E[x^2] - E[x]^2,
        // which cancels catastrophically when the mean is large against the spread). RMSNorm takes
        // a mean of 0, so that pass 2 is the mean square.
        const double mean =
            centered ? sum_of<T>(n, [x](std::size_t i) { return static_cast<double>(x[i]); }) * inv_n : 0.0;
        const double var = sum_of<T>(n, [x, mean](std::size_t i) {
                               const double d = static_cast<double>(x[i]) - mean;
                               return d * d;
                           }) * inv_n;
        // Pass 3: normalise, scale and shift, in T (x may be y: each element is read before it is
        // written).
        const T m = static_cast<T>(mean);
        const T rstd = static_cast<T>(1.0 / std::sqrt(var + eps));
        if (bias)
            for (std::size_t i = 0; i < n; ++i) y[i] = (x[i] - m) * rstd * weight[i] + bias[i];
        else
            for (std::size_t i = 0; i < n; ++i) y[i] = (x[i] - m) * rstd * weight[i];
    }
}

template <class T>
moments moments_impl(const T* data, std::size_t n) {
    double sum = 0;
    for (std::size_t i = 0; i < n; ++i) sum += data[i];
    const double mean = n ? sum / static_cast<double>(n) : std::numeric_limits<double>::quiet_NaN();
    double squares = 0;
    for (std::size_t i = 0; i < n; ++i) squares += (data[i] - mean) * (data[i] - mean);
    const double var = n > 1 ? squares / static_cast<double>(n - 1) : std::numeric_limits<double>::quiet_NaN();
    return {sum, mean, var};
}

}  // namespace

void softmax_rows(const float* in, std::ptrdiff_t in_stride, float* out, std::ptrdiff_t out_stride,
                  std::size_t rows, std::size_t n, bool log) {
    softmax_rows_impl(in, in_stride, out, out_stride, rows, n, log);
}
void softmax_rows(const double* in, std::ptrdiff_t in_stride, double* out, std::ptrdiff_t out_stride,
                  std::size_t rows, std::size_t n, bool log) {
    softmax_rows_impl(in, in_stride, out, out_stride, rows, n, log);
}

void layer_norm_rows(const float* in, std::ptrdiff_t in_stride, float* out, std::ptrdiff_t out_stride,
                     std::size_t rows, std::size_t n, const float* weight, const float* bias, double eps,
                     bool centered) {
    layer_norm_rows_impl(in, in_stride, out, out_stride, rows, n, weight, bias, eps, centered);
}
void layer_norm_rows(const double* in, std::ptrdiff_t in_stride, double* out, std::ptrdiff_t out_stride,
                     std::size_t rows, std::size_t n, const double* weight, const double* bias, double eps,
                     bool centered) {
    layer_norm_rows_impl(in, in_stride, out, out_stride, rows, n, weight, bias, eps, centered);
}

moments moments_of(const float* data, std::size_t n) { return moments_impl(data, n); }
moments moments_of(const double* data, std::size_t n) { return moments_impl(data, n); }

}  // namespace shaped::kernels
