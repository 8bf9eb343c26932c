// matmul against a naive triple loop over sweeps of sizes: batched, transposed operands (read by
// BLAS through its transpose flags), broadcast batches, views, scaled products, static and
// dynamic dims, float and double; and the run-time checks of the contracted and batch dims.

#include "reference.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace {

using Catch::Matchers::Contains;
using Bd = shaped::dim<"B">;
using Md = shaped::dim<"M">;
using Kd = shaped::dim<"K">;
using Nd = shaped::dim<"N">;

const std::vector<std::size_t> sizes{1, 2, 3, 7, 16, 33};

struct problem {
    std::size_t b, m, n, k;
};

// Every (m, n, k) of the sweep, with a batch of one and of three.
std::vector<problem> sweep() {
    std::vector<problem> out;
    for (std::size_t b : {1, 3})
        for (std::size_t m : sizes)
            for (std::size_t n : sizes)
                for (std::size_t k : sizes) out.push_back({b, m, n, k});
    return out;
}

template <std::size_t E>
using Ms = shaped::dim<"M", E>;
template <std::size_t E>
using Ks = shaped::dim<"K", E>;
template <std::size_t E>
using Ns = shaped::dim<"N", E>;
template <std::size_t E>
using Bs = shaped::dim<"B", E>;

// All dims static: a (B, M, K) @ b (B, K, N), and with b given as (B, N, K).mT().
template <class V, std::size_t Batch, std::size_t M, std::size_t N, std::size_t K>
void check_static() {
    INFO("static B=" << Batch << " M=" << M << " N=" << N << " K=" << K);
    shaped::Tensor<V, Bs<Batch>, Ms<M>, Ks<K>> a;
    shaped::Tensor<V, Bs<Batch>, Ks<K>, Ns<N>> b;
    shaped::Tensor<V, Bs<Batch>, Ns<N>, Ks<K>> bt;
    ref::fill(a, M * 100 + K);
    ref::fill(b, N * 100 + K);
    ref::fill(bt, N * 100 + K + 1);
    const auto want = ref::matmul(ref::values(a), ref::values(b), Batch, M, N, K, M * K, K * N);
    const shaped::Tensor<V, Bs<Batch>, Ms<M>, Ns<N>> c = shaped::matmul(a, b);
    ref::require_close(ref::values(c), want, ref::tolerance<V>(K));
    const auto b_of_bt = ref::transpose(ref::values(bt), Batch, N, K);
    const shaped::Tensor<V, Bs<Batch>, Ms<M>, Ns<N>> ct = shaped::matmul(a, bt.mT());
    ref::require_close(ref::values(ct), ref::matmul(ref::values(a), b_of_bt, Batch, M, N, K, M * K, K * N),
                       ref::tolerance<V>(K));
}

}  // namespace

TEMPLATE_TEST_CASE("matmul: batched, dynamic dims, against the naive loop", "[matmul]", float, double) {
    using V = TestType;
    for (const auto [b, m, n, k] : sweep()) {
        INFO("B=" << b << " M=" << m << " N=" << n << " K=" << k);
        shaped::Tensor<V, Bd, Md, Kd> lhs(Bd{b}, Md{m}, Kd{k});
        shaped::Tensor<V, Bd, Kd, Nd> rhs(Bd{b}, Kd{k}, Nd{n});
        ref::fill(lhs, m * 1000 + k);
        ref::fill(rhs, n * 1000 + k);
        const shaped::Tensor<V, Bd, Md, Nd> c = shaped::matmul(lhs, rhs);
        REQUIRE(c.extents() == std::array<std::size_t, 3>{b, m, n});
        ref::require_close(ref::values(c), ref::matmul(ref::values(lhs), ref::values(rhs), b, m, n, k, m * k, k * n),
                           ref::tolerance<V>(k));
    }
}

