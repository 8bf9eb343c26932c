#pragma once
// matmul lowered to BLAS. Operands that are Tensors, Views, or transposes of them are read in
// place: a transposed operand becomes BLAS's transpose flag, never a copy. Batch dims are looped
// over, except where lhs rows run contiguously across its batch and rhs has no batch of its own
// (a Linear layer's x @ W^T): then one GEMM covers the whole batch. Small products whose
// extents are all static skip BLAS for a loop unrolled at compile time.

#include <shaped/kernels/blas.hpp>
#include <shaped/kernels/lower.hpp>
#include <shaped/kernels/strided.hpp>

#include <array>
#include <cstddef>
#include <cstring>
#include <span>

namespace shaped::kernels {

namespace detail {

// How BLAS reads a matrix with strides (row, col): untransposed if columns are adjacent,
// transposed if rows are; otherwise it cannot without a copy.
struct blas_layout {
    bool ok;
    bool transposed;
    std::size_t leading;
};
inline blas_layout layout_of(std::ptrdiff_t row_stride, std::ptrdiff_t col_stride, std::size_t rows, std::size_t cols) {
    if (col_stride == 1 || cols == 1)
        return {row_stride >= static_cast<std::ptrdiff_t>(cols) || rows == 1, false,
                std::max<std::size_t>(rows == 1 ? cols : static_cast<std::size_t>(row_stride), std::max<std::size_t>(cols, 1))};
    if (row_stride == 1 || rows == 1)
        return {col_stride >= static_cast<std::ptrdiff_t>(rows), true,
                std::max<std::size_t>(static_cast<std::size_t>(col_stride), std::max<std::size_t>(rows, 1))};
    return {false, false, 0};
}

// Products this small (multiply-adds per matrix) with every extent known at compile time run as
// plain loops the compiler unrolls: a BLAS call's fixed cost would be most of their time.
inline constexpr std::size_t small_product = 8192;

template <class Target, class L>
constexpr std::size_t static_product_size() {
    if constexpr (dims_of<Target>::all_static && dims_of<L>::all_static)
        return dim_at<rank_of<Target> - 2, dims_of<Target>>::extent * dim_at<rank_of<Target> - 1, dims_of<Target>>::extent *
               dim_at<rank_of<L> - 1, dims_of<L>>::extent;
    else return 0;
}

// The widest vector the target has, as GCC's and clang's vector extensions: the small products
// are the one loop in the headers written in vectors, and xsimd's headers would cost every
// program a second of compile.
#if defined(__AVX512F__)
inline constexpr std::size_t vector_bytes = 64;
#elif defined(__AVX__)
inline constexpr std::size_t vector_bytes = 32;
#else
inline constexpr std::size_t vector_bytes = 16;
#endif
template <class T>
struct simd_vector {
    typedef T type __attribute__((vector_size(vector_bytes)));
};

// c = alpha * a @ b + beta * c for one M x K by K x N product, any strides. b is first copied
// row-major, so that the inner loop runs over N adjacent elements, whole vectors. Always inlined:
// the caller's strides are then constants the loops are compiled for (measured: ~15% of the
// chapter's head, which GCC's heuristics otherwise leave to chance).
template <std::size_t M, std::size_t N, std::size_t K, class T>
[[gnu::always_inline]] inline void small_matmul(const T* a, std::ptrdiff_t a_row, std::ptrdiff_t a_col, const T* b, std::ptrdiff_t b_row,
                  std::ptrdiff_t b_col, T* c, std::ptrdiff_t c_row, std::ptrdiff_t c_col, T alpha, T beta) {
    T rhs[K][N];
    for (std::size_t p = 0; p < K; ++p)
        for (std::size_t j = 0; j < N; ++j)
            rhs[p][j] = b[static_cast<std::ptrdiff_t>(p) * b_row + static_cast<std::ptrdiff_t>(j) * b_col];
    using vec = typename simd_vector<T>::type;
    constexpr std::size_t W = vector_bytes / sizeof(T);
    const auto load = [](const T* p) {
        vec v;
        std::memcpy(&v, p, sizeof v);
        return v;
    };
    for (std::size_t i = 0; i < M; ++i) {
        T* c_row_start = c + static_cast<std::ptrdiff_t>(i) * c_row;
        if constexpr (N % W == 0) {
            vec row[N / W] = {};
            for (std::size_t p = 0; p < K; ++p) {
                const T x = a[static_cast<std::ptrdiff_t>(i) * a_row + static_cast<std::ptrdiff_t>(p) * a_col];
                for (std::size_t j = 0; j < N / W; ++j) row[j] += x * load(&rhs[p][j * W]);
            }
            if (c_col == 1 && beta == T{0}) {
                for (std::size_t j = 0; j < N / W; ++j) {
                    const vec scaled = row[j] * alpha;
                    std::memcpy(c_row_start + j * W, &scaled, sizeof scaled);
                }
                continue;
            }
            T out[N];
            std::memcpy(out, row, sizeof out);
            for (std::size_t j = 0; j < N; ++j) {
                T& cj = c_row_start[static_cast<std::ptrdiff_t>(j) * c_col];
                cj = beta == T{0} ? alpha * out[j] : alpha * out[j] + beta * cj;
            }
        } else {
            T row[N] = {};
            for (std::size_t p = 0; p < K; ++p) {
                const T x = a[static_cast<std::ptrdiff_t>(i) * a_row + static_cast<std::ptrdiff_t>(p) * a_col];
                for (std::size_t j = 0; j < N; ++j) row[j] += x * rhs[p][j];
            }
            for (std::size_t j = 0; j < N; ++j) {
                T& cj = c_row_start[static_cast<std::ptrdiff_t>(j) * c_col];
                cj = beta == T{0} ? alpha * row[j] : alpha * row[j] + beta * cj;
            }
        }
    }
}

// A batched product as the compiled kernel (src/matmul.cpp) takes it: c = alpha * a @ b + beta * c
// for every index of the result's batch dims, each operand's strides along them (0 where it
// broadcasts), then each matrix's m x k, k x n and m x n strides (c's columns adjacent).
template <class T>
struct batched_product {
    std::span<const std::size_t> batch;
    std::size_t m, n, k;
    const T* a;
    std::span<const std::ptrdiff_t> a_batch;
    std::ptrdiff_t a_row, a_col;
    const T* b;
    std::span<const std::ptrdiff_t> b_batch;
    std::ptrdiff_t b_row, b_col;
    T* c;
    std::span<const std::ptrdiff_t> c_batch;
    std::ptrdiff_t c_row;
    T alpha, beta;
};
void batched_matmul(const batched_product<float>& p);
void batched_matmul(const batched_product<double>& p);
}  // namespace detail

// target = alpha * (lhs @ rhs) + beta * target. Target is a Tensor or a View with unit column
// stride; with beta 0 its elements are not read. Only the small static products are compiled
// here; every other is described to the one compiled kernel.
template <class Target, class L, class R, class T>
void matmul_into(Target& target, const L& lhs_expr, const R& rhs_expr, T alpha, T beta = T{0}) {
    const auto lhs_op = as_strided<T>(lhs_expr);
    const auto rhs_op = as_strided<T>(rhs_expr);
    const auto& lhs = lhs_op.elements;
    const auto& rhs = rhs_op.elements;
    constexpr std::size_t lr = rank_of<L>, rr = rank_of<R>, cr = rank_of<Target>, batch = cr - 2;
    const auto out_extents = target.extents();
    const auto out_strides = target.strides();
    if (target.size() == 0) return;
    const auto lb = detail::batch_strides<batch>(lhs);
    const auto rbs = detail::batch_strides<batch>(rhs);

    if constexpr (constexpr std::size_t size = detail::static_product_size<Target, L>();
                  size > 0 && size <= detail::small_product) {
        constexpr std::size_t M = dim_at<cr - 2, dims_of<Target>>::extent, N = dim_at<cr - 1, dims_of<Target>>::extent,
                              K = dim_at<lr - 1, dims_of<L>>::extent;
        for (batch_iterator<batch> at(out_extents); at; ++at)
            detail::small_matmul<M, N, K>(lhs.data + at.offset(lb), lhs.strides[lr - 2], lhs.strides[lr - 1],
                                          rhs.data + at.offset(rbs), rhs.strides[rr - 2], rhs.strides[rr - 1],
                                          target.data() + at.offset(out_strides), out_strides[cr - 2],
                                          out_strides[cr - 1], alpha, beta);
        return;
    }

    std::array<std::size_t, batch> batch_extents{};
    std::array<std::ptrdiff_t, batch> out_batch{};
    for (std::size_t i = 0; i < batch; ++i) {
        batch_extents[i] = out_extents[i];
        out_batch[i] = out_strides[i];
    }
    detail::batched_matmul(detail::batched_product<T>{
        .batch = batch_extents, .m = out_extents[cr - 2], .n = out_extents[cr - 1], .k = lhs.extents[lr - 1],
        .a = lhs.data, .a_batch = lb, .a_row = lhs.strides[lr - 2], .a_col = lhs.strides[lr - 1],
        .b = rhs.data, .b_batch = rbs, .b_row = rhs.strides[rr - 2], .b_col = rhs.strides[rr - 1],
        .c = target.data(), .c_batch = out_batch, .c_row = out_strides[cr - 2], .alpha = alpha, .beta = beta});
}

}  // namespace shaped::kernels
