// x @ W^T with W in a storage format: the kernels of kernels/quantized_matmul.hpp.
//
// Decoding reads every weight once a token, so its speed is the bytes a weight: the Q8_0 and
// Q4_0 rows are read as they lie and multiplied in integers against x quantized to Q8_0 (ggml's
// scheme: one scale a block of 32 on each side, the int8 products summed exactly in int32, one
// float multiply-add a block). With AVX-512 VNNI a block's 32 products and their sum are one
// vpdpbusd; with AVX2 they take maddubs and madd, as in ggml. vpdpbusd multiplies unsigned by
// signed bytes, so the weight's sign moves onto the activation first (|w| * sign(w) a).

#include <shaped/kernels/blas.hpp>
#include <shaped/kernels/quantized_matmul.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>
#define SHAPED_QUANTIZED_AVX2 1
#endif
#if defined(SHAPED_QUANTIZED_AVX2) && defined(__AVX512VNNI__) && defined(__AVX512VL__)
#define SHAPED_QUANTIZED_VNNI 1
#endif
#if defined(SHAPED_QUANTIZED_AVX2) && defined(__AVX512F__)
#define SHAPED_QUANTIZED_AVX512 1
#endif

namespace shaped::kernels {

namespace {

// f<F>() for the format whose ggml id is `type`.
template <class F>
auto with_format(ggml_type type, F&& f) {
    switch (type) {
    case ggml_type::f32: return f.template operator()<shaped::f32>();
    case ggml_type::f16: return f.template operator()<shaped::f16>();
    case ggml_type::bf16: return f.template operator()<shaped::bf16>();
    case ggml_type::q8_0: return f.template operator()<shaped::q8_0>();
    case ggml_type::q4_0: return f.template operator()<shaped::q4_0>();
    case ggml_type::q4_K: return f.template operator()<shaped::q4_K>();
    case ggml_type::q6_K: return f.template operator()<shaped::q6_K>();
    default: break;
    }
    throw std::invalid_argument("shaped::kernels::quantized_matmul: ggml type " +
                                std::to_string(static_cast<std::uint32_t>(type)) + " is none of shaped's formats");
}

template <class F>
std::span<const typename F::block_type> row_blocks(const quantized_weight& w, std::size_t r) {
    const std::size_t per_row = w.cols / F::block_width;
    return {static_cast<const typename F::block_type*>(w.blocks) + r * per_row, per_row};
}

// Row r of W as floats.
template <class F>
void dequantize_weight_row(const quantized_weight& w, std::size_t r, float* out) {
    F::dequantize_row(row_blocks<F>(w, r), std::span<float>(out, w.cols));
}

float dot_floats(const float* a, const float* b, std::size_t n) {
    std::size_t i = 0;
    float sum = 0;
#ifdef SHAPED_QUANTIZED_AVX2
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    for (; i + 16 <= n; i += 16) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
    }
    const __m256 acc = _mm256_add_ps(acc0, acc1);
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    sum = _mm_cvtss_f32(s);
#endif
    for (; i < n; ++i) sum += a[i] * b[i];
    return sum;
}

#ifdef SHAPED_QUANTIZED_AVX2
float horizontal_sum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// The 32 products of signed weights w and signed activations a, summed in 8 int32 lanes, as
// floats. |w| is at most 128 as an unsigned byte, and a from our quantizer is in [-127, 127], so
// sign(w) a never overflows.
__m256 block_products(__m256i w, __m256i a) {
    const __m256i magnitude = _mm256_sign_epi8(w, w);
    const __m256i signed_a = _mm256_sign_epi8(a, w);
#ifdef SHAPED_QUANTIZED_VNNI
    const __m256i sums = _mm256_dpbusd_epi32(_mm256_setzero_si256(), magnitude, signed_a);
#else
    const __m256i pairs = _mm256_maddubs_epi16(magnitude, signed_a);
    const __m256i sums = _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
#endif
    return _mm256_cvtepi32_ps(sums);
}

float half_value(half h) { return _cvtsh_ss(h.bits); }

// A block's 32 weights as signed bytes, in element order: Q8_0's as stored; Q4_0's q - 8, byte
// j's low nibble element j, its high nibble element j + 16.
__m256i signed_values(const block_q8_0& b) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs)); }
__m256i signed_values(const block_q4_0& b) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
    const __m128i low = _mm_and_si128(bytes, _mm_set1_epi8(0x0F));
    const __m128i high = _mm_and_si128(_mm_srli_epi16(bytes, 4), _mm_set1_epi8(0x0F));
    return _mm256_sub_epi8(_mm256_set_m128i(high, low), _mm256_set1_epi8(8));
}
#else
float half_value(half h) { return half_to_float(h); }
#endif

