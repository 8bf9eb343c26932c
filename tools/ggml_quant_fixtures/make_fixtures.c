// Writes the fixtures of tests/unit/quantized_test.cpp with ggml's own code: the reference
// quantizers (quantize_row_*_ref) and dequantizers (dequantize_row_*) of ggml-quants.c, and the
// half and bfloat16 conversions of ggml-impl.h (GGML_FP32_TO_FP16, GGML_FP16_TO_FP32,
// GGML_FP32_TO_BF16, GGML_BF16_TO_FP32). Built and run by tools/ggml_quant_fixtures.sh.
//
//   make_fixtures OUT_DIR
//
// Every file is raw little-endian data, its size fixed by what it holds:
//   input.f32                 ROWS x COLS floats: the tensor quantized (seeded, mixed magnitudes,
//                             a row of zeros, a row with one large outlier, edge-case blocks)
//   <type>.blocks             quantize_row_<type>_ref of each row, rows one after another
//   <type>.dequant.f32        dequantize_row_<type> of those blocks
//   random.<type>.blocks      RANDOM_ELEMENTS elements' blocks of random bytes (finite scales)
//   random.<type>.dequant.f32 dequantize_row_<type> of those
//   convert.f32               floats: special values, rounding ties, subnormals, random bit
//                             patterns, then rows 0 and 3 of input.f32
//   convert.f16 / .bf16       GGML_FP32_TO_FP16 / GGML_FP32_TO_BF16 of each (uint16 bits)
//   half.f16 / half.f32       every subnormal half, some with exponent field 1, 30 and 31 (inf,
//                             NaNs), both signs, then random ones; GGML_FP16_TO_FP32 of each
//   bf16.bf16 / bf16.f32      bfloat16 bit patterns (specials, random) and GGML_BF16_TO_FP32

#include "ggml-common.h"
#include "ggml-impl.h"
#include "ggml-quants.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ggml-quants.c refers to these ggml.c functions (from its validation and importance-matrix
// paths, never from the reference functions called here); linking ggml.c would pull in the
// backend and threading code. They abort if reached.
void ggml_abort(const char * file, int line, const char * fmt, ...) {
    fprintf(stderr, "ggml_abort at %s:%d: %s\n", file, line, fmt);
    abort();
}
size_t ggml_type_size(enum ggml_type type) { (void) type; abort(); }
size_t ggml_row_size(enum ggml_type type, int64_t ne) { (void) type; (void) ne; abort(); }
const char * ggml_type_name(enum ggml_type type) { (void) type; abort(); }

enum { ROWS = 4, COLS = 512, RANDOM_ELEMENTS = 512 };

