// The row conversions of tensor/quantized.hpp: ggml's reference quantizers (quantize_row_*_ref)
// and dequantizers (dequantize_row_*) of ggml-quants.c, the same operations in the same order,
// so that they give ggml's bytes and floats exactly.
//
// ggml-base, where ggml's are, is compiled without -march flags: on x86-64 it fuses no
// multiply-add. This library is compiled with -march=native, where GCC (and Clang) would fuse
// `d1 * q - m1` and the quantizers' sums into FMAs, which round once where ggml rounds twice.
// Contraction is off for this file.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include <shaped/tensor/quantized.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace shaped::detail {

void check_row_blocks(std::string_view operation, std::size_t elements, std::size_t block_width, std::size_t blocks) {
    if (elements % block_width != 0)
        throw_rule(operation, SHAPED_RULE_ROW_BLOCKS,
                   message({"a row of ", elements, " elements, blocks of ", block_width}));
    if (elements / block_width != blocks)
        throw_rule(operation, SHAPED_RULE_ROW_BLOCK_COUNT,
                   message({"a row of ", elements, " elements needs ", elements / block_width, " blocks of ",
                            block_width, ", given ", blocks}));
}

namespace {

constexpr float group_max_eps = 1e-15f;  // GROUP_MAX_EPS

// ggml's nearest_int: round to nearest, ties to even, by the float unit (exact for |x| < 2^22;
// beyond that, and for infinities, what ggml's bits give: a release build has no assert).
int nearest_int(float fval) {
    const float val = fval + 12582912.f;
    const auto i = std::bit_cast<std::int32_t>(val);
    return (i & 0x007fffff) - 0x00400000;
}

// make_qx_quants(n, nmax, x, L, rmse_type, qw = NULL): a symmetric scale for n values in
// [-nmax, nmax - 1], weighted by x^2 (rmse_type 1), searched over 19 trial scales.
float make_qx_quants(int n, int nmax, const float* x, std::int8_t* L, int rmse_type) {
    float max = 0;
    float amax = 0;
    for (int i = 0; i < n; ++i) {
        const float ax = std::fabs(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < group_max_eps) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.f;
    }
    float iscale = -nmax / max;
    if (rmse_type == 0) {
        for (int i = 0; i < n; ++i) {
            const int l = nearest_int(iscale * x[i]);
            L[i] = static_cast<std::int8_t>(nmax + std::max(-nmax, std::min(nmax - 1, l)));
        }
        return 1 / iscale;
    }
    bool return_early = false;
    if (rmse_type < 0) {
        rmse_type = -rmse_type;
        return_early = true;
    }
    const auto weight = [&](int i) -> float {
        return rmse_type == 1   ? x[i] * x[i]
               : rmse_type == 2 ? 1
               : rmse_type == 3 ? std::fabs(x[i])
                                : std::sqrt(std::fabs(x[i]));
    };
    float sumlx = 0;
    float suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = nearest_int(iscale * x[i]);
        l = std::max(-nmax, std::min(nmax - 1, l));
        L[i] = static_cast<std::int8_t>(l + nmax);
        const float w = weight(i);
        sumlx += w * x[i] * static_cast<float>(l);
        suml2 += w * static_cast<float>(l) * static_cast<float>(l);
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    if (return_early) return suml2 > 0 ? 0.5f * (scale + 1 / iscale) : 1 / iscale;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(iscale * x[i]);
            l = std::max(-nmax, std::min(nmax - 1, l));
            const float w = weight(i);
            sumlx += w * x[i] * static_cast<float>(l);
            suml2 += w * static_cast<float>(l) * static_cast<float>(l);
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i) {
                const int l = nearest_int(iscale * x[i]);
                L[i] = static_cast<std::int8_t>(nmax + std::max(-nmax, std::min(nmax - 1, l)));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

// make_qkx2_quants: a scale and a min (x ~ scale * L - the_min, L in [0, nmax]) for n values by
// weighted least squares, searched over nstep + 1 trial scales.
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, std::uint8_t* L, float* the_min,
                       std::uint8_t* Laux, float rmin, float rdelta, int nstep, bool use_mad) {
    float min = x[0];
    float max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        const float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        *the_min = -min;
        return 0.f;
    }
    float iscale = static_cast<float>(nmax) / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; ++i) {
        const int l = nearest_int(iscale * (x[i] - min));
        L[i] = static_cast<std::uint8_t>(std::max(0, std::min(nmax, l)));
        float diff = scale * static_cast<float>(L[i]) + min - x[i];
        diff = use_mad ? std::fabs(diff) : diff * diff;
        const float w = weights[i];
        best_error += w * diff;
    }
    if (nstep < 1) {
        *the_min = -min;
        return scale;
    }
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax)) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(iscale * (x[i] - min));
            l = std::max(0, std::min(nmax, l));
            Laux[i] = static_cast<std::uint8_t>(l);
            const float w = weights[i];
            const auto lf = static_cast<float>(l);
            sum_l += w * lf;
            sum_l2 += w * lf * lf;
            sum_xl += w * lf * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; ++i) {
                float diff = this_scale * static_cast<float>(Laux[i]) + this_min - x[i];
                diff = use_mad ? std::fabs(diff) : diff * diff;
                const float w = weights[i];
                cur_error += w * diff;
            }
            if (cur_error < best_error) {
                for (int i = 0; i < n; ++i) L[i] = Laux[i];
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}


