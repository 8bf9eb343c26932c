// The storage formats of tensor/quantized.hpp against ggml's own code: fixtures written by
// tools/ggml_quant_fixtures.sh (ggml-quants.c's reference quantizers and dequantizers, ggml-impl.h's
// half and bfloat16 conversions) for a seeded 4 x 512 tensor, random blocks and special values.
// Beside them, naive references written from the formats' descriptions (each element found by its
// index, a half's rounding by searching the halves), which share no code with src/quantized.cpp,
// and the round trips' error bounds.

#include <shaped/tensor/quantized.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#ifndef SHAPED_TEST_DATA_DIR
#error "SHAPED_TEST_DATA_DIR must name the tests/unit/data directory"
#endif

namespace {

using shaped::bfloat16;
using shaped::half;

constexpr std::size_t rows = 4, cols = 512;

// A fixture file as elements of T; its size must be a whole number of them (and `count` of them
// when given).
template <class T>
std::vector<T> fixture(const std::string& name, std::size_t count = 0) {
    const auto path = std::filesystem::path(SHAPED_TEST_DATA_DIR) / "ggml_quants" / name;
    std::ifstream in(path, std::ios::binary);
    INFO("fixture " << path.string());
    REQUIRE(in);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    REQUIRE(bytes.size() % sizeof(T) == 0);
    if (count != 0) REQUIRE(bytes.size() == count * sizeof(T));
    std::vector<T> values(bytes.size() / sizeof(T));
    if (!values.empty()) std::memcpy(values.data(), bytes.data(), bytes.size());
    return values;
}

std::uint32_t bits(float f) { return std::bit_cast<std::uint32_t>(f); }

// The index of the first float whose bits differ, or -1: floats compared bit for bit (a -0 is not
// a +0, and a NaN must be the same NaN).
template <class A, class B>
long first_bit_difference(const A& a, const B& b) {
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i)
        if (bits(a[i]) != bits(b[i])) return static_cast<long>(i);
    return -1;
}

template <class Block>
std::vector<std::uint8_t> bytes_of(const std::vector<Block>& blocks) {
    std::vector<std::uint8_t> out(blocks.size() * sizeof(Block));
    if (!out.empty()) std::memcpy(out.data(), blocks.data(), out.size());
    return out;
}

// A product rounded before anything is added to it: the naive references must not fuse a
// multiply-add, which rounds once where ggml rounds twice.
float rounded(float x) {
    volatile float v = x;
    return v;
}

// ---- naive references, element by element -----------------------------------------------------
// The block width divides n; element e of a row lies in block e / width at position e % width.

float naive_q8_0(const shaped::block_q8_0& b, std::size_t e) {
    return static_cast<float>(b.qs[e]) * shaped::half_to_float(b.d);
}

// Low nibbles are elements 0..15, high nibbles 16..31.
float naive_q4_0(const shaped::block_q4_0& b, std::size_t e) {
    const int q = e < 16 ? (b.qs[e] & 0xF) : (b.qs[e - 16] >> 4);
    return static_cast<float>(q - 8) * shaped::half_to_float(b.d);
}

// Sub-block j (32 elements) has a 6-bit scale and min: for j < 4 the low 6 bits of scales[j] and
// scales[j + 4]; for j >= 4 the low (high) nibble of scales[j + 4] below the top 2 bits of
// scales[j - 4] (scales[j]). Elements 64k..64k+31 are the low nibbles of qs[32k..32k+31], the
// next 32 their high nibbles.
float naive_q4_K(const shaped::block_q4_K& b, std::size_t e) {
    const std::size_t j = e / 32;
    unsigned scale, min;
    if (j < 4) {
        scale = b.scales[j] & 63u;
        min = b.scales[j + 4] & 63u;
    } else {
        scale = (b.scales[j + 4] & 0xFu) | ((b.scales[j - 4] >> 6) << 4);
        min = (b.scales[j + 4] >> 4) | ((b.scales[j] >> 6) << 4);
    }
    const std::uint8_t byte = b.qs[(e / 64) * 32 + e % 32];
    const unsigned q = (j % 2 == 0) ? (byte & 0xFu) : (byte >> 4);
    const float d = rounded(shaped::half_to_float(b.d) * static_cast<float>(scale));
    const float m = rounded(shaped::half_to_float(b.dmin) * static_cast<float>(min));
    return rounded(d * static_cast<float>(q)) - m;
}

