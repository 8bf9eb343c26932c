// Attention's backward, compiled once for float and double (see kernels/attention_backward.hpp).
// It works on tiles of 64 queries x 64 keys: each operand is packed once per head into
// per-thread scratch (rows padded to whole vectors, zeros beyond the head and beyond T), and
// every product of two tiles runs through one register-blocked kernel, multiply(). Vectors are
// xsimd batches of the widest instruction set the build targets.
#include <shaped/kernels/attention_backward.hpp>
#include <shaped/kernels/parallel.hpp>

#include "simd_scratch.hpp"

#include <xsimd/xsimd.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <stdexcept>

namespace shaped::kernels {

namespace {

using simd::buffer;
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
    buffer<T> keys, keys_t, values_t, queries, dout, row_lse, row_delta, dq, dk, dv, scores, dscores, slopes;
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

// Which part of a product a tile on the diagonal needs, where query r sees key j only for j <= r
// (all else is zero in P and dS): about half of each product, skipped a row block at a time.
enum class causal_part {
    all,             // a tile off the diagonal
    columns_to_row,  // c(r, j) for j <= r only: S and dP (rows are queries, columns keys)
    depth_from_row,  // sum over queries l >= r: dv and dk (rows are keys)
    depth_to_row,    // sum over keys l <= r: dq (rows are queries)
};

// c[MR x nr vectors] as multiply_block, for nr <= NR chosen at run time.
template <class T, std::size_t MR, std::size_t NR>
void multiply_vectors(std::size_t nr, std::size_t depth, const T* a, std::ptrdiff_t a_row, std::ptrdiff_t a_col,
                      const T* b, std::size_t b_ld, T* c, std::size_t c_ld, bool accumulate) {
    if constexpr (NR > 1) {
        if (nr < NR) return multiply_vectors<T, MR, NR - 1>(nr, depth, a, a_row, a_col, b, b_ld, c, c_ld, accumulate);
    }
    multiply_block<T, MR, NR>(depth, a, a_row, a_col, b, b_ld, c, c_ld, accumulate);
}

// c[rows x cols] (+)= A[rows x depth] B[depth x cols], A read as in multiply_block; rows a
// multiple of block_rows, cols of the vector width. `part` leaves out what a diagonal tile does
// not need (rows, cols and depth are then all the tile).
template <class T>
void multiply(std::size_t rows, std::size_t cols, std::size_t depth, const T* a, std::ptrdiff_t a_row,
              std::ptrdiff_t a_col, const T* b, std::size_t b_ld, T* c, std::size_t c_ld, bool accumulate,
              causal_part part = causal_part::all) {
    constexpr std::size_t N = lanes<T>, NR = block_vectors<T>;
    for (std::size_t r = 0; r < rows; r += block_rows) {
        const T* a_r = a + signed_size(r) * a_row;
        T* c_r = c + r * c_ld;
        // The block's columns and its range of depth [from, to).
        std::size_t width = cols, from = 0, to = depth;
        if (part == causal_part::columns_to_row) width = std::min(cols, round_up(r + block_rows, N));
        if (part == causal_part::depth_from_row) from = r;
        if (part == causal_part::depth_to_row) to = std::min(depth, r + block_rows);
        const T* a_from = a_r + signed_size(from) * a_col;
        const T* b_from = b + from * b_ld;
        std::size_t col = 0;
        for (; col + NR * N <= width; col += NR * N)
            multiply_block<T, block_rows, NR>(to - from, a_from, a_row, a_col, b_from + col, b_ld, c_r + col, c_ld,
                                              accumulate);
        if (col < width)
            multiply_vectors<T, block_rows, NR>((width - col) / N, to - from, a_from, a_row, a_col, b_from + col, b_ld,
                                                c_r + col, c_ld, accumulate);
    }
}

// ---- the problem's geometry ----------------------------------------------------------------------

// The most keys a query sees: its window, or T (a window wider than T changes nothing, and
// clamped to T it cannot overflow the sums below).
template <class T>
std::size_t reach(const attention_problem<T>& p) {
    return p.sees.window ? std::min(*p.sees.window, p.tq()) : p.tq();
}

// Query i sees keys [first_key(i), end_key(i)): those up to itself, or, where a mask replaces
// causality (it has no window then), every key.
template <class T>
std::size_t first_key(const attention_problem<T>& p, std::size_t i) {
    return i + 1 > reach(p) ? i + 1 - reach(p) : 0;
}
template <class T>
std::size_t end_key(const attention_problem<T>& p, std::size_t i) {
    return p.sees.causal ? i + 1 : p.tk();
}

// The keys query i sees within key tile j0, as offsets [from, to) into the tile; padded rows
// (queries past T) see none.
struct visible_span {
    std::size_t from, to;
};
template <class T>
visible_span span_of(const attention_problem<T>& p, std::size_t i, std::size_t j0) {
    if (i >= p.tq()) return {0, 0};
    const std::size_t first = std::max(first_key(p, i), j0), end = std::min(end_key(p, i), j0 + tile);
    if (first >= end) return {0, 0};
    return {first - j0, end - j0};
}

// Whether every query of tile i0 sees every key of tile j0 (no masking needed), and whether any
// query sees any key (else the pair is skipped).
template <class T>
bool sees_all(const attention_problem<T>& p, std::size_t i0, std::size_t j0) {
    const std::size_t i_last = i0 + tile - 1, j_last = j0 + tile - 1;
    if (!p.sees.causal) return i_last < p.tq() && j_last < p.tk();
    return i_last < p.tq() && j_last <= i0 && j0 + reach(p) > i_last;
}
template <class T>
bool sees_any(const attention_problem<T>& p, std::size_t i0, std::size_t j0) {
    const std::size_t i_last = std::min(i0 + tile, p.tq()) - 1, j_last = j0 + tile - 1;
    if (!p.sees.causal) return i0 < p.tq() && j0 < p.tk();
    return j0 <= i_last && j_last + reach(p) > i0;
}

// How much of tile j0's keys the problem's mask keeps for tile i0's queries (a pair it drops
// whole is never computed; one it keeps whole is not masked score by score).
template <class T>
keys_kept kept_by_mask(const attention_problem<T>& p, std::size_t matrix, std::size_t i0, std::size_t j0) {
    if (!p.modifiers.kept) return keys_kept::some;
    return p.modifiers.kept(p.modifiers.context, matrix, i0, std::min(i0 + tile, p.tq()), j0, std::min(j0 + tile, p.tk()));
}

// One matrix of an operand: row t's element c is data[t * row + c * column].
template <class P>
struct matrix_rows {
    P* data;
    std::ptrdiff_t row, column;
    P& operator()(std::size_t t, std::size_t c) const { return data[signed_size(t) * row + signed_size(c) * column]; }
};

// A multi-index over the batch dims.
using batch_index = std::array<std::size_t, max_attention_batch_rank>;

// Matrix `index` of an operand.
template <class P>
matrix_rows<P> matrix_of(const batched_matrices<P>& operand, const batch_index& index, std::size_t rank) {
    P* data = operand.data;
    for (std::size_t i = 0; i < rank; ++i) data += signed_size(index[i]) * operand.batch[i];
    return {data, operand.matrix.strides[0], operand.matrix.strides[1]};
}

// packed[t][0, padded) = the matrix's rows [first, first + rows), zero past d and past T.
template <class T>
void pack_rows(const attention_problem<T>& p, const matrix_rows<const T>& m, std::size_t first, std::size_t rows,
               std::size_t padded, T* packed) {
    for (std::size_t t = 0; t < rows; ++t) {
        T* dst = packed + t * padded;
        std::fill(dst, dst + padded, T{0});
        if (first + t >= p.tq()) continue;
        if (m.column == 1) std::copy_n(&m(first + t, 0), p.d(), dst);
        else
            for (std::size_t c = 0; c < p.d(); ++c) dst[c] = m(first + t, c);
    }
}

// The same rows transposed a tile at a time: packed[tile][c][j], each tile's padded x tile
// block contiguous, so that a product reads it without striding across the whole head.
template <class T>
void pack_tiles_transposed(const attention_problem<T>& p, const matrix_rows<const T>& m, std::size_t first,
                           std::size_t rows, std::size_t padded, T* packed) {
    std::fill(packed, packed + rows * padded, T{0});
    for (std::size_t t = 0; t < rows && first + t < p.tq(); ++t) {
        T* dst = packed + (t / tile) * padded * tile + t % tile;
        for (std::size_t c = 0; c < p.d(); ++c) dst[c * tile] = m(first + t, c);
    }
}

// The matrix's rows [0, T) += the packed rows.
template <class T>
void add_rows(const attention_problem<T>& p, const T* packed, std::size_t padded, const matrix_rows<T>& m) {
    for (std::size_t t = 0; t < p.tq(); ++t) {
        const T* src = packed + t * padded;
        if (m.column == 1) {
            T* dst = &m(t, 0);
            for (std::size_t c = 0; c < p.d(); ++c) dst[c] += src[c];
        } else {
            for (std::size_t c = 0; c < p.d(); ++c) m(t, c) += src[c];
        }
    }
}

template <class T>
double visible_pairs(const attention_problem<T>& p) {
    const double t = static_cast<double>(p.tq());
    if (!p.sees.causal) return t * static_cast<double>(p.tk());
    const double w = static_cast<double>(reach(p));
    return t * w - w * (w - 1) / 2;
}

// ---- backward -------------------------------------------------------------------------------------

// The operands of one task's backward (a key/value head and its group of query heads), packed
// for all T (rows padded to `padded`, T to whole tiles), and its accumulators.
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
    T* slopes;          // (tile, tile): the modifier's derivative, where the problem has one
    std::size_t matrix; // the query head's matrix, counted row-major over the batch dims
};

// Steps 2. and 4. of a pair of tiles, row by row: P = exp(score_factor S - lse) where a query
// sees a key, dS = gradient_factor P (dP - delta); entries a query does not see are zero in both.
// whole: every query of the pair sees every key.
template <class T>
void weights_and_score_gradients(const attention_problem<T>& p, const packed_head<T>& m, std::size_t i0, std::size_t j0,
                                 bool diagonal, bool whole, T score_factor, T gradient_factor) {
    constexpr std::size_t N = lanes<T>;
    const vec<T> factor(score_factor), gradient(gradient_factor);
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
        // Past the vectors that hold what the row sees, the products wrote nothing on the diagonal.
        const std::size_t computed = diagonal ? round_up(seen.to, N) : tile;
        for (std::size_t j = 0; j < computed; j += N) {
            const vec<T> weight = xsimd::exp(xsimd::fma(vec<T>::load_aligned(s + j), factor, minus_lse));
            weight.store_aligned(s + j);
            (gradient * weight * (vec<T>::load_aligned(ds + j) - delta)).store_aligned(ds + j);
        }
        std::fill(s, s + seen.from, T{0});
        std::fill(s + seen.to, s + tile, T{0});
        std::fill(ds, ds + seen.from, T{0});
        std::fill(ds + seen.to, ds + tile, T{0});
    }
}

