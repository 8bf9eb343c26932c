// Causal attention for training, compiled once for float and double (see
// kernels/attention_backward.hpp). Both passes work on tiles of 64 queries x 64 keys: each
// operand is packed once per head into per-thread scratch (rows padded to whole vectors, zeros
// beyond the head and beyond T), and every product of two tiles runs through one
// register-blocked kernel, multiply(). Vectors are xsimd batches of the widest instruction set
// the build targets.
#include <shaped/kernels/attention_backward.hpp>
#include <shaped/kernels/parallel.hpp>

#include "simd_scratch.hpp"

#include <xsimd/xsimd.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

namespace shaped::kernels {

namespace {

using simd::buffer;
using simd::largest_lane;
using simd::lanes;
using simd::round_up;
using simd::sized;
using simd::vec;

// Queries and keys per tile: a pair of tiles' operands and scores fit in L2 together.
constexpr std::size_t tile = 64;
// Below this many multiply-adds in all, a parallel loop costs more than it saves.
constexpr double parallel_work = 4e6;

// Register blocks of multiply(): block_rows rows x up to block_vectors vectors. AVX-512 has 32
// vector registers (4 x 4 accumulators), narrower instruction sets 16 (4 x 2).
constexpr std::size_t block_rows = 4;
template <class T>
inline constexpr std::size_t block_vectors = lanes<T> * sizeof(T) >= 64 ? 4 : 2;
static_assert(tile % block_rows == 0);

constexpr std::ptrdiff_t signed_size(std::size_t n) { return static_cast<std::ptrdiff_t>(n); }

// Per-thread working memory, kept between calls so that a steady state allocates nothing.
template <class T>
struct scratch {
    buffer<T> keys, keys_t, values, values_t, queries, dout, row_lse, row_delta, dq, dk, dv, scores, dscores, out,
        row_max, row_sum;
};
template <class T>
scratch<T>& thread_scratch() {
    return simd::thread_scratch<scratch<T>>();
}

// ---- the product of two tiles ------------------------------------------------------------------

// c[MR x NR vectors] (+)= sum over l < depth of a(r, l) * b[l][NR vectors], where a(r, l) =
// a[r * a_row + l * a_col] (so a may be read transposed), b's rows are b_ld apart and c's c_ld
// apart, both aligned.
template <class T, std::size_t MR, std::size_t NR>
void multiply_block(std::size_t depth, const T* a, std::ptrdiff_t a_row, std::ptrdiff_t a_col, const T* b,
                    std::size_t b_ld, T* c, std::size_t c_ld, bool accumulate) {
    constexpr std::size_t N = lanes<T>;
    // The block's loops unrolled whatever the optimisation level, so that acc lives in
    // registers (at -O2 GCC keeps it on the stack, at half the speed).
    vec<T> acc[MR][NR];
#pragma GCC unroll 8
    for (std::size_t r = 0; r < MR; ++r)
#pragma GCC unroll 8
        for (std::size_t n = 0; n < NR; ++n)
            acc[r][n] = accumulate ? vec<T>::load_aligned(c + r * c_ld + n * N) : vec<T>(T{0});
    for (std::size_t l = 0; l < depth; ++l) {
        vec<T> row[NR];
#pragma GCC unroll 8
        for (std::size_t n = 0; n < NR; ++n) row[n] = vec<T>::load_aligned(b + l * b_ld + n * N);
        const T* a_l = a + signed_size(l) * a_col;
#pragma GCC unroll 8
        for (std::size_t r = 0; r < MR; ++r) {
            const vec<T> factor(a_l[signed_size(r) * a_row]);
#pragma GCC unroll 8
            for (std::size_t n = 0; n < NR; ++n) acc[r][n] = xsimd::fma(factor, row[n], acc[r][n]);
        }
    }
#pragma GCC unroll 8
    for (std::size_t r = 0; r < MR; ++r)
#pragma GCC unroll 8
        for (std::size_t n = 0; n < NR; ++n) acc[r][n].store_aligned(c + r * c_ld + n * N);
}

// c[rows x cols] (+)= A[rows x depth] B[depth x cols], A read as in multiply_block; rows a
// multiple of block_rows, cols of the vector width.
template <class T>
void multiply(std::size_t rows, std::size_t cols, std::size_t depth, const T* a, std::ptrdiff_t a_row,
              std::ptrdiff_t a_col, const T* b, std::size_t b_ld, T* c, std::size_t c_ld, bool accumulate) {
    constexpr std::size_t N = lanes<T>, NR = block_vectors<T>;
    for (std::size_t r = 0; r < rows; r += block_rows) {
        const T* a_r = a + signed_size(r) * a_row;
        T* c_r = c + r * c_ld;
        std::size_t col = 0;
        for (; col + NR * N <= cols; col += NR * N)
            multiply_block<T, block_rows, NR>(depth, a_r, a_row, a_col, b + col, b_ld, c_r + col, c_ld, accumulate);
        for (; col < cols; col += N)
            multiply_block<T, block_rows, 1>(depth, a_r, a_row, a_col, b + col, b_ld, c_r + col, c_ld, accumulate);
    }
}

// ---- the problem's geometry ----------------------------------------------------------------------

// The most keys a query sees: its window, or T (a window wider than T changes nothing, and
// clamped to T it cannot overflow the sums below).
template <class T>
std::size_t reach(const attention_training_problem<T>& p) {
    return p.window ? std::min(*p.window, p.time) : p.time;
}

// Query i sees keys [first_key(i), i + 1).
template <class T>
std::size_t first_key(const attention_training_problem<T>& p, std::size_t i) {
    return i + 1 > reach(p) ? i + 1 - reach(p) : 0;
}

// The keys query i sees within key tile j0, as offsets [from, to) into the tile; padded rows
// (queries past T) see none.
struct visible_span {
    std::size_t from, to;
};
template <class T>
visible_span span_of(const attention_training_problem<T>& p, std::size_t i, std::size_t j0) {
    if (i >= p.time) return {0, 0};
    const std::size_t first = std::max(first_key(p, i), j0), end = std::min(i + 1, j0 + tile);
    if (first >= end) return {0, 0};
    return {first - j0, end - j0};
}

// Whether every query of tile i0 sees every key of tile j0 (no masking needed), and whether any
// query sees any key (else the pair is skipped).
template <class T>
bool sees_all(const attention_training_problem<T>& p, std::size_t i0, std::size_t j0) {
    const std::size_t i_last = i0 + tile - 1, j_last = j0 + tile - 1;
    return i_last < p.time && j_last <= i0 && j0 + reach(p) > i_last;
}
template <class T>
bool sees_any(const attention_training_problem<T>& p, std::size_t i0, std::size_t j0) {
    const std::size_t i_last = std::min(i0 + tile, p.time) - 1, j_last = j0 + tile - 1;
    return j0 <= i_last && j_last + reach(p) > i0;
}

// The first element of row t of head h of batch b of an operand.
template <class P>
P* row_at(P* data, const heads_layout& layout, std::size_t b, std::size_t h, std::size_t t) {
    return data + signed_size(b) * layout.batch + signed_size(h) * layout.head + signed_size(t) * layout.time;
}

// packed[t][0, padded) = the head's rows [first, first + rows), zero past the head and past T.
template <class T>
void pack_rows(const attention_training_problem<T>& p, const T* data, const heads_layout& layout, std::size_t b,
               std::size_t h, std::size_t first, std::size_t rows, std::size_t padded, T* packed) {
    for (std::size_t t = 0; t < rows; ++t) {
        T* dst = packed + t * padded;
        if (first + t < p.time) {
            const T* src = row_at(data, layout, b, h, first + t);
            std::copy(src, src + p.head_size, dst);
            std::fill(dst + p.head_size, dst + padded, T{0});
        } else {
            std::fill(dst, dst + padded, T{0});
        }
    }
}

// The same rows transposed a tile at a time: packed[tile][c][j], each tile's padded x tile
// block contiguous, so that a product reads it without striding across the whole head.
template <class T>
void pack_tiles_transposed(const attention_training_problem<T>& p, const T* data, const heads_layout& layout,
                           std::size_t b, std::size_t h, std::size_t first, std::size_t rows, std::size_t padded,
                           T* packed) {
    std::fill(packed, packed + rows * padded, T{0});
    for (std::size_t t = 0; t < rows && first + t < p.time; ++t) {
        const T* src = row_at(data, layout, b, h, first + t);
        T* dst = packed + (t / tile) * padded * tile + t % tile;
        for (std::size_t c = 0; c < p.head_size; ++c) dst[c * tile] = src[c];
    }
}

// The head's rows [0, T) += the packed rows.
template <class T>
void add_rows(const attention_training_problem<T>& p, const T* packed, std::size_t padded, T* data,
              const heads_layout& layout, std::size_t b, std::size_t h) {
    for (std::size_t t = 0; t < p.time; ++t) {
        T* dst = row_at(data, layout, b, h, t);
        const T* src = packed + t * padded;
        for (std::size_t c = 0; c < p.head_size; ++c) dst[c] += src[c];
    }
}

// ---- forward --------------------------------------------------------------------------------------

// Query tiles [first_tile, last_tile) of head h of batch b: 1. the keys they see packed, 2. per
// query tile, an online softmax over the key tiles it sees (a running max and sum per query, the
// partial output rescaled when the max grows), 3. out and lse written.
template <class T>
void forward_tiles(const attention_training_problem<T>& p, T* out, T* lse, std::size_t b, std::size_t h,
                   std::size_t first_tile, std::size_t last_tile) {
    constexpr std::size_t N = lanes<T>;
    constexpr T minus_infinity = -std::numeric_limits<T>::infinity();
    const std::size_t padded = round_up(p.head_size, N);
    const std::size_t kv_head = h / (p.heads / p.kv_heads);
    scratch<T>& s = thread_scratch<T>();

    // 1. Keys [lowest, highest) of whole tiles: Kt tile by tile (the score product's right side),
    //    V row by row (the output product's).
    const std::size_t lowest = first_key(p, first_tile * tile) / tile * tile;
    const std::size_t highest = std::min(last_tile * tile, round_up(p.time, tile));
    const std::size_t keys = highest - lowest;
    T* keys_t = sized(s.keys_t, keys * padded);
    T* values = sized(s.values, keys * padded);
    pack_tiles_transposed(p, p.k, p.k_layout, b, kv_head, lowest, keys, padded, keys_t);
    pack_rows(p, p.v, p.v_layout, b, kv_head, lowest, keys, padded, values);

    T* queries = sized(s.queries, tile * padded);
    T* scores = sized(s.scores, tile * tile);
    T* acc = sized(s.out, tile * padded);
    T* row_max = sized(s.row_max, tile);
    T* row_sum = sized(s.row_sum, tile);
    for (std::size_t i0 = first_tile * tile; i0 < last_tile * tile; i0 += tile) {
        // 2. The tile's queries and its empty running state.
        pack_rows(p, p.q, p.q_layout, b, h, i0, tile, padded, queries);
        std::fill(acc, acc + tile * padded, T{0});
        std::fill(row_max, row_max + tile, minus_infinity);
        std::fill(row_sum, row_sum + tile, T{0});
        for (std::size_t j0 = first_key(p, i0) / tile * tile; j0 < std::min(i0 + tile, p.time); j0 += tile) {
            if (!sees_any(p, i0, j0)) continue;
            multiply(tile, tile, padded, queries, signed_size(padded), 1, keys_t + (j0 - lowest) * padded, tile,
                     scores, tile, false);
            const bool whole = sees_all(p, i0, j0);
            for (std::size_t r = 0; r < tile; ++r) {
                T* row = scores + r * tile;
                const visible_span seen = whole ? visible_span{0, tile} : span_of(p, i0 + r, j0);
                if (seen.from == seen.to) {  // nothing seen here: weights 0, the running state as it was
                    std::fill(row, row + tile, T{0});
                    continue;
                }
                // Scaled scores (-inf where unseen), their max, and weights exp(score - max)
                // folded into the row's running state; the partial output rescaled when the max
                // grew.
                vec<T> tile_max(minus_infinity);
                for (std::size_t j = 0; j < tile; j += N) {
                    const vec<T> scaled = vec<T>::load_aligned(row + j) * vec<T>(p.scale);
                    scaled.store_aligned(row + j);
                    tile_max = xsimd::max(tile_max, scaled);
                }
                if (!whole) {
                    std::fill(row, row + seen.from, minus_infinity);
                    std::fill(row + seen.to, row + tile, minus_infinity);
                    tile_max = vec<T>(minus_infinity);
                    for (std::size_t j = 0; j < tile; j += N) tile_max = xsimd::max(tile_max, vec<T>::load_aligned(row + j));
                }
                const T new_max = std::max(row_max[r], largest_lane(tile_max));
                const vec<T> shift(new_max);
                vec<T> total(T{0});
                for (std::size_t j = 0; j < tile; j += N) {
                    const vec<T> e = xsimd::exp(vec<T>::load_aligned(row + j) - shift);
                    e.store_aligned(row + j);
                    total += e;
                }
                if (new_max != row_max[r]) {
                    const T rescale = std::exp(row_max[r] - new_max);
                    row_sum[r] *= rescale;
                    T* acc_row = acc + r * padded;
                    for (std::size_t c = 0; c < padded; c += N)
                        (vec<T>::load_aligned(acc_row + c) * vec<T>(rescale)).store_aligned(acc_row + c);
                    row_max[r] = new_max;
                }
                row_sum[r] += xsimd::hadd(total);
            }
            multiply(tile, padded, tile, scores, signed_size(tile), 1, values + (j0 - lowest) * padded, padded, acc,
                     padded, true);
        }

        // 3. Normalised by each query's sum. A query that sees no key (a window of 0) has no
        //    distribution: NaN out, as softmax over -inf gives, and lse -inf.
        for (std::size_t r = 0; r < tile && i0 + r < p.time; ++r) {
            T* out_row = row_at(out, p.out_layout, b, h, i0 + r);
            const T* acc_row = acc + r * padded;
            const T inv = T{1} / row_sum[r];
            for (std::size_t c = 0; c < p.head_size; ++c) out_row[c] = acc_row[c] * inv;
            lse[(b * p.heads + h) * p.time + i0 + r] = row_max[r] + std::log(row_sum[r]);
        }
    }
}

template <class T>
double visible_pairs(const attention_training_problem<T>& p) {
    const double t = static_cast<double>(p.time);
    const double w = static_cast<double>(reach(p));
    return t * w - w * (w - 1) / 2;
}

template <class T>
void forward_impl(const attention_training_problem<T>& p, T* out, T* lse) {
    const std::size_t matrices = p.batch * p.heads;
    if (matrices == 0 || p.time == 0 || p.head_size == 0) return;
    const double work = static_cast<double>(matrices) * visible_pairs(p) * static_cast<double>(2 * p.head_size);
    const std::size_t threads = work < parallel_work ? 1 : thread_count();

    // Tasks: each head whole, or cut into chunks of query tiles when there are fewer heads than
    // threads can share evenly. Later chunks see more keys, so they are handed out first. A
    // query tile's numbers do not depend on the chunk it is in.
    const std::size_t tiles = (p.time + tile - 1) / tile;
    const std::size_t chunks = threads == 1 ? 1 : std::min(tiles, (4 * threads + matrices - 1) / matrices);
    const std::size_t per_chunk = (tiles + chunks - 1) / chunks;
    auto task = [&](std::size_t t) {
        const std::size_t chunk = chunks - 1 - t / matrices, m = t % matrices;
        const std::size_t first = chunk * per_chunk, last = std::min(tiles, first + per_chunk);
        if (first < last) forward_tiles(p, out, lse, m / p.heads, m % p.heads, first, last);
    };
    if (threads == 1) {
        for (std::size_t t = 0; t < chunks * matrices; ++t) task(t);
    } else {
        parallel_for(chunks * matrices, task);
    }
}

// ---- backward -------------------------------------------------------------------------------------

// The operands of one kv head's backward, packed for all T (rows padded to `padded`, T to whole
// tiles), and its accumulators.
template <class T>
struct packed_head {
    std::size_t padded;
    const T* keys;      // (T, padded)
    const T* keys_t;    // tiles of (padded, tile)
    const T* values_t;  // tiles of (padded, tile)
    const T* queries;   // one query head's (T, padded)
    const T* dout;      // (T, padded)
    const T* lse;       // (T)
    const T* delta;     // (T): rowsum(dout * out)
    T* dq;              // (T, padded)
    T* dk;              // (T, padded), summed over the group
    T* dv;              // (T, padded), summed over the group
    T* scores;          // (tile, tile): S, then P
    T* dscores;         // (tile, tile): dP, then dS
};

// One pair of tiles, queries i0 against keys j0: 1. S = q k^T, 2. P = exp(scale S - lse) where
// seen, 3. dP = dout v^T, 4. dS = scale P (dP - delta), 5. dv += P^T dout, dk += dS^T q,
// dq += dS k. (The scale of dq and dk is folded into dS.)
template <class T>
void backward_pair(const attention_training_problem<T>& p, const packed_head<T>& m, std::size_t i0, std::size_t j0) {
    constexpr std::size_t N = lanes<T>;
    const std::size_t padded = m.padded;
    const T* queries = m.queries + i0 * padded;
    const T* dout = m.dout + i0 * padded;

    // 1. and 3.
    multiply(tile, tile, padded, queries, signed_size(padded), 1, m.keys_t + j0 * padded, tile, m.scores, tile, false);
    multiply(tile, tile, padded, dout, signed_size(padded), 1, m.values_t + j0 * padded, tile, m.dscores, tile, false);

    // 2. and 4., row by row; entries a query does not see are zero in P and dS.
    const bool whole = sees_all(p, i0, j0);
    const vec<T> scale(p.scale);
    for (std::size_t r = 0; r < tile; ++r) {
        T* s = m.scores + r * tile;
        T* ds = m.dscores + r * tile;
        const visible_span seen = whole ? visible_span{0, tile} : span_of(p, i0 + r, j0);
        if (seen.from == seen.to) {
            std::fill(s, s + tile, T{0});
            std::fill(ds, ds + tile, T{0});
            continue;
        }
        const vec<T> minus_lse(-m.lse[i0 + r]), delta(m.delta[i0 + r]);
        for (std::size_t j = 0; j < tile; j += N) {
            const vec<T> weight = xsimd::exp(xsimd::fma(vec<T>::load_aligned(s + j), scale, minus_lse));
            weight.store_aligned(s + j);
            (scale * weight * (vec<T>::load_aligned(ds + j) - delta)).store_aligned(ds + j);
        }
        std::fill(s, s + seen.from, T{0});
        std::fill(s + seen.to, s + tile, T{0});
        std::fill(ds, ds + seen.from, T{0});
        std::fill(ds + seen.to, ds + tile, T{0});
    }

    // 5.
    multiply(tile, padded, tile, m.scores, 1, signed_size(tile), dout, padded, m.dv + j0 * padded, padded, true);
    multiply(tile, padded, tile, m.dscores, 1, signed_size(tile), queries, padded, m.dk + j0 * padded, padded, true);
    multiply(tile, padded, tile, m.dscores, signed_size(tile), 1, m.keys + j0 * padded, padded, m.dq + i0 * padded, padded,
             true);
}

// Key/value head kv of batch b, and its group of query heads: 1. k, k^T and v^T packed once,
// 2. per query head, its q, dout, lse and rowsum(dout * out) packed, every pair of tiles where a
// query sees a key, and its dq added in, 3. dk and dv, summed over the group, added in.
template <class T>
void backward_head(const attention_training_problem<T>& p, const T* out, const T* lse, const T* dout,
                   const attention_gradients<T>& grads, std::size_t b, std::size_t kv) {
    constexpr std::size_t N = lanes<T>;
    const std::size_t padded = round_up(p.head_size, N);
    const std::size_t rows = round_up(p.time, tile);
    const std::size_t group = p.heads / p.kv_heads;
    scratch<T>& s = thread_scratch<T>();

    // 1.
    T* keys = sized(s.keys, rows * padded);
    T* keys_t = sized(s.keys_t, rows * padded);
    T* values_t = sized(s.values_t, rows * padded);
    pack_rows(p, p.k, p.k_layout, b, kv, 0, rows, padded, keys);
    pack_tiles_transposed(p, p.k, p.k_layout, b, kv, 0, rows, padded, keys_t);
    pack_tiles_transposed(p, p.v, p.v_layout, b, kv, 0, rows, padded, values_t);
    T* queries = sized(s.queries, rows * padded);
    T* dout_rows = sized(s.dout, rows * padded);
    T* row_lse = sized(s.row_lse, rows);
    T* row_delta = sized(s.row_delta, rows);
    T* dq = sized(s.dq, rows * padded);
    T* dk = sized(s.dk, rows * padded);
    T* dv = sized(s.dv, rows * padded);
    std::fill(dk, dk + rows * padded, T{0});
    std::fill(dv, dv + rows * padded, T{0});
    const packed_head<T> m{padded,    keys, keys_t, values_t, queries, dout_rows, row_lse, row_delta, dq, dk, dv,
                           sized(s.scores, tile * tile), sized(s.dscores, tile * tile)};

    // 2.
    for (std::size_t h = kv * group; h < (kv + 1) * group; ++h) {
        pack_rows(p, p.q, p.q_layout, b, h, 0, rows, padded, queries);
        pack_rows(p, dout, p.out_layout, b, h, 0, rows, padded, dout_rows);
        std::fill(row_lse, row_lse + rows, T{0});
        std::fill(row_delta, row_delta + rows, T{0});
        for (std::size_t t = 0; t < p.time; ++t) {
            row_lse[t] = lse[(b * p.heads + h) * p.time + t];
            const T* out_row = row_at(out, p.out_layout, b, h, t);
            const T* dout_row = dout_rows + t * padded;
            T sum = 0;
            for (std::size_t c = 0; c < p.head_size; ++c) sum += dout_row[c] * out_row[c];
            row_delta[t] = sum;
        }
        std::fill(dq, dq + rows * padded, T{0});
        // Key tiles outer, so that a key tile's dk and dv stay in cache while the query tiles
        // that see it stream past; query tiles wholly before it (its future) or wholly after
        // its window are never visited.
        for (std::size_t j0 = 0; j0 < rows; j0 += tile)
            for (std::size_t i0 = j0; i0 < rows && i0 < j0 + tile + reach(p); i0 += tile)
                if (sees_any(p, i0, j0)) backward_pair(p, m, i0, j0);
        add_rows(p, dq, padded, grads.dq, grads.dq_layout, b, h);
    }

    // 3.
    add_rows(p, dk, padded, grads.dk, grads.dk_layout, b, kv);
    add_rows(p, dv, padded, grads.dv, grads.dv_layout, b, kv);
}

template <class T>
void backward_impl(const attention_training_problem<T>& p, const T* out, const T* lse, const T* dout,
                   const attention_gradients<T>& grads) {
    const std::size_t tasks = p.batch * p.kv_heads;
    if (tasks == 0 || p.time == 0 || p.head_size == 0) return;
    // A task per key/value head: it alone writes that head's dk and dv, and its group's dq.
    const double work =
        static_cast<double>(p.batch * p.heads) * visible_pairs(p) * static_cast<double>(5 * p.head_size);
    auto task = [&](std::size_t t) { backward_head(p, out, lse, dout, grads, t / p.kv_heads, t % p.kv_heads); };
    if (work < parallel_work || thread_count() == 1) {
        for (std::size_t t = 0; t < tasks; ++t) task(t);
    } else {
        parallel_for(tasks, task);
    }
}

}  // namespace

void attention_forward(const attention_training_problem<float>& p, float* out, float* lse) { forward_impl(p, out, lse); }
void attention_forward(const attention_training_problem<double>& p, double* out, double* lse) {
    forward_impl(p, out, lse);
}

void attention_backward(const attention_training_problem<float>& p, const float* out, const float* lse,
                        const float* dout, const attention_gradients<float>& grads) {
    backward_impl(p, out, lse, dout, grads);
}
void attention_backward(const attention_training_problem<double>& p, const double* out, const double* lse,
                        const double* dout, const attention_gradients<double>& grads) {
    backward_impl(p, out, lse, dout, grads);
}

}  // namespace shaped::kernels
