// Tensor: construction, storage, element access, copies; and the factories (zeros, ones, full,
// arange, tensor, randn, rand).

#include "reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include <shaped/interop/xtensor.hpp>

#include <xtensor/xarray.hpp>
#include <xtensor/xmanipulation.hpp>

namespace {

using Catch::Matchers::Contains;
using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 4>;
using C = shaped::dim<"C", 6>;
using Td = shaped::dim<"T">;
using Cd = shaped::dim<"C">;
using N = shaped::dim<"N", 100000>;

template <class X>
bool all_equal(const X& t, double v) {
    return std::all_of(t.data(), t.data() + t.size(), [&](auto x) { return x == v; });
}

}  // namespace

TEST_CASE("Tensor: zero-initialised, static and dynamic", "[tensor]") {
    const shaped::Tensor<float, B, T, C> s;
    CHECK(s.size() == 2 * 4 * 6);
    CHECK(s.extents() == std::array<std::size_t, 3>{2, 4, 6});
    CHECK(all_equal(s, 0.0));

    const shaped::Tensor<double, B, Td, C> d(Td{5});
    CHECK(d.extents() == std::array<std::size_t, 3>{2, 5, 6});
    CHECK(d.size() == 2 * 5 * 6);
    CHECK(all_equal(d, 0.0));

    // Two dynamic dims take their extents in order.
    const shaped::Tensor<float, Td, B, Cd> two(Td{3}, Cd{7});
    CHECK(two.extents() == std::array<std::size_t, 3>{3, 2, 7});
    CHECK(two.shape().numel() == 3 * 2 * 7);

    // A dynamic extent of zero is an empty tensor, not an error.
    const shaped::Tensor<float, B, Td> empty(Td{0});
    CHECK(empty.size() == 0);
}

TEST_CASE("Tensor: row-major strides and element access", "[tensor]") {
    shaped::Tensor<float, B, Td, C> t(Td{3});
    CHECK(t.strides() == std::array<std::ptrdiff_t, 3>{18, 6, 1});
    for (std::size_t i = 0; i < t.size(); ++i) t.data()[i] = static_cast<float>(i);
    for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t s = 0; s < 3; ++s)
            for (std::size_t c = 0; c < 6; ++c) REQUIRE(t(b, s, c) == static_cast<float>((b * 3 + s) * 6 + c));
    t(1, 2, 5) = -1.0f;
    CHECK(t.data()[t.size() - 1] == -1.0f);
    const auto& ct = t;
    CHECK(ct(1, 2, 5) == -1.0f);
}

TEST_CASE("Tensor: out-of-range access throws out_of_range naming the dim", "[tensor]") {
    shaped::Tensor<float, B, Td, C> t(Td{3});
    CHECK_THROWS_AS(t(0, 3, 0), std::out_of_range);
    CHECK_THROWS_WITH(t(0, 3, 0), Contains("T(3)") && Contains("3"));
    CHECK_THROWS_WITH(t(2, 0, 0), Contains("B(2)"));
    CHECK_THROWS_WITH(t(0, 0, 6), Contains("C(6)"));
    CHECK_THROWS_WITH(t(0, -1, 0), Contains("T(3)") && Contains("-1"));
    CHECK_NOTHROW(t(1, 2, 5));
}

TEST_CASE("Tensor: item() of one element, shape_error otherwise", "[tensor]") {
    shaped::Tensor<double> scalar;
    scalar.data()[0] = 2.5;
    CHECK(scalar.item() == 2.5);
    shaped::Tensor<float, Td> one(Td{1});
    one(0) = 7.0f;
    CHECK(one.item() == 7.0f);
    const shaped::Tensor<float, T> four;
    CHECK_THROWS_AS(four.item(), shaped::shape_error);
    CHECK_THROWS_WITH(four.item(), Contains("4 elements"));
}