// Steps 2. and 4. for a problem with modifiers: the scaled scores modified and masked
// (kernels/attention.hpp's score_modifiers), P = exp(modified - lse) where seen, the gradient of
// the modified scores P (dP - delta) times the modifier's slope (handed to a learned modifier),
// then dS = that times the scale.
template <class T>
void modified_weights(const attention_problem<T>& p, const packed_head<T>& m, std::size_t i0, std::size_t j0,
                      bool diagonal, bool kept_whole) {
    constexpr std::size_t N = lanes<T>;
    const auto& mods = p.modifiers;
    const std::size_t rows = std::min(tile, p.tq() - i0), cols = std::min(tile, p.tk() - j0);
    for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t j = 0; j < tile; ++j) m.scores[r * tile + j] *= p.scale;
    const score_tile<T> scores{m.scores, tile, rows, cols, m.matrix, i0, j0, !kept_whole};
    if (mods.derive) mods.derive(mods.context, scores, m.slopes);
    else mods.apply(mods.context, scores);
    weights_and_score_gradients(p, m, i0, j0, diagonal, false, T{1}, T{1});
    if (mods.derive)
        for (std::size_t r = 0; r < rows; ++r) {
            T* ds = m.dscores + r * tile;
            const T* slope = m.slopes + r * tile;
            for (std::size_t j = 0; j < tile; j += N)
                (vec<T>::load_aligned(ds + j) * vec<T>::load_aligned(slope + j)).store_aligned(ds + j);
        }
    // Now the gradient with respect to the score the modifier was given, which a learned bias
    // added to it shares.
    if (mods.learn) mods.learn(mods.context, {m.dscores, tile, rows, cols, m.matrix, i0, j0});
    const vec<T> scale(p.scale);
    for (std::size_t r = 0; r < rows; ++r) {
        T* ds = m.dscores + r * tile;
        for (std::size_t j = 0; j < tile; j += N) (vec<T>::load_aligned(ds + j) * scale).store_aligned(ds + j);
    }
}

