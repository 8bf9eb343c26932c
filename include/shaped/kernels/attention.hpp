#pragma once
// Fused attention: softmax(q @ k^T * scale, mask) @ v in one pass over the keys, compiled once in
// src/attention.cpp. The scores never exist as a T x T matrix: blocks of queries meet blocks of
// keys, the softmax runs online (a running max and sum per query, the partial output rescaled
// when the max grows), and key blocks wholly in a query block's future are never visited. A few
// queries (a decoding step against a cache, or the chapter's T=4) take a row-at-a-time path
// shaped like a GEMV instead, over the keys a query can see and no others.
//
// attention_into(target, q, k, v, scale, visibility) is the entry point from assign(): any
// Tensor or View operands, read in place through their strides (a transposed k is the same
// elements read the other way), batch dims broadcast as in matmul.

#include <shaped/kernels/matmul.hpp>
#include <shaped/kernels/strided.hpp>

#include <xtensor/xnoalias.hpp>

#include <array>
#include <cmath>
#include <cstddef>
#include <type_traits>
#include <utility>

namespace shaped::kernels {

inline constexpr std::size_t max_attention_batch_rank = 6;

// Which keys a query sees: with causal set, query i sees key j when j <= i + diagonal; otherwise
// every key.
struct visibility {
    bool causal;
    long diagonal;
};

// One attention problem over strided memory. Each operand is a batch of matrices: q is
// tq x d, k is tk x d, v is tk x dv, out is tq x dv, each element (r, c) at r * row + c * col.
template <class T>
struct attention_problem {
    struct matrix {
        std::ptrdiff_t row;
        std::ptrdiff_t col;
    };
    const T* q;
    const T* k;
    const T* v;
    T* out;
    matrix q_stride, k_stride, v_stride, out_stride;
    std::size_t tq, tk, d, dv;
    T scale;
    visibility sees;
    // The batch dims in front of the matrices, and each operand's strides along them (0 where
    // it broadcasts).
    std::size_t batch_rank;
    std::array<std::size_t, max_attention_batch_rank> batch_extents;
    std::array<std::ptrdiff_t, max_attention_batch_rank> q_batch, k_batch, v_batch, out_batch;
};

void attention(const attention_problem<float>& problem);
void attention(const attention_problem<double>& problem);

// target = attention(q, k, v). K is (..., Tk, D), or with keys_transposed its transpose
// (..., D, Tk) as a matmul(q, k.mT()) holds it.
template <class Target, class Q, class K, class V, class T>
void attention_into(Target& target, const Q& q_expr, const K& k_expr, const V& v_expr, T scale, visibility sees,
                    bool keys_transposed);

// Runs the fused kernel for the chapter's expression, returning false (and doing nothing) where
// the expression only looks like attention: the mask is not causal, the fill is not -inf.
template <class Target, class Source>
bool assign_recognised_attention(Target& target, const Source& source);

// target = causal_attention(q, k, v, scale).
template <class Target, class Q, class K, class V>
void assign_attention(Target& target, const attention_node<Q, K, V>& node);

// ---- recognising the chapter's attention ----------------------------------------------------

namespace detail {

// The logits: matmul(q, kT), maybe scaled (* s, s *, / s).
template <class E>
struct attention_logits : std::false_type {};
template <class Q, class KT>
struct attention_logits<matmul_node<Q, KT>> : std::true_type {
    static const auto& product(const auto& e) { return e; }
    static double scale(const auto&) { return 1.0; }
};
template <class Q, class KT, class S>
struct attention_logits<elementwise<op::multiply, matmul_node<Q, KT>, scalar<S>>> : std::true_type {
    static const auto& product(const auto& e) { return e.template operand<0>(); }
    static double scale(const auto& e) { return e.template operand<1>().value; }
};
template <class Q, class KT, class S>
struct attention_logits<elementwise<op::multiply, scalar<S>, matmul_node<Q, KT>>> : std::true_type {
    static const auto& product(const auto& e) { return e.template operand<1>(); }
    static double scale(const auto& e) { return e.template operand<0>().value; }
};
template <class Q, class KT, class S>
struct attention_logits<elementwise<op::divide, matmul_node<Q, KT>, scalar<S>>> : std::true_type {
    static const auto& product(const auto& e) { return e.template operand<0>(); }
    static double scale(const auto& e) { return 1.0 / static_cast<double>(e.template operand<1>().value); }
};

// The mask: tril(x) == 0. It is causal when x has no zero on or below tril's diagonal, which is
// checked at run time.
template <class E>
struct tril_mask : std::false_type {};
template <class X, class S>
struct tril_mask<elementwise<op::equal, triangle_node<X, false>, scalar<S>>> : std::true_type {};

// The weights: softmax over the last dim of the logits, masked or not.
template <class E>
struct attention_weights : std::false_type {};
template <std::size_t Axis, class L>
struct attention_weights<softmax_node<Axis, L, false>>
    : std::bool_constant<attention_logits<L>::value && Axis == rank_of<L> - 1> {
    static constexpr bool masked = false;
    static const auto& logits(const auto& w) { return w.operand(); }
};
template <std::size_t Axis, class L, class M, class F>
struct attention_weights<softmax_node<Axis, elementwise<op::masked_fill, L, M, scalar<F>>, false>>
    : std::bool_constant<attention_logits<L>::value && tril_mask<M>::value && Axis == rank_of<L> - 1> {
    static constexpr bool masked = true;
    static const auto& logits(const auto& w) { return w.operand().template operand<0>(); }
};

template <class T>
inline constexpr bool is_float_or_double = std::is_same_v<T, float> || std::is_same_v<T, double>;

// matmul(weights, v), all of one floating-point type.
template <class E>
struct recognised_attention : std::false_type {};
template <class W, class V>
struct recognised_attention<matmul_node<W, V>>
    : std::bool_constant<attention_weights<W>::value && is_float_or_double<value_type_of<V>> &&
                         std::is_same_v<value_type_of<W>, value_type_of<V>>> {};

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

template <class T, std::size_t R>
std::pair<const std::byte*, const std::byte*> bytes_of(const T* data, const std::array<std::size_t, R>& extents,
                                                       const std::array<std::ptrdiff_t, R>& strides) {
    std::ptrdiff_t low = 0, high = 0;
    for (std::size_t i = 0; i < R; ++i) {
        if (extents[i] == 0) return {nullptr, nullptr};
        const std::ptrdiff_t reach = static_cast<std::ptrdiff_t>(extents[i] - 1) * strides[i];
        (reach < 0 ? low : high) += reach;
    }
    const auto* base = reinterpret_cast<const std::byte*>(data);
    return {base + low * static_cast<std::ptrdiff_t>(sizeof(T)), base + (high + 1) * static_cast<std::ptrdiff_t>(sizeof(T))};
}

template <class A, class B>
bool overlaps(const std::pair<A, A>& a, const std::pair<B, B>& b) {
    return a.first != a.second && b.first != b.second && a.first < b.second && b.first < a.second;
}

}  // namespace detail

// ---- implementation -------------------------------------------------------------------------

template <class Target, class Q, class K, class V, class T>
void attention_into(Target& target, const Q& q_expr, const K& k_expr, const V& v_expr, T scale, visibility sees,
                    bool keys_transposed) {
    constexpr std::size_t cr = rank_of<Target>, batch = cr - 2;
    static_assert(batch <= max_attention_batch_rank, "shaped::attention: too many batch dims");
    constexpr std::size_t qr = rank_of<Q>, kr = rank_of<K>, vr = rank_of<V>;
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
    const auto out_bytes = detail::bytes_of<T>(target.data(), out_extents, out_strides);
    if (detail::overlaps(out_bytes, detail::bytes_of(q.data, q.extents, q.strides)) ||
        detail::overlaps(out_bytes, detail::bytes_of(k.data, k.extents, k.strides)) ||
        detail::overlaps(out_bytes, detail::bytes_of(v.data, v.extents, v.strides))) {
        tensor_for<T, dims_of<Target>> aside{typename tensor_for<T, dims_of<Target>>::shape_type(out_extents)};
        attention_into(aside, q_expr, k_expr, v_expr, scale, sees, keys_transposed);
        auto out = xt::adapt(target.data(), target.size(), xt::no_ownership(), out_extents, out_strides);
        xt::noalias(out) = aside.xtensor();
        return;
    }

    attention_problem<T> p{};
    p.q = q.data;
    p.k = k.data;
    p.v = v.data;
    p.out = target.data();
    p.q_stride = {q.strides[qr - 2], q.strides[qr - 1]};
    p.k_stride = keys_transposed ? typename attention_problem<T>::matrix{k.strides[kr - 1], k.strides[kr - 2]}
                                 : typename attention_problem<T>::matrix{k.strides[kr - 2], k.strides[kr - 1]};
    p.v_stride = {v.strides[vr - 2], v.strides[vr - 1]};
    p.out_stride = {out_strides[cr - 2], out_strides[cr - 1]};
    p.tq = q.extents[qr - 2];
    p.d = q.extents[qr - 1];
    p.tk = v.extents[vr - 2];
    p.dv = v.extents[vr - 1];
    p.scale = scale;
    p.sees = sees;
    p.batch_rank = batch;
    const auto qb = detail::batch_strides<batch>(q);
    const auto kb = detail::batch_strides<batch>(k);
    const auto vb = detail::batch_strides<batch>(v);
    for (std::size_t i = 0; i < batch; ++i) {
        p.batch_extents[i] = out_extents[i];
        p.q_batch[i] = qb[i];
        p.k_batch[i] = kb[i];
        p.v_batch[i] = vb[i];
        p.out_batch[i] = out_extents[i] == 1 ? 0 : out_strides[i];
    }
    attention(p);
}

template <class Target, class Source>
bool assign_recognised_attention(Target& target, const Source& source) {
    using T = value_type_of<Target>;
    using weights = detail::attention_weights<std::remove_cvref_t<decltype(source.lhs())>>;
    const auto& w = source.lhs();
    const auto& logits = weights::logits(w);
    using logits_form = detail::attention_logits<std::remove_cvref_t<decltype(logits)>>;
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
    attention_into(target, node.query(), node.key(), node.value(), node.scale(), visibility{true, diagonal}, false);
}

}  // namespace shaped::kernels
