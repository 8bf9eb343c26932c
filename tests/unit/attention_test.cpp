// Fused causal attention against a naive reference (double-precision loops over the T x T
// scores), and against the same expression evaluated step by step: sizes around the kernel's
// blocks, static and dynamic T, float and double, strided operands, other masks; the log-sum-exp
// it keeps for training against the reference's.

#include "dense_attention.hpp"
#include "reference.hpp"

#include <shaped/shaped.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using B = shaped::dim<"B", 2>;
using NH = shaped::dim<"NH", 3>;
using T4 = shaped::dim<"T", 4>;
using H16 = shaped::dim<"H", 16>;
using Td = shaped::dim<"T">;
using Sd = shaped::dim<"S">;
using Hd = shaped::dim<"H">;
using Dd = shaped::dim<"D">;

template <class V>
constexpr V minus_infinity = -std::numeric_limits<V>::infinity();

// out[b, i, :] = sum_j softmax_j(q[b, i] . k[b, j] * scale, sees(i, j)) v[b, j], in double, for
// matrices laid out row-major one after another.
template <class Q, class K, class V, class Sees>
std::vector<double> naive_attention(const Q& q, const K& k, const V& v, double scale, Sees sees) {
    const auto qe = q.extents(), ke = k.extents(), ve = v.extents();
    constexpr std::size_t r = std::tuple_size_v<decltype(qe)>;
    return ref::dense_attention(ref::values(q), ref::values(k), ref::values(v), qe[r - 2], ke[r - 2], qe[r - 1],
                                ve[r - 1], [&](std::size_t, std::size_t i, std::size_t j, double product) {
                                    return sees(i, j) ? product * scale : ref::unseen;
                                });
}

// Query i sees key j when j <= i + diagonal (causal), or every key.
template <class Q, class K, class V>
std::vector<double> naive_attention(const Q& q, const K& k, const V& v, double scale, bool causal, long diagonal) {
    return naive_attention(q, k, v, scale, [=](std::size_t i, std::size_t j) {
        return !causal || static_cast<long>(j) <= static_cast<long>(i) + diagonal;
    });
}

template <class E>
std::vector<double> values_of(const E& e) {
    const auto t = shaped::eval(e);
    return {t.data(), t.data() + t.size()};
}

template <class V>
double tolerance() {
    return std::is_same_v<V, float> ? 2e-5 : 1e-12;
}

void require_close(const std::vector<double>& got, const std::vector<double>& want, double tol) {
    REQUIRE(got.size() == want.size());
    std::size_t bad = 0;
    double worst = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
        if (std::isnan(want[i]) && std::isnan(got[i])) continue;
        const double err = std::abs(got[i] - want[i]) / (1 + std::abs(want[i]));
        if (!(err <= tol)) ++bad;
        if (!(err <= worst)) worst = err;
    }
    INFO("worst relative error " << worst << ", tolerance " << tol);
    REQUIRE(bad == 0);
}

template <class A, class B_>
bool bitwise_equal(const A& a, const B_& b) {
    return a.size() == b.size() && std::equal(a.data(), a.data() + a.size(), b.data(), [](auto x, auto y) {
               return (std::isnan(x) && std::isnan(y)) || x == y;
           });
}

// The chapter's expression, as written in one line, so that assigning it runs the fused kernel.
template <class Q, class K, class M, class V, class S>
auto chapter_attention(const Q& q, const K& k, const M& tril, const V& v, S scale) {
    using value = shaped::value_type_of<Q>;
    return shaped::matmul(
        shaped::softmax<-1>(shaped::masked_fill(shaped::matmul(q, k.mT()) * scale, tril == value{0}, minus_infinity<value>)),
        v);
}