static uint64_t state = 0x9E3779B97F4A7C15ull;
static uint64_t next_u64(void) {  // splitmix64
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static double uniform(void) { return (double) (next_u64() >> 11) * 0x1.0p-53; }
static float normal(void) {
    const double u1 = uniform() + 0x1.0p-60, u2 = uniform();
    return (float) (sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}
static float from_bits(uint32_t bits) { float f; memcpy(&f, &bits, 4); return f; }

static const char * out_dir;
static void write_file(const char * name, const void * data, size_t bytes) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", out_dir, name);
    FILE * f = fopen(path, "wb");
    if (!f || fwrite(data, 1, bytes, f) != bytes || fclose(f) != 0) {
        fprintf(stderr, "make_fixtures: cannot write %s\n", path);
        exit(1);
    }
}

static float input[ROWS][COLS];

static void make_input(void) {
    // Row 0: normal values, each 32-wide block scaled by 10^[-3, 2).
    for (int b = 0; b < COLS / 32; ++b) {
        const float scale = (float) pow(10.0, -3.0 + 5.0 * uniform());
        for (int j = 0; j < 32; ++j) input[0][32 * b + j] = scale * normal();
    }
    // Row 1: zeros.
    // Row 2: small normal values and one large outlier.
    for (int j = 0; j < COLS; ++j) input[2][j] = 0.02f * normal();
    input[2][77] = 1000.0f;
    // Row 3: edge cases, one per 32-wide block, then normal values with a mean.
    float * r = input[3];
    for (int j = 0; j < 32; ++j) r[j] = (float) (j - 16) + 0.5f;                 // halves: roundf's ties
    for (int j = 0; j < 32; ++j) r[32 + j] = (j % 2 ? 1.0f : -1.0f) * (float) j;  // +-max: first wins
    for (int j = 0; j < 32; ++j) r[64 + j] = 3.25f;                              // constant block
    r[96 + 5] = -7.0f;                                                            // one nonzero
    // Float subnormals: Q8_0's and Q4_0's 1/d overflows, and ggml converts inf or NaN to int8_t,
    // undefined: GCC's code gives 0, Clang's -128 (the half d is 0 either way, so are the values).
    for (int j = 0; j < 32; ++j) r[128 + j] = from_bits(0x00000100u * (uint32_t) (j + 1));
    for (int j = 0; j < 32; ++j) r[160 + j] = 1e-6f * normal();                  // below half's normals
    for (int j = 0; j < 32; ++j) r[192 + j] = 60000.0f * normal();               // near half's range
    for (int j = 0; j < 32; ++j) r[224 + j] = -fabsf(normal());                  // all negative
    for (int j = 256; j < COLS; ++j) r[j] = 0.5f + 0.1f * normal();              // offset: K-quants' mins
}

// Floats for the half and bfloat16 conversions.
static float convert_values[8192];
static size_t n_convert;
static void add(float f) { convert_values[n_convert++] = f; }
static void add_bits(uint32_t b) { add(from_bits(b)); }

static void make_convert_values(void) {
    static const uint32_t specials[] = {
        0x00000000u, 0x80000000u,              // +-0
        0x7F800000u, 0xFF800000u,              // +-inf
        0x7FC00000u, 0xFFC00000u,              // quiet NaN
        0x7F800001u, 0xFF800001u, 0x7FA00000u, // signalling NaN
        0x7FFFFFFFu, 0x7F802000u, 0x7FBFE000u, 0x7F80FFFFu, 0xFFFFFFFFu,  // payloads
        0x00000001u, 0x807FFFFFu, 0x00800000u, // float subnormals and its smallest normal
        0x7F7FFFFFu, 0xFF7FFFFFu,              // float's largest
    };
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; ++i) add_bits(specials[i]);
    // Around half's limits: largest half 65504, its tie with 65536 (65520), overflow.
    const float near_max[] = {65504.0f, 65505.0f, 65519.0f, 65519.996f, 65520.0f, 65520.004f, 65536.0f, 1e6f};
    for (size_t i = 0; i < sizeof near_max / sizeof near_max[0]; ++i) { add(near_max[i]); add(-near_max[i]); }
    // Half's subnormals k * 2^-24 and the midpoints between them (ties), every one near the
    // normals (k = 1024) and every fifth elsewhere.
    for (int k = 0; k <= 1100; k += (k >= 1016 && k <= 1032) ? 1 : 5) {
        add(ldexpf((float) k, -24));
        add(-ldexpf((float) k + 0.5f, -24));
    }
    add(ldexpf(1.0f, -25)); add(ldexpf(1.0f, -26)); add(ldexpf(3.0f, -26)); add(ldexpf(1.0f, -40));
    // Ties and near-ties in normal halves (10 mantissa bits) and bfloat16s (7): for each of a few
    // exponents, an even and an odd mantissa, exactly halfway, and one float ulp either side.
    const int exponents[] = {-14, -13, -1, 0, 1, 10, 15};
    for (size_t e = 0; e < sizeof exponents / sizeof exponents[0]; ++e) {
        for (int m = 0; m < 4; ++m) {
            for (int bits = 7; bits <= 10; bits += 3) {
                const float lo = ldexpf(1.0f + (float) m * ldexpf(1.0f, -bits), exponents[e]);
                const float tie = lo + ldexpf(1.0f, exponents[e] - bits - 1);
                add(tie);
                add(-tie);
                add(nextafterf(tie, 0.0f));
                add(nextafterf(tie, INFINITY));
            }
        }
    }
    // bfloat16 ties at float's top and bottom.
    add_bits(0x7F7F8000u); add_bits(0x7F7F7FFFu); add_bits(0x00008000u); add_bits(0x00018000u);
    // Random bit patterns over every exponent.
    while (n_convert < 1536) add_bits((uint32_t) next_u64());
    for (int j = 0; j < COLS; ++j) add(input[0][j]);
    for (int j = 0; j < COLS; ++j) add(input[3][j]);
}