// Decoding's products are one row against a weight matrix, x (1, K) @ W (N, K)^T, and a
// matrix against one column: shaped multiplies their rows itself, a row at a time, four vectors
// of columns at a time, split over the threads when the matrix is large. Sizes just under, at and
// past a vector (16 floats with AVX-512), past four, and a thread's share.
TEMPLATE_TEST_CASE("matmul: a row times a matrix's transpose, and a matrix times a column, against the naive loop",
                   "[matmul]", float, double) {
    using V = TestType;
    const std::size_t k = GENERATE(1, 15, 16, 17, 100, 773);
    const std::size_t n = GENERATE(1, 7, 8, 9, 70, 1029);
    const int threads = GENERATE(1, 2);
    INFO("K=" << k << " N=" << n << " threads=" << threads);
    ref::threads_for_test using_threads(threads);
    shaped::Tensor<V, Md, Kd> x(Md{1}, Kd{k});
    shaped::Tensor<V, Nd, Kd> w(Nd{n}, Kd{k});
    shaped::Tensor<V, Md, Nd> out(Md{1}, Nd{n});
    ref::fill(x, k + 1);
    ref::fill(w, n * 10 + k);
    ref::fill(out, 3);
    const auto product = ref::matmul(ref::values(x), ref::transpose(ref::values(w), 1, n, k), 1, 1, n, k, 0, 0);
    const double tol = ref::tolerance<V>(k);

    const shaped::Tensor<V, Md, Nd> y = shaped::matmul(x, w.mT());
    ref::require_close(ref::values(y), product, tol);
    // Scaled, and added to what the target holds.
    auto want = ref::values(out);
    for (std::size_t j = 0; j < n; ++j) want[j] += V{2} * product[j];
    out = out + shaped::matmul(x, w.mT()) * V{2};
    ref::require_close(ref::values(out), want, tol);
    // W @ x^T: the same products as a column, (N, 1), written with the column's stride.
    const shaped::Tensor<V, Nd, Md> column = shaped::matmul(w, x.mT());
    ref::require_close(ref::values(column), product, tol);
}

TEMPLATE_TEST_CASE("matmul: transposed operands through mT()", "[matmul]", float, double) {
    using V = TestType;
    for (const auto [b, m, n, k] : sweep()) {
        INFO("B=" << b << " M=" << m << " N=" << n << " K=" << k);
        shaped::Tensor<V, Bd, Md, Kd> lhs(Bd{b}, Md{m}, Kd{k});
        shaped::Tensor<V, Bd, Kd, Md> lhs_t(Bd{b}, Kd{k}, Md{m});
        shaped::Tensor<V, Bd, Kd, Nd> rhs(Bd{b}, Kd{k}, Nd{n});
        shaped::Tensor<V, Bd, Nd, Kd> rhs_t(Bd{b}, Nd{n}, Kd{k});
        ref::fill(lhs, 1 + m);
        ref::fill(lhs_t, 2 + k);
        ref::fill(rhs, 3 + n);
        ref::fill(rhs_t, 4 + m);
        const auto l = ref::values(lhs), r = ref::values(rhs);
        const auto lt = ref::transpose(ref::values(lhs_t), b, k, m);  // lhs_t.mT() as (M, K)
        const auto rt = ref::transpose(ref::values(rhs_t), b, n, k);  // rhs_t.mT() as (K, N)
        const double tol = ref::tolerance<V>(k);

        // q @ k.mT(): the seed's attention scores.
        const shaped::Tensor<V, Bd, Md, Nd> c1 = shaped::matmul(lhs, rhs_t.mT());
        ref::require_close(ref::values(c1), ref::matmul(l, rt, b, m, n, k, m * k, k * n), tol);
        const shaped::Tensor<V, Bd, Md, Nd> c2 = shaped::matmul(lhs_t.mT(), rhs);
        ref::require_close(ref::values(c2), ref::matmul(lt, r, b, m, n, k, m * k, k * n), tol);
        const shaped::Tensor<V, Bd, Md, Nd> c3 = shaped::matmul(lhs_t.mT(), rhs_t.mT());
        ref::require_close(ref::values(c3), ref::matmul(lt, rt, b, m, n, k, m * k, k * n), tol);
        // transpose<-2, -1> and the named transpose are the same operation as mT().
        const shaped::Tensor<V, Bd, Md, Nd> c4 = shaped::matmul(lhs, shaped::transpose<Nd, Kd>(rhs_t));
        ref::require_close(ref::values(c4), ref::values(c1), 0.0);
        const shaped::Tensor<V, Bd, Md, Nd> c5 = shaped::matmul(shaped::transpose<-1, -2>(lhs_t), rhs);
        ref::require_close(ref::values(c5), ref::values(c2), 0.0);
    }
}

