// Elementwise expressions against loops over the elements: arithmetic with tensors and scalars,
// broadcasting by position, run-time extent checks, unary math, comparisons, where, masked_fill.

#include "reference.hpp"

#include <cmath>
#include <functional>
#include <limits>

namespace {

using Catch::Matchers::Contains;
using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 3>;
using C = shaped::dim<"C", 5>;
using Td = shaped::dim<"T">;
using Cd = shaped::dim<"C">;

// want[i] = f(a[i], b[i]) where b broadcasts from the right: b's elements repeat every b.size().
template <class F>
std::vector<double> zip(const std::vector<double>& a, const std::vector<double>& b, F f) {
    std::vector<double> out(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) out[i] = f(a[i], b[i % b.size()]);
    return out;
}

template <class F>
std::vector<double> map(const std::vector<double>& a, F f) {
    std::vector<double> out(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) out[i] = f(a[i]);
    return out;
}

// Both operands as the element type computes them (a float result is compared with a reference
// computed from the same float inputs).
template <class V>
double tol() {
    return std::is_same_v<V, float> ? 1e-6 : 1e-14;
}

}  // namespace

TEMPLATE_TEST_CASE("arithmetic on tensors of the same dims", "[elementwise]", float, double) {
    using V = TestType;
    shaped::Tensor<V, B, T, C> a, b;
    ref::fill(a, 1);
    ref::fill(b, 2);
    const auto av = ref::values(a), bv = ref::values(b);
    ref::require_close(ref::values(a + b), zip(av, bv, std::plus<>{}), tol<V>());
    ref::require_close(ref::values(a - b), zip(av, bv, std::minus<>{}), tol<V>());
    ref::require_close(ref::values(a * b), zip(av, bv, std::multiplies<>{}), tol<V>());
    ref::require_close(ref::values(a / b), zip(av, bv, std::divides<>{}), tol<V>());
    ref::require_close(ref::values(a * b + a / (b - V{7})),
                       zip(av, bv, [](double x, double y) { return x * y + x / (y - 7); }), tol<V>());
    ref::require_close(ref::values(-a), map(av, std::negate<>{}), 0.0);
    ref::require_close(ref::values(shaped::maximum(a, b)),
                       zip(av, bv, [](double x, double y) { return std::max(x, y); }), 0.0);
    ref::require_close(ref::values(shaped::minimum(a, b)),
                       zip(av, bv, [](double x, double y) { return std::min(x, y); }), 0.0);
}

TEMPLATE_TEST_CASE("arithmetic with a scalar on either side", "[elementwise]", float, double) {
    using V = TestType;
    shaped::Tensor<V, B, Td, C> a(Td{7});
    ref::fill(a, 3);
    const auto av = ref::values(a);
    ref::require_close(ref::values(a + 2), map(av, [](double x) { return x + 2; }), tol<V>());
    ref::require_close(ref::values(2 + a), map(av, [](double x) { return 2 + x; }), tol<V>());
    ref::require_close(ref::values(a - 0.5), map(av, [](double x) { return x - 0.5; }), tol<V>());
    ref::require_close(ref::values(0.5 - a), map(av, [](double x) { return 0.5 - x; }), tol<V>());
    ref::require_close(ref::values(a * 3.0f), map(av, [](double x) { return x * 3; }), tol<V>());
    ref::require_close(ref::values(3.0f * a), map(av, [](double x) { return 3 * x; }), tol<V>());
    ref::require_close(ref::values(a / 4), map(av, [](double x) { return x / 4; }), tol<V>());
    ref::require_close(ref::values(4 / (a + 10)), map(av, [](double x) { return 4 / (x + 10); }), tol<V>());
    // The scalar takes the tensor's element type, as in PyTorch.
    STATIC_REQUIRE(std::is_same_v<shaped::value_type_of<decltype(a * 2.0)>, V>);
    STATIC_REQUIRE(std::is_same_v<shaped::value_type_of<decltype(1 + a)>, V>);
}