// Weight i of a block as a signed number, for the scalar way.
int signed_value(const block_q8_0& b, int i) { return b.qs[i]; }
int signed_value(const block_q4_0& b, int i) { return (i < 16 ? b.qs[i] & 0x0F : b.qs[i - 16] >> 4) - 8; }

// One weight row of Q8_0 or Q4_0 blocks against an activation row quantized to Q8_0.
template <class Block>
float dot_row(const Block* w, const block_q8_0* a, std::size_t blocks) {
#ifdef SHAPED_QUANTIZED_AVX2
    // acc plus block b's products, scaled.
    const auto add_block = [&](__m256 acc, std::size_t b) {
        return _mm256_fmadd_ps(block_products(signed_values(w[b]), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].qs))),
                               _mm256_set1_ps(half_value(w[b].d) * half_value(a[b].d)), acc);
    };
    // Two sums, so that consecutive blocks do not wait on one another's addition.
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    std::size_t b = 0;
    for (; b + 2 <= blocks; b += 2) {
        acc0 = add_block(acc0, b);
        acc1 = add_block(acc1, b + 1);
    }
    if (b < blocks) acc0 = add_block(acc0, b);
    return horizontal_sum(_mm256_add_ps(acc0, acc1));
#else
    float sum = 0;
    for (std::size_t b = 0; b < blocks; ++b) {
        std::int32_t s = 0;
        for (int i = 0; i < 32; ++i) s += signed_value(w[b], i) * std::int32_t{a[b].qs[i]};
        sum += static_cast<float>(s) * half_value(w[b].d) * half_value(a[b].d);
    }
    return sum;
#endif
}

#ifdef SHAPED_QUANTIZED_AVX512
// A block's 32 weights as floats, unscaled (q, or q - 8 for Q4_0), in two vectors of 16.
struct unscaled_block {
    __m512 v[2];
};
inline unscaled_block unscaled(const block_q8_0& b) {
    const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
    const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16));
    return {{_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(lo)), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(hi))}};
}
inline unscaled_block unscaled(const block_q4_0& b) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
    const __m128i eight = _mm_set1_epi8(8);
    const __m128i lo = _mm_sub_epi8(_mm_and_si128(bytes, _mm_set1_epi8(0x0F)), eight);
    const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(bytes, 4), _mm_set1_epi8(0x0F)), eight);
    return {{_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(lo)), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(hi))}};
}

// Few rows, the blocks dequantized in registers against float x: each block's 32 products
// summed unscaled, then scaled once. (Reading four weight rows at a time, to share x's loads,
// measured no faster: x is in L1.)
template <class Block>
void register_rows(const quantized_weight& w, const float* x, std::size_t n, float* y) {
    const std::size_t blocks = w.cols / 32;
    const auto* all = static_cast<const Block*>(w.blocks);
    for (std::size_t i = 0; i < n; ++i) {
        const float* xi = x + i * w.cols;
        for (std::size_t r = 0; r < w.rows; ++r) {
            const Block* row = all + r * blocks;
            __m512 acc = _mm512_setzero_ps();
            for (std::size_t b = 0; b < blocks; ++b) {
                const unscaled_block q = unscaled(row[b]);
                const __m512 sum =
                    _mm512_fmadd_ps(q.v[1], _mm512_loadu_ps(xi + b * 32 + 16), _mm512_mul_ps(q.v[0], _mm512_loadu_ps(xi + b * 32)));
                acc = _mm512_fmadd_ps(sum, _mm512_set1_ps(half_value(row[b].d)), acc);
            }
            y[i * w.rows + r] = _mm512_reduce_add_ps(acc);
        }
    }
}
// 16 signed bytes times 16 floats of x, as floats.
inline __m512 products16(__m128i q, const float* x) {
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), _mm512_loadu_ps(x));
}

