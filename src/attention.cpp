// Fused attention, compiled once for float and double (see kernels/attention.hpp). Vectors are
// xsimd batches of the widest instruction set the build targets (-march, see SHAPED_NATIVE).
#include <shaped/kernels/attention.hpp>
#include <shaped/kernels/parallel.hpp>

#include "simd_scratch.hpp"

#include <xsimd/xsimd.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <type_traits>
#include <vector>

namespace shaped::kernels {

namespace {

using simd::buffer;
using simd::largest_lane;
using simd::lanes;
using simd::round_up;
using simd::sized;
using simd::vec;

// Blocks of queries and keys: a block of scores, its queries, its keys and values and the
// partial outputs fit in L1 and L2 together.
constexpr std::size_t query_block = 64;
constexpr std::size_t key_block = 64;
// Up to this many queries per matrix, one row at a time (a GEMV per row) beats blocking.
constexpr std::size_t few_queries = 8;
// Below this many multiply-adds in all, a parallel loop costs more than it saves.
constexpr double parallel_work = 4e6;

// Register blocks: AVX-512 has 32 vector registers, narrower instruction sets 16.
template <class T>
inline constexpr bool many_registers = lanes<T> * sizeof(T) >= 64;
template <class T>
inline constexpr std::size_t score_rows = many_registers<T> ? 8 : 4;  // x 2 vectors of keys
template <class T>
inline constexpr std::size_t value_rows = many_registers<T> ? 4 : 2;  // x 4 vectors of values
inline constexpr std::size_t score_vectors = 2;
inline constexpr std::size_t value_vectors = 4;
template <class T>
inline constexpr std::size_t row_padding = std::max(score_rows<T>, value_rows<T>);

// Per-thread working memory, kept between calls so that a steady state allocates nothing.
template <class T>
struct scratch {
    buffer<T> keys_t, values, queries, scores, out, row_max, row_sum, rescale;
};
template <class T>
scratch<T>& thread_scratch() {
    return simd::thread_scratch<scratch<T>>();
}

// The keys query i (of the matrix's tq) sees are [first_visible_key(i), visible_keys(i)); both
// grow with i.
template <class T>
std::size_t visible_keys(const attention_problem<T>& p, std::size_t i) {
    if (!p.sees.causal) return p.tk();
    const long n = static_cast<long>(i) + p.sees.diagonal + 1;
    return static_cast<std::size_t>(std::clamp(n, 0L, static_cast<long>(p.tk())));
}
template <class T>
std::size_t first_visible_key(const attention_problem<T>& p, std::size_t i) {
    const long end = static_cast<long>(i) + p.sees.diagonal + 1;  // one past the diagonal
    // Compared unsigned, so that a window wider than any long (no window at all) is not negative.
    if (!p.sees.window || end <= 0 || *p.sees.window >= static_cast<std::size_t>(end)) return 0;
    return std::min(static_cast<std::size_t>(end) - *p.sees.window, visible_keys(p, i));
}

// One matrix of the batch: its operands' first elements, and its queries' log-sum-exps (null
// when not wanted).
template <class T>
struct matrices {
    const T* q;
    const T* k;
    const T* v;
    T* out;
    T* lse;
};
template <class T>
matrices<T> matrices_at(const attention_problem<T>& p, std::size_t b) {
    matrices<T> m{p.q.data, p.k.data, p.v.data, p.out.data, p.lse ? p.lse + b * p.tq() : nullptr};
    for (std::size_t i = p.batch_rank; i-- > 0;) {
        const auto index = static_cast<std::ptrdiff_t>(b % p.batch_extents[i]);
        b /= p.batch_extents[i];
        m.q += index * p.q.batch[i];
        m.k += index * p.k.batch[i];
        m.v += index * p.v.batch[i];
        m.out += index * p.out.batch[i];
    }
    return m;
}

// Query i of matrix m sees no key: no distribution, so NaN out, as softmax over -inf gives, and
// a log-sum-exp of -inf.
template <class T>
void no_keys_seen(const attention_problem<T>& p, const matrices<T>& m, std::size_t i) {
    T* out_row = m.out + static_cast<std::ptrdiff_t>(i) * p.out.matrix.strides[0];
    for (std::size_t c = 0; c < p.dv(); ++c) out_row[c * p.out.matrix.strides[1]] = std::numeric_limits<T>::quiet_NaN();
    if (m.lse) m.lse[i] = -std::numeric_limits<T>::infinity();
}

// The problem's modifiers over scores [0, cols) of query `query` against keys from `key` of
// matrix b: modified, and -inf where its mask drops a key.
template <class T>
void modify_row(const attention_problem<T>& p, std::size_t b, T* scores, std::size_t cols, std::size_t query,
                std::size_t key) {
    if (p.modifiers.apply) p.modifiers.apply(p.modifiers.context, {scores, 0, 1, cols, b, query, key});
}

// out_row[c] = acc[c] * factor, c < dv.
template <class T>
void write_scaled(const attention_problem<T>& p, const T* acc, T factor, T* out_row) {
    constexpr std::size_t N = lanes<T>;
    std::size_t c = 0;
    if (p.out.matrix.strides[1] == 1)
        for (; c + N <= p.dv(); c += N) (vec<T>::load_unaligned(acc + c) * vec<T>(factor)).store_unaligned(out_row + c);
    for (; c < p.dv(); ++c) out_row[static_cast<std::ptrdiff_t>(c) * p.out.matrix.strides[1]] = acc[c] * factor;
}

// ---- rows: a GEMV-shaped pass per query --------------------------------------------------------

// Batches of W elements of T narrower than vec<T> (void where the target has none): what a head
// smaller than a vector (stories260K's 8 floats against AVX-512's 16) is read with, rather than
// element by element.
template <class T, std::size_t W>
using narrow_vec = xsimd::make_sized_batch_t<T, W>;
template <class T, std::size_t W>
inline constexpr bool has_narrow = W >= 2 && W < lanes<T> && !std::is_void_v<narrow_vec<T, W>>;

// sum += a[i, n) . b[i, n), i advanced past what batches of W and narrower cover.
template <class T, std::size_t W>
void narrow_dot(const T* a, const T* b, std::size_t& i, std::size_t n, T& sum) {
    if constexpr (W >= 2) {
        if constexpr (has_narrow<T, W>) {
            using V = narrow_vec<T, W>;
            for (; i + W <= n; i += W) sum += xsimd::hadd(V::load_unaligned(a + i) * V::load_unaligned(b + i));
        }
        narrow_dot<T, W / 2>(a, b, i, n, sum);
    }
}

template <class T>
T dot(const T* a, const T* b, std::size_t n) {
    constexpr std::size_t N = lanes<T>;
    vec<T> acc0(T{0}), acc1(T{0});
    std::size_t i = 0;
    for (; i + 2 * N <= n; i += 2 * N) {
        acc0 = xsimd::fma(vec<T>::load_unaligned(a + i), vec<T>::load_unaligned(b + i), acc0);
        acc1 = xsimd::fma(vec<T>::load_unaligned(a + i + N), vec<T>::load_unaligned(b + i + N), acc1);
    }
    for (; i + N <= n; i += N) acc0 = xsimd::fma(vec<T>::load_unaligned(a + i), vec<T>::load_unaligned(b + i), acc0);
    T sum = xsimd::hadd(acc0 + acc1);
    narrow_dot<T, N / 2>(a, b, i, n, sum);
    for (; i < n; ++i) sum += a[i] * b[i];
    return sum;
}

// acc[0, n) += w * x[0, n)
template <class T>
void axpy(T w, const T* x, T* acc, std::size_t n) {
    constexpr std::size_t N = lanes<T>;
    const vec<T> wv(w);
    std::size_t i = 0;
    for (; i + N <= n; i += N)
        xsimd::fma(wv, vec<T>::load_unaligned(x + i), vec<T>::load_unaligned(acc + i)).store_unaligned(acc + i);
    for (; i < n; ++i) acc[i] += w * x[i];
}

// acc[c, c + V::size) = sum over j < n of weights[j] * rows[j][c, ...), for as many whole batches
// V as fit below dv, c advanced past them. Two sums, so that the multiply-adds of one key need
// not wait on the last key's.
template <class V, class T>
void weighted_columns(const T* weights, std::size_t n, const T* rows, std::ptrdiff_t ld, std::size_t dv, std::size_t& c,
                      T* acc) {
    constexpr std::size_t W = V::size;
    for (; c + W <= dv; c += W) {
        V a0(T{0}), a1(T{0});
        std::size_t j = 0;
        for (; j + 2 <= n; j += 2) {
            const T* row = rows + static_cast<std::ptrdiff_t>(j) * ld + c;
            a0 = xsimd::fma(V(weights[j]), V::load_unaligned(row), a0);
            a1 = xsimd::fma(V(weights[j + 1]), V::load_unaligned(row + ld), a1);
        }
        if (j < n) a0 = xsimd::fma(V(weights[j]), V::load_unaligned(rows + static_cast<std::ptrdiff_t>(j) * ld + c), a0);
        (a0 + a1).store_unaligned(acc + c);
    }
}
template <class T, std::size_t W>
void narrow_weighted_columns(const T* weights, std::size_t n, const T* rows, std::ptrdiff_t ld, std::size_t dv,
                             std::size_t& c, T* acc) {
    if constexpr (W >= 2) {
        if constexpr (has_narrow<T, W>) weighted_columns<narrow_vec<T, W>>(weights, n, rows, ld, dv, c, acc);
        narrow_weighted_columns<T, W / 2>(weights, n, rows, ld, dv, c, acc);
    }
}

// acc[0, dv) = sum over j < n of weights[j] * rows[j][0, dv), rows ld apart with adjacent
// elements: a block of up to four vectors of acc in registers while every row streams past.
template <class T>
void weighted_rows(const T* weights, std::size_t n, const T* rows, std::ptrdiff_t ld, std::size_t dv, T* acc) {
    constexpr std::size_t N = lanes<T>;
    std::size_t c = 0;
    for (; c + 4 * N <= dv; c += 4 * N) {
        vec<T> a0(T{0}), a1(T{0}), a2(T{0}), a3(T{0});
        for (std::size_t j = 0; j < n; ++j) {
            const T* row = rows + static_cast<std::ptrdiff_t>(j) * ld + c;
            const vec<T> w(weights[j]);
            a0 = xsimd::fma(w, vec<T>::load_unaligned(row), a0);
            a1 = xsimd::fma(w, vec<T>::load_unaligned(row + N), a1);
            a2 = xsimd::fma(w, vec<T>::load_unaligned(row + 2 * N), a2);
            a3 = xsimd::fma(w, vec<T>::load_unaligned(row + 3 * N), a3);
        }
        a0.store_unaligned(acc + c);
        a1.store_unaligned(acc + c + N);
        a2.store_unaligned(acc + c + 2 * N);
        a3.store_unaligned(acc + c + 3 * N);
    }
    weighted_columns<vec<T>>(weights, n, rows, ld, dv, c, acc);
    narrow_weighted_columns<T, N / 2>(weights, n, rows, ld, dv, c, acc);
    for (; c < dv; ++c) {
        T a = 0;
        for (std::size_t j = 0; j < n; ++j) a += weights[j] * rows[static_cast<std::ptrdiff_t>(j) * ld + c];
        acc[c] = a;
    }
}

// Queries [first, last) of matrix b, one at a time: 1. its scores against the keys it sees,
// 2. their softmax, 3. the values weighted by it.
template <class T>
void attend_rows(const attention_problem<T>& p, std::size_t b, std::size_t first, std::size_t last) {
    constexpr std::size_t N = lanes<T>;
    const matrices<T> m = matrices_at(p, b);
    scratch<T>& s = thread_scratch<T>();
    T* query = sized(s.queries, p.d());
    T* scores = sized(s.scores, round_up(p.tk(), N));
    T* acc = sized(s.out, p.dv());
    const bool unit_values = p.v.matrix.strides[1] == 1;
    for (std::size_t i = first; i < last; ++i) {
        T* out_row = m.out + static_cast<std::ptrdiff_t>(i) * p.out.matrix.strides[0];
        // The keys and values this query sees start at its first visible key.
        const std::size_t from = first_visible_key(p, i);
        const std::size_t n = visible_keys(p, i) - from;
        if (n == 0) {
            no_keys_seen(p, m, i);
            continue;
        }
        const T* keys = m.k + static_cast<std::ptrdiff_t>(from) * p.k.matrix.strides[0];
        const T* values = m.v + static_cast<std::ptrdiff_t>(from) * p.v.matrix.strides[0];
        const T* q_row = m.q + static_cast<std::ptrdiff_t>(i) * p.q.matrix.strides[0];
        for (std::size_t c = 0; c < p.d(); ++c) query[c] = p.scale * q_row[c * p.q.matrix.strides[1]];

        // 1. Scores: a dot product per key when each key's elements are adjacent, otherwise one
        //    pass per query element over keys that are adjacent, or element by element.
        if (p.k.matrix.strides[1] == 1) {
            for (std::size_t j = 0; j < n; ++j) scores[j] = dot(query, keys + static_cast<std::ptrdiff_t>(j) * p.k.matrix.strides[0], p.d());
        } else if (p.k.matrix.strides[0] == 1) {
            std::fill(scores, scores + n, T{0});
            for (std::size_t c = 0; c < p.d(); ++c)
                axpy(query[c], keys + static_cast<std::ptrdiff_t>(c) * p.k.matrix.strides[1], scores, n);
        } else {
            for (std::size_t j = 0; j < n; ++j) {
                T sum = 0;
                for (std::size_t c = 0; c < p.d(); ++c)
                    sum += query[c] * keys[static_cast<std::ptrdiff_t>(j) * p.k.matrix.strides[0] +
                                           static_cast<std::ptrdiff_t>(c) * p.k.matrix.strides[1]];
                scores[j] = sum;
            }
        }

        modify_row(p, b, scores, n, i, from);

        // 2. Softmax, shifted by the max so that exp cannot overflow. The scores are padded to
        //    whole vectors with -inf, whose exp adds 0. A mask may drop every key.
        const T max = *std::max_element(scores, scores + n);
        if (max == -std::numeric_limits<T>::infinity()) {
            no_keys_seen(p, m, i);
            continue;
        }
        std::fill(scores + n, scores + round_up(n, N), -std::numeric_limits<T>::infinity());
        vec<T> sum_v(T{0});
        for (std::size_t j = 0; j < n; j += N) {
            const vec<T> e = xsimd::exp(vec<T>::load_aligned(scores + j) - vec<T>(max));
            e.store_aligned(scores + j);
            sum_v += e;
        }
        const T sum = xsimd::hadd(sum_v);
        if (m.lse) m.lse[i] = max + std::log(sum);

        // 3. The weighted sum of the values, normalised once at the end.
        if (unit_values) {
            weighted_rows(scores, n, values, p.v.matrix.strides[0], p.dv(), acc);
        } else {
            std::fill(acc, acc + p.dv(), T{0});
            for (std::size_t key = 0; key < n; ++key) {
                const T* v_row = values + static_cast<std::ptrdiff_t>(key) * p.v.matrix.strides[0];
                for (std::size_t c = 0; c < p.dv(); ++c) acc[c] += scores[key] * v_row[c * p.v.matrix.strides[1]];
            }
        }
        write_scaled(p, acc, T{1} / sum, out_row);
    }
}

// ---- one vector of keys: a matrix as small as the chapter's -------------------------------------

// Queries [first, last) of matrix b when every key fits in one vector: 1. keys packed
// transposed, so that a query's scores are one vector, 2. per query, its scores, their softmax
// with the unseen keys masked lane by lane, 3. the values weighted by it.
template <class T>
void attend_one_vector(const attention_problem<T>& p, std::size_t b, std::size_t first, std::size_t last) {
    constexpr std::size_t N = lanes<T>;
    const matrices<T> m = matrices_at(p, b);
    scratch<T>& s = thread_scratch<T>();
    T* keys_t = sized(s.keys_t, p.d() * N);
    std::fill(keys_t, keys_t + p.d() * N, T{0});
    for (std::size_t j = 0; j < p.tk(); ++j) {
        const T* k_row = m.k + static_cast<std::ptrdiff_t>(j) * p.k.matrix.strides[0];
        for (std::size_t c = 0; c < p.d(); ++c) keys_t[c * N + j] = k_row[static_cast<std::ptrdiff_t>(c) * p.k.matrix.strides[1]];
    }
    alignas(64) T lane_index[N];
    for (std::size_t j = 0; j < N; ++j) lane_index[j] = static_cast<T>(j);
    const vec<T> lane = vec<T>::load_aligned(lane_index);
    T* acc = sized(s.out, p.dv());
    alignas(64) T weights[N];
    for (std::size_t i = first; i < last; ++i) {
        T* out_row = m.out + static_cast<std::ptrdiff_t>(i) * p.out.matrix.strides[0];
        const std::size_t from = first_visible_key(p, i), n = visible_keys(p, i);
        if (n == from) {
            no_keys_seen(p, m, i);
            continue;
        }
        const T* q_row = m.q + static_cast<std::ptrdiff_t>(i) * p.q.matrix.strides[0];
        // Four partial sums, so that the multiply-adds do not wait on one another.
        const auto term = [&](std::size_t c, const vec<T>& sum) {
            return xsimd::fma(vec<T>(p.scale * q_row[static_cast<std::ptrdiff_t>(c) * p.q.matrix.strides[1]]),
                              vec<T>::load_aligned(keys_t + c * N), sum);
        };
        vec<T> part0(T{0}), part1(T{0}), part2(T{0}), part3(T{0});
        std::size_t c = 0;
        for (; c + 4 <= p.d(); c += 4) {
            part0 = term(c, part0);
            part1 = term(c + 1, part1);
            part2 = term(c + 2, part2);
            part3 = term(c + 3, part3);
        }
        for (; c < p.d(); ++c) part0 = term(c, part0);
        const auto seen = (lane >= vec<T>(static_cast<T>(from))) && (lane < vec<T>(static_cast<T>(n)));
        vec<T> raw = (part0 + part1) + (part2 + part3);
        if (p.modifiers.apply) {
            raw.store_aligned(weights);
            modify_row(p, b, weights + from, n - from, i, from);
            raw = vec<T>::load_aligned(weights);
        }
        const vec<T> scores = xsimd::select(seen, raw, vec<T>(-std::numeric_limits<T>::infinity()));
        const T max = largest_lane(scores);
        if (max == -std::numeric_limits<T>::infinity()) {
            no_keys_seen(p, m, i);
            continue;
        }
        const vec<T> e = xsimd::exp(scores - vec<T>(max));
        e.store_aligned(weights);
        const T sum = xsimd::hadd(e);
        if (m.lse) m.lse[i] = max + std::log(sum);
        const T inv = T{1} / sum;
        std::fill(acc, acc + p.dv(), T{0});
        for (std::size_t j = from; j < n; ++j) {
            const T* v_row = m.v + static_cast<std::ptrdiff_t>(j) * p.v.matrix.strides[0];
            if (p.v.matrix.strides[1] == 1) axpy(weights[j], v_row, acc, p.dv());
            else
                for (std::size_t c = 0; c < p.dv(); ++c) acc[c] += weights[j] * v_row[static_cast<std::ptrdiff_t>(c) * p.v.matrix.strides[1]];
        }
        write_scaled(p, acc, inv, out_row);
    }
}

// ---- blocks: queries against keys, block by block, with an online softmax ----------------------

// scores[MR x 2N] = queries[MR x d] @ keys_t[d x 2N]; keys_t rows are keys_ld apart, scores rows
// key_block apart.
template <class T, std::size_t MR, std::size_t NR>
void score_tile(const T* queries, std::size_t d, const T* keys_t, std::size_t keys_ld, T* scores) {
    constexpr std::size_t N = lanes<T>;
    vec<T> acc[MR][NR];
    for (auto& row : acc)
        for (auto& a : row) a = vec<T>(T{0});
    for (std::size_t c = 0; c < d; ++c) {
        vec<T> k[NR];
        for (std::size_t n = 0; n < NR; ++n) k[n] = vec<T>::load_aligned(keys_t + c * keys_ld + n * N);
        for (std::size_t r = 0; r < MR; ++r) {
            const vec<T> q(queries[r * d + c]);
            for (std::size_t n = 0; n < NR; ++n) acc[r][n] = xsimd::fma(q, k[n], acc[r][n]);
        }
    }
    for (std::size_t r = 0; r < MR; ++r)
        for (std::size_t n = 0; n < NR; ++n) acc[r][n].store_aligned(scores + r * key_block + n * N);
}

// out[MR x NR*N] = out * rescale + weights[MR x keys] @ values[keys x NR*N]; weights rows are
// key_block apart, values and out rows values_ld apart.
template <class T, std::size_t MR, std::size_t NR>
void value_tile(const T* weights, const T* rescale, const T* values, std::size_t values_ld, std::size_t keys,
                T* out) {
    constexpr std::size_t N = lanes<T>;
    vec<T> acc[MR][NR];
    for (std::size_t r = 0; r < MR; ++r) {
        const vec<T> factor(rescale[r]);
        for (std::size_t n = 0; n < NR; ++n) acc[r][n] = vec<T>::load_aligned(out + r * values_ld + n * N) * factor;
    }
    for (std::size_t j = 0; j < keys; ++j) {
        vec<T> v[NR];
        for (std::size_t n = 0; n < NR; ++n) v[n] = vec<T>::load_aligned(values + j * values_ld + n * N);
        for (std::size_t r = 0; r < MR; ++r) {
            const vec<T> w(weights[r * key_block + j]);
            for (std::size_t n = 0; n < NR; ++n) acc[r][n] = xsimd::fma(w, v[n], acc[r][n]);
        }
    }
    for (std::size_t r = 0; r < MR; ++r)
        for (std::size_t n = 0; n < NR; ++n) acc[r][n].store_aligned(out + r * values_ld + n * N);
}

// The keys each query of a block sees, folded into a running max, sum and output per query.
template <class T>
struct online_softmax {
    T* max;
    T* sum;
    T* rescale;

