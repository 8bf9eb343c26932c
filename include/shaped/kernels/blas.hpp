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

// y = alpha * op(A) @ x + beta * y, A rows x cols (op(A) = A or A^T), x and y strided by incx
// and incy elements.
void gemv(bool transpose_a, std::size_t rows, std::size_t cols, float alpha, const float* a, std::size_t lda,
          const float* x, std::size_t incx, float beta, float* y, std::size_t incy);
void gemv(bool transpose_a, std::size_t rows, std::size_t cols, double alpha, const double* a, std::size_t lda,
          const double* x, std::size_t incx, double beta, double* y, std::size_t incy);

}  // namespace shaped::kernels::blas