// A product of more rows than one packed panel of a few MiB holds (a GPT's weight gradient over
// its vocabulary) runs as several GEMMs over blocks of rows: k 512 and m 2100 make two blocks of
// float rows and three of double, the last one short, with A read plain and transposed.
TEMPLATE_TEST_CASE("matmul: a product taller than a packed panel, in blocks of rows, against the naive loop",
                   "[matmul]", float, double) {
    using V = TestType;
    const std::size_t m = 2100, n = 3, k = 512;
    shaped::Tensor<V, Md, Kd> lhs(Md{m}, Kd{k});
    shaped::Tensor<V, Kd, Md> lhs_t(Kd{k}, Md{m});
    shaped::Tensor<V, Kd, Nd> rhs(Kd{k}, Nd{n});
    ref::fill(lhs, 5);
    ref::fill(lhs_t, 6);
    ref::fill(rhs, 7);
    const double tol = ref::tolerance<V>(k);
    const shaped::Tensor<V, Md, Nd> plain = shaped::matmul(lhs, rhs);
    ref::require_close(ref::values(plain), ref::matmul(ref::values(lhs), ref::values(rhs), 1, m, n, k, 0, 0), tol);
    const shaped::Tensor<V, Md, Nd> transposed = shaped::matmul(lhs_t.mT(), rhs);
    ref::require_close(ref::values(transposed),
                       ref::matmul(ref::transpose(ref::values(lhs_t), 1, k, m), ref::values(rhs), 1, m, n, k, 0, 0), tol);
}

TEMPLATE_TEST_CASE("matmul: all dims static", "[matmul]", float, double) {
    using V = TestType;
    check_static<V, 1, 1, 1, 1>();
    check_static<V, 2, 3, 7, 16>();
    check_static<V, 3, 33, 2, 7>();
    check_static<V, 2, 16, 33, 3>();
    check_static<V, 1, 7, 1, 33>();
    check_static<V, 4, 1, 16, 2>();
}

TEMPLATE_TEST_CASE("matmul: batch dims broadcast", "[matmul]", float, double) {
    using V = TestType;
    for (const auto [b, m, n, k] : sweep()) {
        INFO("B=" << b << " M=" << m << " N=" << n << " K=" << k);
        shaped::Tensor<V, Bd, Md, Kd> x(Bd{b}, Md{m}, Kd{k});
        shaped::Tensor<V, Kd, Nd> w(Kd{k}, Nd{n});
        shaped::Tensor<V, Nd, Kd> w_out_in(Nd{n}, Kd{k});
        shaped::Tensor<V, Md, Kd> a(Md{m}, Kd{k});
        shaped::Tensor<V, Bd, Kd, Nd> y(Bd{b}, Kd{k}, Nd{n});
        ref::fill(x, 5 + m);
        ref::fill(w, 6 + n);
        ref::fill(w_out_in, 7 + k);
        ref::fill(a, 8 + m);
        ref::fill(y, 9 + n);
        const double tol = ref::tolerance<V>(k);

        // rank 3 @ rank 2: the weight is shared by every batch (one GEMM over all rows).
        const shaped::Tensor<V, Bd, Md, Nd> c1 = shaped::matmul(x, w);
        ref::require_close(ref::values(c1), ref::matmul(ref::values(x), ref::values(w), b, m, n, k, m * k, 0), tol);
        // x @ W^T with W as (out, in), as Linear stores it.
        const shaped::Tensor<V, Bd, Md, Nd> c2 = shaped::matmul(x, w_out_in.mT());
        const auto wt = ref::transpose(ref::values(w_out_in), 1, n, k);
        ref::require_close(ref::values(c2), ref::matmul(ref::values(x), wt, b, m, n, k, m * k, 0), tol);
        // rank 2 @ rank 3: the lhs is shared.
        const shaped::Tensor<V, Bd, Md, Nd> c3 = shaped::matmul(a, y);
        ref::require_close(ref::values(c3), ref::matmul(ref::values(a), ref::values(y), b, m, n, k, 0, k * n), tol);
        // A transposed lhs with a batch: no single GEMM can cover it.
        const shaped::Tensor<V, Bd, Kd, Kd> c4 = shaped::matmul(x.mT(), x);
        const auto x_t = ref::transpose(ref::values(x), b, m, k);
        ref::require_close(ref::values(c4), ref::matmul(x_t, ref::values(x), b, k, k, m, k * m, m * k),
                           ref::tolerance<V>(m));
    }
}