// Each 128 elements: element 32k + l (k = 0..3, l = 0..31) has its low 4 bits in ql[64 * half +
// l + 32 * (k % 2)] (the low nibble for k < 2), its high 2 bits at bit 2k of qh[32 * half + l],
// and the scale of its 16 elements, scales[8 * half + l / 16 + 2k].
float naive_q6_K(const shaped::block_q6_K& b, std::size_t e) {
    const std::size_t h = e / 128, r = e % 128, k = r / 32, l = r % 32;
    const std::uint8_t low_byte = b.ql[64 * h + l + 32 * (k % 2)];
    const unsigned low = k < 2 ? (low_byte & 0xFu) : (low_byte >> 4);
    const unsigned high = (b.qh[32 * h + l] >> (2 * k)) & 3u;
    const int q = static_cast<int>(low | (high << 4)) - 32;
    const int scale = b.scales[8 * h + l / 16 + 2 * k];
    return rounded(shaped::half_to_float(b.d) * static_cast<float>(scale)) * static_cast<float>(q);
}

template <class Format, class Naive>
std::vector<float> naive_dequantize(const std::vector<typename Format::block_type>& blocks, Naive naive) {
    std::vector<float> out(blocks.size() * Format::block_width);
    for (std::size_t e = 0; e < out.size(); ++e)
        out[e] = naive(blocks[e / Format::block_width], e % Format::block_width);
    return out;
}

// A half's value by its fields alone: (-1)^s 2^(E-15) (1 + m/1024), subnormals 2^-14 m/1024.
float naive_half_value(std::uint16_t h) {
    const bool negative = h >> 15;
    const int exponent = (h >> 10) & 0x1F;
    const int mantissa = h & 0x3FF;
    float magnitude;
    if (exponent == 0x1F) {
        // inf, or a NaN whose 10 payload bits are the float's top ones, made quiet (ggml's
        // conversion multiplies it by a power of two, which quiets a signalling NaN)
        const std::uint32_t quiet = mantissa != 0 ? 0x00400000u : 0u;
        return std::bit_cast<float>((negative ? 0x80000000u : 0u) | 0x7F800000u | quiet | (std::uint32_t(mantissa) << 13));
    }
    if (exponent == 0) magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    else magnitude = std::ldexp(static_cast<float>(1024 + mantissa), exponent - 25);
    return negative ? -magnitude : magnitude;
}

// The half nearest f, ties to the even mantissa, by searching the finite halves (in double);
// beyond 65504 + half an ulp (65520) infinity; a NaN to 0x7E00 with its sign, as ggml does.
std::uint16_t naive_float_to_half(float f) {
    const std::uint16_t sign = std::signbit(f) ? 0x8000 : 0;
    if (std::isnan(f)) return sign | 0x7E00;
    const double a = std::fabs(static_cast<double>(f));
    if (a >= 65520.0) return sign | 0x7C00;
    // The positive finite halves are ordered as their bits: find the last one <= a.
    std::uint16_t lo = 0, hi = 0x7BFF;
    while (lo < hi) {
        const std::uint16_t mid = static_cast<std::uint16_t>((lo + hi + 1) / 2);
        if (static_cast<double>(naive_half_value(mid)) <= a) lo = mid;
        else hi = static_cast<std::uint16_t>(mid - 1);
    }
    std::uint16_t best = lo;
    if (lo < 0x7BFF || a > 65504.0) {
        const std::uint16_t up = static_cast<std::uint16_t>(lo + 1);  // 0x7C00: inf, reached only below 65520
        const double below = a - naive_half_value(lo);
        const double above = (up == 0x7C00 ? 65536.0 : static_cast<double>(naive_half_value(up))) - a;
        if (above < below || (above == below && (up & 1) == 0)) best = up;
    }
    return sign | best;
}

