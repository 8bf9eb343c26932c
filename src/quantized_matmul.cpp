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

// The 512-bit integer kernels: VNNI's vpdpbusd, and VBMI's byte permutes (Ice Lake and Zen 4 on).
#if defined(SHAPED_QUANTIZED_AVX512) && defined(__AVX512VNNI__) && defined(__AVX512VBMI__)
#define SHAPED_QUANTIZED_VNNI512 1
// Q4_0 rows against x quantized to Q8_0, four blocks at a time in 512-bit registers. The four
// blocks' 64 bytes of nibbles come in by four loads, their scales by one byte permute (VBMI's
// vpermb); the low nibbles (elements 0..15 of each block) and the high ones
// (16..31) each take a vpdpbusd against the activation bytes laid out to match, so block k's
// products land in int32 lanes 4k..4k+3. The nibbles are q + 8: the accumulator starts at -8 times
// each block's sum of activation bytes. The activation is laid out so once a row of x: a group of
// four weight blocks costs five loads, a permute, its unpacking, two vpdpbusd, and three
// multiplies, with nothing scalar. Two accumulators, as one's multiply-adds would wait on each
// other.
struct activation_groups {
    struct group {
        __m512i low, high;  // bytes: elements 0..15 (then 16..31) of each of the four blocks
        __m512i start;      // lane 4k: -8 sum(q) of block k
        __m512 scales;      // lanes 4k..4k+3: block k's scale
    };
    std::vector<block_q8_0> blocks;  // x in Q8_0, for the last blocks when four do not divide them
    std::vector<group> groups;
};

void quantize_activation(const float* x, activation_groups& a, std::size_t n) {
    const std::size_t blocks = n / 32;
    std::vector<block_q8_0>& quantized = a.blocks;
    quantized.resize(blocks);
    quantize_activation(x, quantized.data(), n);
    a.groups.resize(blocks / 4);
    for (std::size_t g = 0; g < blocks / 4; ++g) {
        alignas(64) std::int8_t low[64], high[64];
        alignas(64) std::int32_t start[16] = {};
        alignas(64) float scales[16];
        for (int k = 0; k < 4; ++k) {
            const block_q8_0& q = quantized[4 * g + k];
            std::memcpy(low + 16 * k, q.qs, 16);
            std::memcpy(high + 16 * k, q.qs + 16, 16);
            start[4 * k] = -8 * std::accumulate(q.qs, q.qs + 32, std::int32_t{0});
            std::fill_n(scales + 4 * k, 4, half_value(q.d));
        }
        a.groups[g] = {_mm512_load_si512(low), _mm512_load_si512(high), _mm512_load_si512(start), _mm512_load_ps(scales)};
    }
}

// The byte permute that spreads a group's four scales (the two bytes at 18k, block k's) to
// 16-bit lanes 4k..4k+3.
__m512i scale_spread() {
    alignas(64) std::uint8_t d[64] = {};
    for (int lane = 0; lane < 16; ++lane) {
        d[2 * lane] = static_cast<std::uint8_t>(18 * (lane / 4));
        d[2 * lane + 1] = static_cast<std::uint8_t>(18 * (lane / 4) + 1);
    }
    return _mm512_load_si512(d);
}