TEMPLATE_TEST_CASE("broadcasting by position from the right", "[elementwise]", float, double) {
    using V = TestType;
    shaped::Tensor<V, B, T, C> x;
    shaped::Tensor<V, C> bias;
    shaped::Tensor<V, T, C> pos;
    ref::fill(x, 4);
    ref::fill(bias, 5);
    ref::fill(pos, 6);
    const auto xv = ref::values(x), bv = ref::values(bias), pv = ref::values(pos);

    shaped::Tensor<V, B, T, C> y = x + bias;
    ref::require_close(ref::values(y), zip(xv, bv, std::plus<>{}), tol<V>());
    y = bias * x;
    ref::require_close(ref::values(y), zip(xv, bv, std::multiplies<>{}), tol<V>());
    y = x - pos;
    ref::require_close(ref::values(y), zip(xv, pv, std::minus<>{}), tol<V>());
    y = pos - x;  // the longer operand on the right
    ref::require_close(ref::values(y), zip(xv, pv, [](double a, double b) { return b - a; }), tol<V>());
    STATIC_REQUIRE(std::is_same_v<shaped::dims_of<decltype(pos + x)>, shaped::dims<B, T, C>>);

    // A static extent of 1 spreads: (B, T, 1) * (C) is (B, T, C).
    shaped::Tensor<V, B, T, shaped::dim<"C", 1>> column;
    ref::fill(column, 7);
    const auto cv = ref::values(column);
    shaped::Tensor<V, B, T, C> outer = column * bias;
    std::vector<double> want(2 * 3 * 5);
    for (std::size_t r = 0; r < 6; ++r)
        for (std::size_t c = 0; c < 5; ++c) want[r * 5 + c] = cv[r] * bv[c];
    ref::require_close(ref::values(outer), want, tol<V>());
}

// An operand that broadcasts, nested inside another elementwise node whose own operands agree:
// (x + bias) + c, exp(x + bias). With every extent static, xtensor once judged such a chain by
// its outer operands alone and read the bias linearly, past its end.
TEMPLATE_TEST_CASE("a broadcasting operand nested in a larger elementwise expression", "[elementwise]", float, double) {
    using V = TestType;
    shaped::Tensor<V, B, T, C> x, c;
    shaped::Tensor<V, C> bias;
    shaped::Tensor<V, T, C> pos;
    ref::fill(x, 40);
    ref::fill(c, 41);
    ref::fill(bias, 42);
    ref::fill(pos, 43);
    const auto xv = ref::values(x), cv = ref::values(c), bv = ref::values(bias), pv = ref::values(pos);
    const auto plus_bias = zip(xv, bv, std::plus<>{});

    const shaped::Tensor<V, B, T, C> nested_left = (x + bias) + c;
    ref::require_close(ref::values(nested_left), zip(plus_bias, cv, std::plus<>{}), tol<V>() * 2);
    const shaped::Tensor<V, B, T, C> nested_right = c * (bias - x);
    ref::require_close(ref::values(nested_right),
                       zip(cv, zip(xv, bv, [](double a, double b) { return b - a; }), std::multiplies<>{}), tol<V>() * 4);
    const shaped::Tensor<V, B, T, C> unary = shaped::exp(x + bias);
    ref::require_close(ref::values(unary), map(plus_bias, [](double v) { return std::exp(v); }), tol<V>() * 8);
    const shaped::Tensor<V, B, T, C> deep = shaped::tanh((pos * x + bias) * V{2}) + c;
    std::vector<double> want(xv.size());
    for (std::size_t i = 0; i < xv.size(); ++i)
        want[i] = std::tanh((pv[i % pv.size()] * xv[i] + bv[i % bv.size()]) * 2) + cv[i];
    ref::require_close(ref::values(deep), want, tol<V>() * 8);
    // The same with dynamic extents, which xtensor checks at run time.
    const shaped::Tensor<V, B, Td, Cd> xd = x, cd = c;
    const shaped::Tensor<V, Cd> bd = bias;
    const shaped::Tensor<V, B, Td, Cd> dynamic = (xd + bd) + cd;
    ref::require_close(ref::values(dynamic), zip(plus_bias, cv, std::plus<>{}), tol<V>() * 2);
}