// The bfloat16 nearest f, ties to even; a NaN keeps its top bits, made quiet.
std::uint16_t naive_float_to_bfloat16(float f) {
    const std::uint32_t u = bits(f);
    if (std::isnan(f)) return static_cast<std::uint16_t>((u >> 16) | 0x40);
    const auto down = static_cast<std::uint16_t>(u >> 16);
    if (std::isinf(f)) return down;
    const auto up = static_cast<std::uint16_t>(down + 1);
    const double value = std::fabs(static_cast<double>(f));
    const double below = value - std::fabs(static_cast<double>(std::bit_cast<float>(std::uint32_t(down) << 16)));
    // Above float's largest bfloat16 the next one up is infinity, at 2^128 for rounding's sake.
    const double up_value = (up & 0x7FFF) == 0x7F80 ? std::ldexp(1.0, 128)
                                                    : std::fabs(static_cast<double>(std::bit_cast<float>(std::uint32_t(up) << 16)));
    const double above = up_value - value;
    return (above < below || (above == below && (up & 1) == 0)) ? up : down;
}

// ---- what the fixtures hold ---------------------------------------------------------------------

std::vector<float> input() { return fixture<float>("input.f32", rows * cols); }

template <class Format>
std::string fixture_name() {
    return std::string(Format::name);
}

template <class Format>
std::vector<typename Format::block_type> quantize_rows(const std::vector<float>& x) {
    std::vector<typename Format::block_type> blocks(rows * cols / Format::block_width);
    const std::size_t per_row = cols / Format::block_width;
    for (std::size_t r = 0; r < rows; ++r)
        Format::quantize_row(std::span<const float>(x).subspan(r * cols, cols),
                             std::span(blocks).subspan(r * per_row, per_row));
    return blocks;
}

template <class Format>
std::vector<float> dequantize_all(const std::vector<typename Format::block_type>& blocks) {
    std::vector<float> out(blocks.size() * Format::block_width);
    Format::dequantize_row(blocks, out);
    return out;
}

template <class Format>
void check_quantizer_bytes() {
    const auto name = fixture_name<Format>();
    INFO("format " << name);
    const auto ggml = fixture<std::uint8_t>(name + ".blocks", rows * cols / Format::block_width * Format::bytes_per_block);
    const auto ours = bytes_of(quantize_rows<Format>(input()));
    REQUIRE(ours.size() == ggml.size());
    const auto mismatch = std::mismatch(ours.begin(), ours.end(), ggml.begin());
    if (mismatch.first != ours.end()) {
        const auto at = static_cast<std::size_t>(mismatch.first - ours.begin());
        FAIL_CHECK("first differing byte " << at << " (block " << at / Format::bytes_per_block << ", byte "
                                           << at % Format::bytes_per_block << "): ours "
                                           << int(*mismatch.first) << ", ggml's " << int(*mismatch.second));
    }
}

template <class Format, class Naive>
void check_dequantizer(const std::string& prefix, std::size_t elements, Naive naive) {
    const auto name = prefix + fixture_name<Format>();
    INFO("fixture " << name);
    using Block = typename Format::block_type;
    const auto blocks = fixture<Block>(name + ".blocks", elements / Format::block_width);
    const auto ggml = fixture<float>(name + ".dequant.f32", elements);
    CHECK(first_bit_difference(dequantize_all<Format>(blocks), ggml) == -1);
    CHECK(first_bit_difference(naive_dequantize<Format>(blocks, naive), ggml) == -1);
}

// ---- the formats as types -----------------------------------------------------------------------

