// Sliding-window attention against naive references in double: the fused kernel's window over
// sizes around its blocks (both the block path and the row path), the positions a window of W
// includes, and the ring-buffer cache decoding past W positions, equal at every step to a full
// recompute with the windowed mask.

#include "reference.hpp"

#include <shaped/shaped.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

namespace {

using B = shaped::dim<"B", 2>;
using NH = shaped::dim<"NH", 3>;
using Td = shaped::dim<"T">;
using Sd = shaped::dim<"S">;
using Hd = shaped::dim<"H">;
using Dd = shaped::dim<"D">;

// out[b, i, :] = sum_j softmax_j(q[b, i] . k[b, j] * scale) v[b, j] over the keys j that query i
// sees: the queries are the last tq of the tk positions, so query i stands at position
// i + tk - tq, and sees positions p with position - window < p <= position. Matrices row-major,
// one after another.
template <class Q, class K, class V>
std::vector<double> naive_windowed_attention(const Q& q, const K& k, const V& v, double scale, std::size_t window) {
    const auto qe = q.extents(), ke = k.extents(), ve = v.extents();
    constexpr std::size_t r = std::tuple_size_v<decltype(qe)>;
    const std::size_t tq = qe[r - 2], d = qe[r - 1], tk = ke[r - 2], dv = ve[r - 1];
    const std::size_t batches = q.size() / (tq * d);
    const auto qs = ref::values(q), ks = ref::values(k), vs = ref::values(v);
    std::vector<double> out(batches * tq * dv);
    std::vector<double> weights(tk);
    for (std::size_t b = 0; b < batches; ++b)
        for (std::size_t i = 0; i < tq; ++i) {
            const long position = static_cast<long>(i + tk - tq);
            double max = -std::numeric_limits<double>::infinity();
            for (std::size_t j = 0; j < tk; ++j) {
                const long p = static_cast<long>(j);
                const bool seen = p <= position && p > position - static_cast<long>(window);
                double s = 0;
                for (std::size_t c = 0; c < d; ++c) s += qs[(b * tq + i) * d + c] * ks[(b * tk + j) * d + c];
                weights[j] = seen ? s * scale : -std::numeric_limits<double>::infinity();
                max = std::max(max, weights[j]);
            }
            double sum = 0;
            for (std::size_t j = 0; j < tk; ++j) sum += weights[j] = std::exp(weights[j] - max);
            for (std::size_t c = 0; c < dv; ++c) {
                double acc = 0;
                for (std::size_t j = 0; j < tk; ++j) acc += weights[j] * vs[(b * tk + j) * dv + c];
                out[(b * tq + i) * dv + c] = acc / sum;
            }
        }
    return out;
}

template <class V>
double tolerance() {
    return std::is_same_v<V, float> ? 2e-5 : 1e-12;
}

// Windowed attention of the last tq of tk positions, fused, against the naive reference.
template <class V, std::size_t W>
void check_window(std::size_t tk, std::size_t tq, std::size_t h) {
    CAPTURE(W, tk, tq, h);
    shaped::Generator gen(tk * 7 + tq + h + W);
    const auto q_all = shaped::randn<V, B, NH, Td, Hd>(gen, Td{tk}, Hd{h});
    const auto k = shaped::randn<V, B, NH, Sd, Hd>(gen, Sd{tk}, Hd{h});
    const auto v = shaped::randn<V, B, NH, Sd, Dd>(gen, Sd{tk}, Dd{24});
    const auto q = shaped::slice<Td>(q_all, tk - tq, tk);
    const shaped::Tensor<V, B, NH, Td, Dd> out = shaped::causal_attention(q, k, v, V{0.3}, shaped::window<W>{});
    ref::require_close(ref::values(out), naive_windowed_attention(q, k, v, 0.3, W), tolerance<V>());
}

}  // namespace

TEST_CASE("a window of W includes a query's own position and the W - 1 before it", "[sliding_window]") {
    // Zero queries weigh every key they see alike, and values one-hot by position show which:
    // out[i][j] is 1/3 where query i sees position j, 0 elsewhere.
    using T8 = shaped::dim<"T", 8>;
    using P8 = shaped::dim<"P", 8>;
    shaped::Generator gen(1);
    const auto q = shaped::zeros<double, T8, Hd>(Hd{4});
    const auto k = shaped::randn<double, T8, Hd>(gen, Hd{4});
    shaped::Tensor<double, T8, P8> v = shaped::zeros<double, T8, P8>();
    for (std::size_t j = 0; j < 8; ++j) v(j, j) = 1;
    const shaped::Tensor<double, T8, P8> out = shaped::causal_attention(q, k, v, 1.0, shaped::window<3>{});
    for (std::size_t i = 0; i < 8; ++i)
        for (std::size_t j = 0; j < 8; ++j) {
            CAPTURE(i, j);
            const bool seen = j <= i && j + 3 > i;  // i - 2, i - 1, i
            REQUIRE(out(i, j) == Approx(seen ? 1.0 / static_cast<double>(std::min<std::size_t>(i + 1, 3)) : 0.0));
        }
}

TEMPLATE_TEST_CASE("windowed attention meets the naive masked softmax, block and row paths", "[sliding_window]", float,
                   double) {
    using V = TestType;
    const std::size_t tk = GENERATE(1, 5, 9, 64, 65, 130, 300);
    const std::size_t tq = GENERATE(1, 3, 8, 9, 70, 300);
    const std::size_t h = GENERATE(5, 16);
    if (tq > tk) return;
    check_window<V, 1>(tk, tq, h);
    check_window<V, 3>(tk, tq, h);
    check_window<V, 64>(tk, tq, h);
    check_window<V, 100>(tk, tq, h);
    check_window<V, 1000>(tk, tq, h);
}

TEST_CASE("windowed attention in parallel, many blocks, meets the naive masked softmax", "[sliding_window]") {
    check_window<float, 100>(700, 700, 64);
    check_window<float, 129>(700, 450, 32);
}