// A Q6_K super-block against its 256 floats of x: each 16 elements share a scale, so the
// products of 16 are scaled once. The 6-bit values are ql's nibble and two bits of qh, less 32,
// in ggml's order (dequantize_row_q6_K): per half of 128, ql 64 bytes, qh 32, scales 8.
inline __m512 dot_block(const block_q6_K& b, const float* x, __m512 acc) {
    const float d = half_value(b.d);
    const __m128i low4 = _mm_set1_epi8(0x0F), low2 = _mm_set1_epi8(0x03), bias = _mm_set1_epi8(32);
    for (int half = 0; half < 2; ++half) {
        const std::uint8_t* ql = b.ql + 64 * half;
        const std::uint8_t* qh = b.qh + 32 * half;
        const std::int8_t* sc = b.scales + 8 * half;
        const float* xh = x + 128 * half;
        for (int l = 0; l < 32; l += 16) {
            const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(ql + l));
            const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(ql + 32 + l));
            const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qh + l));
            const auto six = [&](__m128i nibble, int shift) {
                const __m128i high = _mm_and_si128(_mm_srli_epi16(h, shift), low2);
                return _mm_sub_epi8(_mm_or_si128(nibble, _mm_slli_epi16(high, 4)), bias);
            };
            const __m128i q1 = six(_mm_and_si128(a, low4), 0);
            const __m128i q2 = six(_mm_and_si128(c, low4), 2);
            const __m128i q3 = six(_mm_and_si128(_mm_srli_epi16(a, 4), low4), 4);
            const __m128i q4 = six(_mm_and_si128(_mm_srli_epi16(c, 4), low4), 6);
            const int is = l / 16;
            acc = _mm512_fmadd_ps(products16(q1, xh + l), _mm512_set1_ps(d * static_cast<float>(sc[is + 0])), acc);
            acc = _mm512_fmadd_ps(products16(q2, xh + l + 32), _mm512_set1_ps(d * static_cast<float>(sc[is + 2])), acc);
            acc = _mm512_fmadd_ps(products16(q3, xh + l + 64), _mm512_set1_ps(d * static_cast<float>(sc[is + 4])), acc);
            acc = _mm512_fmadd_ps(products16(q4, xh + l + 96), _mm512_set1_ps(d * static_cast<float>(sc[is + 6])), acc);
        }
    }
    return acc;
}

// A Q4_K super-block against its 256 floats of x: 8 sub-blocks of 32, each d * scale * q - dmin
// * min, q a nibble (the low ones of 32 bytes, then their high ones, per 64 elements). The mins
// multiply x's sums of 32, which the row's caller gives (sums[j] for sub-block j).
inline __m512 dot_block(const block_q4_K& b, const float* x, const float* sums, __m512 acc, float& offset) {
    const float d = half_value(b.d), dmin = half_value(b.dmin);
    const __m128i low4 = _mm_set1_epi8(0x0F);
    for (int j = 0; j < 4; ++j) {
        std::uint8_t sc1, m1, sc2, m2;
        detail::get_scale_min_k4(2 * j, b.scales, &sc1, &m1);
        detail::get_scale_min_k4(2 * j + 1, b.scales, &sc2, &m2);
        const std::uint8_t* q = b.qs + 32 * j;
        const float* xj = x + 64 * j;
        const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
        const __m128i q16 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 16));
        const __m512 low = _mm512_add_ps(products16(_mm_and_si128(q0, low4), xj), products16(_mm_and_si128(q16, low4), xj + 16));
        const __m512 high = _mm512_add_ps(products16(_mm_and_si128(_mm_srli_epi16(q0, 4), low4), xj + 32),
                                          products16(_mm_and_si128(_mm_srli_epi16(q16, 4), low4), xj + 48));
        acc = _mm512_fmadd_ps(low, _mm512_set1_ps(d * static_cast<float>(sc1)), acc);
        acc = _mm512_fmadd_ps(high, _mm512_set1_ps(d * static_cast<float>(sc2)), acc);
        offset += dmin * (static_cast<float>(m1) * sums[2 * j] + static_cast<float>(m2) * sums[2 * j + 1]);
    }
    return acc;
}

