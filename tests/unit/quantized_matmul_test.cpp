// x @ W^T with W in each storage format (kernels/quantized_matmul.hpp), every way it runs — for
// decoding the integer way and the float way (blocks dequantized in registers), for prefill the
// dequantized tiles and GEMM — against the naive reference: W dequantized, the sums in double.
// The integer way also rounds x to Q8_0 (as ggml does), so it is held to the reference over x so
// rounded, where only the float additions differ, and to the plain reference within the
// rounding's bound.

#include <shaped/kernels/quantized_matmul.hpp>
#include <shaped/shaped.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <typeinfo>
#include <vector>

namespace {

using shaped::kernels::quantized_weight;

template <class F>
struct random_weight {
    std::vector<typename F::block_type> blocks;
    quantized_weight weight;

    random_weight(std::size_t rows, std::size_t cols, std::mt19937& rng) : blocks(rows * cols / F::block_width) {
        std::normal_distribution<float> normal(0.0f, 1.0f);
        std::vector<float> row(cols);
        const std::size_t per_row = cols / F::block_width;
        for (std::size_t r = 0; r < rows; ++r) {
            for (float& v : row) v = normal(rng);
            F::quantize_row(row, std::span(blocks).subspan(r * per_row, per_row));
        }
        weight = {F::type, blocks.data(), rows, cols};
    }
};

std::vector<float> random_floats(std::size_t n, std::mt19937& rng) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> v(n);
    for (float& x : v) x = normal(rng);
    return v;
}

// x rounded as the integer kernels round it: to Q8_0 and back.
std::vector<float> through_q8_0(const std::vector<float>& x) {
    std::vector<shaped::block_q8_0> blocks(x.size() / 32);
    shaped::q8_0::quantize_row(x, blocks);
    std::vector<float> back(x.size());
    shaped::q8_0::dequantize_row(blocks, back);
    return back;
}

// x rounded as the K-quant integer kernels round it, by ggml's quantize_row_q8_K_ref: per 256, the
// scale -127 / m for m the value of largest magnitude, each value to nearest, capped at 127.
std::vector<float> through_q8_K(const std::vector<float>& x) {
    std::vector<float> back(x.size());
    for (std::size_t b = 0; b < x.size(); b += 256) {
        float max = 0;
        for (std::size_t i = b; i < b + 256; ++i)
            if (std::abs(x[i]) > std::abs(max)) max = x[i];
        const float iscale = max != 0 ? -127.0f / max : 0.0f;
        for (std::size_t i = b; i < b + 256; ++i)
            back[i] = max != 0 ? std::min(127.0f, std::nearbyint(iscale * x[i])) * (1.0f / iscale) : 0.0f;
    }
    return back;
}

// The largest |a - b| relative to the row's scale (the sum of |w| |x|, which bounds each
// output's float error).
float worst_difference(const std::vector<float>& a, const std::vector<float>& b) {
    float worst = 0;
    for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
    return worst;
}