// The same, evaluated a step at a time as the chapter's section 1 does (no fusion possible).
template <class Q, class K, class M, class V, class S>
auto stepwise_attention(const Q& q, const K& k, const M& tril, const V& v, S scale) {
    using value = shaped::value_type_of<Q>;
    auto wei = shaped::eval(shaped::matmul(q, k.mT()) * scale);
    wei = shaped::masked_fill(wei, tril == value{0}, minus_infinity<value>);
    wei = shaped::softmax<-1>(wei);
    return shaped::eval(shaped::matmul(wei, v));
}

}  // namespace

TEMPLATE_TEST_CASE("the chapter's attention expression is recognised as causal attention", "[attention]", float,
                   double) {
    using V = TestType;
    using Q = shaped::Tensor<V, B, T4, H16>;
    using Ones = shaped::Tensor<V, T4, T4>;
    using expression = decltype(chapter_attention(std::declval<const Q&>(), std::declval<const Q&>(),
                                                  shaped::tril(std::declval<const Ones&>()),
                                                  std::declval<const Q&>(), V{1}));
    STATIC_REQUIRE(shaped::kernels::detail::recognised_attention<expression>::value);
    // softmax over the first dim is not attention.
    using other_axis = decltype(shaped::matmul(shaped::softmax<0>(shaped::matmul(std::declval<const Q&>(),
                                                                                  std::declval<const Q&>().mT())),
                                               std::declval<const Q&>()));
    STATIC_REQUIRE_FALSE(shaped::kernels::detail::recognised_attention<other_axis>::value);
}

TEMPLATE_TEST_CASE("fused attention meets the naive reference and the step-by-step chapter", "[attention]", float,
                   double) {
    using V = TestType;
    const std::size_t t = GENERATE(1, 2, 4, 7, 8, 9, 31, 63, 64, 65, 100, 129, 200);
    // Heads narrower than a vector (2 to 12) are read with narrower vectors.
    const std::size_t h = GENERATE(1, 2, 4, 5, 8, 12, 16, 64, 80);
    CAPTURE(t, h);
    shaped::Generator gen(t * 131 + h);
    const auto q = shaped::randn<V, B, NH, Td, Hd>(gen, Td{t}, Hd{h});
    const auto k = shaped::randn<V, B, NH, Td, Hd>(gen, Td{t}, Hd{h});
    const auto v = shaped::randn<V, B, NH, Td, Hd>(gen, Td{t}, Hd{h});
    const auto tril = shaped::tril(shaped::ones<V, Td, Td>(Td{t}, Td{t}));
    const V scale = static_cast<V>(1.0 / std::sqrt(static_cast<double>(h)));

    const auto want = naive_attention(q, k, v, scale, true, 0);
    const shaped::Tensor<V, B, NH, Td, Hd> fused = chapter_attention(q, k, tril, v, scale);
    const auto stepwise = stepwise_attention(q, k, tril, v, scale);
    const shaped::Tensor<V, B, NH, Td, Hd> direct = shaped::causal_attention(q, k, v, scale);
    require_close(values_of(fused), want, tolerance<V>());
    require_close(values_of(stepwise), want, tolerance<V>());
    require_close(values_of(fused), values_of(stepwise), tolerance<V>());
    // The expression ran the fused kernel: the same bits as calling it directly.
    REQUIRE(bitwise_equal(fused, direct));
}

