#pragma once
// Row kernels, compiled once in src/reduce.cpp: softmax and layer norm over contiguous rows, and
// whole-array statistics accumulated in double (torch accumulates float sums in wider types too).

#include <cstddef>

namespace shaped::kernels {

// out[r, :] = softmax(in[r, :]) (or log_softmax), for `rows` rows of n contiguous elements whose
// starts are in_stride and out_stride apart. in and out may be the same rows.
void softmax_rows(const float* in, std::ptrdiff_t in_stride, float* out, std::ptrdiff_t out_stride,
                  std::size_t rows, std::size_t n, bool log);
void softmax_rows(const double* in, std::ptrdiff_t in_stride, double* out, std::ptrdiff_t out_stride,
                  std::size_t rows, std::size_t n, bool log);

// out[r, :] = (in[r, :] - mean) / sqrt(var + eps) * weight + bias, mean and var (biased) over the
// row's n elements, as torch.nn.functional.layer_norm over the last dim. weight and bias are n
// contiguous elements; bias may be null (no bias). in and out may be the same rows. Not
// centered, it is RMSNorm: in[r, :] / sqrt(mean(in[r, :]^2) + eps) * weight (+ bias).
void layer_norm_rows(const float* in, std::ptrdiff_t in_stride, float* out, std::ptrdiff_t out_stride,
                     std::size_t rows, std::size_t n, const float* weight, const float* bias, double eps,
                     bool centered = true);
void layer_norm_rows(const double* in, std::ptrdiff_t in_stride, double* out, std::ptrdiff_t out_stride,
                     std::size_t rows, std::size_t n, const double* weight, const double* bias, double eps,
                     bool centered = true);

struct moments {
    double sum;
    double mean;
    double unbiased_variance;  // NaN for fewer than two elements, as torch.var
};
moments moments_of(const float* data, std::size_t n);
moments moments_of(const double* data, std::size_t n);

}  // namespace shaped::kernels
