// BLAS calls, compiled once: every matmul in shaped ends here.
#include <shaped/kernels/blas.hpp>

#include <shaped/core/shape_error.hpp>

#include <cblas.h>

#include <limits>
#include <string>

namespace shaped::kernels::blas {

namespace {
CBLAS_TRANSPOSE flag(bool transpose) { return transpose ? CblasTrans : CblasNoTrans; }
// BLAS counts in blasint (32 bits in Debian's OpenBLAS): a larger extent or stride would be
// cut short, and the product silently wrong.
blasint blas_int(std::size_t n) {
    if (n > static_cast<std::size_t>(std::numeric_limits<blasint>::max()))
        throw shape_error("shaped::matmul: an extent or stride of " + std::to_string(n) +
                          " exceeds the largest BLAS can take, " + std::to_string(std::numeric_limits<blasint>::max()));
    return static_cast<blasint>(n);
}
}  // namespace

void gemm(bool transpose_a, bool transpose_b, std::size_t m, std::size_t n, std::size_t k, float alpha,
          const float* a, std::size_t lda, const float* b, std::size_t ldb, float beta, float* c, std::size_t ldc) {
    cblas_sgemm(CblasRowMajor, flag(transpose_a), flag(transpose_b), blas_int(m), blas_int(n), blas_int(k), alpha, a,
                blas_int(lda), b, blas_int(ldb), beta, c, blas_int(ldc));
}

void gemm(bool transpose_a, bool transpose_b, std::size_t m, std::size_t n, std::size_t k, double alpha,
          const double* a, std::size_t lda, const double* b, std::size_t ldb, double beta, double* c,
          std::size_t ldc) {
    cblas_dgemm(CblasRowMajor, flag(transpose_a), flag(transpose_b), blas_int(m), blas_int(n), blas_int(k), alpha, a,
                blas_int(lda), b, blas_int(ldb), beta, c, blas_int(ldc));
}

void gemv(bool transpose_a, std::size_t rows, std::size_t cols, float alpha, const float* a, std::size_t lda,
          const float* x, std::size_t incx, float beta, float* y, std::size_t incy) {
    cblas_sgemv(CblasRowMajor, flag(transpose_a), blas_int(rows), blas_int(cols), alpha, a, blas_int(lda), x,
                blas_int(incx), beta, y, blas_int(incy));
}

void gemv(bool transpose_a, std::size_t rows, std::size_t cols, double alpha, const double* a, std::size_t lda,
          const double* x, std::size_t incx, double beta, double* y, std::size_t incy) {
    cblas_dgemv(CblasRowMajor, flag(transpose_a), blas_int(rows), blas_int(cols), alpha, a, blas_int(lda), x,
                blas_int(incx), beta, y, blas_int(incy));
}

}  // namespace shaped::kernels::blas