TEST_CASE("Tensor: from_xtensor checks rank and static extents", "[tensor]") {
    xt::xarray<float> x = xt::xarray<float>::from_shape({2, 3});
    std::iota(x.begin(), x.end(), 0.0f);

    const auto d = shaped::Tensor<float, B, Cd>::from_xtensor(x);
    CHECK(d.extents() == std::array<std::size_t, 2>{2, 3});
    CHECK(d(1, 2) == 5.0f);

    const auto s = shaped::Tensor<float, B, shaped::dim<"C", 3>>::from_xtensor(x);
    CHECK(s(1, 0) == 3.0f);

    CHECK_THROWS_AS((shaped::Tensor<float, B, C>::from_xtensor(x)), shaped::shape_error);
    CHECK_THROWS_WITH((shaped::Tensor<float, B, C>::from_xtensor(x)), Contains("C(6)") && Contains("C(3)"));
    CHECK_THROWS_AS((shaped::Tensor<float, B, T, C>::from_xtensor(x)), shaped::shape_error);
    CHECK_THROWS_AS((shaped::Tensor<float, T, Cd>::from_xtensor(x)), shaped::shape_error);

    // An expression that is not stored row-major is read in its own order.
    const auto t = shaped::Tensor<float, shaped::dim<"C", 3>, B>::from_xtensor(xt::transpose(x));
    CHECK(t(2, 0) == 2.0f);
    CHECK(t(0, 1) == 3.0f);
}

TEST_CASE("Tensor: to_xtensor reads and writes the elements in place", "[tensor]") {
    shaped::Tensor<float, B, Cd> t(Cd{3});
    auto x = shaped::to_xtensor(t);
    CHECK(x.shape()[0] == 2);
    CHECK(x.shape()[1] == 3);
    x(1, 2) = 7.0f;
    CHECK(t(1, 2) == 7.0f);
    const auto transposed = shaped::to_xtensor(shaped::view_of(shaped::mT(t)));
    CHECK(transposed(2, 1) == 7.0f);
}

TEST_CASE("Tensor: copies are deep, moves keep the buffer", "[tensor]") {
    SECTION("inline storage") {
        shaped::Tensor<float, B, T> a;
        a(1, 1) = 3.0f;
        shaped::Tensor<float, B, T> b = a;
        b(1, 1) = 4.0f;
        CHECK(a(1, 1) == 3.0f);
        CHECK(b(1, 1) == 4.0f);
        a = b;
        CHECK(a(1, 1) == 4.0f);
        const shaped::Tensor<float, B, T> c = std::move(b);
        CHECK(c(1, 1) == 4.0f);
    }
    SECTION("heap storage") {
        shaped::Tensor<float, B, Td> a(Td{5});
        a(1, 4) = 3.0f;
        shaped::Tensor<float, B, Td> b = a;
        CHECK(b.data() != a.data());
        b(1, 4) = 4.0f;
        CHECK(a(1, 4) == 3.0f);
        const float* buffer = b.data();
        shaped::Tensor<float, B, Td> c = std::move(b);
        CHECK(c.data() == buffer);
        CHECK(c(1, 4) == 4.0f);
        // Copy-assigning a tensor of other extents takes the source's extents.
        shaped::Tensor<float, B, Td> d(Td{2});
        d = c;
        CHECK(d.extents() == c.extents());
        CHECK(d(1, 4) == 4.0f);
    }
}