inline __m512 group_product(const block_q4_0* blocks, const activation_groups::group& a, __m512i spread, __m512 acc) {
    // The nibbles by 16-byte loads: two 64-byte ones (and vpermt2b) streamed from memory at half
    // the speed (11 against 33 GB/s), though they ran as fast from the caches.
    __m512i packed = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blocks[0].qs)));
    packed = _mm512_inserti32x4(packed, _mm_loadu_si128(reinterpret_cast<const __m128i*>(blocks[1].qs)), 1);
    packed = _mm512_inserti32x4(packed, _mm_loadu_si128(reinterpret_cast<const __m128i*>(blocks[2].qs)), 2);
    packed = _mm512_inserti32x4(packed, _mm_loadu_si128(reinterpret_cast<const __m128i*>(blocks[3].qs)), 3);
    // The four scales, at bytes 0, 18, 36 and 54, by one permute of the group's first 64 bytes.
    const __m512i first = _mm512_loadu_si512(reinterpret_cast<const char*>(blocks));
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    __m512i dots = _mm512_dpbusd_epi32(a.start, _mm512_and_si512(packed, low4), a.low);
    dots = _mm512_dpbusd_epi32(dots, _mm512_and_si512(_mm512_srli_epi16(packed, 4), low4), a.high);
    const __m512 weight_scales = _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi8(spread, first)));
    return _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(dots), a.scales), weight_scales, acc);
}

void q4_0_vnni_rows(const quantized_weight& w, const float* x, std::size_t n, float* y) {
    const std::size_t blocks = w.cols / 32, grouped = blocks / 4 * 4;
    const __m512i spread = scale_spread();
    activation_groups a;
    const auto* all = static_cast<const block_q4_0*>(w.blocks);
    for (std::size_t i = 0; i < n; ++i) {
        quantize_activation(x + i * w.cols, a, w.cols);
        float* out = y + i * w.rows;
        for (std::size_t r = 0; r < w.rows; ++r) {
            const block_q4_0* row = all + r * blocks;
            __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
            std::size_t g = 0;
            for (; g + 2 <= a.groups.size(); g += 2) {
                acc0 = group_product(row + 4 * g, a.groups[g], spread, acc0);
                acc1 = group_product(row + 4 * g + 4, a.groups[g + 1], spread, acc1);
            }
            if (g < a.groups.size()) acc0 = group_product(row + 4 * g, a.groups[g], spread, acc0);
            float sum = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
            if (grouped < blocks) sum += dot_row(row + grouped, a.blocks.data() + grouped, blocks - grouped);
            out[r] = sum;
        }
    }
}
#endif

// x as ggml's CPU backend quantizes an activation for a K-quant product (quantize_row_q8_K_ref):
// per 256 values one float scale, 1 / (-127 / m) for m the value of largest magnitude, each value
// rounded to nearest (ties to even) and capped at 127. Beside them, 32 times each 16 bytes' sum:
// what Q6_K's offset of 32 takes off a sub-block's products.
struct activation_q8_K {
    std::vector<std::int8_t> bytes;
    std::vector<float> scales;          // one a super-block
    std::vector<std::int32_t> offsets;  // 32 sum(q), one a 16
};

void quantize_activation(const float* x, activation_q8_K& y, std::size_t n) {
    y.bytes.resize(n);
    y.scales.resize(n / qk_k);
    y.offsets.resize(n / 16);
    for (std::size_t b = 0; b < n / qk_k; ++b) {
        const float* xb = x + b * qk_k;
        std::int8_t* q = y.bytes.data() + b * qk_k;
        float max = 0, amax = 0;
        for (std::size_t i = 0; i < qk_k; ++i)
            if (std::abs(xb[i]) > amax) amax = std::abs(xb[i]), max = xb[i];
        const float iscale = amax != 0.0f ? -127.0f / max : 0.0f;
        for (std::size_t i = 0; i < qk_k; ++i)
            q[i] = static_cast<std::int8_t>(std::min(127.0f, std::nearbyint(iscale * xb[i])));
        y.scales[b] = amax != 0.0f ? 1.0f / iscale : 0.0f;
        for (std::size_t j = 0; j < qk_k / 16; ++j)
            y.offsets[b * 16 + j] = 32 * std::accumulate(q + 16 * j, q + 16 * j + 16, std::int32_t{0});
    }
}

