#pragma once
// Private to the library's sources: the one layer norm over rows, shared by layer_norm_rows
// (src/reduce.cpp) and layer_norm_rows_saving (src/rows_backward.cpp), so that the forward a
// backward is trained against gives the inference forward's numbers bit for bit.

#include <cmath>
#include <cstddef>
#include <type_traits>

namespace shaped::kernels::detail {

// The sum of n elements, in double, over eight independent partial sums: the compiler can keep
// them in vector registers (a single running sum is a dependency chain it may not reorder).
template <class F>
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

// See layer_norm_rows in kernels/rows.hpp. When row_mean and row_rstd are not null, each row's
// mean and 1 / sqrt(var + eps) are kept there, as the T values pass 3 normalised with.
template <class T>
void layer_norm_rows(const T* in, std::ptrdiff_t in_stride, T* out, std::ptrdiff_t out_stride, std::size_t rows,
                     std::size_t n, const T* weight, const T* bias, double eps, bool centered,
                     std::type_identity_t<T>* row_mean, std::type_identity_t<T>* row_rstd) {
    if (n == 0) return;
    const double inv_n = 1.0 / static_cast<double>(n);
    for (std::size_t r = 0; r < rows; ++r) {
        const T* x = in + static_cast<std::ptrdiff_t>(r) * in_stride;
        T* y = out + static_cast<std::ptrdiff_t>(r) * out_stride;
        // Pass 1: the mean. Pass 2: the biased variance about it (two passes, not E[x^2] - E[x]^2,
        // which cancels catastrophically when the mean is large against the spread). RMSNorm takes
        // a mean of 0, so that pass 2 is the mean square.
        const double mean =
            centered ? sum_of(n, [x](std::size_t i) { return static_cast<double>(x[i]); }) * inv_n : 0.0;
        const double var = sum_of(n, [x, mean](std::size_t i) {
                               const double d = static_cast<double>(x[i]) - mean;
                               return d * d;
                           }) * inv_n;
        // Pass 3: normalise, scale and shift, in T (x may be y: each element is read before it is
        // written).
        const T m = static_cast<T>(mean);
        const T rstd = static_cast<T>(1.0 / std::sqrt(var + eps));
        if (row_mean) row_mean[r] = m;
        if (row_rstd) row_rstd[r] = rstd;
        if (bias)
            for (std::size_t i = 0; i < n; ++i) y[i] = (x[i] - m) * rstd * weight[i] + bias[i];
        else
            for (std::size_t i = 0; i < n; ++i) y[i] = (x[i] - m) * rstd * weight[i];
    }
}

}  // namespace shaped::kernels::detail