// ggml converts a scaled float straight to int8_t, which is undefined for a non-finite one: a
// block of float subnormals makes it one (the scale's reciprocal overflows to infinity, the
// block's half scale is 0 all the same). GCC's x86 code gives 0 there (cvttss2si's 0x80000000,
// truncated to its low byte), Clang's -128; this is GCC's, by definition, and the same as a
// direct conversion for every finite value in int's range.
std::int8_t float_to_int8(float v) {
    return std::isfinite(v) ? static_cast<std::int8_t>(static_cast<int>(v)) : std::int8_t{0};
}

}  // namespace

// Sub-block j's 6-bit scale and min, of the 12 bytes of a block_q4_K.
void get_scale_min_k4(int j, const std::uint8_t* q, std::uint8_t* d, std::uint8_t* m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = static_cast<std::uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = static_cast<std::uint8_t>((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
    }
}

// ---- Q8_0 -------------------------------------------------------------------------------------
void quantize_row_q8_0(const float* x, block_q8_0* y, std::size_t n) {
    constexpr int qk = 32;
    const std::size_t nb = n / qk;
    for (std::size_t i = 0; i < nb; i++) {
        float amax = 0.0f;
        for (int j = 0; j < qk; j++) {
            const float v = std::fabs(x[i * qk + j]);
            amax = amax > v ? amax : v;  // ggml's MAX(amax, v), also for a NaN
        }
        const float d = amax / ((1 << 7) - 1);
        const float id = d != 0 ? 1.0f / d : 0.0f;
        y[i].d = float_to_half(d);
        for (int j = 0; j < qk; ++j) {
            const float x0 = x[i * qk + j] * id;
            y[i].qs[j] = float_to_int8(std::round(x0));
        }
    }
}

void dequantize_row_q8_0(const block_q8_0* x, float* y, std::size_t n) {
    constexpr int qk = 32;
    const std::size_t nb = n / qk;
    for (std::size_t i = 0; i < nb; i++) {
        const float d = half_to_float(x[i].d);
        for (int j = 0; j < qk; ++j) y[i * qk + j] = static_cast<float>(x[i].qs[j]) * d;
    }
}

// ---- Q4_0 -------------------------------------------------------------------------------------
void quantize_row_q4_0(const float* x, block_q4_0* y, std::size_t n) {
    constexpr int qk = 32;
    const std::size_t nb = n / qk;
    for (std::size_t i = 0; i < nb; i++) {
        float amax = 0.0f;
        float max = 0.0f;
        for (int j = 0; j < qk; j++) {
            const float v = x[i * qk + j];
            if (amax < std::fabs(v)) {
                amax = std::fabs(v);
                max = v;
            }
        }
        const float d = max / -8;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        y[i].d = float_to_half(d);
        for (int j = 0; j < qk / 2; ++j) {
            const float x0 = x[i * qk + 0 + j] * id;
            const float x1 = x[i * qk + qk / 2 + j] * id;
            const auto xi0 = static_cast<std::uint8_t>(std::min<int>(15, float_to_int8(x0 + 8.5f)));
            const auto xi1 = static_cast<std::uint8_t>(std::min<int>(15, float_to_int8(x1 + 8.5f)));
            y[i].qs[j] = static_cast<std::uint8_t>(xi0 | (xi1 << 4));
        }
    }
}

void dequantize_row_q4_0(const block_q4_0* x, float* y, std::size_t n) {
    constexpr int qk = 32;
    const std::size_t nb = n / qk;
    for (std::size_t i = 0; i < nb; i++) {
        const float d = half_to_float(x[i].d);
        for (int j = 0; j < qk / 2; ++j) {
            const int x0 = (x[i].qs[j] & 0x0F) - 8;
            const int x1 = (x[i].qs[j] >> 4) - 8;
            y[i * qk + j + 0] = static_cast<float>(x0) * d;
            y[i * qk + j + qk / 2] = static_cast<float>(x1) * d;
        }
    }
}

// ---- Q4_K -------------------------------------------------------------------------------------
void quantize_row_q4_K(const float* x, block_q4_K* y, std::size_t n) {
    const std::size_t nb = n / qk_k;
    std::uint8_t L[qk_k];
    std::uint8_t Laux[32];
    float weights[32];
    float mins[qk_k / 32];
    float scales[qk_k / 32];

    for (std::size_t i = 0; i < nb; i++) {
        float max_scale = 0;  // as the min is deducted, scales are always positive
        float max_min = 0;
        for (int j = 0; j < static_cast<int>(qk_k / 32); ++j) {
            float sum_x2 = 0;
            for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
            const float av_x = std::sqrt(sum_x2 / 32);
            for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
            scales[j] = make_qkx2_quants(32, 15, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, -1.f, 0.1f, 20, false);
            const float scale = scales[j];
            if (scale > max_scale) max_scale = scale;
            const float min = mins[j];
            if (min > max_min) max_min = min;
        }

        const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
        const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
        for (int j = 0; j < static_cast<int>(qk_k / 32); ++j) {
            auto ls = static_cast<std::uint8_t>(nearest_int(inv_scale * scales[j]));
            auto lm = static_cast<std::uint8_t>(nearest_int(inv_min * mins[j]));
            ls = std::min<std::uint8_t>(63, ls);
            lm = std::min<std::uint8_t>(63, lm);
            if (j < 4) {
                y[i].scales[j] = ls;
                y[i].scales[j + 4] = lm;
            } else {
                y[i].scales[j + 4] = static_cast<std::uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
                y[i].scales[j - 4] |= static_cast<std::uint8_t>((ls >> 4) << 6);
                y[i].scales[j - 0] |= static_cast<std::uint8_t>((lm >> 4) << 6);
            }
        }
        y[i].d = float_to_half(max_scale / 63.f);
        y[i].dmin = float_to_half(max_min / 63.f);

        std::uint8_t sc, m;
        for (int j = 0; j < static_cast<int>(qk_k / 32); ++j) {
            get_scale_min_k4(j, y[i].scales, &sc, &m);
            const float d = half_to_float(y[i].d) * static_cast<float>(sc);
            if (d == 0) continue;
            const float dm = half_to_float(y[i].dmin) * static_cast<float>(m);
            for (int ii = 0; ii < 32; ++ii) {
                int l = nearest_int((x[32 * j + ii] + dm) / d);
                l = std::max(0, std::min(15, l));
                L[32 * j + ii] = static_cast<std::uint8_t>(l);
            }
        }

        std::uint8_t* q = y[i].qs;
        for (std::size_t j = 0; j < qk_k; j += 64) {
            for (int l = 0; l < 32; ++l) q[l] = static_cast<std::uint8_t>(L[j + l] | (L[j + l + 32] << 4));
            q += 32;
        }
        x += qk_k;
    }
}

void dequantize_row_q4_K(const block_q4_K* x, float* y, std::size_t n) {
    const std::size_t nb = n / qk_k;
    for (std::size_t i = 0; i < nb; i++) {
        const std::uint8_t* q = x[i].qs;
        const float d = half_to_float(x[i].d);
        const float min = half_to_float(x[i].dmin);
        int is = 0;
        std::uint8_t sc, m;
        for (std::size_t j = 0; j < qk_k; j += 64) {
            get_scale_min_k4(is + 0, x[i].scales, &sc, &m);
            const float d1 = d * static_cast<float>(sc);
            const float m1 = min * static_cast<float>(m);
            get_scale_min_k4(is + 1, x[i].scales, &sc, &m);
            const float d2 = d * static_cast<float>(sc);
            const float m2 = min * static_cast<float>(m);
            for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 0xF) - m1;
            for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
            q += 32;
            is += 2;
        }
    }
}