TEMPLATE_TEST_CASE("matmul: rank-4 batches, and a batch of extent one that spreads", "[matmul]", float, double) {
    using V = TestType;
    using H = shaped::dim<"H", 3>;
    using One = shaped::dim<"B", 1>;
    const std::size_t b = 2, t = GENERATE(1, 5, 16), d = GENERATE(1, 4, 7);
    INFO("T=" << t << " D=" << d);
    shaped::Tensor<V, Bd, H, Md, Kd> q(Bd{b}, Md{t}, Kd{d});
    shaped::Tensor<V, Bd, H, Nd, Kd> k(Bd{b}, Nd{t}, Kd{d});
    ref::fill(q, 10);
    ref::fill(k, 11);
    const shaped::Tensor<V, Bd, H, Md, Nd> s = shaped::matmul(q, k.mT());
    const auto kt = ref::transpose(ref::values(k), b * 3, t, d);
    ref::require_close(ref::values(s), ref::matmul(ref::values(q), kt, b * 3, t, t, d, t * d, d * t),
                       ref::tolerance<V>(d));

    // (1, H, M, K) @ (B, H, K, N): the lhs's batch of one spreads over B.
    shaped::Tensor<V, One, H, Md, Kd> q1(Md{t}, Kd{d});
    ref::fill(q1, 12);
    const shaped::Tensor<V, Bd, H, Md, Nd> s1 = shaped::matmul(q1, k.mT());
    std::vector<double> want;
    const auto q1v = ref::values(q1);
    for (std::size_t i = 0; i < b; ++i) {
        const std::vector<double> ki(kt.begin() + i * 3 * d * t, kt.begin() + (i + 1) * 3 * d * t);
        const auto part = ref::matmul(q1v, ki, 3, t, t, d, t * d, d * t);
        want.insert(want.end(), part.begin(), part.end());
    }
    ref::require_close(ref::values(s1), want, ref::tolerance<V>(d));
}

TEMPLATE_TEST_CASE("matmul: scaled products equal the naive product scaled", "[matmul]", float, double) {
    using V = TestType;
    const std::size_t b = 2, t = GENERATE(1, 4, 17), h = GENERATE(1, 16);
    INFO("T=" << t << " H=" << h);
    using Td = shaped::dim<"T">;
    using Hd = shaped::dim<"H">;
    shaped::Tensor<V, Bd, Td, Hd> q(Bd{b}, Td{t}, Hd{h}), k(Bd{b}, Td{t}, Hd{h});
    ref::fill(q, 13);
    ref::fill(k, 14);
    const V scale = V{1} / std::sqrt(static_cast<V>(h));
    const auto kt = ref::transpose(ref::values(k), b, t, h);
    auto want = ref::matmul(ref::values(q), kt, b, t, t, h, t * h, h * t);
    for (auto& w : want) w *= scale;
    const double tol = ref::tolerance<V>(h);

    shaped::Tensor<V, Bd, Td, Td> w1 = shaped::matmul(q, k.mT()) * scale;
    ref::require_close(ref::values(w1), want, tol);
    const shaped::Tensor<V, Bd, Td, Td> w2 = scale * shaped::matmul(q, k.mT());
    ref::require_close(ref::values(w2), want, tol);
    const shaped::Tensor<V, Bd, Td, Td> w3 = shaped::matmul(q, k.mT()) / (V{1} / scale);
    ref::require_close(ref::values(w3), want, tol);
    // Assigned into an existing tensor, and nested in a larger expression.
    w1 = shaped::matmul(q, k.mT()) * scale;
    ref::require_close(ref::values(w1), want, tol);
    const shaped::Tensor<V, Bd, Td, Td> w4 = shaped::matmul(q, k.mT()) * scale + V{1};
    auto want4 = want;
    for (auto& w : want4) w += 1;
    ref::require_close(ref::values(w4), want4, tol);
}