TEST_CASE("Tensor: small static tensors store inline, large or dynamic ones on the heap", "[tensor]") {
    using R = shaped::dim<"R", 64>;
    using K64 = shaped::dim<"K", 64>;
    using K65 = shaped::dim<"K", 65>;
    static_assert(sizeof(float) * 64 * 64 == shaped::detail::max_inline_bytes);
    // The storage is the inline array itself: the object's size is its elements'.
    STATIC_REQUIRE(sizeof(shaped::Tensor<float, B, T, C>) >= sizeof(float) * 2 * 4 * 6);
    STATIC_REQUIRE(sizeof(shaped::Tensor<float, R, K64>) >= shaped::detail::max_inline_bytes);
    STATIC_REQUIRE(sizeof(shaped::Tensor<float, R, K65>) < 1024);
    STATIC_REQUIRE(sizeof(shaped::Tensor<float, B, Td>) < 1024);
    STATIC_REQUIRE(shaped::detail::stores_inline<float, B, T, C>);
    STATIC_REQUIRE(shaped::detail::stores_inline<float, R, K64>);
    STATIC_REQUIRE_FALSE(shaped::detail::stores_inline<float, R, K65>);
    STATIC_REQUIRE_FALSE(shaped::detail::stores_inline<double, R, K64>);
    STATIC_REQUIRE_FALSE(shaped::detail::stores_inline<float, B, Td>);

    // An inline tensor's elements live inside the object.
    const shaped::Tensor<float, B, T, C> small;
    const auto* begin = reinterpret_cast<const std::byte*>(&small);
    const auto* data = reinterpret_cast<const std::byte*>(small.data());
    CHECK((data >= begin && data < begin + sizeof(small)));
    const shaped::Tensor<float, R, K65> large;
    const auto* large_begin = reinterpret_cast<const std::byte*>(&large);
    const auto* large_data = reinterpret_cast<const std::byte*>(large.data());
    CHECK_FALSE((large_data >= large_begin && large_data < large_begin + sizeof(large)));
    CHECK(large.size() == 64 * 65);
    CHECK(all_equal(large, 0.0));
}

TEST_CASE("Tensor: assigning an expression checks a dynamic extent against a static one", "[tensor]") {
    const shaped::Tensor<float, B, Td> five(Td{5});
    CHECK_THROWS_WITH((shaped::Tensor<float, B, T>(five)), Contains("T(4)") && Contains("T(5)"));
    shaped::Tensor<float, B, T> target;
    CHECK_THROWS_AS(target = five * 1.0f, shaped::shape_error);
    // A dynamic target takes the source's extents.
    shaped::Tensor<float, B, Td> dynamic(Td{1});
    dynamic = five + 1.0f;
    CHECK(dynamic.extents() == five.extents());
    CHECK(all_equal(dynamic, 1.0));
}

// ---- factories ---------------------------------------------------------------------------------

TEST_CASE("zeros, ones, full", "[factories]") {
    CHECK(all_equal(shaped::zeros<float, B, T>(), 0.0));
    CHECK(all_equal(shaped::ones<double, B, T, C>(), 1.0));
    const auto f = shaped::full<float, B, Td>(2.5f, Td{3});
    CHECK(f.extents() == std::array<std::size_t, 2>{2, 3});
    CHECK(all_equal(f, 2.5));
    const auto z = shaped::zeros<double, Td, Cd>(Td{2}, Cd{9});
    CHECK(z.size() == 18);
    CHECK(all_equal(z, 0.0));
    const auto o = shaped::ones<float, Td>(Td{7});
    CHECK(o.size() == 7);
    CHECK(all_equal(o, 1.0));
}

TEST_CASE("arange counts along its dim", "[factories]") {
    const auto a = shaped::arange<float, T>();
    for (std::size_t i = 0; i < 4; ++i) CHECK(a(i) == static_cast<float>(i));
    const auto d = shaped::arange<double, Td>(Td{11});
    REQUIRE(d.size() == 11);
    for (std::size_t i = 0; i < 11; ++i) CHECK(d(i) == static_cast<double>(i));
}