static_assert(shaped::StorageFormat<shaped::q8_0> && shaped::StorageFormat<shaped::q4_0> &&
              shaped::StorageFormat<shaped::q4_K> && shaped::StorageFormat<shaped::q6_K> &&
              shaped::StorageFormat<shaped::f16> && shaped::StorageFormat<shaped::bf16> &&
              shaped::StorageFormat<shaped::f32>);
static_assert(!shaped::StorageFormat<float> && !shaped::StorageFormat<shaped::block_q8_0>);
static_assert(shaped::q8_0::block_width == 32 && shaped::q8_0::bytes_per_block == 34);
static_assert(shaped::q4_0::block_width == 32 && shaped::q4_0::bytes_per_block == 18);
static_assert(shaped::q4_K::block_width == 256 && shaped::q4_K::bytes_per_block == 144);
static_assert(shaped::q6_K::block_width == 256 && shaped::q6_K::bytes_per_block == 210);
static_assert(shaped::f16::block_width == 1 && shaped::f16::bytes_per_block == 2);
static_assert(shaped::bf16::block_width == 1 && shaped::bf16::bytes_per_block == 2);
static_assert(shaped::storage_bytes<shaped::q8_0>(4096) == 4352 && shaped::storage_bytes<shaped::q4_K>(4096) == 2304);

using K128 = shaped::dim<"K", 128>;
using K100 = shaped::dim<"K", 100>;
using K256 = shaped::dim<"K", 256>;
using Kd = shaped::dim<"K">;
static_assert(shaped::rows_divide_into_blocks<shaped::q8_0, K128>);
static_assert(!shaped::rows_divide_into_blocks<shaped::q8_0, K100>);
static_assert(!shaped::rows_divide_into_blocks<shaped::q4_K, K128>);
static_assert(shaped::rows_divide_into_blocks<shaped::q6_K, K256>);
static_assert(shaped::rows_divide_into_blocks<shaped::q4_0, Kd>);  // checked when its extent is known
static_assert(shaped::rows_divide_into_blocks<shaped::f16, K100>);
static_assert(!shaped::rows_divide_into_blocks<float, K128>);

// Constant evaluation of the conversions.
static_assert(shaped::float_to_half(1.0f).bits == 0x3C00 && shaped::half_to_float(half{0xC000}) == -2.0f);
static_assert(shaped::float_to_bfloat16(1.0f).bits == 0x3F80 && shaped::bfloat16_to_float(bfloat16{0xC000}) == -2.0f);

TEST_CASE("storage formats carry ggml's type ids and names", "[quantized]") {
    using shaped::ggml_type;
    CHECK(static_cast<int>(shaped::f32::type) == 0);
    CHECK(static_cast<int>(shaped::f16::type) == 1);
    CHECK(static_cast<int>(shaped::q4_0::type) == 2);
    CHECK(static_cast<int>(shaped::q8_0::type) == 8);
    CHECK(static_cast<int>(shaped::q4_K::type) == 12);
    CHECK(static_cast<int>(shaped::q6_K::type) == 14);
    CHECK(static_cast<int>(shaped::bf16::type) == 30);
    CHECK(shaped::q8_0::name == "q8_0");
    CHECK(shaped::q4_0::name == "q4_0");
    CHECK(shaped::q4_K::name == "q4_K");
    CHECK(shaped::q6_K::name == "q6_K");
    CHECK(shaped::f16::name == "f16");
    CHECK(shaped::bf16::name == "bf16");
    CHECK(shaped::f32::name == "f32");
}

// ---- quantizing: ggml's bytes -------------------------------------------------------------------

TEST_CASE("quantize_row gives the bytes of ggml's reference quantizer", "[quantized]") {
    SECTION("q8_0") { check_quantizer_bytes<shaped::q8_0>(); }
    SECTION("q4_0") { check_quantizer_bytes<shaped::q4_0>(); }
    SECTION("q4_K") { check_quantizer_bytes<shaped::q4_K>(); }
    SECTION("q6_K") { check_quantizer_bytes<shaped::q6_K>(); }
}

