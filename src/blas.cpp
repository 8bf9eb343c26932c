// BLAS calls, compiled once: every matmul in shaped ends here (a matrix-vector product over
// rows, decoding's, in shaped's own loop below).
#include <shaped/kernels/blas.hpp>

#include <shaped/core/shape_error.hpp>
#include <shaped/kernels/parallel.hpp>

#include <cblas.h>
#include <xsimd/xsimd.hpp>

#include <algorithm>
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

// y = alpha * A x + beta * y for a row-major A and a contiguous x, each element of y one row's
// dot product with x: decoding's x @ W^T, one pass over the whole weight matrix a token.
// Decoding's tokens/s follow the bandwidth this reaches. OpenBLAS 0.3.21's gemv read GPT-2's
// matrices slower than a plain streaming loop did on the machine this was written on (and the
// generate benchmark took 3.11 s against 2.62 s with this loop), so shaped reads the rows
// itself: a block of rows at a time, each row a stream, x from L1.
template <class T>
struct row_products {
    std::size_t cols;
    T alpha;
    const T* a;
    std::size_t lda;
    const T* x;
    T beta;
    T* y;
    std::size_t incy;

    // Rows enough to keep the memory system busy with one stream each, and to share a load
    // of x among them, within the vector registers of any instruction set.
    static constexpr std::size_t block = 8;

    // Rows [first, last) of y.
    void operator()(std::size_t first, std::size_t last) const {
        std::size_t row = first;
        for (; row + block <= last; row += block) products<block>(row);
        for (; row < last; ++row) products<1>(row);
    }

    template <std::size_t R>
    void products(std::size_t row) const {
        using vec = xsimd::batch<T>;
        constexpr std::size_t lanes = vec::size;
        const T* rows = a + row * lda;
        vec sums[R];
        for (vec& sum : sums) sum = vec(T(0));
        std::size_t c = 0;
        // Each row of a block is a stream too short (a few KB) for the hardware prefetcher to
        // have ramped up before it ends: the next block's rows are asked for while this one's
        // are read, a line for a line (a prefetch past the matrix's end reads nothing).
        const T* next = rows + R * lda;
        for (; c + lanes <= cols; c += lanes) {
            const vec xs = vec::load_unaligned(x + c);
            for (std::size_t r = 0; r < R; ++r) {
                __builtin_prefetch(next + r * lda + c);
                sums[r] = xsimd::fma(vec::load_unaligned(rows + r * lda + c), xs, sums[r]);
            }
        }
        for (std::size_t r = 0; r < R; ++r) {
            T sum = xsimd::hadd(sums[r]);
            for (std::size_t j = c; j < cols; ++j) sum += rows[r * lda + j] * x[j];
            T& out = y[(row + r) * incy];
            out = beta == T(0) ? alpha * sum : alpha * sum + beta * out;
        }
    }
};

// Below this many elements of A, a parallel loop costs more than the rows it shares out.
constexpr std::size_t parallel_elements = std::size_t{1} << 18;

template <class T>
void multiply_rows(const row_products<T>& job, std::size_t rows) {
    const std::size_t threads = kernels::thread_count();
    if (threads == 1 || rows * job.cols < parallel_elements) return job(0, rows);
    // A few chunks a thread, whole blocks each, so that a thread slowed by other work is
    // made up for by the others.
    constexpr std::size_t block = row_products<T>::block;
    const std::size_t per_chunk = std::max(block, rows / (4 * threads) / block * block);
    const std::size_t chunks = (rows + per_chunk - 1) / per_chunk;
    auto task = [&](std::size_t i) { job(i * per_chunk, std::min(rows, (i + 1) * per_chunk)); };
    kernels::parallel_for(chunks, task);
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
    if (!transpose_a && incx == 1) return multiply_rows(row_products<float>{cols, alpha, a, lda, x, beta, y, incy}, rows);
    cblas_sgemv(CblasRowMajor, flag(transpose_a), blas_int(rows), blas_int(cols), alpha, a, blas_int(lda), x,
                blas_int(incx), beta, y, blas_int(incy));
}

void gemv(bool transpose_a, std::size_t rows, std::size_t cols, double alpha, const double* a, std::size_t lda,
          const double* x, std::size_t incx, double beta, double* y, std::size_t incy) {
    if (!transpose_a && incx == 1) return multiply_rows(row_products<double>{cols, alpha, a, lda, x, beta, y, incy}, rows);
    cblas_dgemv(CblasRowMajor, flag(transpose_a), blas_int(rows), blas_int(cols), alpha, a, blas_int(lda), x,
                blas_int(incx), beta, y, blas_int(incy));
}

}  // namespace shaped::kernels::blas