TEMPLATE_TEST_CASE("each way of writing the scale is recognised", "[attention]", float, double) {
    using V = TestType;
    const std::size_t t = 70;
    shaped::Generator gen(7);
    const auto q = shaped::randn<V, B, Td, H16>(gen, Td{t});
    const auto k = shaped::randn<V, B, Td, H16>(gen, Td{t});
    const auto v = shaped::randn<V, B, Td, H16>(gen, Td{t});
    const auto tril = shaped::tril(shaped::ones<V, Td, Td>(Td{t}, Td{t}));
    const auto mask = tril == V{0};
    const V s = V{0.25};
    const auto want = naive_attention(q, k, v, s, true, 0);
    const auto direct = shaped::eval(shaped::causal_attention(q, k, v, s));

    const shaped::Tensor<V, B, Td, H16> times = shaped::matmul(
        shaped::softmax<-1>(shaped::masked_fill(shaped::matmul(q, k.mT()) * s, mask, minus_infinity<V>)), v);
    const shaped::Tensor<V, B, Td, H16> times_left = shaped::matmul(
        shaped::softmax<-1>(shaped::masked_fill(s * shaped::matmul(q, k.mT()), mask, minus_infinity<V>)), v);
    const shaped::Tensor<V, B, Td, H16> divided = shaped::matmul(
        shaped::softmax<-1>(shaped::masked_fill(shaped::matmul(q, k.mT()) / V{4}, mask, minus_infinity<V>)), v);
    for (const auto* out : {&times, &times_left, &divided}) {
        require_close(values_of(*out), want, tolerance<V>());
        REQUIRE(bitwise_equal(*out, direct));
    }

    // Unscaled, as the chapter's section 1 writes it.
    const shaped::Tensor<V, B, Td, H16> unscaled = shaped::matmul(
        shaped::softmax<-1>(shaped::masked_fill(shaped::matmul(q, k.mT()), mask, minus_infinity<V>)), v);
    require_close(values_of(unscaled), naive_attention(q, k, v, 1.0, true, 0), tolerance<V>());
    REQUIRE(bitwise_equal(unscaled, shaped::eval(shaped::causal_attention(q, k, v, 1))));
}

TEST_CASE("the seed's head: static shapes, fused and step by step", "[attention]") {
    shaped::Generator gen(1337);
    const auto q = shaped::randn<float, B, T4, H16>(gen);
    const auto k = shaped::randn<float, B, T4, H16>(gen);
    const auto v = shaped::randn<float, B, T4, H16>(gen);
    const auto tril = shaped::tril(shaped::ones<float, T4, T4>());
    const shaped::Tensor<float, B, T4, H16> fused = chapter_attention(q, k, tril, v, 0.25f);
    const auto want = naive_attention(q, k, v, 0.25, true, 0);
    require_close(values_of(fused), want, tolerance<float>());
    require_close(values_of(stepwise_attention(q, k, tril, v, 0.25f)), want, tolerance<float>());
}