// ---- dequantizing: ggml's floats ----------------------------------------------------------------

TEST_CASE("dequantize_row and a naive reference give ggml's floats for ggml's blocks", "[quantized]") {
    SECTION("q8_0") { check_dequantizer<shaped::q8_0>("", rows * cols, naive_q8_0); }
    SECTION("q4_0") { check_dequantizer<shaped::q4_0>("", rows * cols, naive_q4_0); }
    SECTION("q4_K") { check_dequantizer<shaped::q4_K>("", rows * cols, naive_q4_K); }
    SECTION("q6_K") { check_dequantizer<shaped::q6_K>("", rows * cols, naive_q6_K); }
}

TEST_CASE("dequantize_row and a naive reference give ggml's floats for random blocks", "[quantized]") {
    // Random bytes with finite scales: every nibble, 6-bit scale and min, and int8 scale occurs.
    SECTION("q8_0") { check_dequantizer<shaped::q8_0>("random.", 512, naive_q8_0); }
    SECTION("q4_0") { check_dequantizer<shaped::q4_0>("random.", 512, naive_q4_0); }
    SECTION("q4_K") { check_dequantizer<shaped::q4_K>("random.", 512, naive_q4_K); }
    SECTION("q6_K") { check_dequantizer<shaped::q6_K>("random.", 512, naive_q6_K); }
}

// ---- F16 and BF16 -------------------------------------------------------------------------------

TEST_CASE("float to half and bfloat16 equal ggml's bit for bit, and the nearest value", "[quantized]") {
    const auto values = fixture<float>("convert.f32");
    const auto halves = fixture<std::uint16_t>("convert.f16", values.size());
    const auto bf16s = fixture<std::uint16_t>("convert.bf16", values.size());
    std::vector<half> our_halves(values.size());
    std::vector<bfloat16> our_bf16s(values.size());
    shaped::f16::quantize_row(values, our_halves);
    shaped::bf16::quantize_row(values, our_bf16s);
    std::size_t nans = 0, ties = 0;
    for (std::size_t i = 0; i < values.size(); ++i) {
        INFO("value " << i << ": bits 0x" << std::hex << bits(values[i]));
        CHECK(our_halves[i].bits == halves[i]);
        CHECK(shaped::float_to_half(values[i]).bits == halves[i]);
        CHECK(naive_float_to_half(values[i]) == halves[i]);
        CHECK(our_bf16s[i].bits == bf16s[i]);
        CHECK(naive_float_to_bfloat16(values[i]) == bf16s[i]);
        nans += std::isnan(values[i]);
        ties += (bits(values[i]) & 0x1FFF) == 0x1000 && std::fabs(values[i]) > 6.2e-5f;
    }
    // The fixture holds what it is meant to: NaNs and halves' rounding ties.
    CHECK(nans >= 10);
    CHECK(ties >= 50);
}

TEST_CASE("float to half and bfloat16 round to nearest even over random floats", "[quantized]") {
    std::mt19937 gen(28);
    std::uniform_int_distribution<std::uint32_t> any;
    for (int i = 0; i < 200000; ++i) {
        // Every third value within half's range, where rounding is not a flush to zero or inf.
        std::uint32_t u = any(gen);
        if (i % 3 == 0) u = (u & 0x807FFFFFu) | ((0x66u + (u >> 23) % 42u) << 23);
        const float f = std::bit_cast<float>(u);
        INFO("bits 0x" << std::hex << u);
        REQUIRE(shaped::float_to_half(f).bits == naive_float_to_half(f));
        REQUIRE(shaped::float_to_bfloat16(f).bits == naive_float_to_bfloat16(f));
    }
}

