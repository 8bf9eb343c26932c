#pragma once
// Fused attention: softmax(q @ k^T * scale, mask) @ v in one pass over the keys, compiled once in
// src/attention.cpp. The scores never exist as a T x T matrix: blocks of queries meet blocks of
// keys, the softmax runs online (a running max and sum per query, the partial output rescaled
// when the max grows), and key blocks wholly in a query block's future are never visited (nor,
// with a sliding window, those wholly before it: O(T x W) work, not O(T^2)). A few queries (a
// decoding step against a cache, or the chapter's T=4) take a row-at-a-time path shaped like a
// GEMV instead, over the keys a query can see and no others. The one kernel serves inference,
// decoding and training: asked to, it keeps each query's log-sum-exp for the backward
// (kernels/attention_backward.hpp).
//
// attention_into(target, q, k, v, scale, visibility) is the entry point from assign(): any
// Tensor or View operands, read in place through their strides (a transposed k is the same
// elements read the other way), batch dims broadcast as in matmul.

#include <shaped/kernels/matmul.hpp>
#include <shaped/kernels/overlap.hpp>
#include <shaped/kernels/recognise.hpp>
#include <shaped/kernels/strided.hpp>

#include <array>
#include <cmath>
#include <cstddef>
#include <optional>
#include <type_traits>
#include <utility>

