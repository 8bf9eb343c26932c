#pragma once
// The BLAS entry points shaped uses, compiled once in src/blas.cpp. Row-major throughout;
// leading dimensions are in elements.

#include <cstddef>

namespace shaped::kernels::blas {

// C = alpha * op(A) @ op(B) + beta * C, op(X) = X or X^T, op(A) m x k, op(B) k x n.
void gemm(bool transpose_a, bool transpose_b, std::size_t m, std::size_t n, std::size_t k, float alpha,
          const float* a, std::size_t lda, const float* b, std::size_t ldb, float beta, float* c, std::size_t ldc);
void gemm(bool transpose_a, bool transpose_b, std::size_t m, std::size_t n, std::size_t k, double alpha,
          const double* a, std::size_t lda, const double* b, std::size_t ldb, double beta, double* c,
          std::size_t ldc);

}  // namespace shaped::kernels::blas
