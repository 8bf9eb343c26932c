#pragma once
// Attention written densely, the oracle of the fused kernel's tests (attention, sliding windows,
// score and mask modifiers): every score of a matrix computed, each modified or masked by the
// caller, a softmax over the row, the values weighted. Plain row-major arrays in double, no code
// shared with shaped.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

namespace ref {

inline constexpr double unseen = -std::numeric_limits<double>::infinity();

// out = softmax_j(score(m, i, j, q_i . k_j)) v over matrices laid out one after another: q
// (tq x d), k (tk x d) and v (tk x dv) each, or one k and v every matrix shares. score(m, i, j,
// product) is the score of query i of matrix m for key j given their dot product, or `unseen`
// for a key the query does not see. A query that sees no key gives NaN, as softmax over -inf does.
template <class Score>
std::vector<double> dense_attention(const std::vector<double>& q, const std::vector<double>& k,
                                    const std::vector<double>& v, std::size_t tq, std::size_t tk, std::size_t d,
                                    std::size_t dv, Score score) {
    const std::size_t matrices = q.size() / (tq * d);
    const bool shared_keys = k.size() == tk * d;
    std::vector<double> out(matrices * tq * dv);
    std::vector<double> w(tk);
    for (std::size_t m = 0; m < matrices; ++m) {
        const std::size_t km = shared_keys ? 0 : m;
        for (std::size_t i = 0; i < tq; ++i) {
            double max = unseen;
            for (std::size_t j = 0; j < tk; ++j) {
                double product = 0;
                for (std::size_t c = 0; c < d; ++c) product += q[(m * tq + i) * d + c] * k[(km * tk + j) * d + c];
                w[j] = score(m, i, j, product);
                max = std::max(max, w[j]);
            }
            double sum = 0;
            for (std::size_t j = 0; j < tk; ++j) sum += w[j] = std::exp(w[j] - max);
            for (std::size_t c = 0; c < dv; ++c) {
                double acc = 0;
                for (std::size_t j = 0; j < tk; ++j) acc += w[j] * v[(km * tk + j) * dv + c];
                out[(m * tq + i) * dv + c] = acc / sum;
            }
        }
    }
    return out;
}

}  // namespace ref
