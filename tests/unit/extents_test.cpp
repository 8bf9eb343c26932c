// Extents too large for memory, and dims of extent zero. Each case must be a shape_error naming
// the dims, or the right (empty) answer: never a size that wrapped, a stride that overflowed, or
// a read outside an allocation (these tests also run under ASan and UBSan: make asan).

#include "file_support.hpp"
#include "reference.hpp"

#include <shaped/shaped.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

namespace {

using Catch::Matchers::Contains;
using file_support::error_message;
using A = shaped::dim<"A">;
using Bd = shaped::dim<"B">;
using Cd = shaped::dim<"C">;
using B2 = shaped::dim<"B", 2>;
using T = shaped::dim<"T">;
using C3 = shaped::dim<"C", 3>;

constexpr std::size_t size_max = std::numeric_limits<std::size_t>::max();

}  // namespace

TEST_CASE("extents whose element count overflows are a shape_error naming the dims", "[core][extents]") {
    const A wraps{size_max / 3 + 1};  // x 3 wraps to 2
    const Bd three{3};
    SECTION("each factory names itself") {
        CHECK_THAT(error_message<shaped::shape_error>([&] { (void)shaped::zeros<float, A, Bd>(wraps, three); }),
                   Contains("shaped::zeros: the extents' element count does not fit in memory: (A=6148914691236517206, B=3) of 4-byte elements span more than"));
        CHECK_THAT(error_message<shaped::shape_error>([&] { (void)shaped::ones<float, A, Bd>(wraps, three); }),
                   Contains("shaped::ones: the extents' element count does not fit in memory: (A=6148914691236517206, B=3)"));
        CHECK_THAT(error_message<shaped::shape_error>([&] { (void)shaped::full<float, A, Bd>(1.0f, wraps, three); }),
                   Contains("shaped::full"));
        shaped::Generator gen(1);
        CHECK_THAT(error_message<shaped::shape_error>([&] { (void)shaped::randn<float, A, Bd>(gen, wraps, three); }),
                   Contains("shaped::randn"));
        CHECK_THAT(error_message<shaped::shape_error>([&] { (void)shaped::rand<float, A, Bd>(gen, wraps, three); }),
                   Contains("shaped::rand"));
        CHECK_THAT(error_message<shaped::shape_error>([&] { (void)shaped::arange<float, A>(A{size_max}); }),
                   Contains("shaped::arange"));
        CHECK_THAT(error_message<shaped::shape_error>([&] { (void)shaped::tensor<float, A, Bd>({1.0f, 2.0f}, wraps, three); }),
                   Contains("shaped::tensor"));
    }
    SECTION("the constructors") {
        using Tensor = shaped::Tensor<float, A, Bd>;
        CHECK_THAT(error_message<shaped::shape_error>([&] { Tensor t(wraps, three); }),
                   Contains("shaped::Tensor: the extents' element count does not fit in memory: (A=6148914691236517206, B=3)"));
        CHECK_THAT(error_message<shaped::shape_error>([&] { Tensor t{Tensor::shape_type({size_max / 3 + 1, 3})}; }),
                   Contains("shaped::Tensor: the extents' element count does not fit in memory: (A=6148914691236517206, B=3)"));
    }
    SECTION("one extent whose bytes overflow, though its element count fits") {
        CHECK_THROWS_AS((shaped::zeros<float, A>(A{(std::size_t{1} << 62) + 1})), shaped::shape_error);
        CHECK_THROWS_AS((shaped::zeros<double, A>(A{std::size_t{1} << 60})), shaped::shape_error);
        CHECK_THROWS_AS((shaped::zeros<float, A>(A{size_max})), shaped::shape_error);  // not std::bad_alloc
    }
    SECTION("an empty tensor whose other extents would overflow its strides") {
        CHECK_THAT(error_message<shaped::shape_error>(
                       [&] { (void)shaped::zeros<float, A, Bd, Cd>(A{0}, Bd{2}, Cd{8831398157261209593u}); }),
                   Contains("(A=0, B=2, C=8831398157261209593)"));
    }
    SECTION("extents that fit, around an empty dim, make an empty tensor") {
        const auto t = shaped::zeros<float, A, Bd, Cd>(A{std::size_t{1} << 30}, Bd{0}, Cd{std::size_t{1} << 30});
        CHECK(t.size() == 0);
        CHECK(t.strides()[0] == 0);
        CHECK(t.strides()[1] == std::ptrdiff_t{1} << 30);
    }
    SECTION("a view over extents that do not fit") {
        float one = 0;
        using View = shaped::View<float, A, Bd>;
        CHECK_THAT(error_message<shaped::shape_error>([&] { View v(&one, {size_max / 3 + 1, 3}, {0, 0}); }),
                   Contains("shaped::View: the extents' element count does not fit in memory: (A=6148914691236517206, B=3)"));
    }
}