// Few rows of K-quant weights, each super-block dequantized in registers against float x.
template <class Block>
void k_quant_register_rows(const quantized_weight& w, const float* x, std::size_t n, float* y) {
    const std::size_t blocks = w.cols / qk_k;
    const auto* all = static_cast<const Block*>(w.blocks);
    std::vector<float> sums(w.cols / 32);
    for (std::size_t i = 0; i < n; ++i) {
        const float* xi = x + i * w.cols;
        if constexpr (std::is_same_v<Block, block_q4_K>)
            for (std::size_t j = 0; j < sums.size(); ++j) sums[j] = std::accumulate(xi + 32 * j, xi + 32 * j + 32, 0.0f);
        for (std::size_t r = 0; r < w.rows; ++r) {
            const Block* row = all + r * blocks;
            __m512 acc = _mm512_setzero_ps();
            float offset = 0;
            for (std::size_t b = 0; b < blocks; ++b) {
                if constexpr (std::is_same_v<Block, block_q4_K>) acc = dot_block(row[b], xi + b * qk_k, sums.data() + 8 * b, acc, offset);
                else acc = dot_block(row[b], xi + b * qk_k, acc);
            }
            y[i * w.rows + r] = _mm512_reduce_add_ps(acc) - offset;
        }
    }
}
#endif

// x to Q8_0 as ggml's CPU backend quantizes an activation (quantize_row_q8_0 of ggml-cpu, not
// the reference quantizer the weights' files are written with): the scale 127 / max|x|, each
// value rounded to nearest, ties to even.
void quantize_activation(const float* x, block_q8_0* y, std::size_t n) {
    for (std::size_t b = 0; b < n / 32; ++b) {
        const float* xb = x + b * 32;
        float amax = 0;
        for (int i = 0; i < 32; ++i) amax = std::max(amax, std::abs(xb[i]));
        const float d = amax / 127.0f;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        y[b].d = float_to_half(d);
        for (int i = 0; i < 32; ++i) y[b].qs[i] = static_cast<std::int8_t>(std::nearbyint(xb[i] * id));
    }
}

