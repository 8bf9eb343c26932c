// Reductions along a dim (sum, mean, max, min, var), over all elements, and softmax/log_softmax,
// each against a loop over the reduced line; by position and by name, along every axis, static
// and dynamic dims, float and double; and softmax's handling of -inf.

#include "reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace {

using Bd = shaped::dim<"B">;
using Td = shaped::dim<"T">;
using Cd = shaped::dim<"C">;

double line_max(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }
double line_min(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

// The (outer, n, inner) split of extents around an axis.
template <std::size_t R>
ref::axis_split split_at(const std::array<std::size_t, R>& e, std::size_t axis) {
    ref::axis_split s{1, e[axis], 1};
    for (std::size_t i = 0; i < axis; ++i) s.outer *= e[i];
    for (std::size_t i = axis + 1; i < R; ++i) s.inner *= e[i];
    return s;
}

template <class V>
double tol(std::size_t n) {
    return ref::tolerance<V>(n);
}

// Every reduction along Axis of x, against the loops.
template <int Axis, class X>
void check_reductions_along(const X& x) {
    using V = shaped::value_type_of<X>;
    constexpr std::size_t axis = shaped::normalize_axis<Axis, X::rank>;
    const auto s = split_at(x.extents(), axis);
    const auto xv = ref::values(x);
    INFO("axis " << Axis << " (outer " << s.outer << ", n " << s.n << ", inner " << s.inner << ")");
    STATIC_REQUIRE(std::is_same_v<shaped::dims_of<decltype(shaped::sum<Axis>(x))>,
                                  shaped::drop_at<axis, shaped::dims_of<X>>>);
    const auto check = [](const char* what, const auto& got, const auto& want, double t) {
        INFO(what);
        ref::require_close(got, want, t);
    };
    check("sum", ref::values(shaped::sum<Axis>(x)), ref::reduce(xv, s, ref::sum), tol<V>(s.n));
    check("mean", ref::values(shaped::mean<Axis>(x)), ref::reduce(xv, s, ref::mean), tol<V>(s.n));
    check("max", ref::values(shaped::max<Axis>(x)), ref::reduce(xv, s, line_max), 0.0);
    check("min", ref::values(shaped::min<Axis>(x)), ref::reduce(xv, s, line_min), 0.0);
    if (s.n > 1) check("var", ref::values(shaped::var<Axis>(x)), ref::reduce(xv, s, ref::var), tol<V>(s.n));
    check("softmax", ref::values(shaped::softmax<Axis>(x)), ref::softmax(xv, s), tol<V>(s.n));
    check("log_softmax", ref::values(shaped::log_softmax<Axis>(x)), ref::softmax(xv, s, true), tol<V>(s.n));
}

// Assigned into a Tensor declared by the user (not only through eval).
template <class V, class X>
void check_declared_targets(const X& x) {
    const auto xv = ref::values(x);
    const auto e = x.extents();
    const auto s = split_at(e, 2);
    shaped::Tensor<V, Bd, Td> total(Bd{e[0]}, Td{e[1]});
    total = shaped::sum<Cd>(x);
    ref::require_close(ref::values(total), ref::reduce(xv, s, ref::sum), tol<V>(s.n));
    const shaped::Tensor<V, Bd, Td> spread = shaped::var<-1>(x);
    ref::require_close(ref::values(spread), ref::reduce(xv, s, ref::var), tol<V>(s.n));
    shaped::Tensor<V, Bd, Td, Cd> probs(Bd{e[0]}, Td{e[1]}, Cd{e[2]});
    probs = shaped::softmax<Cd>(x);
    ref::require_close(ref::values(probs), ref::softmax(xv, s), tol<V>(s.n));
}

}  // namespace

TEMPLATE_TEST_CASE("reductions along every axis, dynamic dims", "[reduce]", float, double) {
    using V = TestType;
    const std::size_t b = GENERATE(1, 2), t = GENERATE(1, 3, 17), c = GENERATE(2, 8, 33);
    shaped::Tensor<V, Bd, Td, Cd> x(Bd{b}, Td{t}, Cd{c});
    ref::fill(x, b * 10000 + t * 100 + c);
    check_reductions_along<0>(x);
    check_reductions_along<1>(x);
    check_reductions_along<2>(x);
    check_reductions_along<-1>(x);
    check_reductions_along<-3>(x);
    check_declared_targets<V>(x);
}

TEMPLATE_TEST_CASE("reductions along every axis, static dims", "[reduce]", float, double) {
    using V = TestType;
    using B = shaped::dim<"B", 2>;
    using T = shaped::dim<"T", 5>;
    using C = shaped::dim<"C", 16>;
    shaped::Tensor<V, B, T, C> x;
    ref::fill(x, 1);
    check_reductions_along<0>(x);
    check_reductions_along<1>(x);
    check_reductions_along<2>(x);
    check_reductions_along<-2>(x);
    // The result of a static reduction is a Tensor of the remaining dims.
    const shaped::Tensor<V, B, C> over_t = shaped::sum<T>(x);
    ref::require_close(ref::values(over_t), ref::values(shaped::sum<1>(x)), 0.0);
    // A rank-1 reduction is a 0-d tensor.
    shaped::Tensor<V, C> row;
    ref::fill(row, 2);
    const shaped::Tensor<V> total = shaped::sum<C>(row);
    CHECK(std::abs(total.item() - ref::sum(ref::values(row))) <= tol<V>(16) * 10);
}