TEST_CASE("core's checked extent arithmetic", "[core][extents]") {
    STATIC_REQUIRE(shaped::checked_product(size_max / 3 + 1, 3) == std::nullopt);
    STATIC_REQUIRE(shaped::checked_product(6, 7) == 42);
    STATIC_REQUIRE(shaped::checked_sum(size_max, 1) == std::nullopt);
    STATIC_REQUIRE(shaped::static_extents_fit<4, 2, 3>);
    STATIC_REQUIRE(!shaped::static_extents_fit<4, std::size_t{1} << 62, 8>);
    STATIC_REQUIRE(!shaped::static_extents_fit<4, 0, 2, 8831398157261209593u>);
    const std::array<std::size_t, 3> empty{4, 0, 5};
    CHECK(shaped::checked_byte_count(empty, 8) == 0);
    const std::array<std::size_t, 2> full{4, 5};
    CHECK(shaped::checked_byte_count(full, 8) == 160);
    const std::array<std::size_t, 1> largest{shaped::max_array_bytes};
    CHECK(shaped::checked_byte_count(largest, 1) == shaped::max_array_bytes);
    CHECK(shaped::checked_byte_count(largest, 2) == std::nullopt);
}

TEST_CASE("split refuses new extents whose product wraps to the old one", "[reshape][extents]") {
    using C4 = shaped::dim<"C", 4>;
    auto x = shaped::zeros<float, C4>();
    // (2^63 + 2) x 2 = 2^64 + 4, which wraps to 4.
    const A outer{(std::size_t{1} << 63) + 2};
    CHECK_THAT(error_message<shaped::shape_error>([&] { (void)shaped::split<C4, A, shaped::dim<"B", 2>>(x, outer); }),
               Contains("shaped::split: the product of the new extents differs from the old extent: C(4) is not "
                        "A(9223372036854775810) x B(2)"));
    CHECK_THROWS_AS((shaped::split<C4, A, shaped::dim<"B", 2>>(shaped::eval(x), outer)), shaped::shape_error);
    CHECK_THROWS_AS((shaped::split<C4, A, Bd>(x, outer, Bd{2})), shaped::shape_error);
}