TEST_CASE("tensor({...}) fills row-major and checks the count", "[factories]") {
    const auto t = shaped::tensor<float, B, shaped::dim<"C", 3>>({1, 2, 3, 4, 5, 6});
    CHECK(t(0, 0) == 1.0f);
    CHECK(t(0, 2) == 3.0f);
    CHECK(t(1, 0) == 4.0f);
    CHECK(t(1, 2) == 6.0f);
    const auto d = shaped::tensor<double, Td>({1, 2, 3}, Td{3});
    CHECK(d(2) == 3.0);
    CHECK_THROWS_AS((shaped::tensor<float, B, T>({1, 2, 3})), shaped::shape_error);
    CHECK_THROWS_WITH((shaped::tensor<float, B, T>({1, 2, 3})), Contains("3 values") && Contains("8 elements"));
    CHECK_THROWS_AS((shaped::tensor<double, Td>({1, 2, 3}, Td{4})), shaped::shape_error);
}

TEST_CASE("randn and rand: the same seed gives the same numbers, another seed others", "[factories]") {
    shaped::Generator g1(42), g2(42), g3(43);
    const auto a = shaped::randn<float, B, Td, C>(g1, Td{5});
    const auto b = shaped::randn<float, B, Td, C>(g2, Td{5});
    const auto c = shaped::randn<float, B, Td, C>(g3, Td{5});
    CHECK(ref::values(a) == ref::values(b));
    CHECK(ref::values(a) != ref::values(c));
    // The generator moves on: a second draw differs from the first.
    const auto a2 = shaped::randn<float, B, Td, C>(g1, Td{5});
    CHECK(ref::values(a2) != ref::values(a));

    shaped::Generator h1(7), h2(7), h3(8);
    const auto u = shaped::rand<double, B, T>(h1);
    CHECK(ref::values(u) == ref::values(shaped::rand<double, B, T>(h2)));
    CHECK(ref::values(u) != ref::values(shaped::rand<double, B, T>(h3)));
}

TEST_CASE("randn: mean about 0 and variance about 1 over 100k samples", "[factories]") {
    shaped::Generator gen(2024);
    const auto x = shaped::randn<double, N>(gen);
    const auto v = ref::values(x);
    // The standard error of the mean is 1/sqrt(n) ~ 0.003; of the variance sqrt(2/n) ~ 0.0045.
    CHECK(std::abs(ref::mean(v)) < 0.02);
    CHECK(std::abs(ref::var(v) - 1.0) < 0.03);
    // Roughly 68% within one standard deviation.
    const auto within = std::count_if(v.begin(), v.end(), [](double s) { return std::abs(s) < 1.0; });
    CHECK(std::abs(static_cast<double>(within) / v.size() - 0.6827) < 0.01);
    const auto f = shaped::randn<float, N>(gen);
    const auto fv = ref::values(f);
    CHECK(std::abs(ref::mean(fv)) < 0.02);
    CHECK(std::abs(ref::var(fv) - 1.0) < 0.03);
    CHECK(std::all_of(fv.begin(), fv.end(), [](double s) { return std::isfinite(s); }));
}

TEST_CASE("rand: uniform from 0 up to but never 1", "[factories]") {
    shaped::Generator gen(5);
    const auto x = shaped::rand<float, N>(gen);
    const auto v = ref::values(x);
    CHECK(std::all_of(v.begin(), v.end(), [](double s) { return s >= 0.0 && s < 1.0; }));
    CHECK(std::abs(ref::mean(v) - 0.5) < 0.01);
    CHECK(std::abs(ref::var(v) - 1.0 / 12.0) < 0.005);
    CHECK(*std::min_element(v.begin(), v.end()) < 0.001);
    CHECK(*std::max_element(v.begin(), v.end()) > 0.999);
}

TEST_CASE("rand<float>: a draw just below 1 in double does not round up to 1", "[factories]") {
    // Seed 250's 208811th draw is within 2^-25 of 1, where the nearest float is 1 itself.
    using M = shaped::dim<"M", 262144>;
    shaped::Generator gen(250);
    const auto x = shaped::rand<float, M>(gen);
    CHECK(*std::max_element(x.data(), x.data() + x.size()) < 1.0f);
    shaped::Generator wide(250);
    const auto y = shaped::rand<double, M>(wide);
    CHECK(*std::max_element(y.data(), y.data() + y.size()) < 1.0);
}