TEMPLATE_TEST_CASE("broadcasting along a middle dim of extent one", "[elementwise]", float, double) {
    using V = TestType;
    using H = shaped::dim<"H", 4>;
    using One = shaped::dim<"H", 1>;
    const std::size_t t = GENERATE(1, 3, 17);
    shaped::Tensor<V, B, H, Td, Cd> x(Td{t}, Cd{5});
    shaped::Tensor<V, B, One, Td, Cd> per_batch(Td{t}, Cd{5});
    ref::fill(x, 30 + t);
    ref::fill(per_batch, 31 + t);
    const auto xv = ref::values(x), pv = ref::values(per_batch);
    const shaped::Tensor<V, B, H, Td, Cd> y = x * per_batch + per_batch;
    std::vector<double> want(xv.size());
    for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t h = 0; h < 4; ++h)
            for (std::size_t i = 0; i < t * 5; ++i) {
                const double p = pv[b * t * 5 + i];
                want[(b * 4 + h) * t * 5 + i] = xv[(b * 4 + h) * t * 5 + i] * p + p;
            }
    ref::require_close(ref::values(y), want, tol<V>() * 4);
}

TEST_CASE("broadcasting with dynamic extents, checked at run time", "[elementwise]") {
    shaped::Tensor<float, B, Td, Cd> x(Td{4}, Cd{5});
    shaped::Tensor<float, Cd> bias(Cd{5});
    ref::fill(x, 8);
    ref::fill(bias, 9);
    ref::require_close(ref::values(x + bias), zip(ref::values(x), ref::values(bias), std::plus<>{}), 1e-6);
    // A dynamic extent of 1 spreads too.
    shaped::Tensor<float, Cd> one(Cd{1});
    one(0) = 3.0f;
    ref::require_close(ref::values(x * one), map(ref::values(x), [](double v) { return v * 3; }), 1e-6);
    // Static and dynamic operands of the same name meet.
    shaped::Tensor<float, B, shaped::dim<"T", 4>, C> s;
    ref::fill(s, 10);
    shaped::Tensor<float, B, Td, C> xs(Td{4});
    ref::fill(xs, 11);
    ref::require_close(ref::values(s + xs), zip(ref::values(s), ref::values(xs), std::plus<>{}), 1e-6);
}

TEST_CASE("a dynamic extent mismatch throws shape_error naming both dims", "[elementwise]") {
    shaped::Tensor<float, B, Td, C> a(Td{5}), b(Td{4});
    CHECK_THROWS_AS(a + b, shaped::shape_error);
    CHECK_THROWS_WITH(a + b, Contains("T(5)") && Contains("T(4)") && Contains("shaped::+"));
    CHECK_THROWS_WITH(b * a, Contains("T(4)") && Contains("T(5)"));
    // Against a static extent as well.
    shaped::Tensor<float, B, shaped::dim<"T", 3>, C> s;
    CHECK_THROWS_WITH(s - a, Contains("T(3)") && Contains("T(5)"));
    shaped::Tensor<float, Cd> bias(Cd{4});
    CHECK_THROWS_WITH(a + bias, Contains("C(5)") && Contains("C(4)"));
    // The check fires when the expression is built, before anything is assigned.
    shaped::Tensor<float, B, Td, C> out(Td{5});
    out(0, 0, 0) = 1.0f;
    CHECK_THROWS_AS(out = a + b, shaped::shape_error);
    CHECK(out(0, 0, 0) == 1.0f);
}

TEMPLATE_TEST_CASE("unary math against the standard library", "[elementwise]", float, double) {
    using V = TestType;
    shaped::Tensor<V, B, Td, C> x(Td{9});
    ref::fill(x, 12);
    const auto xv = ref::values(x);
    const shaped::Tensor<V, B, Td, C> pos = shaped::abs(x) + V{0.01};
    const auto pv = ref::values(pos);
    // Float results agree with the double reference to float's rounding of the inputs' results.
    const double t = std::is_same_v<V, float> ? 2e-6 : 1e-14;
    ref::require_close(ref::values(shaped::exp(x)), map(xv, [](double v) { return std::exp(v); }), t);
    ref::require_close(ref::values(shaped::log(pos)), map(pv, [](double v) { return std::log(v); }), t);
    ref::require_close(ref::values(shaped::sqrt(pos)), map(pv, [](double v) { return std::sqrt(v); }), t);
    ref::require_close(ref::values(shaped::rsqrt(pos)), map(pv, [](double v) { return 1 / std::sqrt(v); }), t);
    ref::require_close(ref::values(shaped::tanh(x)), map(xv, [](double v) { return std::tanh(v); }), t);
    ref::require_close(ref::values(shaped::abs(x)), map(xv, [](double v) { return std::abs(v); }), 0.0);
    ref::require_close(ref::values(shaped::sigmoid(x)), map(xv, [](double v) { return 1 / (1 + std::exp(-v)); }), t);
    ref::require_close(ref::values(shaped::relu(x)), map(xv, [](double v) { return v > 0 ? v : 0.0; }), 0.0);
    ref::require_close(ref::values(shaped::square(x)), map(xv, [](double v) { return v * v; }), t);
    ref::require_close(ref::values(shaped::exp(shaped::log(pos))), pv, 4 * t);
    STATIC_REQUIRE(std::is_same_v<shaped::value_type_of<decltype(shaped::relu(x))>, V>);
    STATIC_REQUIRE(std::is_same_v<shaped::value_type_of<decltype(shaped::sigmoid(x))>, V>);
    STATIC_REQUIRE(std::is_same_v<shaped::value_type_of<decltype(shaped::rsqrt(x))>, V>);
}