TEMPLATE_TEST_CASE("masks that are not the causal one run unfused and still meet the reference", "[attention]",
                   float, double) {
    using V = TestType;
    const std::size_t t = 67;
    shaped::Generator gen(11);
    const auto q = shaped::randn<V, Td, H16>(gen, Td{t});
    const auto k = shaped::randn<V, Td, H16>(gen, Td{t});
    const auto v = shaped::randn<V, Td, H16>(gen, Td{t});

    SECTION("a zero below the diagonal masks one more key") {
        auto holes = shaped::ones<V, Td, Td>(Td{t}, Td{t});
        holes(40, 3) = V{0};
        const auto tril = shaped::tril(holes);
        const auto want = naive_attention(q, k, v, 1.0, [](std::size_t i, std::size_t j) {
            return j <= i && !(i == 40 && j == 3);
        });
        const shaped::Tensor<V, Td, H16> out = chapter_attention(q, k, tril, v, V{1});
        require_close(values_of(out), want, tolerance<V>());
        require_close(values_of(stepwise_attention(q, k, tril, v, V{1})), want, tolerance<V>());
        REQUIRE_FALSE(bitwise_equal(out, shaped::eval(shaped::causal_attention(q, k, v, 1))));
    }
    SECTION("tril's diagonal shifts what each query sees") {
        for (long diagonal : {-3L, -1L, 1L, 5L, 100L}) {
            CAPTURE(diagonal);
            const auto tril = shaped::tril(shaped::ones<V, Td, Td>(Td{t}, Td{t}), diagonal);
            const shaped::Tensor<V, Td, H16> out = chapter_attention(q, k, tril, v, V{1});
            const auto want = naive_attention(q, k, v, 1.0, true, diagonal);
            require_close(values_of(out), want, tolerance<V>());
            require_close(values_of(stepwise_attention(q, k, tril, v, V{1})), want, tolerance<V>());
        }
    }
    SECTION("a fill other than -inf is not attention") {
        const auto tril = shaped::tril(shaped::ones<V, Td, Td>(Td{t}, Td{t}));
        const shaped::Tensor<V, Td, H16> out =
            shaped::matmul(shaped::softmax<-1>(shaped::masked_fill(shaped::matmul(q, k.mT()), tril == V{0}, V{-1e4})), v);
        // exp(-1e4 - max) underflows to 0: the same as causal, but computed unfused.
        require_close(values_of(out), naive_attention(q, k, v, 1.0, true, 0), tolerance<V>());
        // A fill of 0 lets the future in with weight exp(0 - max).
        const shaped::Tensor<V, Td, H16> zero_fill =
            shaped::matmul(shaped::softmax<-1>(shaped::masked_fill(shaped::matmul(q, k.mT()), tril == V{0}, V{0})), v);
        auto wei = shaped::eval(shaped::matmul(q, k.mT()));
        wei = shaped::masked_fill(wei, tril == V{0}, V{0});
        wei = shaped::softmax<-1>(wei);
        require_close(values_of(zero_fill), values_of(shaped::matmul(wei, v)), tolerance<V>());
        const auto causal = naive_attention(q, k, v, 1.0, true, 0);
        REQUIRE(std::abs(values_of(zero_fill)[0] - causal[0]) > 1e-3);
    }
    SECTION("without a mask every query sees every key") {
        const shaped::Tensor<V, Td, H16> out = shaped::matmul(shaped::softmax<-1>(shaped::matmul(q, k.mT()) * V{0.5}), v);
        require_close(values_of(out), naive_attention(q, k, v, 0.5, false, 0), tolerance<V>());
    }
}

TEMPLATE_TEST_CASE("causal_attention: queries are the last of the keys' positions", "[attention]", float, double) {
    using V = TestType;
    const std::size_t tk = GENERATE(1, 9, 64, 130, 300);
    const std::size_t tq = GENERATE(1, 3, 8, 9, 70);
    const std::size_t h = GENERATE(5, 8, 16, 80);
    if (tq > tk) return;
    CAPTURE(tk, tq, h);
    shaped::Generator gen(tk * 7 + tq + h);
    const auto q_all = shaped::randn<V, B, Td, Hd>(gen, Td{tk}, Hd{h});
    const auto k = shaped::randn<V, B, Sd, Hd>(gen, Sd{tk}, Hd{h});
    const auto v = shaped::randn<V, B, Sd, Dd>(gen, Sd{tk}, Dd{24});
    // The last tq queries, as a strided view of the full set.
    const auto q = shaped::slice<Td>(q_all, tk - tq, tk);
    const shaped::Tensor<V, B, Td, Dd> out = shaped::causal_attention(q, k, v, V{0.3});
    const shaped::Tensor<V, B, Td, Dd> full = shaped::causal_attention(q_all, k, v, V{0.3});
    const auto want = naive_attention(q_all, k, v, 0.3, true, 0);
    require_close(values_of(full), want, tolerance<V>());
    std::vector<double> last_rows;
    for (std::size_t b = 0; b < 2; ++b)
        last_rows.insert(last_rows.end(), want.begin() + static_cast<std::ptrdiff_t>((b * tk + tk - tq) * 24),
                         want.begin() + static_cast<std::ptrdiff_t>((b + 1) * tk * 24));
    require_close(values_of(out), last_rows, tolerance<V>());
}