TEMPLATE_TEST_CASE("matmul: a product added to the target itself accumulates onto it", "[matmul]", float, double) {
    using V = TestType;
    const std::size_t b = 2, m = GENERATE(1, 5, 16), k = GENERATE(1, 7), n = GENERATE(1, 9);
    INFO("M=" << m << " K=" << k << " N=" << n);
    shaped::Tensor<V, Bd, Md, Kd> a(Bd{b}, Md{m}, Kd{k});
    shaped::Tensor<V, Nd, Kd> w(Nd{n}, Kd{k});
    shaped::Tensor<V, Bd, Md, Nd> out(Bd{b}, Md{m}, Nd{n});
    ref::fill(a, 31);
    ref::fill(w, 32);
    ref::fill(out, 33);
    const auto product = ref::matmul(ref::values(a), ref::transpose(ref::values(w), 1, n, k), b, m, n, k, m * k, 0);
    auto want = ref::values(out);
    for (std::size_t i = 0; i < want.size(); ++i) want[i] += product[i];
    const double tol = ref::tolerance<V>(k);
    SECTION("out = out + matmul, and the operands the other way round") {
        const auto before = out;
        out = out + shaped::matmul(a, w.mT());
        ref::require_close(ref::values(out), want, tol);
        out = before;
        out = shaped::matmul(a, w.mT()) + out;
        ref::require_close(ref::values(out), want, tol);
    }
    SECTION("an addend that is another tensor, or the target read another way, is added as it is") {
        const auto addend = out;
        shaped::Tensor<V, Bd, Md, Nd> other(Bd{b}, Md{m}, Nd{n});
        other = addend + shaped::matmul(a, w.mT());
        ref::require_close(ref::values(other), want, tol);
        if (m == n) {
            auto square_want = ref::transpose(ref::values(out), b, m, n);
            for (std::size_t i = 0; i < square_want.size(); ++i) square_want[i] += product[i];
            // out's transpose, under out's own dim names: the same elements, other strides.
            using Xd = shaped::dim<"X">;
            const auto transposed = shaped::rename<Xd, Nd>(shaped::rename<Nd, Md>(shaped::rename<Md, Xd>(out.mT())));
            out = transposed + shaped::matmul(a, w.mT());
            ref::require_close(ref::values(out), square_want, tol);
        }
    }
}

