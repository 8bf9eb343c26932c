// Operations that move or mask positions: tril/triu, transpose by position and by name, rename,
// and the views slice and select (read and written through), against index loops.

#include "reference.hpp"

#include <stdexcept>

namespace {

using Catch::Matchers::Contains;
using B = shaped::dim<"B", 2>;
using Td = shaped::dim<"T">;
using Sd = shaped::dim<"S">;

// Row-major element of a rank-3 array.
double at3(const std::vector<double>& v, const std::array<std::size_t, 3>& e, std::size_t i, std::size_t j,
           std::size_t k) {
    return v[(i * e[1] + j) * e[2] + k];
}

}  // namespace

TEMPLATE_TEST_CASE("tril and triu keep a triangle, shifted by the diagonal", "[structure]", float, double) {
    using V = TestType;
    const std::size_t rows = GENERATE(1, 3, 5), cols = GENERATE(1, 4, 5);
    const long diagonal = GENERATE(-2, -1, 0, 1, 3);
    INFO(rows << "x" << cols << " diagonal " << diagonal);
    shaped::Tensor<V, B, Td, Sd> x(Td{rows}, Sd{cols});
    ref::fill(x, rows * 10 + cols);
    const auto xv = ref::values(x);
    const auto e = x.extents();
    const shaped::Tensor<V, B, Td, Sd> lower = shaped::tril(x, diagonal);
    const shaped::Tensor<V, B, Td, Sd> upper = shaped::triu(x, diagonal);
    for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t i = 0; i < rows; ++i)
            for (std::size_t j = 0; j < cols; ++j) {
                const long d = static_cast<long>(j) - static_cast<long>(i);
                const double v = at3(xv, e, b, i, j);
                REQUIRE(lower(b, i, j) == (d <= diagonal ? v : 0.0));
                REQUIRE(upper(b, i, j) == (d >= diagonal ? v : 0.0));
            }
}

TEST_CASE("tril of ones is the causal mask, static dims", "[structure]") {
    using T = shaped::dim<"T", 6>;
    const shaped::Tensor<float, T, T> mask = shaped::tril(shaped::ones<float, T, T>());
    for (std::size_t i = 0; i < 6; ++i)
        for (std::size_t j = 0; j < 6; ++j) CHECK(mask(i, j) == (j <= i ? 1.0f : 0.0f));
    // tril of an expression, and tril + triu less the diagonal gives back the whole.
    shaped::Tensor<double, T, T> x;
    ref::fill(x, 1);
    const shaped::Tensor<double, T, T> whole = shaped::tril(x) + shaped::triu(x, 1);
    CHECK(ref::values(whole) == ref::values(x));
    const shaped::Tensor<double, T, T> doubled = shaped::tril(x * 2.0);
    for (std::size_t i = 0; i < 6; ++i)
        for (std::size_t j = 0; j < 6; ++j) CHECK(doubled(i, j) == (j <= i ? 2 * x(i, j) : 0.0));
}

TEMPLATE_TEST_CASE("transpose by position and by name", "[structure]", float, double) {
    using V = TestType;
    using C = shaped::dim<"C", 3>;
    shaped::Tensor<V, B, Td, C> x(Td{5});
    ref::fill(x, 2);
    const auto xv = ref::values(x);
    const auto e = x.extents();

    const shaped::Tensor<V, B, C, Td> a = shaped::transpose<1, 2>(x);
    const shaped::Tensor<V, B, C, Td> b = shaped::transpose<-1, -2>(x);
    const shaped::Tensor<V, B, C, Td> c = shaped::transpose<C, Td>(x);
    const shaped::Tensor<V, B, C, Td> m = x.mT();
    const shaped::Tensor<V, C, Td, B> d = shaped::transpose<0, 2>(x);
    const shaped::Tensor<V, Td, B, C> f = shaped::transpose<B, shaped::dim<"T", 5>>(x);
    STATIC_REQUIRE(std::is_same_v<shaped::dims_of<decltype(shaped::transpose<0, 2>(x))>, shaped::dims<C, Td, B>>);
    for (std::size_t i = 0; i < 2; ++i)
        for (std::size_t t = 0; t < 5; ++t)
            for (std::size_t k = 0; k < 3; ++k) {
                const double v = at3(xv, e, i, t, k);
                REQUIRE(a(i, k, t) == v);
                REQUIRE(b(i, k, t) == v);
                REQUIRE(c(i, k, t) == v);
                REQUIRE(m(i, k, t) == v);
                REQUIRE(d(k, t, i) == v);
                REQUIRE(f(t, i, k) == v);
            }
    // Transposing twice is the identity, and a transposed expression transposes its values.
    const shaped::Tensor<V, B, Td, C> back = shaped::transpose<1, 2>(shaped::transpose<1, 2>(x));
    CHECK(ref::values(back) == xv);
    const shaped::Tensor<V, B, C, Td> scaled = shaped::transpose<1, 2>(x * V{3});
    for (std::size_t i = 0; i < 2; ++i)
        for (std::size_t t = 0; t < 5; ++t)
            for (std::size_t k = 0; k < 3; ++k) REQUIRE(scaled(i, k, t) == V{3} * x(i, t, k));
}