TEST_CASE("cast converts element by element", "[elementwise]") {
    shaped::Tensor<double, B, C> x;
    ref::fill(x, 13);
    const shaped::Tensor<float, B, C> f = shaped::cast<float>(x);
    for (std::size_t i = 0; i < x.size(); ++i) CHECK(f.data()[i] == static_cast<float>(x.data()[i]));
    const shaped::Tensor<int, B, C> n = shaped::cast<int>(x * 10);
    for (std::size_t i = 0; i < x.size(); ++i) CHECK(n.data()[i] == static_cast<int>(x.data()[i] * 10));
}

TEMPLATE_TEST_CASE("comparisons give bool masks", "[elementwise]", float, double) {
    using V = TestType;
    shaped::Tensor<V, B, T, C> a, b;
    ref::fill(a, 14);
    ref::fill(b, 15);
    a(1, 2, 3) = b(1, 2, 3);  // one tie, so that == and <= are exercised
    STATIC_REQUIRE(std::is_same_v<shaped::value_type_of<decltype(a < b)>, bool>);
    const shaped::Tensor<bool, B, T, C> lt = a < b, le = a <= b, gt = a > b, ge = a >= b, eq = a == b,
                                        ne = a != b, pos = a > 0, both = (a > 0) && (b > 0),
                                        either = (a > 0) || (b > 0), neither = !((a > 0) || (b > 0));
    std::size_t ties = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        const V x = a.data()[i], y = b.data()[i];
        REQUIRE(lt.data()[i] == (x < y));
        REQUIRE(le.data()[i] == (x <= y));
        REQUIRE(gt.data()[i] == (x > y));
        REQUIRE(ge.data()[i] == (x >= y));
        REQUIRE(eq.data()[i] == (x == y));
        REQUIRE(ne.data()[i] == (x != y));
        REQUIRE(pos.data()[i] == (x > 0));
        REQUIRE(both.data()[i] == (x > 0 && y > 0));
        REQUIRE(either.data()[i] == (x > 0 || y > 0));
        REQUIRE(neither.data()[i] == !(x > 0 || y > 0));
        ties += x == y;
    }
    CHECK(ties == 1);
    // A scalar on the left compares the same way round.
    const shaped::Tensor<bool, B, T, C> rev = 0 < a;
    CHECK(ref::values(rev) == ref::values(pos));
}

TEMPLATE_TEST_CASE("where picks by a broadcast condition", "[elementwise]", float, double) {
    using V = TestType;
    shaped::Tensor<V, B, Td, C> a(Td{4}), b(Td{4});
    shaped::Tensor<V, C> row;
    ref::fill(a, 16);
    ref::fill(b, 17);
    ref::fill(row, 18);
    const auto av = ref::values(a), bv = ref::values(b), rv = ref::values(row);

    const shaped::Tensor<V, B, Td, C> w = shaped::where(a > b, a, b);
    ref::require_close(ref::values(w), zip(av, bv, [](double x, double y) { return x > y ? x : y; }), 0.0);
    const shaped::Tensor<V, B, Td, C> ws = shaped::where(a > 0, a, V{0});
    ref::require_close(ref::values(ws), map(av, [](double x) { return x > 0 ? x : 0.0; }), 0.0);
    const shaped::Tensor<V, B, Td, C> wl = shaped::where(a > 0, V{-1}, a);
    ref::require_close(ref::values(wl), map(av, [](double x) { return x > 0 ? -1.0 : x; }), 0.0);
    // The condition broadcasts along the leading dims.
    const shaped::Tensor<V, B, Td, C> wr = shaped::where(row > 0, a, b);
    std::vector<double> want(av.size());
    for (std::size_t i = 0; i < av.size(); ++i) want[i] = rv[i % 5] > 0 ? av[i] : bv[i];
    ref::require_close(ref::values(wr), want, 0.0);
}