TEMPLATE_TEST_CASE("named reductions equal the positional ones", "[reduce]", float, double) {
    using V = TestType;
    shaped::Tensor<V, Bd, Td, Cd> x(Bd{2}, Td{3}, Cd{7});
    ref::fill(x, 3);
    CHECK(ref::values(shaped::sum<Bd>(x)) == ref::values(shaped::sum<0>(x)));
    CHECK(ref::values(shaped::mean<Td>(x)) == ref::values(shaped::mean<1>(x)));
    CHECK(ref::values(shaped::max<Cd>(x)) == ref::values(shaped::max<2>(x)));
    CHECK(ref::values(shaped::min<Td>(x)) == ref::values(shaped::min<-2>(x)));
    CHECK(ref::values(shaped::var<Cd>(x)) == ref::values(shaped::var<-1>(x)));
    CHECK(ref::values(shaped::softmax<Td>(x)) == ref::values(shaped::softmax<1>(x)));
    CHECK(ref::values(shaped::log_softmax<Cd>(x)) == ref::values(shaped::log_softmax<-1>(x)));
    // A static name finds a dynamic dim of that name.
    CHECK(ref::values(shaped::sum<shaped::dim<"C", 7>>(x)) == ref::values(shaped::sum<2>(x)));
}

TEMPLATE_TEST_CASE("reductions of expressions and views", "[reduce]", float, double) {
    using V = TestType;
    using T = shaped::dim<"T", 6>;
    using C = shaped::dim<"C", 9>;
    shaped::Tensor<V, T, C> x;
    ref::fill(x, 4);
    const auto xv = ref::values(x);
    std::vector<double> doubled(xv.size()), transposed(xv.size());
    for (std::size_t i = 0; i < xv.size(); ++i) doubled[i] = 2 * xv[i] + 1;
    for (std::size_t i = 0; i < 6; ++i)
        for (std::size_t j = 0; j < 9; ++j) transposed[j * 6 + i] = xv[i * 9 + j];

    ref::require_close(ref::values(shaped::sum<-1>(x * V{2} + V{1})), ref::reduce(doubled, {6, 9, 1}, ref::sum),
                       tol<V>(9));
    ref::require_close(ref::values(shaped::softmax<-1>(x * V{2} + V{1})), ref::softmax(doubled, {6, 9, 1}),
                       tol<V>(9));
    // A transposed operand: its rows are not contiguous.
    ref::require_close(ref::values(shaped::softmax<-1>(x.mT())), ref::softmax(transposed, {9, 6, 1}), tol<V>(6));
    ref::require_close(ref::values(shaped::max<-1>(x.mT())), ref::reduce(transposed, {9, 6, 1}, line_max), 0.0);
    // A slice along the softmax's own dim.
    const auto part = shaped::slice<C>(x, 2, 7);
    std::vector<double> pv;
    for (std::size_t i = 0; i < 6; ++i)
        for (std::size_t j = 2; j < 7; ++j) pv.push_back(xv[i * 9 + j]);
    ref::require_close(ref::values(shaped::softmax<-1>(part)), ref::softmax(pv, {6, 5, 1}), tol<V>(5));
    ref::require_close(ref::values(shaped::mean<C>(part)), ref::reduce(pv, {6, 5, 1}, ref::mean), tol<V>(5));
    // Written through a view whose rows lie apart: the softmax and a reduction.
    using W = shaped::dim<"C", 12>;
    shaped::Tensor<V, T, W> wide;
    shaped::slice<C>(wide, 2, 11) = shaped::softmax<-1>(x);
    std::vector<double> written;
    for (std::size_t i = 0; i < 6; ++i)
        for (std::size_t j = 2; j < 11; ++j) written.push_back(wide(i, j));
    ref::require_close(written, ref::softmax(xv, {6, 9, 1}), tol<V>(9));
    CHECK(wide(0, 0) == V{0});
    CHECK(wide(5, 11) == V{0});
    using K = shaped::dim<"K", 4>;
    shaped::Tensor<V, C, K> sums;
    shaped::select<K>(sums, 3) = shaped::sum<T>(x);
    for (std::size_t j = 0; j < 9; ++j) {
        double want = 0;
        for (std::size_t i = 0; i < 6; ++i) want += xv[i * 9 + j];
        CHECK(std::abs(sums(j, 3) - want) <= tol<V>(6) * (1 + std::abs(want)));
        CHECK(sums(j, 2) == V{0});
    }
}

