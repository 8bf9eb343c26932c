// Projections: matmul over small static shapes runs as an unrolled loop, not BLAS, and must give
// BLAS's numbers for every layout a matmul meets (transposed operands, a shared rhs, strided
// views); a matmul plus a bias (a Linear layer) writes the bias and accumulates the product into
// the target, and must give the sum it stands for.

#include <shaped/shaped.hpp>

#include <catch2/catch.hpp>

#include <cmath>

namespace {

using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 4>;
using C = shaped::dim<"C", 6>;
using H = shaped::dim<"H", 16>;

// out[b, i, j] = sum_p a[b, i, p] * b[b, p, j], by element access.
template <class Out, class A, class Bm>
void require_product(const Out& out, const A& a, const Bm& b, double scale = 1.0) {
    const auto e = out.extents();
    const std::size_t k = a.extents()[2];
    for (std::size_t n = 0; n < e[0]; ++n)
        for (std::size_t i = 0; i < e[1]; ++i)
            for (std::size_t j = 0; j < e[2]; ++j) {
                double want = 0;
                for (std::size_t p = 0; p < k; ++p) want += static_cast<double>(a(n, i, p)) * static_cast<double>(b(n, p, j));
                CAPTURE(n, i, j);
                REQUIRE(std::abs(out(n, i, j) - scale * want) <= 1e-5 * (1 + std::abs(want)));
            }
}

}  // namespace

static_assert(shaped::kernels::detail::static_product_size<shaped::Tensor<float, B, T, H>, shaped::Tensor<float, B, T, C>>() ==
              4 * 16 * 6);
static_assert(shaped::kernels::detail::static_product_size<shaped::Tensor<float, B, shaped::dim<"T">, H>,
                                                           shaped::Tensor<float, B, shaped::dim<"T">, C>>() == 0);

TEST_CASE("small static matmul meets the definition in every layout", "[matmul]") {
    shaped::Generator gen(21);
    const auto x = shaped::randn<float, B, T, C>(gen);
    const auto w = shaped::randn<float, H, C>(gen);
    const auto y = shaped::randn<float, B, T, H>(gen);

    SECTION("x @ W^T, the rhs shared by the batch (a Linear layer)") {
        const shaped::Tensor<float, B, T, H> out = shaped::matmul(x, w.mT());
        const auto wt = shaped::eval(w.mT());
        shaped::Tensor<float, B, C, H> shared;
        for (std::size_t n = 0; n < 2; ++n)
            for (std::size_t p = 0; p < 6; ++p)
                for (std::size_t j = 0; j < 16; ++j) shared(n, p, j) = wt(p, j);
        require_product(out, x, shared);
    }
    SECTION("q @ k^T, scaled") {
        const shaped::Tensor<float, B, T, T> out = shaped::matmul(y, y.mT()) * 0.5f;
        require_product(out, y, shaped::eval(y.mT()), 0.5);
    }
    SECTION("into a strided view") {
        shaped::Tensor<float, B, T, T> storage;
        auto view = storage.view();
        view = shaped::matmul(y, y.mT());
        require_product(storage, y, shaped::eval(y.mT()));
    }
    SECTION("the same numbers as BLAS computes for the dynamic shape") {
        using Td = shaped::dim<"T">;
        shaped::Tensor<float, B, Td, C> xd(Td{4});
        std::copy(x.data(), x.data() + x.size(), xd.data());
        const shaped::Tensor<float, B, Td, H> blas = shaped::matmul(xd, w.mT());
        const shaped::Tensor<float, B, T, H> small = shaped::matmul(x, w.mT());
        for (std::size_t i = 0; i < small.size(); ++i)
            REQUIRE(std::abs(small.data()[i] - blas.data()[i]) <= 1e-5f * (1 + std::abs(blas.data()[i])));
    }
}