// ---- Q6_K -------------------------------------------------------------------------------------
void quantize_row_q6_K(const float* x, block_q6_K* y, std::size_t n) {
    const std::size_t nb = n / qk_k;
    std::int8_t L[qk_k];
    float scales[qk_k / 16];

    for (std::size_t i = 0; i < nb; i++) {
        float max_scale = 0;
        float max_abs_scale = 0;
        for (int ib = 0; ib < static_cast<int>(qk_k / 16); ++ib) {
            const float scale = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib, 1);
            scales[ib] = scale;
            const float abs_scale = std::fabs(scale);
            if (abs_scale > max_abs_scale) {
                max_abs_scale = abs_scale;
                max_scale = scale;
            }
        }

        if (max_abs_scale < group_max_eps) {
            std::memset(&y[i], 0, sizeof(block_q6_K));
            y[i].d = float_to_half(0.f);
            x += qk_k;
            continue;
        }

        const float iscale = -128.f / max_scale;
        y[i].d = float_to_half(1 / iscale);
        for (int ib = 0; ib < static_cast<int>(qk_k / 16); ++ib)
            y[i].scales[ib] = static_cast<std::int8_t>(std::min(127, nearest_int(iscale * scales[ib])));

        for (int j = 0; j < static_cast<int>(qk_k / 16); ++j) {
            const float d = half_to_float(y[i].d) * static_cast<float>(y[i].scales[j]);
            if (d == 0) continue;
            for (int ii = 0; ii < 16; ++ii) {
                int l = nearest_int(x[16 * j + ii] / d);
                l = std::max(-32, std::min(31, l));
                L[16 * j + ii] = static_cast<std::int8_t>(l + 32);
            }
        }

        std::uint8_t* ql = y[i].ql;
        std::uint8_t* qh = y[i].qh;
        for (std::size_t j = 0; j < qk_k; j += 128) {
            for (int l = 0; l < 32; ++l) {
                const std::uint8_t q1 = L[j + l + 0] & 0xF;
                const std::uint8_t q2 = L[j + l + 32] & 0xF;
                const std::uint8_t q3 = L[j + l + 64] & 0xF;
                const std::uint8_t q4 = L[j + l + 96] & 0xF;
                ql[l + 0] = static_cast<std::uint8_t>(q1 | (q3 << 4));
                ql[l + 32] = static_cast<std::uint8_t>(q2 | (q4 << 4));
                qh[l] = static_cast<std::uint8_t>((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                                                  ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
            }
            ql += 64;
            qh += 32;
        }
        x += qk_k;
    }
}

void dequantize_row_q6_K(const block_q6_K* x, float* y, std::size_t n) {
    const std::size_t nb = n / qk_k;
    for (std::size_t i = 0; i < nb; i++) {
        const float d = half_to_float(x[i].d);
        const std::uint8_t* ql = x[i].ql;
        const std::uint8_t* qh = x[i].qh;
        const std::int8_t* sc = x[i].scales;
        for (std::size_t n128 = 0; n128 < qk_k; n128 += 128) {
            for (int l = 0; l < 32; ++l) {
                const int is = l / 16;
                const auto q1 = static_cast<std::int8_t>(((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
                const auto q2 = static_cast<std::int8_t>(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
                const auto q3 = static_cast<std::int8_t>(((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
                const auto q4 = static_cast<std::int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
                y[l + 0] = d * static_cast<float>(sc[is + 0]) * static_cast<float>(q1);
                y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
                y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
                y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
            }
            y += 128;
            ql += 64;
            qh += 32;
            sc += 8;
        }
    }
}

// ---- F16, BF16, F32 ---------------------------------------------------------------------------
void float_row_to_half(const float* x, half* y, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) y[i] = float_to_half(x[i]);
}
void half_row_to_float(const half* x, float* y, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) y[i] = half_to_float(x[i]);
}
void float_row_to_bfloat16(const float* x, bfloat16* y, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) y[i] = float_to_bfloat16(x[i]);
}
void bfloat16_row_to_float(const bfloat16* x, float* y, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) y[i] = bfloat16_to_float(x[i]);
}
void copy_float_row(const float* x, float* y, std::size_t n) {
    if (n > 0) std::memcpy(y, x, n * sizeof(float));
}

}  // namespace shaped::detail