TEST_CASE("half and bfloat16 to float equal ggml's and every value exactly", "[quantized]") {
    const auto halves = fixture<std::uint16_t>("half.f16");
    const auto ggml = fixture<float>("half.f32", halves.size());
    std::vector<float> ours(halves.size());
    std::vector<half> typed(halves.size());
    std::transform(halves.begin(), halves.end(), typed.begin(), [](std::uint16_t h) { return half{h}; });
    shaped::f16::dequantize_row(typed, ours);
    CHECK(first_bit_difference(ours, ggml) == -1);

    const auto bf16s = fixture<std::uint16_t>("bf16.bf16");
    const auto ggml_bf16 = fixture<float>("bf16.f32", bf16s.size());
    std::vector<bfloat16> typed_bf16(bf16s.size());
    std::transform(bf16s.begin(), bf16s.end(), typed_bf16.begin(), [](std::uint16_t b) { return bfloat16{b}; });
    std::vector<float> ours_bf16(bf16s.size());
    shaped::bf16::dequantize_row(typed_bf16, ours_bf16);
    CHECK(first_bit_difference(ours_bf16, ggml_bf16) == -1);

    // Every half: its value by its fields, and back to itself (a NaN to the quiet 0x7E00).
    for (std::uint32_t h = 0; h <= 0xFFFF; ++h) {
        const auto value = shaped::half_to_float(half{static_cast<std::uint16_t>(h)});
        INFO("half 0x" << std::hex << h);
        REQUIRE(bits(value) == bits(naive_half_value(static_cast<std::uint16_t>(h))));
        const bool nan = (h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0;
        REQUIRE(shaped::float_to_half(value).bits == (nan ? ((h & 0x8000) | 0x7E00) : h));
    }
}

// ---- round trips ----------------------------------------------------------------------------------

// Normal values, each block of 32 scaled by 10^[-2, 1]: within half's range, so that a block's
// scale keeps its precision.
std::vector<float> round_trip_values(std::size_t n) {
    std::mt19937 gen(2828);
    std::normal_distribution<float> normal;
    std::uniform_real_distribution<float> exponent(-2.0f, 1.0f);
    std::vector<float> x(n);
    for (std::size_t b = 0; b < n / 32; ++b) {
        const float scale = std::pow(10.0f, exponent(gen));
        for (std::size_t j = 0; j < 32; ++j) x[32 * b + j] = scale * normal(gen) + (b % 3 == 0 ? scale : 0.0f);
    }
    return x;
}

template <class Format>
std::vector<float> round_trip(const std::vector<float>& x) {
    std::vector<typename Format::block_type> blocks(x.size() / Format::block_width);
    Format::quantize_row(x, blocks);
    std::vector<float> back(x.size());
    Format::dequantize_row(blocks, back);
    return back;
}

TEST_CASE("quantize then dequantize stays within each format's error bound", "[quantized]") {
    const std::size_t n = 8192;
    const auto x = round_trip_values(n);

    // Per element, against the amax of its 32 (an exact scale's error, plus its rounding to half).
    const auto per_block_bound = [&](const std::vector<float>& back, float units) {
        float worst = 0;
        for (std::size_t b = 0; b < n / 32; ++b) {
            float amax = 0;
            for (std::size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[32 * b + j]));
            for (std::size_t j = 0; j < 32; ++j)
                worst = std::max(worst, std::fabs(back[32 * b + j] - x[32 * b + j]) / (amax * units));
        }
        return worst;
    };
    // Q8_0: d = amax / 127, |x - d q| <= d / 2, and 127 |d - half(d)| <= 127 d 2^-11.
    CHECK(per_block_bound(round_trip<shaped::q8_0>(x), 1.0f / 127) <= 0.5f + 127.0f / 2048);
    // Q4_0: d = max / -8, |x - d (q - 8)| <= d / 2, except -max, clamped to 7: d.
    CHECK(per_block_bound(round_trip<shaped::q4_0>(x), 1.0f / 8) <= 1.0f + 8.0f / 2048);

    // The K-quants fit a scale (and min) by least squares: their error relative to the data's RMS.
    const auto relative_rms_error = [&](const std::vector<float>& back) {
        double err = 0, ref = 0;
        for (std::size_t i = 0; i < n; ++i) {
            err += double(back[i] - x[i]) * double(back[i] - x[i]);
            ref += double(x[i]) * double(x[i]);
        }
        return std::sqrt(err / ref);
    };
    const double q8 = relative_rms_error(round_trip<shaped::q8_0>(x));
    const double q6 = relative_rms_error(round_trip<shaped::q6_K>(x));
    const double q4k = relative_rms_error(round_trip<shaped::q4_K>(x));
    const double q4 = relative_rms_error(round_trip<shaped::q4_0>(x));
    INFO("relative RMS error: q8_0 " << q8 << ", q6_K " << q6 << ", q4_K " << q4k << ", q4_0 " << q4);
    CHECK(q8 < 0.01);
    CHECK(q6 < 0.03);
    CHECK(q4k < 0.12);
    CHECK(q4 < 0.12);
    CHECK(q8 < q6);
    CHECK(q6 < q4k);

    // Half and bfloat16: half an ulp, relative, and half of half's least subnormal, 2^-25.
    const auto h = round_trip<shaped::f16>(x);
    const auto b = round_trip<shaped::bf16>(x);
    for (std::size_t i = 0; i < n; ++i) {
        INFO("x = " << x[i] << ", as a half " << h[i] << ", as a bfloat16 " << b[i]);
        REQUIRE(std::fabs(h[i] - x[i]) <= std::max(std::fabs(x[i]) * 0x1.0p-11f, 0x1.0p-25f));
        REQUIRE(std::fabs(b[i] - x[i]) <= std::fabs(x[i]) * 0x1.0p-8f);
    }
    CHECK(round_trip<shaped::f32>(x) == x);
}