TEMPLATE_TEST_CASE("a matmul plus a bias is the bias added to the product", "[matmul]", float, double) {
    using V = TestType;
    using Td = shaped::dim<"T">;
    using O = shaped::dim<"O", 24>;
    shaped::Generator gen(5);
    const std::size_t t = GENERATE(4, 37);
    CAPTURE(t);
    const auto x = shaped::randn<V, B, Td, C>(gen, Td{t});
    const auto w = shaped::randn<V, O, C>(gen);
    const auto bias = shaped::randn<V, O>(gen);
    const auto product = shaped::eval(shaped::matmul(x, w.mT()));

    const auto check = [&](const auto& out) {
        for (std::size_t n = 0; n < 2; ++n)
            for (std::size_t i = 0; i < t; ++i)
                for (std::size_t j = 0; j < 24; ++j) {
                    const double want = static_cast<double>(product(n, i, j)) + static_cast<double>(bias(j));
                    REQUIRE(std::abs(out(n, i, j) - want) <= 1e-5 * (1 + std::abs(want)));
                }
    };
    STATIC_REQUIRE(shaped::kernels::detail::biased_matmul<decltype(shaped::matmul(x, w.mT()) + bias)>::value);
    STATIC_REQUIRE(shaped::kernels::detail::biased_matmul<decltype(bias + shaped::matmul(x, w.mT()))>::value);
    const shaped::Tensor<V, B, Td, O> right = shaped::matmul(x, w.mT()) + bias;
    check(right);
    const shaped::Tensor<V, B, Td, O> left = bias + shaped::matmul(x, w.mT());
    check(left);

    // Static and small: the unrolled loop accumulates onto the bias too.
    shaped::Tensor<V, B, T, C> xs;
    shaped::Tensor<V, B, T, O> small_product;
    std::copy(x.data(), x.data() + xs.size(), xs.data());
    small_product = shaped::matmul(xs, w.mT());
    const shaped::Tensor<V, B, T, O> small = shaped::matmul(xs, w.mT()) + bias;
    for (std::size_t i = 0; i < small.size(); ++i) {
        const double want = static_cast<double>(small_product.data()[i]) + static_cast<double>(bias.data()[i % 24]);
        REQUIRE(std::abs(small.data()[i] - want) <= 1e-5 * (1 + std::abs(want)));
    }

    // Into its own input: x = x @ W^T + b with a square W cannot write x while reading it.
    using Cd = shaped::dim<"C", 6>;
    auto square = shaped::randn<V, Cd, C>(gen);
    auto bias6 = shaped::randn<V, Cd>(gen);
    auto y = shaped::eval(x);
    const auto want = shaped::eval(shaped::eval(shaped::matmul(y, square.mT())) + bias6);
    y = shaped::matmul(y, square.mT()) + bias6;
    for (std::size_t i = 0; i < y.size(); ++i)
        REQUIRE(std::abs(y.data()[i] - want.data()[i]) <= 1e-5 * (1 + std::abs(want.data()[i])));
}

TEMPLATE_TEST_CASE("a product with one row or one column is the GEMV it stands for", "[matmul]", float, double) {
    using V = TestType;
    using One = shaped::dim<"T", 1>;
    using Kd = shaped::dim<"K">;
    using Nd = shaped::dim<"N">;
    const std::size_t k = GENERATE(1, 7, 384);
    const std::size_t n = GENERATE(1, 5, 1152);
    CAPTURE(k, n);
    shaped::Generator gen(k + n);
    const auto x = shaped::randn<V, B, One, Kd>(gen, Kd{k});
    const auto w = shaped::randn<V, Nd, Kd>(gen, Nd{n}, Kd{k});
    const auto wt = shaped::eval(w.mT());
    const auto check = [&](const auto& out, const auto& lhs, const auto& rhs) {
        const auto e = out.extents();
        for (std::size_t b = 0; b < e[0]; ++b)
            for (std::size_t i = 0; i < e[1]; ++i)
                for (std::size_t j = 0; j < e[2]; ++j) {
                    double want = 0;
                    for (std::size_t p = 0; p < k; ++p)
                        want += static_cast<double>(lhs(b, i, p)) * static_cast<double>(rhs(p, j));
                    REQUIRE(std::abs(out(b, i, j) - want) <= 1e-4 * (1 + std::abs(want)));
                }
    };
    // One row: x @ W^T (W read transposed) and x @ W^T stored as such.
    const shaped::Tensor<V, B, One, Nd> row = shaped::matmul(x, w.mT());
    check(row, x, wt);
    const shaped::Tensor<V, B, One, Nd> row_plain = shaped::matmul(x, wt);
    check(row_plain, x, wt);
    // One row read transposed: x as the transpose of a (K, 1) column.
    const auto column = shaped::eval(shaped::transpose<1, 2>(x));
    const shaped::Tensor<V, B, One, Nd> row_of_column = shaped::matmul(shaped::transpose<1, 2>(column), w.mT());
    check(row_of_column, x, wt);
    // One column: W @ v for v (K, 1), and W^T @ u for u (N, 1).
    using OneC = shaped::dim<"O", 1>;
    const auto v = shaped::randn<V, B, Kd, OneC>(gen, Kd{k});
    const shaped::Tensor<V, B, Nd, OneC> col = shaped::matmul(w, v);
    for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t i = 0; i < n; ++i) {
            double want = 0;
            for (std::size_t p = 0; p < k; ++p) want += static_cast<double>(w(i, p)) * static_cast<double>(v(b, p, 0));
            REQUIRE(std::abs(col(b, i, 0) - want) <= 1e-4 * (1 + std::abs(want)));
        }
    const auto u = shaped::randn<V, B, Nd, OneC>(gen, Nd{n});
    const shaped::Tensor<V, B, Kd, OneC> col_t = shaped::matmul(w.mT(), u);
    for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t i = 0; i < k; ++i) {
            double want = 0;
            for (std::size_t p = 0; p < n; ++p) want += static_cast<double>(w(p, i)) * static_cast<double>(u(b, p, 0));
            REQUIRE(std::abs(col_t(b, i, 0) - want) <= 1e-4 * (1 + std::abs(want)));
        }
}