#define QUANTIZE(type, block, qk)                                                              \
    do {                                                                                       \
        static block blocks[ROWS][COLS / (qk)];                                                \
        static float back[ROWS][COLS];                                                         \
        for (int i = 0; i < ROWS; ++i) {                                                       \
            quantize_row_##type##_ref(input[i], blocks[i], COLS);                              \
            dequantize_row_##type(blocks[i], back[i], COLS);                                   \
        }                                                                                      \
        write_file(#type ".blocks", blocks, sizeof blocks);                                    \
        write_file(#type ".dequant.f32", back, sizeof back);                                   \
    } while (0)

// A random finite half (no inf or NaN: those make every float of a block NaN).
static ggml_half random_finite_half(void) {
    for (;;) {
        const ggml_half h = (ggml_half) next_u64();
        if ((h & 0x7C00) != 0x7C00) return h;
    }
}

#define RANDOM(type, block, qk, halves)                                                        \
    do {                                                                                       \
        static block blocks[RANDOM_ELEMENTS / (qk)];                                           \
        static float back[RANDOM_ELEMENTS];                                                    \
        for (int b = 0; b < RANDOM_ELEMENTS / (qk); ++b) {                                     \
            unsigned char * p = (unsigned char *) &blocks[b];                                  \
            for (size_t k = 0; k < sizeof(block); ++k) p[k] = (unsigned char) next_u64();      \
            halves;                                                                            \
        }                                                                                      \
        dequantize_row_##type(blocks, back, RANDOM_ELEMENTS);                                \
        write_file("random." #type ".blocks", blocks, sizeof blocks);                          \
        write_file("random." #type ".dequant.f32", back, sizeof back);                         \
    } while (0)

int main(int argc, char ** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: make_fixtures OUT_DIR\n");
        return 2;
    }
    out_dir = argv[1];

    make_input();
    write_file("input.f32", input, sizeof input);

    QUANTIZE(q8_0, block_q8_0, QK8_0);
    QUANTIZE(q4_0, block_q4_0, QK4_0);
    QUANTIZE(q4_K, block_q4_K, QK_K);
    QUANTIZE(q6_K, block_q6_K, QK_K);

    RANDOM(q8_0, block_q8_0, QK8_0, blocks[b].d = random_finite_half());
    RANDOM(q4_0, block_q4_0, QK4_0, blocks[b].d = random_finite_half());
    RANDOM(q4_K, block_q4_K, QK_K, (blocks[b].d = random_finite_half(), blocks[b].dmin = random_finite_half()));
    RANDOM(q6_K, block_q6_K, QK_K, blocks[b].d = random_finite_half());

    make_convert_values();
    static uint16_t halves[8192], bf16s[8192];
    for (size_t i = 0; i < n_convert; ++i) {
        halves[i] = GGML_FP32_TO_FP16(convert_values[i]);
        bf16s[i] = GGML_FP32_TO_BF16(convert_values[i]).bits;
    }
    write_file("convert.f32", convert_values, n_convert * sizeof(float));
    write_file("convert.f16", halves, n_convert * sizeof(uint16_t));
    write_file("convert.bf16", bf16s, n_convert * sizeof(uint16_t));

    static uint16_t half_in[8192];
    static float half_out[8192];
    size_t n_half = 0;
    const unsigned exponent_fields[] = {0, 1, 30, 31};
    for (unsigned sign = 0; sign < 2; ++sign)
        for (size_t e = 0; e < 4; ++e)
            for (unsigned m = 0; m < 1024; m += 1)
                if (e == 0 || m % (e == 3 ? 16 : 32) == 0)  // every subnormal; some NaN payloads, near-limit normals
                    half_in[n_half++] = (uint16_t) (sign << 15 | exponent_fields[e] << 10 | m);
    while (n_half < 2560) half_in[n_half++] = (uint16_t) next_u64();
    for (size_t i = 0; i < n_half; ++i) half_out[i] = GGML_FP16_TO_FP32(half_in[i]);
    write_file("half.f16", half_in, n_half * sizeof(uint16_t));
    write_file("half.f32", half_out, n_half * sizeof(float));

    static uint16_t bf16_in[256];
    static float bf16_out[256];
    size_t n_bf16 = 0;
    const uint16_t bf16_specials[] = {0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0xFFC1, 0x7F81, 0x0001, 0x807F, 0x0080, 0x7F7F};
    for (size_t i = 0; i < sizeof bf16_specials / sizeof bf16_specials[0]; ++i) bf16_in[n_bf16++] = bf16_specials[i];
    while (n_bf16 < 256) bf16_in[n_bf16++] = (uint16_t) next_u64();
    for (size_t i = 0; i < n_bf16; ++i) {
        ggml_bf16_t b = {bf16_in[i]};
        bf16_out[i] = GGML_BF16_TO_FP32(b);
    }
    write_file("bf16.bf16", bf16_in, n_bf16 * sizeof(uint16_t));
    write_file("bf16.f32", bf16_out, n_bf16 * sizeof(float));
    return 0;
}