#if defined(SHAPED_QUANTIZED_AVX512) && defined(__AVX512VNNI__)
#define SHAPED_QUANTIZED_VNNI512 1
// Q4_0 rows against x quantized to Q8_0, two blocks to a 512-bit vpdpbusd: the nibbles 0..15
// multiply the activation's signed bytes, and the 8 they stand above their value comes off once
// a block, as 8 times the block's sum of activation bytes. The activation is laid out for it: its
// bytes contiguous, each block's scale and 8 d sum(q) beside.
void q4_0_vnni_rows(const quantized_weight& w, const float* x, std::size_t n, float* y) {
    const std::size_t blocks = w.cols / 32;
    std::vector<block_q8_0> quantized(blocks);
    std::vector<std::int8_t> bytes(w.cols);
    std::vector<float> scales(blocks), offsets(blocks);
    const auto* all = static_cast<const block_q4_0*>(w.blocks);
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    for (std::size_t i = 0; i < n; ++i) {
        quantize_activation(x + i * w.cols, quantized.data(), w.cols);
        for (std::size_t b = 0; b < blocks; ++b) {
            std::int32_t sum = 0;
            for (int k = 0; k < 32; ++k) sum += bytes[b * 32 + k] = quantized[b].qs[k];
            scales[b] = half_value(quantized[b].d);
            offsets[b] = 8.0f * scales[b] * static_cast<float>(sum);
        }
        float* out = y + i * w.rows;
        for (std::size_t r = 0; r < w.rows; ++r) {
            const block_q4_0* row = all + r * blocks;
            __m512 acc = _mm512_setzero_ps();
            float offset = 0;
            std::size_t b = 0;
            for (; b + 2 <= blocks; b += 2) {
                const __m256i packed = _mm256_set_m128i(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row[b + 1].qs)),
                                                        _mm_loadu_si128(reinterpret_cast<const __m128i*>(row[b].qs)));
                const __m256i lo = _mm256_and_si256(packed, low4);
                const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low4);
                // [lo b, lo b+1, hi b, hi b+1] in 128-bit lanes, to [lo b, hi b, lo b+1, hi b+1]: each
                // block's 32 elements in order, against its 32 activation bytes.
                const __m512i q = _mm512_shuffle_i64x2(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1),
                                                       _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1),
                                                       _MM_SHUFFLE(3, 1, 2, 0));
                const __m512i a = _mm512_loadu_si512(bytes.data() + b * 32);
                const __m512 dots = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), q, a));
                const float d0 = half_value(row[b].d), d1 = half_value(row[b + 1].d);
                const __m512 scale = _mm512_insertf32x8(_mm512_set1_ps(d0 * scales[b]), _mm256_set1_ps(d1 * scales[b + 1]), 1);
                acc = _mm512_fmadd_ps(dots, scale, acc);
                offset += d0 * offsets[b] + d1 * offsets[b + 1];
            }
            float sum = _mm512_reduce_add_ps(acc);
            for (; b < blocks; ++b) {
                std::int32_t dot = 0;
                for (int k = 0; k < 16; ++k)
                    dot += std::int32_t{row[b].qs[k] & 0x0F} * bytes[b * 32 + k] + std::int32_t{row[b].qs[k] >> 4} * bytes[b * 32 + 16 + k];
                const float d = half_value(row[b].d);
                sum += d * scales[b] * static_cast<float>(dot);
                offset += d * offsets[b];
            }
            out[r] = sum - offset;
        }
    }
}
#endif

// Few rows, integer dot products: each x row quantized once, then every weight row's blocks.
template <class F>
void integer_rows(const quantized_weight& w, const float* x, std::size_t n, float* y) {
    const std::size_t blocks = w.cols / 32;
    std::vector<block_q8_0> activation(blocks);
    for (std::size_t i = 0; i < n; ++i) {
        quantize_activation(x + i * w.cols, activation.data(), w.cols);
        float* out = y + i * w.rows;
        for (std::size_t r = 0; r < w.rows; ++r) out[r] = dot_row(row_blocks<F>(w, r).data(), activation.data(), blocks);
    }
}

// Few rows, float dot products, a weight row converted at a time into a buffer of one row.
template <class F>
void float_rows(const quantized_weight& w, const float* x, std::size_t n, float* y) {
    std::vector<float> row(w.cols);
    for (std::size_t r = 0; r < w.rows; ++r) {
        dequantize_weight_row<F>(w, r, row.data());
        for (std::size_t i = 0; i < n; ++i) y[i * w.rows + r] = dot_floats(row.data(), x + i * w.cols, w.cols);
    }
}

// F16 rows read as they lie: 8 halves at a time converted in registers.
void half_rows(const quantized_weight& w, const float* x, std::size_t n, float* y) {
#ifdef SHAPED_QUANTIZED_AVX2
    const auto* weights = static_cast<const half*>(w.blocks);
    for (std::size_t i = 0; i < n; ++i) {
        const float* xi = x + i * w.cols;
        for (std::size_t r = 0; r < w.rows; ++r) {
            const half* row = weights + r * w.cols;
            __m256 acc = _mm256_setzero_ps();
            std::size_t c = 0;
            for (; c + 8 <= w.cols; c += 8) {
                const __m256 v = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + c)));
                acc = _mm256_fmadd_ps(v, _mm256_loadu_ps(xi + c), acc);
            }
            float sum = horizontal_sum(acc);
            for (; c < w.cols; ++c) sum += half_value(row[c]) * xi[c];
            y[i * w.rows + r] = sum;
        }
    }
