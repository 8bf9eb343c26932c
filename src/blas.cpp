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
// matrices slower than a plain streaming loop, so shaped reads the rows itself, one after the
// other: the matrix is then one sequential stream, the pattern hardware prefetchers follow
// best, and x stays in L1. (Blocks of 8 rows read side by side, each row a short stream
// prefetched by hand, decoded GPT-2 124M and stories110M 4-8% slower in the bench's cases.)
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

    // Rows [first, last) of y.
    void operator()(std::size_t first, std::size_t last) const {
        for (std::size_t row = first; row < last; ++row) {
            T& out = y[row * incy];
            const T sum = dot(a + row * lda);
            out = beta == T(0) ? alpha * sum : alpha * sum + beta * out;
        }
    }

    // One row's product with x, in four independent sums so that the additions keep up with
    // the loads.
    T dot(const T* row) const {
        using vec = xsimd::batch<T>;
        constexpr std::size_t lanes = vec::size;
        vec sums[4] = {vec(T(0)), vec(T(0)), vec(T(0)), vec(T(0))};
        std::size_t c = 0;
        for (; c + 4 * lanes <= cols; c += 4 * lanes)
            for (std::size_t i = 0; i < 4; ++i)
                sums[i] = xsimd::fma(vec::load_unaligned(row + c + i * lanes), vec::load_unaligned(x + c + i * lanes), sums[i]);
        for (; c + lanes <= cols; c += lanes)
            sums[0] = xsimd::fma(vec::load_unaligned(row + c), vec::load_unaligned(x + c), sums[0]);
        T sum = xsimd::hadd((sums[0] + sums[1]) + (sums[2] + sums[3]));
        for (; c < cols; ++c) sum += row[c] * x[c];
        return sum;
    }
};

// Below this many elements of A, a parallel loop costs more than the rows it shares out.
constexpr std::size_t parallel_elements = std::size_t{1} << 18;

template <class T>
void multiply_rows(const row_products<T>& job, std::size_t rows) {
    const std::size_t threads = kernels::thread_count();
    if (threads == 1 || rows * job.cols < parallel_elements) return job(0, rows);
    // A few chunks a thread, so that a thread slowed by other work is made up for by the others.
    const std::size_t per_chunk = std::max<std::size_t>(1, rows / (4 * threads));
    const std::size_t chunks = (rows + per_chunk - 1) / per_chunk;
    auto task = [&](std::size_t i) { job(i * per_chunk, std::min(rows, (i + 1) * per_chunk)); };
    kernels::parallel_for(chunks, task);
}

// OpenBLAS works column-major, on C^T = op(B)^T op(A)^T, and packs a panel of op(A)^T as wide as
// all of C's m rows when they fit its buffer: the weight gradient of a vocabulary-wide layer
// (dW = dY^T X, m = 50257 for GPT-2's logits) packed a 25 MiB copy of dY per thread, resident for
// the rest of the process. A product is therefore split into blocks of rows whose panel stays
// under a few MiB, each block a GEMM of its own (every element of C is still one dot product over
// all of k). The panel is at most min(k, 512) deep: OpenBLAS blocks k by less than that.
constexpr std::size_t packed_panel_bytes = std::size_t{4} << 20;

template <class T, class Multiply>
void by_row_blocks(bool transpose_a, std::size_t m, std::size_t k, const T* a, std::size_t lda, T* c, std::size_t ldc,
                   Multiply multiply) {
    const std::size_t depth = std::clamp<std::size_t>(k, 1, 512);
    const std::size_t block = std::max<std::size_t>(256, packed_panel_bytes / (depth * sizeof(T)) / 64 * 64);
    // Row i of op(A) starts at row i of A, or at column i of a transposed A.
    for (std::size_t first = 0; first < m; first += block)
        multiply(std::min(block, m - first), a + (transpose_a ? first : first * lda), c + first * ldc);
}

}  // namespace

void gemm(bool transpose_a, bool transpose_b, std::size_t m, std::size_t n, std::size_t k, float alpha,
          const float* a, std::size_t lda, const float* b, std::size_t ldb, float beta, float* c, std::size_t ldc) {
    by_row_blocks<float>(transpose_a, m, k, a, lda, c, ldc, [&](std::size_t rows, const float* a_block, float* c_block) {
        cblas_sgemm(CblasRowMajor, flag(transpose_a), flag(transpose_b), blas_int(rows), blas_int(n), blas_int(k), alpha,
                    a_block, blas_int(lda), b, blas_int(ldb), beta, c_block, blas_int(ldc));
    });
}

void gemm(bool transpose_a, bool transpose_b, std::size_t m, std::size_t n, std::size_t k, double alpha,
          const double* a, std::size_t lda, const double* b, std::size_t ldb, double beta, double* c,
          std::size_t ldc) {
    by_row_blocks<double>(transpose_a, m, k, a, lda, c, ldc, [&](std::size_t rows, const double* a_block, double* c_block) {
        cblas_dgemm(CblasRowMajor, flag(transpose_a), flag(transpose_b), blas_int(rows), blas_int(n), blas_int(k), alpha,
                    a_block, blas_int(lda), b, blas_int(ldb), beta, c_block, blas_int(ldc));
    });
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