TEST_CASE("causal_attention checks its operands' dims", "[attention]") {
    shaped::Generator gen(3);
    const auto q = shaped::randn<float, Td, Hd>(gen, Td{5}, Hd{8});
    const auto k = shaped::randn<float, Sd, Hd>(gen, Sd{4}, Hd{8});
    const auto k_wide = shaped::randn<float, Sd, Hd>(gen, Sd{6}, Hd{9});
    const auto v = shaped::randn<float, Sd, Dd>(gen, Sd{6}, Dd{3});
    // The run-time check says its static check's words, then the dims it found.
    const std::string rule = "shaped::causal_attention: " SHAPED_RULE_ATTENTION_DIMS ": ";
    REQUIRE_THROWS_WITH(shaped::causal_attention(q, k_wide, v, 1.0f), rule + "q H(8), k H(9)");
    REQUIRE_THROWS_WITH(shaped::causal_attention(q, k, v, 1.0f), rule + "k S(4), v S(6)");
    const auto k6 = shaped::randn<float, Sd, Hd>(gen, Sd{4}, Hd{8});
    const auto v4 = shaped::randn<float, Sd, Dd>(gen, Sd{4}, Dd{3});
    REQUIRE_THROWS_WITH(shaped::causal_attention(q, k6, v4, 1.0f),
                        "shaped::causal_attention: T(5) queries are more than the S(4) keys they follow");
    // Batch dims that do not meet are named by their own names, with the operand each is from.
    using Bd = shaped::dim<"B">;
    using NHd = shaped::dim<"NH">;
    const auto qb = shaped::randn<float, Bd, NHd, Td, Hd>(gen, Bd{2}, NHd{3}, Td{4}, Hd{8});
    const auto kb = shaped::randn<float, Bd, NHd, Sd, Hd>(gen, Bd{2}, NHd{5}, Sd{4}, Hd{8});
    const auto vb = shaped::randn<float, Sd, Dd>(gen, Sd{4}, Dd{3});
    REQUIRE_THROWS_WITH(shaped::causal_attention(qb, kb, vb, 1.0f), rule + "q's NH(3), k's NH(5)");
    const auto kr = shaped::randn<float, NHd, Sd, Hd>(gen, NHd{1}, Sd{4}, Hd{8});
    const auto vr = shaped::randn<float, Bd, NHd, Sd, Dd>(gen, Bd{3}, NHd{3}, Sd{4}, Dd{3});
    REQUIRE_THROWS_WITH(shaped::causal_attention(qb, kr, vr, 1.0f), rule + "q's B(2), v's B(3)");
}

TEMPLATE_TEST_CASE("fused attention reads strided heads in place", "[attention]", float, double) {
    using V = TestType;
    // q, k and v as heads of one (B, T, 3 x NH x H) projection, as multi-head attention holds them:
    // (B, NH, T, H) views whose rows are 3 x NH x H apart.
    const std::size_t t = 75, h = 16, nh = 3;
    shaped::Generator gen(5);
    const auto qkv = shaped::randn<V, B, Td, Dd>(gen, Td{t}, Dd{3 * nh * h});
    const std::array<std::size_t, 4> extents{2, nh, t, h};
    const std::array<std::ptrdiff_t, 4> strides{static_cast<std::ptrdiff_t>(t * 3 * nh * h), static_cast<std::ptrdiff_t>(h),
                                                static_cast<std::ptrdiff_t>(3 * nh * h), 1};
    using Head = shaped::View<const V, B, NH, Td, Hd>;
    const Head q(qkv.data(), extents, strides), k(qkv.data() + nh * h, extents, strides),
        v(qkv.data() + 2 * nh * h, extents, strides);
    const auto qc = shaped::eval(q), kc = shaped::eval(k), vc = shaped::eval(v);
    const auto want = naive_attention(qc, kc, vc, 0.25, true, 0);

    const auto tril = shaped::tril(shaped::ones<V, Td, Td>(Td{t}, Td{t}));
    const shaped::Tensor<V, B, NH, Td, Hd> fused = chapter_attention(q, k, tril, v, V{0.25});
    require_close(values_of(fused), want, tolerance<V>());
    REQUIRE(bitwise_equal(fused, shaped::eval(chapter_attention(qc, kc, tril, vc, V{0.25}))));

    // Written into a strided view: out's heads interleaved in a (B, T, NH x H) tensor.
    auto merged = shaped::zeros<V, B, Td, Dd>(Td{t}, Dd{nh * h});
    const std::array<std::ptrdiff_t, 4> out_strides{static_cast<std::ptrdiff_t>(t * nh * h), static_cast<std::ptrdiff_t>(h),
                                                    static_cast<std::ptrdiff_t>(nh * h), 1};
    shaped::View<V, B, NH, Td, Hd> out(merged.data(), extents, out_strides);
    out = shaped::causal_attention(q, k, v, V{0.25});
    REQUIRE(bitwise_equal(shaped::eval(out), fused));
}

