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