namespace shaped::kernels {

inline constexpr std::size_t max_attention_batch_rank = 6;

// Which keys a query sees: with causal set, query i sees key j when j <= i + diagonal; otherwise
// every key. With a window W as well, only the last W of those: j > i + diagonal - W, so that a
// query on the diagonal sees itself and the W - 1 keys before it (a sliding window).
struct visibility {
    bool causal;
    long diagonal;
    std::optional<std::size_t> window{};
};

// One operand of an attention problem: a batch of matrices. Matrix b's element (i, j) is
// data[offset + i * matrix.strides[0] + j * matrix.strides[1]], offset stepping along the batch
// dims by `batch` (0 where the operand broadcasts).
template <class P>
struct batched_matrices {
    P* data;
    strided_layout<2> matrix;
    std::array<std::ptrdiff_t, max_attention_batch_rank> batch;
};

// One attention problem over strided memory: q is tq x d, k is tk x d, v is tk x dv, out is
// tq x dv, each a batch of them. With lse set, the forward also writes each query's log-sum-exp
// of its scaled scores over the keys it sees (natural log; -inf where it sees none), what the
// backward (kernels/attention_backward.hpp) recomputes the weights from: lse[b * tq + i] for
// query i of matrix b, the matrices counted row-major over the batch dims.
template <class T>
struct attention_problem {
    batched_matrices<const T> q, k, v;
    batched_matrices<T> out;
    T* lse;
    std::size_t tq() const { return q.matrix.extents[0]; }
    std::size_t d() const { return q.matrix.extents[1]; }
    std::size_t tk() const { return v.matrix.extents[0]; }
    std::size_t dv() const { return v.matrix.extents[1]; }
    T scale;
    visibility sees;
    // The batch dims in front of the matrices.
    std::size_t batch_rank;
    std::array<std::size_t, max_attention_batch_rank> batch_extents;
};

void attention(const attention_problem<float>& problem);
void attention(const attention_problem<double>& problem);

// target = attention(q, k, v). K is (..., Tk, D), or with keys_transposed its transpose
// (..., D, Tk) as a matmul(q, k.mT()) holds it.
template <class Target, class Q, class K, class V, class T>
void attention_into(Target& target, const Q& q_expr, const K& k_expr, const V& v_expr, T scale, visibility sees,
                    bool keys_transposed);

// The problem of out = attention(q, k, v) over strided elements (kernels/strided.hpp), batch dims
// broadcast as in matmul; no log-sum-exp asked for. attention_into runs it; a derivative that
// must run the forward again keeping the log-sum-exp builds it so too.
template <class T, std::size_t QR, std::size_t KR, std::size_t VR, std::size_t CR>
attention_problem<T> problem_over(const strided<T, QR>& q, const strided<T, KR>& k, const strided<T, VR>& v, T* out,
                                  const strided_layout<CR>& out_layout, T scale, visibility sees, bool keys_transposed);

// Runs the fused kernel for the chapter's expression, returning false (and doing nothing) where
// the expression only looks like attention: the mask is not causal, the fill is not -inf.
template <class Target, class Source>
bool assign_recognised_attention(Target& target, const Source& source);

// target = causal_attention(q, k, v, scale[, window]).
template <class Target, class Q, class K, class V>
void assign_attention(Target& target, const attention_node<Q, K, V>& node);

// ---- implementation -------------------------------------------------------------------------

namespace detail {

// Whether x is non-zero everywhere on and below each matrix's diagonal `diagonal`.
template <class X>
bool fills_lower_triangle(const X& x, long diagonal) {
    using T = value_type_of<X>;
    constexpr std::size_t r = rank_of<X>;
    const auto op = as_strided<T>(x);
    const auto& e = op.elements;
    const std::size_t rows = e.extents[r - 2], cols = e.extents[r - 1];
    for (batch_iterator<r - 2> matrix(e.extents); matrix; ++matrix) {
        const T* first = e.data + matrix.offset(e.strides);
        for (std::size_t i = 0; i < rows; ++i) {
            const long last = std::min(static_cast<long>(cols) - 1, static_cast<long>(i) + diagonal);
            const T* row = first + static_cast<std::ptrdiff_t>(i) * e.strides[r - 2];
            for (long j = 0; j <= last; ++j)
                if (row[j * e.strides[r - 1]] == T{0}) return false;
        }
    }
    return true;
}

}  // namespace detail

template <class Target, class Q, class K, class V, class T>
void attention_into(Target& target, const Q& q_expr, const K& k_expr, const V& v_expr, T scale, visibility sees,
                    bool keys_transposed) {
    constexpr std::size_t cr = rank_of<Target>;
    const auto q_op = as_strided<T>(q_expr);
    const auto k_op = as_strided<T>(k_expr);
    const auto v_op = as_strided<T>(v_expr);
    const auto& q = q_op.elements;
    const auto& k = k_op.elements;
    const auto& v = v_op.elements;
    const auto out_extents = target.extents();
    const auto out_strides = target.strides();

    // The kernel writes outputs while it still reads inputs: a target that shares memory with
    // q, k or v is computed aside first.
    const detail::footprint written = detail::footprint_of(elements_of(target));
    if (written.meets(detail::footprint_of(q)) || written.meets(detail::footprint_of(k)) ||
        written.meets(detail::footprint_of(v))) {
        tensor_for<T, dims_of<Target>> aside{typename tensor_for<T, dims_of<Target>>::shape_type(out_extents)};
        attention_into(aside, q_expr, k_expr, v_expr, scale, sees, keys_transposed);
        detail::copy_into(target, aside);
        return;
    }

    attention(problem_over<T>(q, k, v, target.data(), strided_layout<cr>{out_extents, out_strides}, scale, sees,
                              keys_transposed));
}

template <class T, std::size_t QR, std::size_t KR, std::size_t VR, std::size_t CR>
attention_problem<T> problem_over(const strided<T, QR>& q, const strided<T, KR>& k, const strided<T, VR>& v, T* out,
                                  const strided_layout<CR>& out_layout, T scale, visibility sees, bool keys_transposed) {
    constexpr std::size_t batch = CR - 2;
    static_assert(batch <= max_attention_batch_rank, "shaped::attention: too many batch dims");
    attention_problem<T> p{};
    // The last two dims of each operand; k's the other way round where it is held transposed.
    const auto matrix = [](const auto& layout, std::size_t rows, std::size_t cols) {
        return strided_layout<2>{{layout.extents[rows], layout.extents[cols]},
                                 {layout.strides[rows], layout.strides[cols]}};
    };
    p.q = {q.data, matrix(q, QR - 2, QR - 1), {}};
    p.k = {k.data, keys_transposed ? matrix(k, KR - 1, KR - 2) : matrix(k, KR - 2, KR - 1), {}};
    p.v = {v.data, matrix(v, VR - 2, VR - 1), {}};
    p.out = {out, matrix(out_layout, CR - 2, CR - 1), {}};
    p.scale = scale;
    p.sees = sees;
    p.batch_rank = batch;
    const auto qb = detail::batch_strides<batch>(q);
    const auto kb = detail::batch_strides<batch>(k);
    const auto vb = detail::batch_strides<batch>(v);
    for (std::size_t i = 0; i < batch; ++i) {
        p.batch_extents[i] = out_layout.extents[i];
        p.q.batch[i] = qb[i];
        p.k.batch[i] = kb[i];
        p.v.batch[i] = vb[i];
        p.out.batch[i] = out_layout.extents[i] == 1 ? 0 : out_layout.strides[i];
    }
    return p;
}

template <class Target, class Source>
bool assign_recognised_attention(Target& target, const Source& source) {
    using T = value_type_of<Target>;
    using weights = detail::attention_weights<std::remove_cvref_t<decltype(source.lhs())>>;
    const auto& w = source.lhs();
    const auto& logits = weights::logits(w);
    using logits_form = detail::scaled_matmul<std::remove_cvref_t<decltype(logits)>>;
    const auto& product = logits_form::product(logits);
    visibility sees{false, 0};
    if constexpr (weights::masked) {
        const auto& filled = w.operand();
        const auto& mask = filled.template operand<1>();
        const auto& tril = mask.template operand<0>();
        const auto fill = filled.template operand<2>().value;
        if (!(std::isinf(fill) && fill < 0) || mask.template operand<1>().value != 0) return false;
        // The mask must cover each score matrix exactly, not broadcast along its rows or columns.
        const auto scores = product.extents();
        const auto masks = mask.extents();
        constexpr std::size_t sr = rank_of<decltype(product)>, mr = rank_of<decltype(mask)>;
        if (masks[mr - 2] != scores[sr - 2] || masks[mr - 1] != scores[sr - 1]) return false;
        if (!detail::fills_lower_triangle(tril.operand(), tril.diagonal())) return false;
        sees = {true, tril.diagonal()};
    }
    attention_into(target, product.lhs(), product.rhs(), source.rhs(), static_cast<T>(logits_form::scale(logits)), sees,
                   true);
    return true;
}

template <class Target, class Q, class K, class V>
void assign_attention(Target& target, const attention_node<Q, K, V>& node) {
    const auto q = node.query().extents();
    const auto k = node.key().extents();
    const long diagonal = static_cast<long>(k[rank_of<K> - 2]) - static_cast<long>(q[rank_of<Q> - 2]);
    attention_into(target, node.query(), node.key(), node.value(), node.scale(), visibility{true, diagonal, node.window()},
                   false);
}

}  // namespace shaped::kernels