#else
    float_rows<shaped::f16>(w, x, n, y);
#endif
}

// The rows of W a GEMM tile holds: 64 rows of 4096 floats is 1 MiB, within L2.
constexpr std::size_t tile_rows = 64;

}  // namespace

void quantized_matmul_integer(const quantized_weight& w, const float* x, std::size_t n, float* y) {
    with_format(w.type, [&]<class F>() {
#ifdef SHAPED_QUANTIZED_VNNI512
        if constexpr (std::is_same_v<F, shaped::q4_0>) return q4_0_vnni_rows(w, x, n, y);
#endif
        if constexpr (std::is_same_v<F, shaped::q8_0> || std::is_same_v<F, shaped::q4_0>) integer_rows<F>(w, x, n, y);
        else if constexpr (std::is_same_v<F, shaped::f16>) half_rows(w, x, n, y);
        else float_rows<F>(w, x, n, y);
    });
}

void quantized_matmul_registers(const quantized_weight& w, const float* x, std::size_t n, float* y) {
    with_format(w.type, [&]<class F>() {
#ifdef SHAPED_QUANTIZED_AVX512
        if constexpr (std::is_same_v<F, shaped::q8_0> || std::is_same_v<F, shaped::q4_0>)
            return register_rows<typename F::block_type>(w, x, n, y);
        if constexpr (std::is_same_v<F, shaped::q4_K> || std::is_same_v<F, shaped::q6_K>)
            return k_quant_register_rows<typename F::block_type>(w, x, n, y);
#endif
        if constexpr (std::is_same_v<F, shaped::f16>) half_rows(w, x, n, y);
        else float_rows<F>(w, x, n, y);
    });
}

void quantized_matmul_rows(const quantized_weight& w, const float* x, std::size_t n, float* y) {
#ifdef SHAPED_QUANTIZED_AVX512
#ifdef SHAPED_QUANTIZED_VNNI512
    // Q4_0's nibbles take twice the float way's work to unpack: its integer way is 1.5-1.8x faster.
    if (w.type == ggml_type::q4_0) return quantized_matmul_integer(w, x, n, y);
#endif
    quantized_matmul_registers(w, x, n, y);
#else
    quantized_matmul_integer(w, x, n, y);
#endif
}

void quantized_matmul_tiles(const quantized_weight& w, const float* x, std::size_t n, float* y) {
    with_format(w.type, [&]<class F>() {
        std::vector<float> tile(std::min(tile_rows, w.rows) * w.cols);
        for (std::size_t first = 0; first < w.rows; first += tile_rows) {
            const std::size_t rows = std::min(tile_rows, w.rows - first);
            for (std::size_t r = 0; r < rows; ++r) dequantize_weight_row<F>(w, first + r, tile.data() + r * w.cols);
            // y[:, first:first+rows] = x @ tile^T
            blas::gemm(false, true, n, rows, w.cols, 1.0f, x, w.cols, tile.data(), w.cols, 0.0f, y + first, w.rows);
        }
    });
}

void quantized_matmul(const quantized_weight& w, const float* x, std::size_t n, float* y) {
    if (n == 0 || w.rows == 0) return;
    if (w.cols == 0) {
        std::fill_n(y, n * w.rows, 0.0f);
        return;
    }
    if (n >= quantized_gemm_rows) quantized_matmul_tiles(w, x, n, y);
    else quantized_matmul_rows(w, x, n, y);
}

void quantized_matmul_reference(const quantized_weight& w, const float* x, std::size_t n, float* y) {
    with_format(w.type, [&]<class F>() {
        std::vector<float> row(w.cols);
        for (std::size_t r = 0; r < w.rows; ++r) {
            dequantize_weight_row<F>(w, r, row.data());
            for (std::size_t i = 0; i < n; ++i) {
                double sum = 0;
                for (std::size_t c = 0; c < w.cols; ++c) sum += double{row[c]} * double{x[i * w.cols + c]};
                y[i * w.rows + r] = static_cast<float>(sum);
            }
        }
    });
}

}  // namespace shaped::kernels