    // Turns a row of scores into weights exp(score - max), updating the row's max and sum and
    // setting the factor its partial output must be rescaled by.
    void update(std::size_t r, T* row) const {
        constexpr std::size_t N = lanes<T>;
        vec<T> m(row[0]);
        for (std::size_t j = 0; j < key_block; j += N) m = xsimd::max(m, vec<T>::load_aligned(row + j));
        const T new_max = std::max(max[r], largest_lane(m));
        if (new_max == -std::numeric_limits<T>::infinity()) {  // nothing seen yet
            std::fill(row, row + key_block, T{0});
            rescale[r] = T{1};
            return;
        }
        const vec<T> shift(new_max);
        vec<T> total(T{0});
        for (std::size_t j = 0; j < key_block; j += N) {
            const vec<T> e = xsimd::exp(vec<T>::load_aligned(row + j) - shift);
            e.store_aligned(row + j);
            total += e;
        }
        rescale[r] = std::exp(max[r] - new_max);
        sum[r] = sum[r] * rescale[r] + xsimd::hadd(total);
        max[r] = new_max;
    }
};

// Queries [first, last) of matrix b, a block of query_block at a time.
template <class T>
void attend_blocks(const attention_problem<T>& p, std::size_t b, std::size_t first, std::size_t last) {
    constexpr std::size_t N = lanes<T>;
    constexpr T minus_infinity = -std::numeric_limits<T>::infinity();
    const matrices<T> m = matrices_at(p, b);
    scratch<T>& s = thread_scratch<T>();

    // 1. Pack the keys these queries see, keys [lowest, lowest + keys), transposed (d x keys, so
    //    that a score tile reads whole vectors of keys), and their values with rows padded to
    //    whole vectors. Padding is zero: a padded key is masked, and its zero value adds
    //    nothing. Packed key j is key lowest + j; lowest starts a key block, so that a query's
    //    blocks, and so its numbers, are the same whichever chunk of queries it is in.
    const std::size_t lowest = first_visible_key(p, first) / key_block * key_block;
    const std::size_t keys = visible_keys(p, last - 1) - lowest;
    const std::size_t keys_ld = round_up(std::max<std::size_t>(keys, 1), key_block);
    const std::size_t values_ld = round_up(p.dv(), N);
    T* keys_t = sized(s.keys_t, p.d() * keys_ld);
    T* values = sized(s.values, keys_ld * values_ld);
    const T* k_first = m.k + static_cast<std::ptrdiff_t>(lowest) * p.k.matrix.strides[0];
    const T* v_first = m.v + static_cast<std::ptrdiff_t>(lowest) * p.v.matrix.strides[0];
    for (std::size_t c = 0; c < p.d(); ++c) {
        T* dst = keys_t + c * keys_ld;
        const T* src = k_first + static_cast<std::ptrdiff_t>(c) * p.k.matrix.strides[1];
        for (std::size_t j = 0; j < keys; ++j) dst[j] = src[static_cast<std::ptrdiff_t>(j) * p.k.matrix.strides[0]];
        std::fill(dst + keys, dst + keys_ld, T{0});
    }
    for (std::size_t j = 0; j < keys_ld; ++j) {
        T* dst = values + j * values_ld;
        if (j < keys) {
            const T* src = v_first + static_cast<std::ptrdiff_t>(j) * p.v.matrix.strides[0];
            for (std::size_t c = 0; c < p.dv(); ++c) dst[c] = src[static_cast<std::ptrdiff_t>(c) * p.v.matrix.strides[1]];
            std::fill(dst + p.dv(), dst + values_ld, T{0});
        } else {
            std::fill(dst, dst + values_ld, T{0});
        }
    }

    constexpr std::size_t padding = row_padding<T>;
    T* queries = sized(s.queries, query_block * p.d());
    T* scores = sized(s.scores, query_block * key_block);
    T* out = sized(s.out, query_block * values_ld);
    const online_softmax<T> softmax{sized(s.row_max, query_block), sized(s.row_sum, query_block),
                                    sized(s.rescale, query_block)};

    for (std::size_t i0 = first; i0 < last; i0 += query_block) {
        const std::size_t rows = std::min(query_block, last - i0);
        const std::size_t padded_rows = round_up(rows, padding);

        // 2. The block's queries, scaled, and its empty running state.
        for (std::size_t r = 0; r < padded_rows; ++r) {
            T* dst = queries + r * p.d();
            if (r < rows) {
                const T* src = m.q + static_cast<std::ptrdiff_t>(i0 + r) * p.q.matrix.strides[0];
                for (std::size_t c = 0; c < p.d(); ++c) dst[c] = p.scale * src[static_cast<std::ptrdiff_t>(c) * p.q.matrix.strides[1]];
            } else {
                std::fill(dst, dst + p.d(), T{0});
            }
            softmax.max[r] = minus_infinity;
            softmax.sum[r] = T{0};
        }
        std::fill(out, out + padded_rows * values_ld, T{0});

        // 3. Key blocks from the first key the block's first query sees to the last key its
        //    last query sees; blocks beyond are in every query's future, blocks before in every
        //    query's past (out of its window), and are skipped. Blocks that reach past what the
        //    first query sees, or before what the last query sees, are masked query by query.
        //    Offsets are into the packed keys.
        const std::size_t seen_by_all = visible_keys(p, i0) - lowest;
        const std::size_t seen_by_any = visible_keys(p, i0 + rows - 1) - lowest;
        const std::size_t from_all = first_visible_key(p, i0 + rows - 1) - lowest;
        const std::size_t from_any = first_visible_key(p, i0) - lowest;
        // Keys past what the last of rows [r, r + count) sees: a tile of scores wholly there is
        // masked below, so is not computed (half the block on the diagonal), nor are the
        // products of the zero weights it becomes.
        const auto seen_by_rows = [&](std::size_t r, std::size_t count) {
            return visible_keys(p, i0 + std::min(r + count, rows) - 1) - lowest;
        };
        for (std::size_t j0 = from_any / key_block * key_block; j0 < seen_by_any; j0 += key_block) {
            // A block the mask drops for every query of this block is never computed: the work of
            // a document or window mask is proportional to what it keeps.
            const std::size_t block_cols = std::min(key_block, seen_by_any - j0);
            const keys_kept kept = p.modifiers.kept ? p.modifiers.kept(p.modifiers.context, b, i0, i0 + rows, lowest + j0,
                                                                       lowest + j0 + block_cols)
                                                    : keys_kept::some;
            if (kept == keys_kept::none) continue;
            for (std::size_t r = 0; r < padded_rows; r += score_rows<T>) {
                const std::size_t seen = seen_by_rows(r, score_rows<T>);
                for (std::size_t j = 0; j < key_block && j0 + j < seen; j += score_vectors * N)
                    score_tile<T, score_rows<T>, score_vectors>(queries + r * p.d(), p.d(), keys_t + j0 + j, keys_ld,
                                                                scores + r * key_block + j);
            }
            // The modifiers before causality's mask, which then drops what they made of the
            // scores no query sees (and of those never computed).
            if (p.modifiers.apply)
                p.modifiers.apply(p.modifiers.context,
                                  {scores, key_block, rows, block_cols, b, i0, lowest + j0, kept != keys_kept::all});
            if (j0 + key_block > seen_by_all || j0 < from_all) {
                for (std::size_t r = 0; r < padded_rows; ++r) {
                    const std::size_t query = i0 + std::min(r, rows - 1);
                    const std::size_t seen = visible_keys(p, query) - lowest;
                    const std::size_t first_seen = first_visible_key(p, query) - lowest;
                    T* row = scores + r * key_block;
                    const std::size_t before = std::min(first_seen > j0 ? first_seen - j0 : 0, key_block);
                    const std::size_t after = std::min(seen > j0 ? seen - j0 : 0, key_block);
                    std::fill(row, row + before, minus_infinity);
                    std::fill(row + std::max(before, after), row + key_block, minus_infinity);
                }
            }
            for (std::size_t r = 0; r < padded_rows; ++r) softmax.update(r, scores + r * key_block);

            const T* block_values = values + j0 * values_ld;
            for (std::size_t r = 0; r < padded_rows; r += value_rows<T>) {
                const std::size_t seen = seen_by_rows(r, value_rows<T>);
                const std::size_t block_keys = seen > j0 ? std::min(key_block, seen - j0) : 0;
                std::size_t c = 0;
                for (; c + value_vectors * N <= values_ld; c += value_vectors * N)
                    value_tile<T, value_rows<T>, value_vectors>(scores + r * key_block, softmax.rescale + r,
                                                                block_values + c, values_ld, block_keys,
                                                                out + r * values_ld + c);
                for (; c < values_ld; c += N)
                    value_tile<T, value_rows<T>, 1>(scores + r * key_block, softmax.rescale + r, block_values + c,
                                                    values_ld, block_keys, out + r * values_ld + c);
            }
        }

        // 4. Normalise by each query's sum, and keep its log-sum-exp if asked. A query that sees
        //    no key has no distribution: its sum is 0 and its output NaN, as the unfused softmax
        //    gives.
        for (std::size_t r = 0; r < rows; ++r) {
            if (softmax.sum[r] == T{0}) {
                no_keys_seen(p, m, i0 + r);
                continue;
            }
            write_scaled(p, out + r * values_ld, T{1} / softmax.sum[r],
                         m.out + static_cast<std::ptrdiff_t>(i0 + r) * p.out.matrix.strides[0]);
            if (m.lse) m.lse[i0 + r] = softmax.max[r] + std::log(softmax.sum[r]);
        }
    }
}

template <class T>
void attention_impl(const attention_problem<T>& p) {
    std::size_t batches = 1;
    for (std::size_t i = 0; i < p.batch_rank; ++i) batches *= p.batch_extents[i];
    if (batches == 0 || p.tq() == 0 || p.dv() == 0) return;

    // Work per matrix, in multiply-adds, counting only the keys the queries see.
    double seen = p.sees.causal ? std::min<double>(static_cast<double>(p.tk()),
                                                   static_cast<double>(p.tq()) / 2 + static_cast<double>(p.sees.diagonal))
                                : static_cast<double>(p.tk());
    if (p.sees.window) seen = std::min(seen, static_cast<double>(*p.sees.window));
    const double work = static_cast<double>(batches) * static_cast<double>(p.tq()) * std::max(seen, 1.0) *
                        static_cast<double>(p.d() + p.dv());
    const std::size_t threads = work < parallel_work ? 1 : thread_count();

    // Tasks: each matrix whole, or cut into chunks of query blocks when there are fewer matrices
    // than threads can share evenly. Later chunks see more keys, so they are handed out first.
    const bool by_rows = p.tq() <= few_queries || p.tk() <= lanes<T>;
    const std::size_t unit = by_rows ? 1 : query_block;
    const std::size_t units = (p.tq() + unit - 1) / unit;
    const std::size_t chunks = threads == 1 ? 1 : std::min(units, (4 * threads + batches - 1) / batches);
    const std::size_t per_chunk = (units + chunks - 1) / chunks * unit;
    auto task = [&](std::size_t t) {
        const std::size_t chunk = chunks - 1 - t / batches, b = t % batches;
        const std::size_t first = chunk * per_chunk, last = std::min(p.tq(), first + per_chunk);
        if (first >= last) return;
        if (p.tk() <= lanes<T>) attend_one_vector(p, b, first, last);
        else if (by_rows) attend_rows(p, b, first, last);
        else attend_blocks(p, b, first, last);
    };
    if (threads == 1) {
        for (std::size_t t = 0; t < chunks * batches; ++t) task(t);
    } else {
        parallel_for(chunks * batches, task);
    }
}

}  // namespace

void attention(const attention_problem<float>& problem) { attention_impl(problem); }
void attention(const attention_problem<double>& problem) { attention_impl(problem); }

}  // namespace shaped::kernels