TEMPLATE_TEST_CASE("fused attention into one of its own operands", "[attention]", float, double) {
    using V = TestType;
    const std::size_t t = 90;
    shaped::Generator gen(9);
    auto q = shaped::randn<V, B, Td, H16>(gen, Td{t});
    const auto k = shaped::randn<V, B, Td, H16>(gen, Td{t});
    auto v = shaped::randn<V, B, Td, H16>(gen, Td{t});
    const auto want_q = shaped::eval(shaped::causal_attention(q, k, v, V{0.5}));
    q = shaped::causal_attention(q, k, v, V{0.5});
    REQUIRE(bitwise_equal(q, want_q));
    const auto tril = shaped::tril(shaped::ones<V, Td, Td>(Td{t}, Td{t}));
    const auto want_v = shaped::eval(chapter_attention(q, k, tril, v, V{0.5}));
    v = chapter_attention(q, k, tril, v, V{0.5});
    REQUIRE(bitwise_equal(v, want_v));
}

TEST_CASE("fused attention over batch x heads in parallel gives the serial numbers", "[attention]") {
    const std::size_t t = GENERATE(5, 200, 513);
    CAPTURE(t);
    shaped::Generator gen(t);
    const auto q = shaped::randn<float, B, NH, Td, Hd>(gen, Td{t}, Hd{64});
    const auto k = shaped::randn<float, B, NH, Td, Hd>(gen, Td{t}, Hd{64});
    const auto v = shaped::randn<float, B, NH, Td, Hd>(gen, Td{t}, Hd{64});
    shaped::Tensor<float, B, NH, Td, Hd> serial(Td{t}, Hd{64}), parallel(Td{t}, Hd{64});
    {
        ref::threads_for_test one(1);
        serial = shaped::causal_attention(q, k, v, 0.125f);
    }
    {
        ref::threads_for_test two(2);
        REQUIRE(shaped::kernels::thread_count() == 2);
        parallel = shaped::causal_attention(q, k, v, 0.125f);
    }
    REQUIRE(bitwise_equal(serial, parallel));
    require_close(values_of(parallel), naive_attention(q, k, v, 0.125, true, 0), tolerance<float>());
}