TEST_CASE("reductions along an empty dim: torch's answers, or a shape_error for max and min", "[reduce][extents]") {
    const auto x = shaped::zeros<float, B2, T>(T{0});
    SECTION("sum is zero; mean and var have none: NaN") {
        CHECK(ref::values(shaped::sum<T>(x)) == std::vector<double>{0, 0});
        const shaped::Tensor<float, B2> mean = shaped::mean<T>(x);
        const shaped::Tensor<float, B2> var = shaped::var<T>(x);
        for (std::size_t b = 0; b < 2; ++b) {
            CHECK(std::isnan(mean(b)));
            CHECK(std::isnan(var(b)));  // not -0
        }
    }
    SECTION("max and min name the empty dim") {
        CHECK_THAT(error_message<shaped::shape_error>([&] { (void)shaped::eval(shaped::max<T>(x)); }),
                   Contains("shaped::max: the reduced dim T(0) is empty"));
        CHECK_THAT(error_message<shaped::shape_error>([&] { (void)shaped::eval(shaped::min<-1>(x)); }),
                   Contains("shaped::min: the reduced dim T(0) is empty"));
    }
    SECTION("along a dim that is not empty, of an empty tensor: an empty result") {
        CHECK(shaped::eval(shaped::sum<B2>(x)).size() == 0);
        CHECK(shaped::eval(shaped::max<B2>(x)).size() == 0);
        CHECK(shaped::eval(shaped::var<0>(x)).size() == 0);
    }
    SECTION("over every element") {
        CHECK(shaped::sum(x).item() == 0);
        CHECK(std::isnan(shaped::mean(x).item()));
        CHECK(std::isnan(shaped::var(x).item()));
        CHECK_THROWS_AS(shaped::max(x), shaped::shape_error);
    }
    SECTION("softmax along either dim is empty") {
        CHECK(shaped::eval(shaped::softmax<T>(x)).size() == 0);
        CHECK(shaped::eval(shaped::softmax<B2>(x)).size() == 0);
        CHECK(shaped::eval(shaped::log_softmax<0>(x)).size() == 0);
    }
}

TEST_CASE("var of one element along a dim is NaN, as torch.var", "[reduce][extents]") {
    auto x = shaped::ones<double, B2, T>(T{1});
    const shaped::Tensor<double, B2> var = shaped::var<T>(x);
    CHECK(std::isnan(var(0)));
    CHECK(std::isnan(var(1)));
}

TEST_CASE("operations over an empty dim give empty results, or zeros where torch does", "[extents]") {
    const auto empty_rows = shaped::zeros<float, T, C3>(T{0});
    SECTION("a matmul over an empty inner dim is zeros") {
        const auto lhs = shaped::ones<float, B2, T>(T{0});
        const auto product = shaped::eval(shaped::matmul(lhs, empty_rows));
        REQUIRE(product.extents() == std::array<std::size_t, 2>{2, 3});
        CHECK(ref::values(product) == std::vector<double>(6, 0.0));
        const auto scaled = shaped::eval(shaped::matmul(lhs, empty_rows) * 2.0f);
        CHECK(ref::values(scaled) == std::vector<double>(6, 0.0));
    }
    SECTION("a matmul with no rows is empty") {
        const auto w = shaped::ones<float, C3, B2>();
        CHECK(shaped::eval(shaped::matmul(empty_rows, w)).size() == 0);
        CHECK(shaped::eval(shaped::matmul(empty_rows.mT(), empty_rows)).size() == 9);
    }
    SECTION("elementwise, structure, layer_norm and attention") {
        CHECK(shaped::eval(shaped::exp(empty_rows) * 2.0f + empty_rows).size() == 0);
        CHECK(shaped::eval(shaped::tril(empty_rows)).size() == 0);
        CHECK(shaped::eval(empty_rows.mT()).size() == 0);
        const auto weight = shaped::ones<float, C3>();
        CHECK(shaped::eval(shaped::layer_norm(empty_rows, weight, weight)).size() == 0);
        CHECK(shaped::eval(shaped::causal_attention(empty_rows, empty_rows, empty_rows, 0.5f)).size() == 0);
        CHECK(shaped::eval(shaped::concat<T>(empty_rows, empty_rows)).size() == 0);
    }
}

TEST_CASE("an expression of the wrong extent assigned into a View names the dim", "[tensor][extents]") {
    auto big = shaped::zeros<float, B2, T>(T{5});
    auto window = shaped::slice<T>(big, 0, 4);
    const auto three = shaped::ones<float, B2, T>(T{3});
    CHECK_THAT(error_message<shaped::shape_error>([&] { window = three * 2.0f; }),
               Contains("shaped::assign: the dims given do not meet the dims declared: declared T(4), given T(3)"));
    CHECK(ref::values(big) == std::vector<double>(10, 0.0));
}