TEMPLATE_TEST_CASE("matmul: operands that are views, slices and expressions", "[matmul]", float, double) {
    using V = TestType;
    using I = shaped::dim<"I", 4>;
    using J = shaped::dim<"J", 5>;
    using K = shaped::dim<"K", 6>;
    using L = shaped::dim<"L", 3>;
    shaped::Tensor<V, I, J, K> x;
    shaped::Tensor<V, K, L> w;
    ref::fill(x, 15);
    ref::fill(w, 16);
    const auto xv = ref::values(x), wv = ref::values(w);
    const double tol = ref::tolerance<V>(6);

    // A slice along the contracted dim: rows are strided past their length.
    const auto xs = shaped::slice<K>(x, 1, 4);
    const auto ws = shaped::slice<K>(w, 1, 4);
    const shaped::Tensor<V, I, J, L> c1 = shaped::matmul(xs, ws);
    std::vector<double> xsv, wsv;
    for (std::size_t r = 0; r < 4 * 5; ++r)
        for (std::size_t c = 1; c < 4; ++c) xsv.push_back(xv[r * 6 + c]);
    for (std::size_t r = 1; r < 4; ++r)
        for (std::size_t c = 0; c < 3; ++c) wsv.push_back(wv[r * 3 + c]);
    ref::require_close(ref::values(c1), ref::matmul(xsv, wsv, 4, 5, 3, 3, 15, 0), tol);

    // select<K> leaves a matrix (I, J) with no unit stride: BLAS cannot read it in place.
    const auto x0 = shaped::select<K>(x, 2);
    shaped::Tensor<V, J, L> m;
    ref::fill(m, 17);
    const shaped::Tensor<V, I, L> c2 = shaped::matmul(x0, m);
    std::vector<double> x0v;
    for (std::size_t r = 0; r < 4 * 5; ++r) x0v.push_back(xv[r * 6 + 2]);
    ref::require_close(ref::values(c2), ref::matmul(x0v, ref::values(m), 1, 4, 3, 5, 0, 0), tol);

    // An elementwise operand is evaluated first.
    const shaped::Tensor<V, I, J, L> c3 = shaped::matmul(x * V{2}, w);
    auto want3 = ref::matmul(xv, wv, 4, 5, 3, 6, 30, 0);
    for (auto& v : want3) v *= 2;
    ref::require_close(ref::values(c3), want3, tol);

    // A product nested in an elementwise expression, and a product of products.
    const shaped::Tensor<V, I, J, L> c4 = shaped::matmul(x, w) - shaped::matmul(x, w);
    ref::require_close(ref::values(c4), std::vector<double>(4 * 5 * 3, 0.0), 0.0);
    shaped::Tensor<V, L, K> back;
    ref::fill(back, 18);
    const shaped::Tensor<V, I, J, K> c5 = shaped::matmul(shaped::matmul(x, w), back);
    const auto xw = ref::matmul(xv, wv, 4, 5, 3, 6, 30, 0);
    ref::require_close(ref::values(c5), ref::matmul(xw, ref::values(back), 4, 5, 6, 3, 15, 0), ref::tolerance<V>(18));

    // Written through a view: one batch of the result.
    shaped::Tensor<V, I, J, L> out;
    shaped::select<I>(out, 1) = shaped::matmul(shaped::select<I>(x, 1), w);
    const auto want6 = ref::matmul(xv, wv, 4, 5, 3, 6, 30, 0);
    for (std::size_t i = 0; i < 4; ++i)
        for (std::size_t j = 0; j < 5; ++j)
            for (std::size_t l = 0; l < 3; ++l) {
                const double expect = i == 1 ? want6[(i * 5 + j) * 3 + l] : 0.0;
                REQUIRE(std::abs(out(i, j, l) - expect) <= tol * (1 + std::abs(expect)));
            }
}

TEST_CASE("matmul: a contracted-dim mismatch at run time names both dims", "[matmul]") {
    shaped::Tensor<float, Bd, Md, Kd> a(Bd{2}, Md{3}, Kd{4});
    shaped::Tensor<float, Bd, Kd, Nd> b(Bd{2}, Kd{5}, Nd{6});
    CHECK_THROWS_AS(shaped::matmul(a, b), shaped::shape_error);
    CHECK_THROWS_WITH(shaped::matmul(a, b), Contains("shaped::matmul") && Contains("K(4)") && Contains("K(5)"));
    // Static on one side, dynamic on the other.
    shaped::Tensor<float, shaped::dim<"K", 7>, Nd> s(Nd{2});
    CHECK_THROWS_WITH(shaped::matmul(a, s), Contains("K(4)") && Contains("K(7)"));
    // Through a transposed operand.
    shaped::Tensor<float, Bd, Nd, Kd> bt(Bd{2}, Nd{6}, Kd{5});
    CHECK_THROWS_WITH(shaped::matmul(a, bt.mT()), Contains("K(4)") && Contains("K(5)"));
    // The check fires when the product is built, before any assignment.
    shaped::Tensor<float, Bd, Md, Nd> c(Bd{2}, Md{3}, Nd{6});
    c(0, 0, 0) = 1.0f;
    CHECK_THROWS_AS(c = shaped::matmul(a, b), shaped::shape_error);
    CHECK(c(0, 0, 0) == 1.0f);
}

TEST_CASE("matmul: a batch-dim mismatch at run time names both dims", "[matmul]") {
    shaped::Tensor<float, Bd, Md, Kd> a(Bd{2}, Md{3}, Kd{4});
    shaped::Tensor<float, Bd, Kd, Nd> b(Bd{3}, Kd{4}, Nd{6});
    CHECK_THROWS_AS(shaped::matmul(a, b), shaped::shape_error);
    CHECK_THROWS_WITH(shaped::matmul(a, b), Contains("shaped::matmul") && Contains("B(2)") && Contains("B(3)"));
    // An extent of one spreads instead.
    shaped::Tensor<float, Bd, Kd, Nd> one(Bd{1}, Kd{4}, Nd{6});
    CHECK_NOTHROW(shaped::matmul(a, one));
}