// One pair of tiles, queries i0 against keys j0: 1. S = q k^T, 2. P = exp(scale S - lse) where
// seen, 3. dP = dout v^T, 4. dS = scale P (dP - delta), 5. dv += P^T dout, dk += dS^T q,
// dq += dS k. (The scale of dq and dk is folded into dS.)
template <class T>
void backward_pair(const attention_problem<T>& p, const packed_head<T>& m, std::size_t i0, std::size_t j0,
                   bool kept_whole) {
    const std::size_t padded = m.padded;
    const T* queries = m.queries + i0 * padded;
    const T* dout = m.dout + i0 * padded;

    // On the diagonal a causal query sees no key after it: the products leave those entries out.
    const bool diagonal = p.sees.causal && i0 == j0;
    const auto part = [diagonal](causal_part wanted) { return diagonal ? wanted : causal_part::all; };

    // 1. and 3.
    multiply(tile, tile, padded, queries, signed_size(padded), 1, m.keys_t + j0 * padded, tile, m.scores, tile, false,
             part(causal_part::columns_to_row));
    multiply(tile, tile, padded, dout, signed_size(padded), 1, m.values_t + j0 * padded, tile, m.dscores, tile, false,
             part(causal_part::columns_to_row));

    // 2. and 4.
    if (p.modifiers.apply) modified_weights(p, m, i0, j0, diagonal, kept_whole);
    else weights_and_score_gradients(p, m, i0, j0, diagonal, sees_all(p, i0, j0), p.scale, p.scale);

    // 5.
    multiply(tile, padded, tile, m.scores, 1, signed_size(tile), dout, padded, m.dv + j0 * padded, padded, true,
             part(causal_part::depth_from_row));
    multiply(tile, padded, tile, m.dscores, 1, signed_size(tile), queries, padded, m.dk + j0 * padded, padded, true,
             part(causal_part::depth_from_row));
    multiply(tile, padded, tile, m.dscores, signed_size(tile), 1, m.keys + j0 * padded, padded, m.dq + i0 * padded, padded,
             true, part(causal_part::depth_to_row));
}