TEMPLATE_TEST_CASE("full reductions give 0-d tensors", "[reduce]", float, double) {
    using V = TestType;
    const std::size_t t = GENERATE(1, 2, 31, 1000);
    shaped::Tensor<V, Bd, Td> x(Bd{3}, Td{t});
    ref::fill(x, 5 + t);
    const auto xv = ref::values(x);
    CHECK(std::abs(shaped::sum(x).item() - ref::sum(xv)) <= tol<V>(xv.size()) * (1 + std::abs(ref::sum(xv))));
    CHECK(std::abs(shaped::mean(x).item() - ref::mean(xv)) <= tol<V>(1));
    CHECK(std::abs(shaped::var(x).item() - ref::var(xv)) <= tol<V>(1) * (1 + ref::var(xv)));
    CHECK(shaped::max(x).item() == *std::max_element(xv.begin(), xv.end()));
    CHECK(shaped::min(x).item() == *std::min_element(xv.begin(), xv.end()));
    // Of an expression too.
    CHECK(std::abs(shaped::sum(x * V{2}).item() - 2 * ref::sum(xv)) <=
          tol<V>(xv.size()) * (1 + std::abs(2 * ref::sum(xv))));
    STATIC_REQUIRE(std::is_same_v<decltype(shaped::var(x)), shaped::Tensor<V>>);
}

TEST_CASE("var of one element is NaN, as torch.var", "[reduce]") {
    shaped::Tensor<double, Td> one(Td{1});
    one(0) = 3.0;
    CHECK(std::isnan(shaped::var(one).item()));
    CHECK(shaped::mean(one).item() == 3.0);
    shaped::Tensor<double, Bd, Td> rows(Bd{2}, Td{1});
    const shaped::Tensor<double, Bd> v = shaped::var<-1>(rows);
    CHECK(std::isnan(v(0)));
    CHECK(std::isnan(v(1)));
}

TEST_CASE("max and min of an empty tensor throw", "[reduce]") {
    const shaped::Tensor<float, Td> empty(Td{0});
    CHECK_THROWS_AS(shaped::max(empty), shaped::shape_error);
    CHECK_THROWS_AS(shaped::min(empty), shaped::shape_error);
}

TEMPLATE_TEST_CASE("softmax: -inf entries get exactly zero, an all -inf row is NaN", "[reduce]", float, double) {
    using V = TestType;
    const V inf = std::numeric_limits<V>::infinity();
    using T = shaped::dim<"T", 4>;
    using S = shaped::dim<"S", 5>;
    shaped::Tensor<V, T, S> x;
    ref::fill(x, 6);
    x(0, 1) = -inf;
    x(0, 4) = -inf;
    for (std::size_t s = 0; s < 5; ++s) x(2, s) = -inf;
    x(3, 0) = V{1000};  // large, but finite after the max is subtracted

    SECTION("along the last dim") {
        const shaped::Tensor<V, T, S> p = shaped::softmax<-1>(x);
        const shaped::Tensor<V, T, S> lp = shaped::log_softmax<-1>(x);
        CHECK(p(0, 1) == V{0});
        CHECK(p(0, 4) == V{0});
        CHECK(lp(0, 1) == -inf);
        CHECK(std::abs(p(0, 0) + p(0, 2) + p(0, 3) - 1) < 1e-6);
        for (std::size_t s = 0; s < 5; ++s) {
            CHECK(std::isnan(p(2, s)));
            CHECK(std::isnan(lp(2, s)));
        }
        CHECK(std::abs(p(3, 0) - 1) < 1e-6);
        CHECK(std::isfinite(lp(3, 1)));
        for (std::size_t s = 0; s < 5; ++s) CHECK(std::isfinite(p(1, s)));
    }
    SECTION("along the first dim") {
        const shaped::Tensor<V, S, T> xt = x.mT();
        const shaped::Tensor<V, S, T> p = shaped::softmax<0>(xt);
        const shaped::Tensor<V, S, T> lp = shaped::log_softmax<0>(xt);
        CHECK(p(1, 0) == V{0});
        CHECK(p(4, 0) == V{0});
        CHECK(lp(1, 0) == -inf);
        for (std::size_t s = 0; s < 5; ++s) {
            CHECK(std::isnan(p(s, 2)));
            CHECK(std::isnan(lp(s, 2)));
        }
        CHECK(std::abs(p(0, 3) - 1) < 1e-6);
    }
}

TEMPLATE_TEST_CASE("softmax rows sum to one", "[reduce]", float, double) {
    using V = TestType;
    const std::size_t n = GENERATE(1, 7, 64, 1000);
    shaped::Tensor<V, Td, Cd> x(Td{3}, Cd{n});
    ref::fill(x, 7 + n);
    const shaped::Tensor<V, Td> sums = shaped::sum<-1>(shaped::softmax<-1>(x * V{10}));
    for (std::size_t t = 0; t < 3; ++t) CHECK(std::abs(sums(t) - 1) < tol<V>(n));
}