#ifdef SHAPED_QUANTIZED_VNNI512
// Q6_K rows against x quantized to Q8_K, 64 weights a vpdpbusd: the 6-bit values 0..63 multiply
// the activation's signed bytes, each int32 lane the sum of 4 neighbours, so a sub-block of 16 is
// 4 lanes and its scale multiplies them; the offset of 32 comes off as its scale times 32 sum(q).
// Each lane's sum over a super-block is exact in int32 (below 2^25), then one float multiply-add.
void q6_K_vnni_rows(const quantized_weight& w, const float* x, std::size_t n, float* y) {
    const std::size_t blocks = w.cols / qk_k;
    activation_q8_K a;
    const auto* all = static_cast<const block_q6_K*>(w.blocks);
    const __m256i low4 = _mm256_set1_epi8(0x0F), low2 = _mm256_set1_epi8(0x03);
    // Lanes 4j..4j+3 of the k-th product take the scale of sub-block 4k + j.
    const __m512i spread[4] = {
        _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0),
        _mm512_set_epi32(7, 7, 7, 7, 6, 6, 6, 6, 5, 5, 5, 5, 4, 4, 4, 4),
        _mm512_set_epi32(11, 11, 11, 11, 10, 10, 10, 10, 9, 9, 9, 9, 8, 8, 8, 8),
        _mm512_set_epi32(15, 15, 15, 15, 14, 14, 14, 14, 13, 13, 13, 13, 12, 12, 12, 12)};
    for (std::size_t i = 0; i < n; ++i) {
        quantize_activation(x + i * w.cols, a, w.cols);
        float* out = y + i * w.rows;
        for (std::size_t r = 0; r < w.rows; ++r) {
            const block_q6_K* row = all + r * blocks;
            __m512 acc = _mm512_setzero_ps();
            for (std::size_t b = 0; b < blocks; ++b) {
                const block_q6_K& blk = row[b];
                const std::int8_t* xq = a.bytes.data() + b * qk_k;
                const __m512i scales = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales)));
                __m512i sum = _mm512_sub_epi32(
                    _mm512_setzero_si512(),
                    _mm512_mullo_epi32(scales, _mm512_loadu_si512(a.offsets.data() + b * 16)));
                for (int half = 0; half < 2; ++half) {
                    // ggml's order (dequantize_row_q6_K): of 128 values, ql's 64 bytes give the low
                    // nibbles of 0..63 and the high ones of 64..127; qh's 32 bytes two bits each.
                    const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.ql + 64 * half));
                    const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.ql + 64 * half + 32));
                    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qh + 32 * half));
                    const auto six = [&](__m256i nibbles, int shift) {
                        return _mm256_or_si256(nibbles, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, shift), low2), 4));
                    };
                    const __m256i q0 = six(_mm256_and_si256(ql0, low4), 0);
                    const __m256i q1 = six(_mm256_and_si256(ql1, low4), 2);
                    const __m256i q2 = six(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4), 4);
                    const __m256i q3 = six(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4), 6);
                    const __m512i first = _mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1);
                    const __m512i second = _mm512_inserti64x4(_mm512_castsi256_si512(q2), q3, 1);
                    const __m512i dot0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), first, _mm512_loadu_si512(xq + 128 * half));
                    const __m512i dot1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), second, _mm512_loadu_si512(xq + 128 * half + 64));
                    sum = _mm512_add_epi32(sum, _mm512_mullo_epi32(dot0, _mm512_permutexvar_epi32(spread[2 * half], scales)));
                    sum = _mm512_add_epi32(sum, _mm512_mullo_epi32(dot1, _mm512_permutexvar_epi32(spread[2 * half + 1], scales)));
                }
                acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_set1_ps(half_value(blk.d) * a.scales[b]), acc);
            }
            out[r] = _mm512_reduce_add_ps(acc);
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
        if constexpr (std::is_same_v<F, shaped::q6_K>) return q6_K_vnni_rows(w, x, n, y);
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
    // Q6_K's 6-bit values and sub-block scales, 3x.
    if (w.type == ggml_type::q4_0 || w.type == ggml_type::q6_K) return quantized_matmul_integer(w, x, n, y);
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