TEMPLATE_TEST_CASE("the forward's log-sum-exp meets the naive reference: causal, windowed, grouped, after a cache",
                   "[attention]", float, double) {
    using V = TestType;
    using shaped::kernels::attention_problem;
    using shaped::kernels::batched_matrices;
    struct lengths {
        std::size_t tq, tk;
    };
    // Few queries (a row at a time), every key in one vector, and blocks; tk > tq are queries
    // after tk - tq cached positions, tk < tq queries of which the first see no key.
    const lengths n = GENERATE(lengths{1, 1}, lengths{1, 37}, lengths{4, 4}, lengths{7, 100}, lengths{3, 13},
                               lengths{9, 9}, lengths{64, 64}, lengths{65, 130}, lengths{130, 130}, lengths{20, 17});
    const std::size_t window = GENERATE(0, 1, 5, 70);  // 0: none
    const bool grouped = GENERATE(false, true);
    const bool causal = GENERATE(true, false);
    if (!causal && window) return;  // a window is a causal mask's
    const std::size_t batch = 2, kv_heads = grouped ? 2 : 1, group = grouped ? 3 : 1, d = 24, dv = 40;
    const std::size_t matrices = batch * kv_heads * group;
    CAPTURE(n.tq, n.tk, window, grouped, causal);

    // q and out (B, kv_heads, group, T, D) contiguous; k and v (B, kv_heads, T, D), broadcast
    // along the group.
    std::mt19937 gen(static_cast<unsigned>(n.tq * 1000 + n.tk + window));
    std::uniform_real_distribution<double> uniform(-2, 2);
    const auto random = [&](std::size_t size) {
        std::vector<V> x(size);
        for (auto& e : x) e = static_cast<V>(uniform(gen));
        return x;
    };
    const std::vector<V> q = random(matrices * n.tq * d), k = random(batch * kv_heads * n.tk * d),
                         v = random(batch * kv_heads * n.tk * dv);
    std::vector<V> out(matrices * n.tq * dv), lse(matrices * n.tq, std::numeric_limits<V>::quiet_NaN());
    const auto operand = [&](auto* data, std::size_t rows, std::size_t cols, bool shared) {
        const auto matrix = static_cast<std::ptrdiff_t>(rows * cols);
        const auto heads = static_cast<std::ptrdiff_t>(shared ? kv_heads : kv_heads * group);
        const std::ptrdiff_t head = shared ? matrix : matrix * static_cast<std::ptrdiff_t>(group);
        return batched_matrices<std::remove_pointer_t<decltype(data)>>{
            data,
            {{rows, cols}, {static_cast<std::ptrdiff_t>(cols), 1}},
            {heads * matrix, head, shared ? 0 : matrix}};
    };
    const V scale = static_cast<V>(1 / std::sqrt(static_cast<double>(d)));
    const long diagonal = static_cast<long>(n.tk) - static_cast<long>(n.tq);
    attention_problem<V> p{.q = operand(q.data(), n.tq, d, false),
                           .k = operand(k.data(), n.tk, d, true),
                           .v = operand(v.data(), n.tk, dv, true),
                           .out = operand(out.data(), n.tq, dv, false),
                           .lse = lse.data(),
                           .scale = scale,
                           .sees = {causal, diagonal, window ? std::optional<std::size_t>(window) : std::nullopt},
                           .batch_rank = 3,
                           .batch_extents = {batch, kv_heads, group}};
    shaped::kernels::attention(p);

    // log sum_j exp(scale q_i . k_j) over the keys query i sees, in double.
    std::size_t bad = 0;
    for (std::size_t m = 0; m < matrices; ++m) {
        const std::size_t kv = m / group;  // (b, kv_head) of matrix m = (b, kv_head, member)
        for (std::size_t i = 0; i < n.tq; ++i) {
            std::vector<double> scores;
            for (std::size_t j = 0; j < n.tk; ++j) {
                const long last = static_cast<long>(i) + diagonal;
                const bool seen = !causal || (static_cast<long>(j) <= last &&
                                              (!window || static_cast<long>(j) > last - static_cast<long>(window)));
                if (!seen) continue;
                const V* q_row = q.data() + (m * n.tq + i) * d;
                const V* k_row = k.data() + (kv * n.tk + j) * d;
                double s = 0;
                for (std::size_t c = 0; c < d; ++c) s += static_cast<double>(q_row[c]) * static_cast<double>(k_row[c]);
                scores.push_back(static_cast<double>(scale) * s);
            }
            const double got = lse[m * n.tq + i];
            if (scores.empty()) {
                if (!(std::isinf(got) && got < 0)) ++bad;
                continue;
            }
            const double max = *std::max_element(scores.begin(), scores.end());
            double sum = 0;
            for (double s : scores) sum += std::exp(s - max);
            const double want = max + std::log(sum);
            if (!(std::abs(got - want) <= tolerance<V>() * (1 + std::abs(want)))) ++bad;
        }
    }
    REQUIRE(bad == 0);
}
