// concat, permute and compile-time slices against naive index arithmetic.
#include <shaped/shaped.hpp>

#include <catch2/catch.hpp>

namespace {
using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 3>;
using C = shaped::dim<"C", 4>;
using Td = shaped::dim<"T">;
}  // namespace

TEST_CASE("concat joins along a named or positional dim, static or dynamic", "[concat]") {
    shaped::Generator gen(7);
    const auto x = shaped::randn<float, B, T, C>(gen);
    const auto y = shaped::randn<float, B, Td, C>(gen, Td{2});

    const auto z = shaped::concat<T>(x, y);
    static_assert(std::is_same_v<shaped::dims_of<decltype(z)>, shaped::dims<B, Td, C>>);
    REQUIRE(z.extents() == std::array<std::size_t, 3>{2, 5, 4});
    for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t t = 0; t < 5; ++t)
            for (std::size_t c = 0; c < 4; ++c) REQUIRE(z(b, t, c) == (t < 3 ? x(b, t, c) : y(b, t - 3, c)));

    // Static extents add up at compile time.
    const auto w = shaped::concat<-1>(x, x, x);
    static_assert(std::is_same_v<shaped::dims_of<decltype(w)>, shaped::dims<B, T, shaped::dim<"C", 12>>>);
    for (std::size_t c = 0; c < 12; ++c) REQUIRE(w(1, 2, c) == x(1, 2, c % 4));
}

TEST_CASE("concat refuses operands whose other dims differ at run time", "[concat]") {
    using Bd = shaped::dim<"B">;
    const auto a = shaped::zeros<float, Bd, T>(Bd{2});
    const auto b = shaped::zeros<float, Bd, T>(Bd{3});
    REQUIRE_THROWS_WITH(shaped::concat<T>(a, b), Catch::Contains("B(2)") && Catch::Contains("B(3)"));
}

TEST_CASE("permute reorders dims by position and by name", "[permute]") {
    shaped::Generator gen(8);
    const auto x = shaped::randn<float, B, T, C>(gen);
    shaped::Tensor<float, C, B, T> by_position = shaped::permute<2, 0, 1>(x);
    shaped::Tensor<float, C, B, T> by_name = shaped::permute<C, B, T>(x);
    shaped::Tensor<float, C, B, T> negative = shaped::permute<-1, -3, -2>(x);
    for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t t = 0; t < 3; ++t)
            for (std::size_t c = 0; c < 4; ++c) {
                REQUIRE(by_position(c, b, t) == x(b, t, c));
                REQUIRE(by_name(c, b, t) == x(b, t, c));
                REQUIRE(negative(c, b, t) == x(b, t, c));
            }
}

TEST_CASE("a slice with static bounds has a static extent", "[slice]") {
    auto x = shaped::arange<float, C>();
    auto middle = shaped::slice<C, 1, 3>(x);
    static_assert(std::is_same_v<shaped::dims_of<decltype(middle)>, shaped::dims<shaped::dim<"C", 2>>>);
    REQUIRE(middle(0) == 1.0f);
    REQUIRE(middle(1) == 2.0f);
    middle = shaped::full<float, shaped::dim<"C", 2>>(9.0f);
    REQUIRE(x(0) == 0.0f);
    REQUIRE(x(1) == 9.0f);
    REQUIRE(x(2) == 9.0f);
    REQUIRE(x(3) == 3.0f);
}