TEST_CASE("quantized values are what they are meant to be", "[quantized]") {
    // A block of exactly representable steps: Q8_0 keeps it exactly (d = 127 / 127 = 1, ties
    // rounded away from zero by roundf).
    std::vector<float> x(32);
    for (std::size_t j = 0; j < 32; ++j) x[j] = static_cast<float>(j) - 16.0f;
    x[31] = 127.0f;
    CHECK(round_trip<shaped::q8_0>(x) == x);
    x[0] = 2.5f;
    x[1] = -2.5f;
    const auto back = round_trip<shaped::q8_0>(x);
    CHECK(back[0] == 3.0f);
    CHECK(back[1] == -3.0f);

    // Q4_0: elements 0..15 in the low nibbles, 16..31 in the high ones; the signed max is -8 d.
    std::vector<float> y(32, 0.0f);
    y[3] = -8.0f;
    y[19] = 4.0f;
    std::vector<shaped::block_q4_0> block(1);
    shaped::q4_0::quantize_row(y, block);
    CHECK(shaped::half_to_float(block[0].d) == 1.0f);
    CHECK((block[0].qs[3] & 0xF) == 0);
    CHECK((block[0].qs[3] >> 4) == 12);
    CHECK((block[0].qs[0] & 0xF) == 8);

    // All zeros: zero blocks, zero values, for every format.
    const std::vector<float> zeros(256, 0.0f);
    CHECK(round_trip<shaped::q8_0>(zeros) == zeros);
    CHECK(round_trip<shaped::q4_0>(zeros) == zeros);
    CHECK(round_trip<shaped::q4_K>(zeros) == zeros);
    CHECK(round_trip<shaped::q6_K>(zeros) == zeros);
}

// ---- rows, blocks and matrices ------------------------------------------------------------------

template <class F>
std::string thrown(F&& f) {
    try {
        f();
    } catch (const shaped::shape_error& e) {
        return e.what();
    }
    return "nothing thrown";
}