template <class F>
void check_format(bool integer) {
    std::mt19937 rng(20261207);
    // 3 x 5 blocks of rows: a row count that is no multiple of the tile, a width of several blocks.
    const std::size_t rows = 67, cols = 5 * F::block_width;
    const random_weight<F> w(rows, cols, rng);
    for (const std::size_t n : {std::size_t{1}, std::size_t{3}, std::size_t{9}}) {
        INFO(F::name << ", " << n << " rows of x");
        const std::vector<float> x = random_floats(n * cols, rng);
        std::vector<float> reference(n * rows), rounded_reference(n * rows), by_integers(n * rows, NAN),
            by_registers(n * rows, NAN), by_rows(n * rows, NAN), by_tiles(n * rows, NAN), chosen(n * rows, NAN);
        shaped::kernels::quantized_matmul_reference(w.weight, x.data(), n, reference.data());
        shaped::kernels::quantized_matmul_integer(w.weight, x.data(), n, by_integers.data());
        shaped::kernels::quantized_matmul_registers(w.weight, x.data(), n, by_registers.data());
        shaped::kernels::quantized_matmul_rows(w.weight, x.data(), n, by_rows.data());
        shaped::kernels::quantized_matmul_tiles(w.weight, x.data(), n, by_tiles.data());
        shaped::kernels::quantized_matmul(w.weight, x.data(), n, chosen.data());
        // Each output sums cols products of two N(0, 1)-sized values: float error ~ 1e-6 of sqrt(cols).
        const float float_tolerance = 1e-5f * std::sqrt(static_cast<float>(cols));
        CHECK(worst_difference(by_tiles, reference) < float_tolerance);
        CHECK(worst_difference(by_registers, reference) < float_tolerance);
        if (integer) {
            const std::vector<float> xq = through_q8_0(x);
            shaped::kernels::quantized_matmul_reference(w.weight, xq.data(), n, rounded_reference.data());
            CHECK(worst_difference(by_integers, rounded_reference) < float_tolerance);
            // Q8_0 rounds each x by at most half a step, max|x| / 254 in its block.
            CHECK(worst_difference(by_integers, reference) < 0.05f * std::sqrt(static_cast<float>(cols)));
            CHECK(worst_difference(by_integers, reference) > 0);  // x was rounded: the test sees which way ran
        } else if constexpr (F::block_width == 256) {
            // With AVX-512 VNNI, Q6_K's integer way rounds x to Q8_K; without, it keeps x's floats.
            const std::vector<float> xq = through_q8_K(x);
            shaped::kernels::quantized_matmul_reference(w.weight, xq.data(), n, rounded_reference.data());
            CHECK((worst_difference(by_integers, reference) < float_tolerance ||
                   worst_difference(by_integers, rounded_reference) < float_tolerance));
        } else {
            CHECK(worst_difference(by_integers, reference) < float_tolerance);
        }
        CHECK((by_rows == by_integers || by_rows == by_registers));
        CHECK(chosen == (n >= shaped::kernels::quantized_gemm_rows ? by_tiles : by_rows));
    }
}

}  // namespace

TEST_CASE("quantized matmul of Q8_0 and Q4_0 weights in integers equals the reference over x rounded to Q8_0",
          "[quantized_matmul]") {
    check_format<shaped::q8_0>(true);
    check_format<shaped::q4_0>(true);
}

TEST_CASE("quantized matmul of K-quant F16 BF16 and F32 weights equals the naive reference", "[quantized_matmul]") {
    check_format<shaped::q4_K>(false);
    check_format<shaped::q6_K>(false);
    check_format<shaped::f16>(false);
    check_format<shaped::bf16>(false);
    check_format<shaped::f32>(false);
}

TEST_CASE("quantized matmul of a weight with extreme blocks stays exact in its int32 sums", "[quantized_matmul]") {
    // Every weight -128 (a corrupt file's byte: ggml's quantizer writes [-127, 127]) and every x at
    // its block's maximum: the products' magnitudes as large as the kernels can see.
    const std::size_t rows = 2, cols = 64;
    std::vector<shaped::block_q8_0> blocks(rows * cols / 32);
    for (auto& b : blocks) {
        b.d = shaped::float_to_half(1.0f);
        std::fill(std::begin(b.qs), std::end(b.qs), std::int8_t{-128});
    }
    const quantized_weight w{shaped::ggml_type::q8_0, blocks.data(), rows, cols};
    const std::vector<float> x(cols, 1.0f);
    const std::vector<float> xq = through_q8_0(x);
    std::vector<float> y(rows), reference(rows);
    shaped::kernels::quantized_matmul_integer(w, x.data(), 1, y.data());
    shaped::kernels::quantized_matmul_reference(w, xq.data(), 1, reference.data());
    for (std::size_t r = 0; r < rows; ++r) CHECK(y[r] == Approx(reference[r]).epsilon(1e-6));
    CHECK(reference[0] == Approx(-128.0 * 64.0).epsilon(1e-3));
}

// ---- the layers that compute with them ----------------------------------------------------------

namespace {
using In = shaped::dim<"In", 64>;
using Out = shaped::dim<"Out", 6>;
using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T">;
using V = shaped::dim<"V", 9>;
}  // namespace

