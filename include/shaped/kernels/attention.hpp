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
#include <algorithm>
#include <cstddef>
#include <limits>
#include <mutex>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

namespace shaped::kernels {

inline constexpr std::size_t max_attention_batch_rank = 6;

// The band of keys a query sees, what the masks that are bands (causality, shaped::window<W>)
// come to (expr/attention.hpp); other masks are the modifiers' below. With causal set, query i
// sees key j when j <= i + diagonal; otherwise every key. With a window W as well, only the last
// W of those: j > i + diagonal - W, so that a query on the diagonal sees itself and the W - 1
// keys before it (a sliding window).
struct visibility {
    bool causal;
    long diagonal;
    std::optional<std::size_t> window{};
};

// A tile of scaled scores, handed to a problem's modifiers: scores[r * ld + j] is the score of
// query `query` + r (r < rows) for key `key` + j (j < cols) of matrix `matrix` (counted row-major
// over the batch dims).
template <class T>
struct score_tile {
    T* scores;
    std::size_t ld, rows, cols, matrix, query, key;
    // Whether the mask is asked about each score (not where it keeps the whole block).
    bool masked = true;
};

// A problem's score and mask modifiers (expr/attention_modifiers.hpp), behind one indirect call a
// tile so that the kernel is compiled once while the modifiers are inlined into the loop over a
// tile's scores (modifiers_over below). apply modifies the tile's scores and sets those of the
// keys its mask drops to -inf; kept says how many of the pairs of queries [q0, q1) and keys
// [k0, k1) of a matrix the mask keeps (null: some of every block). Both null: no modifiers.
template <class T>
struct score_modifiers {
    const void* context = nullptr;
    void (*apply)(const void* context, const score_tile<T>& tile) = nullptr;
    keys_kept (*kept)(const void* context, std::size_t matrix, std::size_t q0, std::size_t q1, std::size_t k0,
                      std::size_t k1) = nullptr;
    // The backward's (kernels/attention_backward.hpp): derive does what apply does and writes
    // slope[r * ld + j], the derivative of each modified score with respect to the score it was
    // given (null: a modifier that leaves scores as they are, slope 1); learn is handed the
    // loss's gradient with respect to the scores a tile's modifier was given, which is the
    // gradient of the bias a learned modifier adds to them (null: none learns).
    void (*derive)(const void* context, const score_tile<T>& tile, T* slope) = nullptr;
    void (*learn)(const void* context, const score_tile<T>& gradient) = nullptr;
    // Whether apply modifies scores (else it only masks): the backward needs derive then.
    bool modifies_scores = false;
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
    score_modifiers<T> modifiers{};
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
                    bool keys_transposed, score_modifiers<T> modifiers = {});

// The problem of out = attention(q, k, v) over strided elements (kernels/strided.hpp), batch dims
// broadcast as in matmul; no log-sum-exp asked for. attention_into runs it; a derivative that
// must run the forward again keeping the log-sum-exp builds it so too.
template <class T, std::size_t QR, std::size_t KR, std::size_t VR, std::size_t CR>
attention_problem<T> problem_over(const strided<T, QR>& q, const strided<T, KR>& k, const strided<T, VR>& v, T* out,
                                  const strided_layout<CR>& out_layout, T scale, visibility sees, bool keys_transposed,
                                  score_modifiers<T> modifiers = {});

// Runs the fused kernel for the chapter's expression, returning false (and doing nothing) where
// the expression only looks like attention: the mask is not causal, the fill is not -inf.
template <class Target, class Source>
bool assign_recognised_attention(Target& target, const Source& source);

// target = causal_attention(q, k, v, scale[, window][, modifiers]).
template <class Target, class Q, class K, class V, class Mods>
void assign_attention(Target& target, const attention_node<Q, K, V, Mods>& node);

// Where a problem's matrices, queries and keys lie, for modifiers M (attention_modifiers): the
// context of modifiers_over.
template <class M, class TableGradient = std::nullptr_t>
struct modifier_frame {
    const M* modifiers;
    std::size_t heads;         // matrix m is batch row m / heads + batch origin, head m % heads
    std::size_t query_origin;  // query i is at query_origin + i, key j at the key origin + j
    // The backward's, for a learned score modifier: where its table's gradient adds up (a
    // tensor of the table's dims), under lock, since the backward's tasks run in parallel.
    TableGradient* table_gradient = nullptr;
    std::mutex* lock = nullptr;
};

// The frame of a causal_attention node's modifiers: its heads (every batch dim after the first
// unless the modifiers say), its queries the last of its keys' positions.
template <class Q, class K, class V, class Mods>
modifier_frame<Mods> modifier_frame_of(const attention_node<Q, K, V, Mods>& node);

// The score_modifiers of a problem whose modifiers and coordinates frame holds; frame must
// outlive the kernel's call. The forward's calls only.
template <class T, class M, class G>
score_modifiers<T> modifiers_over(const modifier_frame<M, G>& frame);

// The same with the backward's: derive, and learn for a learned score modifier.
template <class T, class M, class G>
score_modifiers<T> differentiated_modifiers_over(const modifier_frame<M, G>& frame);

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
                    bool keys_transposed, score_modifiers<T> modifiers) {
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
        attention_into(aside, q_expr, k_expr, v_expr, scale, sees, keys_transposed, modifiers);
        detail::copy_into(target, aside);
        return;
    }

    attention(problem_over<T>(q, k, v, target.data(), strided_layout<cr>{out_extents, out_strides}, scale, sees,
                              keys_transposed, modifiers));
}