TEST_CASE("rename changes a dim's name, not its values", "[structure]") {
    using T = shaped::dim<"T", 4>;
    using U = shaped::dim<"U", 3>;
    using S = shaped::dim<"S", 3>;
    shaped::Tensor<float, B, T, U> w;
    ref::fill(w, 3);
    STATIC_REQUIRE(std::is_same_v<shaped::dims_of<decltype(shaped::rename<U, S>(w))>, shaped::dims<B, T, S>>);
    const shaped::Tensor<float, B, T, S> r = shaped::rename<U, S>(w);
    CHECK(ref::values(r) == ref::values(w));
    // The new name is what the named forms find.
    const shaped::Tensor<float, B, T> over_s = shaped::sum<S>(r);
    for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t t = 0; t < 4; ++t) {
            double want = 0;
            for (std::size_t s = 0; s < 3; ++s) want += w(b, t, s);
            CHECK(std::abs(over_s(b, t) - want) < 1e-5);
        }
    // Renamed inside an expression, and a dynamic dim keeps its run-time extent.
    const shaped::Tensor<float, B, T, S> r2 = shaped::rename<U, S>(w * 2.0f);
    CHECK(r2(1, 3, 2) == 2.0f * w(1, 3, 2));
    shaped::Tensor<double, B, Td> d(Td{7});
    const shaped::Tensor<double, B, Sd> ds = shaped::rename<Td, Sd>(d);
    CHECK(ds.extents() == std::array<std::size_t, 2>{2, 7});
}

TEMPLATE_TEST_CASE("slice reads a range along a dim", "[structure]", float, double) {
    using V = TestType;
    using C = shaped::dim<"C", 6>;
    shaped::Tensor<V, B, Td, C> x(Td{5});
    ref::fill(x, 4);
    const std::size_t begin = GENERATE(0, 1, 4), end = GENERATE(4, 5);
    INFO("[" << begin << ", " << end << ")");
    const auto s = shaped::slice<Td>(x, begin, end);
    STATIC_REQUIRE(std::is_same_v<shaped::dims_of<decltype(s)>, shaped::dims<B, Td, C>>);
    REQUIRE(s.extents() == std::array<std::size_t, 3>{2, end - begin, 6});
    for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t t = 0; t < end - begin; ++t)
            for (std::size_t c = 0; c < 6; ++c) REQUIRE(s(b, t, c) == x(b, begin + t, c));
    // Along a static dim the result's dim is dynamic.
    const auto cs = shaped::slice<C>(x, 2, 5);
    STATIC_REQUIRE(std::is_same_v<shaped::dims_of<decltype(cs)>, shaped::dims<B, Td, shaped::dim<"C">>>);
    const shaped::Tensor<V, B, Td, shaped::dim<"C">> owned = cs;
    for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t t = 0; t < 5; ++t)
            for (std::size_t c = 0; c < 3; ++c) REQUIRE(owned(b, t, c) == x(b, t, c + 2));
    // A slice in an expression.
    const shaped::Tensor<V, B, Td, shaped::dim<"C">> twice = cs * V{2};
    CHECK(twice(1, 4, 2) == V{2} * x(1, 4, 4));
}

TEST_CASE("slice and select of a slice", "[structure]") {
    using C = shaped::dim<"C", 6>;
    shaped::Tensor<float, B, Td, C> x(Td{5});
    ref::fill(x, 5);
    auto s = shaped::slice<Td>(x, 1, 4);
    const auto ss = shaped::slice<C>(s, 3, 6);
    const auto row = shaped::select<Td>(ss, 2);
    REQUIRE(row.extents() == std::array<std::size_t, 2>{2, 3});
    for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t c = 0; c < 3; ++c) CHECK(row(b, c) == x(b, 3, c + 3));
}