TEST_CASE("a Linear of quantized weights runs the kernel on x, inline or held", "[quantized_matmul]") {
    shaped::Generator gen(3);
    const shaped::nn::Linear<In, Out, true, float, shaped::q4_0> layer(gen);
    const auto dense_weight = shaped::dequantize(layer.weight);
    for (const std::size_t t : {std::size_t{1}, std::size_t{5}}) {
        const auto x = shaped::randn<float, B, T, In>(gen, T{t});
        const shaped::Tensor<float, B, T, Out> inline_result = layer(x);
        const auto held = layer(x);  // an expression, held before it is evaluated
        const shaped::Tensor<float, B, T, Out> from_held = held;
        const shaped::Tensor<float, B, T, Out> want = shaped::matmul(x, dense_weight.mT()) + layer.bias;
        INFO(t << " positions");
        CHECK(std::equal(from_held.data(), from_held.data() + from_held.size(), inline_result.data()));
        // The layer runs the kernel: exactly its product, plus the bias. (The kernel against the
        // dense product is the cases above: a decoding step of Q4_0 may round x to Q8_0.)
        const std::size_t rows = B::extent * t;
        std::vector<float> product(rows * Out::extent);
        shaped::kernels::quantized_matmul(shaped::kernels::weight_of(layer.weight), x.data(), rows, product.data());
        for (std::size_t i = 0; i < want.size(); ++i) CHECK(inline_result.data()[i] == product[i] + layer.bias(i % Out::extent));
        const float bound = rows < shaped::kernels::quantized_gemm_rows ? 0.05f * std::sqrt(float(In::extent)) : 1e-4f;
        for (std::size_t i = 0; i < want.size(); ++i) CHECK(inline_result.data()[i] == Approx(want.data()[i]).margin(bound));
    }
    // Into a target of doubles: the product aside in floats, then converted.
    const shaped::nn::Linear<In, Out, false, float, shaped::q8_0> unbiased(gen);
    const auto x = shaped::randn<float, T, In>(gen, T{3});
    const shaped::Tensor<double, T, Out> wide = unbiased(x);
    const shaped::Tensor<float, T, Out> direct = unbiased(x);
    for (std::size_t i = 0; i < direct.size(); ++i) CHECK(wide.data()[i] == double{direct.data()[i]});
}

TEST_CASE("a quantized Embedding gathers dequantized rows and unembeds by its blocks", "[quantized_matmul]") {
    shaped::Generator gen(4);
    const shaped::nn::Embedding<V, In, float, shaped::q8_0> table(gen);
    const auto dense = shaped::dequantize(table.weight);
    std::vector<float> row(In::extent);
    table.copy_row(7, 0, row.data());
    for (std::size_t c = 0; c < In::extent; ++c) CHECK(row[c] == dense(7, c));
    CHECK_THROWS_AS(table.copy_row(9, 3, row.data()), shaped::shape_error);
    const auto x = shaped::randn<float, T, In>(gen, T{2});
    const shaped::Tensor<float, T, V> logits = table.unembed(x);
    const shaped::Tensor<float, T, V> want = shaped::matmul(x, dense.mT());
    // The kernel's product exactly; the dense one to the rounding of x a CPU without AVX-512
    // gives it (the kernel cases above).
    std::vector<float> product(2 * V::extent);
    shaped::kernels::quantized_matmul(shaped::kernels::weight_of(table.weight), x.data(), 2, product.data());
    for (std::size_t i = 0; i < want.size(); ++i) CHECK(logits.data()[i] == product[i]);
    for (std::size_t i = 0; i < want.size(); ++i)
        CHECK(logits.data()[i] == Approx(want.data()[i]).margin(0.05 * std::sqrt(double(In::extent))));
}

TEST_CASE("a quantized weight is a module parameter of its blocks, named and summarised with its format",
          "[quantized_matmul]") {
    using Layer = shaped::nn::Linear<In, Out, false, float, shaped::q8_0>;
    STATIC_REQUIRE(shaped::nn::parameter_count<Layer> == 64 * 6);
    STATIC_REQUIRE(shaped::nn::parameter_bytes<Layer> == 6 * 2 * 34);
    Layer layer;
    const auto slots = shaped::nn::parameter_list(layer);
    REQUIRE(slots.size() == 1);
    CHECK(slots[0].name == "weight");
    CHECK(slots[0].element_type == typeid(shaped::block_q8_0));
    CHECK(slots[0].size == 12);
    CHECK_THROWS_AS(slots[0].elements<float>(), std::logic_error);
    CHECK(shaped::nn::summary(layer).find("weight q8_0 (Out=6, In=64)") != std::string::npos);
}