// ---- nn::Linear --------------------------------------------------------------------------------

TEST_CASE("nn::Linear: weight is (Out, In) and y = x @ W^T + b", "[matmul][nn]") {
    using C = shaped::dim<"C", 6>;
    using H = shaped::dim<"H", 16>;
    using Td = shaped::dim<"T">;
    using B = shaped::dim<"B", 2>;
    STATIC_REQUIRE(std::is_same_v<decltype(shaped::nn::Linear<C, H>::weight), shaped::Tensor<float, H, C>>);
    STATIC_REQUIRE(std::is_same_v<decltype(shaped::nn::Linear<C, H>::bias), shaped::Tensor<float, H>>);

    shaped::Generator gen(21);
    const shaped::nn::Linear<C, H> with_bias(gen);
    const shaped::nn::Linear<C, H, false> without(gen);
    // PyTorch's initialisation: uniform within 1/sqrt(in_features).
    const double bound = 1 / std::sqrt(6.0);
    for (float w : with_bias.weight.elements()) CHECK(std::abs(w) <= bound);
    for (float b : with_bias.bias.elements()) CHECK(std::abs(b) <= bound);

    const std::size_t t = GENERATE(1, 4, 33);
    shaped::Tensor<float, B, Td, C> x(Td{t});
    ref::fill(x, 22);
    const auto xv = ref::values(x);
    // The naive y[b, t, h] = sum_c x[b, t, c] * W[h, c] (+ bias[h]), W read in its (Out, In) layout.
    const auto naive = [&](const auto& layer, bool add_bias) {
        std::vector<double> y(2 * t * 16);
        for (std::size_t r = 0; r < 2 * t; ++r)
            for (std::size_t h = 0; h < 16; ++h) {
                double s = 0;
                for (std::size_t c = 0; c < 6; ++c) s += xv[r * 6 + c] * layer.weight(h, c);
                if constexpr (requires { layer.bias(h); }) s += add_bias ? layer.bias(h) : 0.0;
                y[r * 16 + h] = s;
            }
        return y;
    };
    const shaped::Tensor<float, B, Td, H> y = with_bias(x);
    ref::require_close(ref::values(y), naive(with_bias, true), ref::tolerance<float>(6));
    const shaped::Tensor<float, B, Td, H> z = without(x);
    ref::require_close(ref::values(z), naive(without, false), ref::tolerance<float>(6));
    // Applied to an expression, and to a rank-2 input.
    const shaped::Tensor<float, B, Td, H> y2 = with_bias(x * 1.0f);
    ref::require_close(ref::values(y2), ref::values(y), ref::tolerance<float>(6));
    shaped::Tensor<float, Td, C> row = shaped::select<B>(x, 1);
    const shaped::Tensor<float, Td, H> yr = with_bias(row);
    const auto yv = ref::values(y);
    ref::require_close(ref::values(yr), std::vector<double>(yv.begin() + t * 16, yv.end()), ref::tolerance<float>(6));
}

TEST_CASE("nn::Linear: default-constructed parameters are zero and can be loaded", "[matmul][nn]") {
    using C = shaped::dim<"C", 3>;
    using H = shaped::dim<"H", 2>;
    shaped::nn::Linear<C, H> layer;
    CHECK(std::all_of(layer.weight.data(), layer.weight.data() + 6, [](float w) { return w == 0.0f; }));
    layer.weight = shaped::tensor<float, H, C>({1, 2, 3, 4, 5, 6});
    layer.bias = shaped::tensor<float, H>({10, 20});
    const auto x = shaped::tensor<float, shaped::dim<"T", 1>, C>({1, 1, 1});
    const shaped::Tensor<float, shaped::dim<"T", 1>, H> y = layer(x);
    // Row h of the weight is output h: 1+2+3 + 10 and 4+5+6 + 20.
    CHECK(y(0, 0) == 16.0f);
    CHECK(y(0, 1) == 35.0f);
}