template <class T, std::size_t QR, std::size_t KR, std::size_t VR, std::size_t CR>
attention_problem<T> problem_over(const strided<T, QR>& q, const strided<T, KR>& k, const strided<T, VR>& v, T* out,
                                  const strided_layout<CR>& out_layout, T scale, visibility sees, bool keys_transposed,
                                  score_modifiers<T> modifiers) {
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
    p.modifiers = modifiers;
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

template <class Target, class Q, class K, class V, class Mods>
void assign_attention(Target& target, const attention_node<Q, K, V, Mods>& node) {
    using T = value_type_of<Target>;
    constexpr std::size_t qr = rank_of<Q>, kr = rank_of<K>;
    const auto q = node.query().extents();
    const auto k = node.key().extents();
    const long diagonal = static_cast<long>(k[kr - 2]) - static_cast<long>(q[qr - 2]);
    if constexpr (std::is_same_v<Mods, no_modifiers>) {
        const visibility sees{true, diagonal, node.window()};
        attention_into(target, node.query(), node.key(), node.value(), node.scale(), sees, false);
    } else {
        const visibility sees{Mods::causal, diagonal, node.window()};
        const auto frame = modifier_frame_of(node);
        attention_into(target, node.query(), node.key(), node.value(), node.scale(), sees, false,
                       modifiers_over<T>(frame));
    }
}

template <class Q, class K, class V, class Mods>
modifier_frame<Mods> modifier_frame_of(const attention_node<Q, K, V, Mods>& node) {
    const Mods& mods = node.modifiers();
    std::size_t heads = mods.heads;
    if (heads == 0) {  // every batch dim after the first
        constexpr std::size_t batch = rank_of<attention_node<Q, K, V, Mods>> - 2;
        const auto out = node.extents();
        heads = 1;
        for (std::size_t i = 1; i < batch; ++i) heads *= out[i];
    }
    const std::size_t tq = node.query().extents()[rank_of<Q> - 2], tk = node.key().extents()[rank_of<K> - 2];
    return {&mods, std::max<std::size_t>(heads, 1), mods.key_origin + tk - tq};
}

namespace detail {

// The calls of score_modifiers for modifiers M (apply, derive, learn, kept), each a loop over a
// tile or a block the modifiers are inlined into.
template <class T, class M, class G>
struct modifier_calls {
    using frame = modifier_frame<M, G>;
    // A key a causal problem's query never sees: its modifiers are not asked about it (a table
    // read by q - kv need not hold negative distances).
    static constexpr bool after_query(query_position q, key_position kv) { return M::causal && kv.value > q.value; }
    // Matrix `matrix`'s batch row and head (matrices counted row-major over the batch dims).
    static batch_index row_of(const frame& f, std::size_t matrix) {
        return batch_index{matrix / f.heads + f.modifiers->batch_origin};
    }
    static head_index head_of(const frame& f, std::size_t matrix) { return head_index{matrix % f.heads}; }
    // How many of a row's keys from `first` its query can see: all of them, or for a causal
    // problem those up to the query's own position (the modifiers are not asked about the rest).
    static std::size_t visible(query_position q, key_position first, std::size_t keys) {
        if constexpr (!M::causal) return keys;
        else return q.value < first.value ? 0 : std::min(keys, q.value - first.value + 1);
    }
    // -inf past the visible keys and where the mask drops one.
    static void mask_row(const M& m, bool masked, T* row, std::size_t seen, std::size_t keys, batch_index b,
                         head_index h, query_position q, key_position first) {
        std::fill(row + seen, row + keys, -std::numeric_limits<T>::infinity());
        if constexpr (M::masks_keys)
            if (masked)
                for (std::size_t j = 0; j < seen; ++j)
                    if (!m.keeps(b, h, q, key_position{first.value + j})) row[j] = -std::numeric_limits<T>::infinity();
    }
    // A score modifier may give a whole row at once, for speed (nn::alibi and nn::soft_cap do,
    // in vectors): row(scores, n, b, h, q, first) as score() on each of keys first .. first + n - 1,
    // and row_with_slopes(scores, slopes, n, ...) with its derivative too.
    static constexpr bool has_row = requires(const M& m, T* s) {
        m.score.row(s, std::size_t{}, batch_index{}, head_index{}, query_position{}, key_position{});
    };
    static constexpr bool has_row_with_slopes = requires(const M& m, T* s) {
        m.score.row_with_slopes(s, s, std::size_t{}, batch_index{}, head_index{}, query_position{}, key_position{});
    };
    // apply's and derive's loop: each row's visible scores modified (with their slopes, for
    // derive), then masked.
    template <bool WithSlopes>
    static void modify(const void* context, const score_tile<T>& tile, T* slope) {
        const auto& f = *static_cast<const frame*>(context);
        const M& m = *f.modifiers;
        const batch_index b = row_of(f, tile.matrix);
        const head_index h = head_of(f, tile.matrix);
        const key_position first{m.key_origin + tile.key};
        for (std::size_t r = 0; r < tile.rows; ++r) {
            const query_position q{f.query_origin + tile.query + r};
            T* row = tile.scores + r * tile.ld;
            const std::size_t seen = visible(q, first, tile.cols);
            if constexpr (WithSlopes) {
                T* row_slope = slope + r * tile.ld;
                if constexpr (has_row_with_slopes)
                    m.score.row_with_slopes(row, row_slope, seen, b, h, q, first);
                else
                    for (std::size_t j = 0; j < seen; ++j)
                        std::tie(row[j], row_slope[j]) =
                            value_and_slope(m.score, row[j], b, h, q, key_position{first.value + j});
                std::fill(row_slope + seen, row_slope + tile.cols, T{0});
            } else if constexpr (M::modifies_scores) {
                if constexpr (has_row)
                    m.score.row(row, seen, b, h, q, first);
                else
                    for (std::size_t j = 0; j < seen; ++j)
                        row[j] = static_cast<T>(m.score(row[j], b, h, q, key_position{first.value + j}));
            }
            mask_row(m, tile.masked, row, seen, tile.cols, b, h, q, first);
        }
    }
    static void apply(const void* context, const score_tile<T>& tile) { modify<false>(context, tile, nullptr); }
    static void derive(const void* context, const score_tile<T>& tile, T* slope) { modify<true>(context, tile, slope); }
    // The score modifier's value and derivative at s: its own derivative(...), or run over a dual.
    template <class Score>
    static std::pair<T, T> value_and_slope(const Score& score, T s, batch_index b, head_index h, query_position q,
                                           key_position kv) {
        if constexpr (requires { score.derivative(s, b, h, q, kv); }) {
            return {static_cast<T>(score(s, b, h, q, kv)), static_cast<T>(score.derivative(s, b, h, q, kv))};
        } else {
            const dual<T> d = score(dual<T>{s, T{1}}, b, h, q, kv);
            return {d.value, d.slope};
        }
    }
    static void learn(const void* context, const score_tile<T>& tile) {
        const auto& f = *static_cast<const frame*>(context);
        const M& m = *f.modifiers;
        const batch_index b = row_of(f, tile.matrix);
        const head_index h = head_of(f, tile.matrix);
        const std::lock_guard<std::mutex> hold(*f.lock);
        for (std::size_t r = 0; r < tile.rows; ++r)
            for (std::size_t j = 0; j < tile.cols; ++j) {
                const T g = tile.scores[r * tile.ld + j];
                if (g == T{0}) continue;
                const auto at = m.score.element(b, h, query_position{f.query_origin + tile.query + r},
                                                key_position{m.key_origin + tile.key + j});
                std::apply([&](auto... i) -> auto& { return (*f.table_gradient)(i...); }, at) += g;
            }
    }
    static keys_kept kept(const void* context, std::size_t matrix, std::size_t q0, std::size_t q1, std::size_t k0,
                          std::size_t k1) {
        const auto& f = *static_cast<const frame*>(context);
        const M& m = *f.modifiers;
        const batch_index b = row_of(f, matrix);
        const head_index h = head_of(f, matrix);
        const query_position first_query{f.query_origin + q0}, last_query{f.query_origin + q1};
        const key_position first_key{m.key_origin + k0}, last_key{m.key_origin + k1};
        if constexpr (requires { m.keeps.block(b, h, first_query, last_query, first_key, last_key); }) {
            return m.keeps.block(b, h, first_query, last_query, first_key, last_key);
        } else {
            bool any = false, every = true;
            for (std::size_t i = q0; i < q1; ++i)
                for (std::size_t j = k0; j < k1; ++j) {
                    const query_position q{f.query_origin + i};
                    const key_position kv{m.key_origin + j};
                    if (after_query(q, kv)) continue;
                    if (m.keeps(b, h, q, kv)) any = true;
                    else every = false;
                    if (any && !every) return keys_kept::some;
                }
            return any ? (every ? keys_kept::all : keys_kept::some) : keys_kept::none;
        }
    }
};

}  // namespace detail

template <class T, class M, class G>
score_modifiers<T> modifiers_over(const modifier_frame<M, G>& frame) {
    using calls = detail::modifier_calls<T, M, G>;
    score_modifiers<T> out;
    out.context = &frame;
    out.apply = &calls::apply;
    out.modifies_scores = M::modifies_scores;
    if constexpr (M::masks_keys) out.kept = &calls::kept;
    return out;
}

template <class T, class M, class G>
score_modifiers<T> differentiated_modifiers_over(const modifier_frame<M, G>& frame) {
    using calls = detail::modifier_calls<T, M, G>;
    using Score = decltype(M::score);
    score_modifiers<T> out = modifiers_over<T>(frame);
    if constexpr (M::modifies_scores) {
        static_assert(differentiable_score_modifier<Score, T>,
                      "shaped::attention: this score modifier has no derivative: write it over any score type "
                      "(template <class S> S operator()(S s, ...), math functions called unqualified), or give it "
                      "derivative(s, b, h, q, kv)");
        out.derive = &calls::derive;
    }
    if constexpr (learned_score_modifier<Score>) out.learn = &calls::learn;
    return out;
}

}  // namespace shaped::kernels
