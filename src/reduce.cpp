// Row softmax, row layer norm and whole-array moments, compiled once for float and double.
#include <shaped/kernels/rows.hpp>

#include "layer_norm_rows.hpp"

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
    detail::layer_norm_rows(in, in_stride, out, out_stride, rows, n, weight, bias, eps, centered, nullptr, nullptr);
}
void layer_norm_rows(const double* in, std::ptrdiff_t in_stride, double* out, std::ptrdiff_t out_stride,
                     std::size_t rows, std::size_t n, const double* weight, const double* bias, double eps,
                     bool centered) {
    detail::layer_norm_rows(in, in_stride, out, out_stride, rows, n, weight, bias, eps, centered, nullptr, nullptr);
}

moments moments_of(const float* data, std::size_t n) { return moments_impl(data, n); }
moments moments_of(const double* data, std::size_t n) { return moments_impl(data, n); }

}  // namespace shaped::kernels
