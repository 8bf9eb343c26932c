// The batched matrix product every matmul of shaped ends in (kernels/matmul.hpp), compiled once
// for float and double: the templates that call it only describe their operands' strides, so a
// program's each shape of product costs it no code of its own beyond that description.
#include <shaped/kernels/matmul.hpp>

#include <algorithm>
#include <array>
#include <vector>

namespace shaped::kernels::detail {

namespace {

// Steps a multi-index over any number of batch extents, the last fastest, once through each.
// The index lives inline up to 8 batch dims (a product allocates nothing it does not need).
class batch_walk {
public:
    explicit batch_walk(std::span<const std::size_t> extents) : extents_(extents) {
        if (extents.size() > inline_index_.size()) heap_index_.resize(extents.size());
        index_ = extents.size() > inline_index_.size() ? heap_index_.data() : inline_index_.data();
        for (const std::size_t e : extents) count_ *= e;
    }
    batch_walk(const batch_walk&) = delete;
    batch_walk& operator=(const batch_walk&) = delete;
    std::size_t count() const { return count_; }
    explicit operator bool() const { return step_ < count_; }
    batch_walk& operator++() {
        ++step_;
        for (std::size_t i = extents_.size(); i-- > 0;) {
            if (++index_[i] < extents_[i]) break;
            index_[i] = 0;
        }
        return *this;
    }
    std::ptrdiff_t offset(std::span<const std::ptrdiff_t> strides) const {
        std::ptrdiff_t offset = 0;
        for (std::size_t i = 0; i < extents_.size(); ++i) offset += static_cast<std::ptrdiff_t>(index_[i]) * strides[i];
        return offset;
    }

private:
    std::span<const std::size_t> extents_;
    std::array<std::size_t, 8> inline_index_{};
    std::vector<std::size_t> heap_index_;
    std::size_t* index_;
    std::size_t count_ = 1;
    std::size_t step_ = 0;
};

// One rows x cols matrix with any strides, copied row-major into `to`.
template <class T>
void copy_matrix(const T* from, std::ptrdiff_t row, std::ptrdiff_t col, std::size_t rows, std::size_t cols, T* to) {
    for (std::size_t i = 0; i < rows; ++i)
        for (std::size_t j = 0; j < cols; ++j)
            to[i * cols + j] = from[static_cast<std::ptrdiff_t>(i) * row + static_cast<std::ptrdiff_t>(j) * col];
}

template <class T>
void run(const batched_product<T>& p) {
    const std::size_t m = p.m, n = p.n, k = p.k;
    const std::size_t batch = p.batch.size();
    if (k == 0) {  // BLAS's answer, c = beta * c, without its pointers (beta 0: zeros, c unread)
        for (batch_walk at(p.batch); at; ++at)
            for (std::size_t i = 0; i < m; ++i) {
                T* row = p.c + at.offset(p.c_batch) + static_cast<std::ptrdiff_t>(i) * p.c_row;
                for (std::size_t j = 0; j < n; ++j) row[j] = p.beta == T{0} ? T{0} : p.beta * row[j];
            }
        return;
    }
    // Operands BLAS cannot read as they lie are copied row-major, a matrix at a time.
    auto la = layout_of(p.a_row, p.a_col, m, k);
    auto rb = layout_of(p.b_row, p.b_col, k, n);
    const bool copy_a = !la.ok, copy_b = !rb.ok;
    std::vector<T> a_copy(copy_a ? m * k : 0), b_copy(copy_b ? k * n : 0);
    if (copy_a) la = layout_of(static_cast<std::ptrdiff_t>(k), 1, m, k);
    if (copy_b) rb = layout_of(static_cast<std::ptrdiff_t>(n), 1, k, n);
    const std::size_t ldc = p.c_row > 0 ? static_cast<std::size_t>(p.c_row) : n;

    // rows x n of the result from lhs rows at a, rhs at b. One row (a decoding step's x @ W^T)
    // or one column is a matrix-vector product: GEMV reads the matrix once, where GEMM would
    // first copy it into its packed layout.
    const auto product = [&](std::size_t rows, const T* a, const T* b, T* c) {
        if (copy_a) {
            copy_matrix(a, p.a_row, p.a_col, rows, k, a_copy.data());
            a = a_copy.data();
        }
        if (copy_b) {
            copy_matrix(b, p.b_row, p.b_col, k, n, b_copy.data());
            b = b_copy.data();
        }
        if (rows == 1)
            blas::gemv(!rb.transposed, rb.transposed ? n : k, rb.transposed ? k : n, p.alpha, b, rb.leading, a,
                       la.transposed ? la.leading : 1, p.beta, c, 1);
        else if (n == 1)
            blas::gemv(la.transposed, la.transposed ? k : rows, la.transposed ? rows : k, p.alpha, a, la.leading, b,
                       rb.leading, p.beta, c, ldc);
        else
            blas::gemm(la.transposed, rb.transposed, rows, n, k, p.alpha, a, la.leading, b, rb.leading, p.beta, c, ldc);
    };

    batch_walk at(p.batch);
    // One GEMM for the whole batch when lhs rows continue across it and rhs is shared.
    bool fold = !copy_a && !la.transposed && batch > 0;
    for (std::size_t i = 0; i < batch && fold; ++i) {
        std::size_t inner_rows = m;
        for (std::size_t j = i + 1; j < batch; ++j) inner_rows *= p.batch[j];
        fold = p.b_batch[i] == 0 && p.a_batch[i] == static_cast<std::ptrdiff_t>(inner_rows * la.leading) &&
               p.c_batch[i] == static_cast<std::ptrdiff_t>(inner_rows * ldc);
    }
    if (fold || batch == 0) {
        product(m * at.count(), p.a, p.b, p.c);
        return;
    }
    for (; at; ++at) product(m, p.a + at.offset(p.a_batch), p.b + at.offset(p.b_batch), p.c + at.offset(p.c_batch));
}

}  // namespace

void batched_matmul(const batched_product<float>& p) { run(p); }
void batched_matmul(const batched_product<double>& p) { run(p); }

}  // namespace shaped::kernels::detail