TEST_CASE("writing through slice and select views", "[structure]") {
    using C = shaped::dim<"C", 4>;
    shaped::Tensor<double, B, Td, C> x(Td{5});
    ref::fill(x, 6);
    const auto before = ref::values(x);
    const auto e = x.extents();

    shaped::slice<Td>(x, 1, 3) = shaped::zeros<double, B, Td, C>(Td{2});
    shaped::select<C>(x, 3) = shaped::full<double, B, Td>(7.0, Td{5});
    auto view = shaped::select<B>(x, 1);
    view(4, 0) = -1.0;
    for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t t = 0; t < 5; ++t)
            for (std::size_t c = 0; c < 4; ++c) {
                double want = at3(before, e, b, t, c);
                if (t == 1 || t == 2) want = 0.0;
                if (c == 3) want = 7.0;
                if (b == 1 && t == 4 && c == 0) want = -1.0;
                REQUIRE(x(b, t, c) == want);
            }
    // The extents of what is written must match the view's.
    CHECK_THROWS_AS((shaped::slice<Td>(x, 0, 2) = shaped::zeros<double, B, Td, C>(Td{3})), shaped::shape_error);
}

TEST_CASE("one view assigned to another copies the elements", "[structure]") {
    using C = shaped::dim<"C", 3>;
    shaped::Tensor<float, B, C> x;
    ref::fill(x, 7);
    const auto row1 = ref::values(shaped::select<B>(x, 1));
    // The same view type on both sides: PyTorch's x[0] = x[1].
    shaped::select<B>(x, 0) = shaped::select<B>(x, 1);
    for (std::size_t c = 0; c < 3; ++c) CHECK(x(0, c) == row1[c]);
    auto first = shaped::select<B>(x, 0);
    const auto second = shaped::select<B>(x, 1);
    x(1, 2) = 42.0f;
    first = second;
    CHECK(x(0, 2) == 42.0f);
    CHECK(first.data() == x.data());
}

TEST_CASE("slice and select out of range throw, naming the dim", "[structure]") {
    using C = shaped::dim<"C", 4>;
    shaped::Tensor<float, B, Td, C> x(Td{5});
    CHECK_THROWS_AS(shaped::slice<Td>(x, 2, 6), shaped::shape_error);
    CHECK_THROWS_WITH(shaped::slice<Td>(x, 2, 6), Contains("T(5)") && Contains("[2, 6)"));
    CHECK_THROWS_AS(shaped::slice<Td>(x, 3, 2), shaped::shape_error);
    CHECK_NOTHROW(shaped::slice<Td>(x, 5, 5));
    CHECK(shaped::slice<Td>(x, 5, 5).size() == 0);
    CHECK_THROWS_AS(shaped::select<C>(x, 4), std::out_of_range);
    CHECK_THROWS_WITH(shaped::select<C>(x, 4), Contains("C(4)"));
    CHECK_THROWS_WITH(shaped::select<Td>(x, 5), Contains("T(5)"));
    // Element access through a view is checked against the view's extents.
    const auto s = shaped::slice<Td>(x, 1, 3);
    CHECK_THROWS_AS(s(0, 2, 0), std::out_of_range);
    CHECK_THROWS_WITH(s(0, 2, 0), Contains("T(2)"));
    CHECK_NOTHROW(s(1, 1, 3));
}

TEST_CASE("views of a const tensor are read-only", "[structure]") {
    using C = shaped::dim<"C", 3>;
    shaped::Tensor<float, B, C> x;
    ref::fill(x, 8);
    const auto& cx = x;
    const auto row = shaped::select<B>(cx, 1);
    STATIC_REQUIRE(std::is_same_v<std::remove_cvref_t<decltype(row)>, shaped::View<const float, C>>);
    STATIC_REQUIRE(std::is_same_v<decltype(row(0)), const float&>);
    CHECK(row(2) == x(1, 2));
    const auto whole = cx.view();
    CHECK(whole(1, 1) == x(1, 1));
    CHECK(whole.is_contiguous());
    CHECK_FALSE(shaped::select<C>(cx, 0).is_contiguous());
}