TEMPLATE_TEST_CASE("masked_fill writes the value where the mask holds", "[elementwise]", float, double) {
    using V = TestType;
    using S = shaped::dim<"T">;
    const std::size_t n = GENERATE(1, 2, 5);
    shaped::Tensor<V, B, S, S> scores(S{n}, S{n});
    ref::fill(scores, 19 + n);
    const auto sv = ref::values(scores);
    const V inf = std::numeric_limits<V>::infinity();
    // The seed's causal mask: (T, T) broadcast over B.
    const auto tril = shaped::tril(shaped::ones<V, S, S>(S{n}, S{n}));
    const shaped::Tensor<V, B, S, S> masked = shaped::masked_fill(scores, tril == V{0}, -inf);
    for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t i = 0; i < n; ++i)
            for (std::size_t j = 0; j < n; ++j) {
                const double got = masked(b, i, j);
                if (j > i) REQUIRE(got == -std::numeric_limits<double>::infinity());
                else REQUIRE(got == sv[(b * n + i) * n + j]);
            }
    // A mask of the tensor's own dims, and a finite value.
    const shaped::Tensor<V, B, S, S> clipped = shaped::masked_fill(scores, scores > V{1}, 1);
    ref::require_close(ref::values(clipped), map(sv, [](double x) { return x > 1 ? 1.0 : x; }), 0.0);
}

TEST_CASE("building an expression evaluates nothing until assigned", "[elementwise]") {
    shaped::Tensor<float, B, C> a;
    ref::fill(a, 20);
    const auto e = a * 2.0f;
    a(0, 0) = 100.0f;  // the expression reads a when it runs, not when it is built
    const shaped::Tensor<float, B, C> r = e;
    CHECK(r(0, 0) == 200.0f);
}

TEST_CASE("dropout zeroes a fraction p and scales the rest by 1 / (1 - p)", "[elementwise][dropout]") {
    using N = shaped::dim<"N", 100>;
    using M = shaped::dim<"M", 100>;
    shaped::Generator gen(21);
    const auto x = shaped::randn<float, N, M>(gen);
    shaped::Generator draws(9);
    // Held in a variable first: a value, x times its mask, the same as inline.
    const auto held = shaped::dropout(x, 0.25, draws);
    const shaped::Tensor<float, N, M> y = held;
    std::size_t zeros = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        if (y.data()[i] == 0.0f) {
            ++zeros;
            continue;
        }
        REQUIRE(y.data()[i] == Approx(x.data()[i] / 0.75f).epsilon(1e-6));
    }
    // 10000 draws of p = 0.25: the count of zeros within 6 standard deviations (43) of 2500.
    REQUIRE((zeros > 2500 - 260 && zeros < 2500 + 260));
    // The same seed draws the same mask; inline as held.
    shaped::Generator again(9);
    const shaped::Tensor<float, N, M> inline_y = shaped::dropout(x, 0.25, again);
    for (std::size_t i = 0; i < x.size(); ++i) REQUIRE(inline_y.data()[i] == y.data()[i]);
    // The ends: nothing dropped, everything dropped; outside [0, 1], an error.
    const shaped::Tensor<float, N, M> none = shaped::dropout(x, 0.0, gen), all = shaped::dropout(x, 1.0, gen);
    for (std::size_t i = 0; i < x.size(); ++i) {
        REQUIRE(none.data()[i] == x.data()[i]);
        REQUIRE(all.data()[i] == 0.0f);
    }
    REQUIRE_THROWS_WITH(shaped::dropout(x, 1.5, gen), Catch::Contains("p must be a probability in [0, 1], got 1.5"));
    REQUIRE_THROWS_AS(shaped::nn::Dropout<float>(-0.1), std::invalid_argument);
}