// The batch dims along which k and v broadcast: a group of matrices that share keys and values
// (the query heads of one key/value head). The matrices of a group are one task.
struct task_split {
    std::array<bool, max_attention_batch_rank> shared{};
    std::size_t tasks = 1, members = 1;
};

// The multi-index of member `member` of task `task`, each counted row-major over its dims.
template <class T>
batch_index index_of(const attention_problem<T>& p, const task_split& split, std::size_t task, std::size_t member) {
    batch_index index{};
    for (std::size_t i = p.batch_rank; i-- > 0;) {
        std::size_t& n = split.shared[i] ? member : task;
        index[i] = n % p.batch_extents[i];
        n /= p.batch_extents[i];
    }
    return index;
}

// Task `task`: 1. its shared k, k^T and v^T packed once, 2. per matrix of the group, its q,
// dout, lse and rowsum(dout * out) packed, every pair of tiles where a query sees a key, and its
// dq added in, 3. dk and dv, summed over the group, added in.
template <class T>
void backward_task(const attention_problem<T>& p, const T* dout, const attention_gradients<T>& grads,
                   const task_split& split, std::size_t task) {
    constexpr std::size_t N = lanes<T>;
    const std::size_t padded = round_up(p.d(), N);
    const std::size_t rows = round_up(p.tq(), tile);
    const std::size_t rank = p.batch_rank;
    scratch<T>& s = thread_scratch<T>();

    // 1.
    const batch_index first = index_of(p, split, task, 0);
    const matrix_rows<const T> k = matrix_of(p.k, first, rank);
    T* keys = sized(s.keys, rows * padded);
    T* keys_t = sized(s.keys_t, rows * padded);
    T* values_t = sized(s.values_t, rows * padded);
    pack_rows(p, k, 0, rows, padded, keys);
    pack_tiles_transposed(p, k, 0, rows, padded, keys_t);
    pack_tiles_transposed(p, matrix_of(p.v, first, rank), 0, rows, padded, values_t);
    T* queries = sized(s.queries, rows * padded);
    T* dout_rows = sized(s.dout, rows * padded);
    T* row_lse = sized(s.row_lse, rows);
    T* row_delta = sized(s.row_delta, rows);
    T* dq = sized(s.dq, rows * padded);
    T* dk = sized(s.dk, rows * padded);
    T* dv = sized(s.dv, rows * padded);
    std::fill(dk, dk + rows * padded, T{0});
    std::fill(dv, dv + rows * padded, T{0});
    packed_head<T> m{padded, keys, keys_t, values_t, queries, dout_rows, row_lse, row_delta, dq, dk, dv,
                     sized(s.scores, tile * tile), sized(s.dscores, tile * tile),
                     p.modifiers.derive ? sized(s.slopes, tile * tile) : nullptr, 0};

    // 2.
    for (std::size_t member = 0; member < split.members; ++member) {
        const batch_index index = index_of(p, split, task, member);
        std::size_t matrix = 0;  // row-major over the batch dims, as lse is laid out
        for (std::size_t i = 0; i < rank; ++i) matrix = matrix * p.batch_extents[i] + index[i];
        m.matrix = matrix;
        const matrix_rows<T> out = matrix_of(p.out, index, rank);
        pack_rows(p, matrix_of(p.q, index, rank), 0, rows, padded, queries);
        pack_rows(p, matrix_rows<const T>{dout + (out.data - p.out.data), out.row, out.column}, 0, rows, padded,
                  dout_rows);
        std::fill(row_lse, row_lse + rows, T{0});
        std::fill(row_delta, row_delta + rows, T{0});
        for (std::size_t t = 0; t < p.tq(); ++t) {
            row_lse[t] = p.lse[matrix * p.tq() + t];
            const T* dout_row = dout_rows + t * padded;
            T sum = 0;
            for (std::size_t c = 0; c < p.d(); ++c) sum += dout_row[c] * out(t, c);
            row_delta[t] = sum;
        }
        std::fill(dq, dq + rows * padded, T{0});
        // Key tiles outer, so that a key tile's dk and dv stay in cache while the query tiles
        // that see it stream past; causal query tiles wholly before it (its future) or wholly
        // after its window are never visited.
        for (std::size_t j0 = 0; j0 < rows; j0 += tile)
            for (std::size_t i0 = p.sees.causal ? j0 : 0; i0 < rows && (!p.sees.causal || i0 < j0 + tile + reach(p));
                 i0 += tile)
                if (sees_any(p, i0, j0))
                    if (const keys_kept kept = kept_by_mask(p, matrix, i0, j0); kept != keys_kept::none)
                        backward_pair(p, m, i0, j0, kept == keys_kept::all);
        add_rows(p, dq, padded, matrix_of(grads.dq, index, rank));
    }

    // 3.
    add_rows(p, dk, padded, matrix_of(grads.dk, first, rank));
    add_rows(p, dv, padded, matrix_of(grads.dv, first, rank));
}