TEST_CASE("a row conversion takes a whole number of blocks, exactly as many as the row needs", "[quantized]") {
    using Catch::Matchers::Contains;
    std::vector<float> x(100, 1.0f);
    std::vector<shaped::block_q8_0> blocks(3);
    CHECK_THAT(thrown([&] { shaped::q8_0::quantize_row(x, blocks); }),
               Contains("shaped::quantize_row: the format's block width must divide the row dim") &&
                   Contains("a row of 100 elements, blocks of 32"));
    x.assign(128, 127.0f);  // d = 127 / 127: exactly 1 as a half
    CHECK_THAT(thrown([&] { shaped::q8_0::quantize_row(x, blocks); }),
               Contains("shaped::quantize_row: the blocks given must hold the row's elements exactly") &&
                   Contains("needs 4 blocks of 32, given 3"));
    CHECK_THAT(thrown([&] { shaped::q8_0::dequantize_row(blocks, x); }), Contains("shaped::dequantize_row"));
    blocks.resize(4);
    shaped::q8_0::quantize_row(x, blocks);
    shaped::q8_0::dequantize_row(blocks, x);
    CHECK(x == std::vector<float>(128, 127.0f));
}

TEST_CASE("a quantized matrix holds rows of blocks, each row ggml's quantization of its floats", "[quantized]") {
    using N = shaped::dim<"N", 3>;
    using K = shaped::dim<"K", 512>;
    shaped::Tensor<float, N, K> w;
    const auto x = input();
    std::copy(x.begin(), x.begin() + 3 * 512, w.data());

    const auto q = shaped::quantize<shaped::q4_K>(w);
    static_assert(std::is_same_v<std::remove_const_t<decltype(q)>, shaped::QuantizedMatrix<shaped::q4_K, N, K>>);
    CHECK(q.rows() == 3);
    CHECK(q.cols() == 512);
    CHECK(q.blocks_per_row() == 2);
    CHECK(q.bytes() == 3 * 2 * 144);
    const auto ggml = fixture<std::uint8_t>("q4_K.blocks");
    CHECK(std::equal(ggml.begin(), ggml.begin() + 3 * 2 * 144, reinterpret_cast<const std::uint8_t*>(q.blocks().data())));

    const auto back = shaped::dequantize(q);
    static_assert(std::is_same_v<std::remove_const_t<decltype(back)>, shaped::Tensor<float, N, K>>);
    const auto ggml_floats = fixture<float>("q4_K.dequant.f32");
    CHECK(first_bit_difference(back.elements(), std::span(ggml_floats).first(3 * 512)) == -1);

    // A default matrix is zero blocks: zeros.
    shaped::QuantizedMatrix<shaped::q8_0, N, K> zero;
    CHECK(zero.bytes() == 3 * 16 * 34);
    const auto zeros = shaped::dequantize(zero);
    CHECK(std::all_of(zeros.elements().begin(), zeros.elements().end(), [](float v) { return v == 0.0f; }));
}

TEST_CASE("a dynamic row dim the block width does not divide is a shape_error naming it", "[quantized]") {
    using Catch::Matchers::Contains;
    using N = shaped::dim<"N", 2>;
    using K = shaped::dim<"K">;
    CHECK_THAT(thrown([] { shaped::QuantizedMatrix<shaped::q8_0, N, K> m({2, 100}); }),
               Contains("shaped::QuantizedMatrix: the format's block width must divide the row dim") &&
                   Contains("row dim K(100), q8_0 blocks of 32"));
    CHECK_THAT(thrown([] { shaped::QuantizedMatrix<shaped::q8_0, N, K> m({3, 128}); }), Contains("QuantizedMatrix"));

    shaped::Tensor<float, N, K> w(K{96});
    for (std::size_t i = 0; i < w.size(); ++i) w.data()[i] = static_cast<float>(i % 7) - 3.0f;
    const auto q = shaped::quantize<shaped::q8_0>(w);
    CHECK(q.cols() == 96);
    CHECK(shaped::dequantize(q).elements().size() == 2 * 96);
    shaped::Tensor<float, N, K> odd(K{100});
    CHECK_THAT(thrown([&] { (void)shaped::quantize<shaped::q4_0>(odd); }), Contains("row dim K(100), q4_0 blocks of 32"));
}

}  // namespace
