#pragma once
// matmul lowered to BLAS. Operands that are Tensors, Views, or transposes of them are read in
// place: a transposed operand becomes BLAS's transpose flag, never a copy. Batch dims are looped
// over, except where lhs rows run contiguously across its batch and rhs has no batch of its own
// (a Linear layer's x @ W^T): then one GEMM covers the whole batch. Small products whose
// extents are all static skip BLAS for a loop unrolled at compile time.

#include <shaped/kernels/blas.hpp>
#include <shaped/kernels/lower.hpp>
#include <shaped/kernels/strided.hpp>

#include <xsimd/xsimd.hpp>

#include <array>
#include <cstddef>
#include <vector>

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

template <class T, std::size_t R>
auto contiguous_copy(const strided<T, R>& s) {
    std::vector<T> copy;
    std::size_t n = 1;
    for (auto e : s.extents) n *= e;
    copy.resize(n);
    auto src = xt::adapt(s.data, n, xt::no_ownership(), s.extents, s.strides);
    auto dst = xt::adapt(copy.data(), n, xt::no_ownership(), s.extents);
    dst = src;
    return copy;
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
    using vec = xsimd::batch<T>;
    constexpr std::size_t W = vec::size;
    for (std::size_t i = 0; i < M; ++i) {
        T* c_row_start = c + static_cast<std::ptrdiff_t>(i) * c_row;
        if constexpr (N % W == 0) {
            vec row[N / W];
            for (auto& r : row) r = vec(T{0});
            for (std::size_t p = 0; p < K; ++p) {
                const vec x(a[static_cast<std::ptrdiff_t>(i) * a_row + static_cast<std::ptrdiff_t>(p) * a_col]);
                for (std::size_t j = 0; j < N / W; ++j) row[j] = xsimd::fma(x, vec::load_unaligned(&rhs[p][j * W]), row[j]);
            }
            if (c_col == 1 && beta == T{0}) {
                for (std::size_t j = 0; j < N / W; ++j) (row[j] * vec(alpha)).store_unaligned(c_row_start + j * W);
                continue;
            }
            T out[N];
            for (std::size_t j = 0; j < N / W; ++j) row[j].store_unaligned(out + j * W);
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
// target *= beta (beta 0: zeros, never reading target): a product over an empty inner dim.
template <class Target, class T>
void scale_elements(Target& target, T beta) {
    constexpr std::size_t r = rank_of<Target>;
    const auto extents = target.extents();
    const auto strides = target.strides();
    for (batch_iterator<r> at(extents); at; ++at) {
        auto& element = target.data()[at.offset(strides)];
        element = beta == T{0} ? T{0} : beta * element;
    }
}
}  // namespace detail

// target = alpha * (lhs @ rhs) + beta * target. Target is a Tensor or a View with unit column
// stride; with beta 0 its elements are not read.
template <class Target, class L, class R, class T>
void matmul_into(Target& target, const L& lhs_expr, const R& rhs_expr, T alpha, T beta = T{0}) {
    auto lhs_op = as_strided<T>(lhs_expr);
    auto rhs_op = as_strided<T>(rhs_expr);
    auto lhs = lhs_op.elements;
    auto rhs = rhs_op.elements;
    constexpr std::size_t lr = rank_of<L>, rr = rank_of<R>, cr = rank_of<Target>, batch = cr - 2;
    const auto out_extents = target.extents();
    const auto out_strides = target.strides();
    const std::size_t m = out_extents[cr - 2], n = out_extents[cr - 1], k = lhs.extents[lr - 1];
    if (target.size() == 0) return;
    if (k == 0) return detail::scale_elements(target, beta);  // BLAS's answer, without its pointers


    if constexpr (constexpr std::size_t size = detail::static_product_size<Target, L>();
                  size > 0 && size <= detail::small_product) {
        constexpr std::size_t M = dim_at<cr - 2, dims_of<Target>>::extent, N = dim_at<cr - 1, dims_of<Target>>::extent,
                              K = dim_at<lr - 1, dims_of<L>>::extent;
        const auto lb = detail::batch_strides<batch>(lhs);
        const auto rbs = detail::batch_strides<batch>(rhs);
        for (batch_iterator<batch> at(out_extents); at; ++at)
            detail::small_matmul<M, N, K>(lhs.data + at.offset(lb), lhs.strides[lr - 2], lhs.strides[lr - 1],
                                          rhs.data + at.offset(rbs), rhs.strides[rr - 2], rhs.strides[rr - 1],
                                          target.data() + at.offset(out_strides), out_strides[cr - 2],
                                          out_strides[cr - 1], alpha, beta);
        return;
    }

    // Operands BLAS cannot read as they lie are copied to row-major once.
    std::vector<T> lhs_copy, rhs_copy;
    auto la = detail::layout_of(lhs.strides[lr - 2], lhs.strides[lr - 1], m, k);
    if (!la.ok) {
        lhs_copy = detail::contiguous_copy(lhs);
        lhs = {{lhs.extents, row_major_strides(lhs.extents)}, lhs_copy.data()};
        la = detail::layout_of(lhs.strides[lr - 2], lhs.strides[lr - 1], m, k);
    }
    auto rb = detail::layout_of(rhs.strides[rr - 2], rhs.strides[rr - 1], k, n);
    if (!rb.ok) {
        rhs_copy = detail::contiguous_copy(rhs);
        rhs = {{rhs.extents, row_major_strides(rhs.extents)}, rhs_copy.data()};
        rb = detail::layout_of(rhs.strides[rr - 2], rhs.strides[rr - 1], k, n);
    }
    const std::size_t ldc = out_strides[cr - 2] > 0 ? static_cast<std::size_t>(out_strides[cr - 2]) : n;

    // rows x n of the result from lhs rows at a, rhs at b. One row (a decoding step's x @ W^T)
    // or one column is a matrix-vector product: GEMV reads the matrix once, where GEMM would
    // first copy it into its packed layout.
    const auto product = [&](std::size_t rows, const T* a, const T* b, T* c) {
        if (rows == 1)
            blas::gemv(!rb.transposed, rb.transposed ? n : k, rb.transposed ? k : n, alpha, b, rb.leading, a,
                       la.transposed ? la.leading : 1, beta, c, 1);
        else if (n == 1)
            blas::gemv(la.transposed, la.transposed ? k : rows, la.transposed ? rows : k, alpha, a, la.leading, b,
                       rb.leading, beta, c, ldc);
        else
            blas::gemm(la.transposed, rb.transposed, rows, n, k, alpha, a, la.leading, b, rb.leading, beta, c, ldc);
    };

    const auto lb = detail::batch_strides<batch>(lhs);
    const auto rbs = detail::batch_strides<batch>(rhs);
    batch_iterator<batch> at(out_extents);

    // One GEMM for the whole batch when lhs rows continue across it and rhs is shared.
    bool fold = !la.transposed && batch > 0;
    for (std::size_t i = 0; i < batch && fold; ++i) {
        const std::size_t inner_rows = [&] {
            std::size_t rows = m;
            for (std::size_t j = i + 1; j < batch; ++j) rows *= out_extents[j];
            return rows;
        }();
        fold = rbs[i] == 0 && lb[i] == static_cast<std::ptrdiff_t>(inner_rows * la.leading) &&
               out_strides[i] == static_cast<std::ptrdiff_t>(inner_rows * ldc);
    }
    if (fold || batch == 0) {
        product(m * at.count(), lhs.data, rhs.data, target.data());
        return;
    }
    for (; at; ++at) product(m, lhs.data + at.offset(lb), rhs.data + at.offset(rbs), target.data() + at.offset(out_strides));
}

}  // namespace shaped::kernels