// What the backward covers: the forward's causal attention of queries at the keys' own
// positions, or the attention of a mask that replaces causality (without a window); k and v
// broadcast alike, q and out nowhere.
template <class T>
bool covers(const attention_problem<T>& p) {
    if (p.sees.diagonal != 0 || p.tq() != p.tk() || p.d() != p.dv() || !p.lse) return false;
    // Modifiers: as many as the forward ran, with the backward's calls (a score modifier's
    // derivative); only a mask of theirs replaces causality.
    if (!p.sees.causal && (!p.modifiers.apply || p.sees.window)) return false;
    if (p.modifiers.apply && p.modifiers.modifies_scores && !p.modifiers.derive) return false;
    if (!p.modifiers.apply && p.modifiers.kept) return false;
    for (std::size_t i = 0; i < p.batch_rank; ++i) {
        const std::size_t n = p.batch_extents[i];
        const bool k_shared = n > 1 && p.k.batch[i] == 0, v_shared = n > 1 && p.v.batch[i] == 0;
        if (k_shared != v_shared || (n > 1 && (p.q.batch[i] == 0 || p.out.batch[i] == 0))) return false;
    }
    return true;
}

template <class T>
task_split split_of(const attention_problem<T>& p) {
    if (!covers(p))
        throw std::invalid_argument("shaped::kernels::attention_backward: causal attention of T queries over their own "
                                    "T keys (or a mask in its place), with the forward's lse; k and v broadcast alike, q "
                                    "and out not at all");
    task_split split;
    for (std::size_t i = 0; i < p.batch_rank; ++i) {
        const std::size_t n = p.batch_extents[i];
        const bool k_shared = n > 1 && p.k.batch[i] == 0;
        split.shared[i] = k_shared;
        (k_shared ? split.members : split.tasks) *= n;
    }
    return split;
}

template <class T>
void backward_impl(const attention_problem<T>& p, const T* dout, const attention_gradients<T>& grads) {
    const task_split split = split_of(p);
    if (split.tasks * split.members == 0 || p.tq() == 0 || p.d() == 0) return;
    // A task per group: it alone writes its dk and dv, and its members' dq.
    const double work = static_cast<double>(split.tasks * split.members) * visible_pairs(p) *
                        static_cast<double>(5 * p.d());
    auto task = [&](std::size_t t) { backward_task(p, dout, grads, split, t); };
    if (work < parallel_work || thread_count() == 1) {
        for (std::size_t t = 0; t < split.tasks; ++t) task(t);
    } else {
        parallel_for(split.tasks, task);
    }
}

}  // namespace

void attention_backward(const attention_problem<float>& p, const float* dout, const attention_gradients<float>& grads) {
    backward_impl(p, dout, grads);
}
void attention_backward(const attention_problem<double>& p, const double* dout,
                        const attention_gradients<double>& grads) {
    backward_impl(p, dout, grads);
}
bool attention_backward_covers(const attention_problem<float>& p) { return covers(p); }
bool attention_backward_covers(const attention_problem<double>& p) { return covers(p); }

}  // namespace shaped::kernels
