#pragma once
// Naive reference kernels and helpers shared by the unit tests: the oracles every fast path is
// compared against. They work on plain row-major arrays so that they share no code with shaped.

#include "threads_for_test.hpp"

#include <shaped/shaped.hpp>

#include <catch2/catch.hpp>
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

namespace ref {

// The elements of a Tensor (or anything evaluated to one), row-major, in double.
template <class X>
std::vector<double> values(const X& x) {
    const auto t = shaped::eval(x);
    return std::vector<double>(t.data(), t.data() + t.size());
}

// Fills a tensor with distinct-looking values in [-2, 2) from a seed.
template <class Tensor>
void fill(Tensor& t, std::uint64_t seed) {
    shaped::Generator gen(seed);
    gen.fill_uniform(t.elements(), -2.0, 2.0);
}

// C[b] = A[b] @ B[b] for `batches` row-major matrices (m x k) @ (k x n); a batch stride of 0
// shares one operand across the batch.
inline std::vector<double> matmul(const std::vector<double>& a, const std::vector<double>& b, std::size_t batches,
                                  std::size_t m, std::size_t n, std::size_t k, std::size_t a_batch_stride,
                                  std::size_t b_batch_stride) {
    std::vector<double> c(batches * m * n, 0.0);
    for (std::size_t p = 0; p < batches; ++p)
        for (std::size_t i = 0; i < m; ++i)
            for (std::size_t j = 0; j < n; ++j) {
                double s = 0;
                for (std::size_t l = 0; l < k; ++l)
                    s += a[p * a_batch_stride + i * k + l] * b[p * b_batch_stride + l * n + j];
                c[(p * m + i) * n + j] = s;
            }
    return c;
}

// The transpose of each of `batches` row-major (rows x cols) matrices.
inline std::vector<double> transpose(const std::vector<double>& a, std::size_t batches, std::size_t rows,
                                     std::size_t cols) {
    std::vector<double> t(a.size());
    for (std::size_t p = 0; p < batches; ++p)
        for (std::size_t i = 0; i < rows; ++i)
            for (std::size_t j = 0; j < cols; ++j) t[(p * cols + j) * rows + i] = a[(p * rows + i) * cols + j];
    return t;
}

// A row-major array viewed as (outer, n, inner), reduced or normalised along n.
struct axis_split {
    std::size_t outer, n, inner;
    std::size_t at(std::size_t o, std::size_t i, std::size_t in) const { return (o * n + i) * inner + in; }
};

template <class F>
std::vector<double> reduce(const std::vector<double>& a, axis_split s, F f) {
    std::vector<double> out(s.outer * s.inner);
    std::vector<double> line(s.n);
    for (std::size_t o = 0; o < s.outer; ++o)
        for (std::size_t in = 0; in < s.inner; ++in) {
            for (std::size_t i = 0; i < s.n; ++i) line[i] = a[s.at(o, i, in)];
            out[o * s.inner + in] = f(line);
        }
    return out;
}

inline double sum(const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return s;
}
inline double mean(const std::vector<double>& v) { return sum(v) / static_cast<double>(v.size()); }
inline double var(const std::vector<double>& v) {
    const double m = mean(v);
    double s = 0;
    for (double x : v) s += (x - m) * (x - m);
    return s / static_cast<double>(v.size() - 1);
}

// softmax (or log_softmax) along n, straight from the definition (with the max subtracted so
// that the reference itself does not overflow).
inline std::vector<double> softmax(const std::vector<double>& a, axis_split s, bool log = false) {
    std::vector<double> out(a.size());
    for (std::size_t o = 0; o < s.outer; ++o)
        for (std::size_t in = 0; in < s.inner; ++in) {
            double mx = -std::numeric_limits<double>::infinity();
            for (std::size_t i = 0; i < s.n; ++i) mx = std::max(mx, a[s.at(o, i, in)]);
            double z = 0;
            for (std::size_t i = 0; i < s.n; ++i) z += std::exp(a[s.at(o, i, in)] - mx);
            for (std::size_t i = 0; i < s.n; ++i) {
                const double x = a[s.at(o, i, in)] - mx;
                out[s.at(o, i, in)] = log ? x - std::log(z) : std::exp(x) / z;
            }
        }
    return out;
}

// Element by element within a relative-and-absolute tolerance; reports the first miss.
inline void require_close(const std::vector<double>& got, const std::vector<double>& want, double tol) {
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
        const double bound = tol * (1.0 + std::abs(want[i]));
        if (!(std::abs(got[i] - want[i]) <= bound)) {
            INFO("element " << i << ": got " << got[i] << ", want " << want[i]);
            REQUIRE(std::abs(got[i] - want[i]) <= bound);
        }
    }
}

// The tolerance for sums of k products in T.
template <class T>
double tolerance(std::size_t k = 1) {
    return (std::is_same_v<T, float> ? 1e-5 : 1e-12) * static_cast<double>(k + 1);
}

// Rows of a (B, n, D) result against positions from .. from + n - 1 of a (B, T, D) one: got(b, i, :)
// against want(b, from + i, :), for every batch row. Decoding tests compare a cached step's
// output with the full forward's this way.
template <class Got, class Want>
void require_rows_match(const Got& got, const Want& want, std::size_t from, double tol = 1e-5) {
    const auto g = got.extents();
    for (std::size_t b = 0; b < g[0]; ++b)
        for (std::size_t i = 0; i < g[1]; ++i)
            for (std::size_t d = 0; d < g[2]; ++d) {
                const double w = want(b, from + i, d);
                INFO("batch row " << b << ", position " << from + i << ", element " << d);
                REQUIRE(std::abs(got(b, i, d) - w) <= tol * (1.0 + std::abs(w)));
            }
}

}  // namespace ref
