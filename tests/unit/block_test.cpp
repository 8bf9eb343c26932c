// The rest of a GPT block: LayerNorm (a row kernel), GELU (vectorised elementwise), nanoGPT's
// MLP and Block, each against naive loops in double over a few sizes, static and dynamic T; and
// Block's cached decoding against its full causal forward.
#include "reference.hpp"

#include <shaped/shaped.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace {

using B = shaped::dim<"B", 2>;
using Td = shaped::dim<"T">;

// Layer norm of each row of n in x: (x - mean) / sqrt(biased var + eps) * w + b.
std::vector<double> naive_layer_norm(const std::vector<double>& x, std::size_t n, const std::vector<double>& w,
                                     const std::vector<double>& b, double eps = 1e-5) {
    std::vector<double> y(x.size());
    for (std::size_t r = 0; r < x.size() / n; ++r) {
        double mean = 0;
        for (std::size_t i = 0; i < n; ++i) mean += x[r * n + i];
        mean /= static_cast<double>(n);
        double var = 0;
        for (std::size_t i = 0; i < n; ++i) var += (x[r * n + i] - mean) * (x[r * n + i] - mean);
        var /= static_cast<double>(n);
        for (std::size_t i = 0; i < n; ++i)
            y[r * n + i] = (x[r * n + i] - mean) / std::sqrt(var + eps) * w[i] + (b.empty() ? 0.0 : b[i]);
    }
    return y;
}

double naive_gelu(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
// GPT-2's gelu_new, as Hugging Face writes it.
double naive_gelu_tanh(double x) {
    return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * std::pow(x, 3.0))));
}

// activation(x) against naive(x) element by element, over n values in [-6, 6) (both tails),
// evaluated into a new tensor and assigned to x in place; the inputs, for further checks.
template <class V, class Activation>
std::vector<double> check_activation(Activation activation, double (*naive)(double), std::size_t n,
                                     std::uint64_t seed) {
    using N = shaped::dim<"N">;
    shaped::Tensor<V, N> x(N{n});
    ref::fill(x, seed);
    x = x * V(3);
    const std::vector<double> inputs = ref::values(x);
    std::vector<double> want;
    for (double v : inputs) want.push_back(naive(v));
    const double tol = std::is_same_v<V, float> ? 1e-6 : 1e-13;
    ref::require_close(ref::values(activation(x)), want, tol);
    x = activation(x);
    ref::require_close(ref::values(x), want, tol);
    return inputs;
}

}  // namespace

TEMPLATE_TEST_CASE("layer_norm is the mean and biased variance of each row, normalised", "[block][layer_norm]", float,
                   double) {
    using V = TestType;
    const auto sizes = GENERATE(1, 3, 12, 37);
    using N = shaped::dim<"N">;
    using T = shaped::dim<"T", 3>;
    shaped::Tensor<V, B, T, N> x(N{static_cast<std::size_t>(sizes)});
    shaped::Tensor<V, N> w(N{static_cast<std::size_t>(sizes)}), b(N{static_cast<std::size_t>(sizes)});
    ref::fill(x, 1);
    ref::fill(w, 2);
    ref::fill(b, 3);
    // An offset far from zero against a small spread: one-pass E[x^2] - E[x]^2 would lose it.
    x = x * V(0.01) + V(100);
    const std::size_t n = static_cast<std::size_t>(sizes);
    const auto want = naive_layer_norm(ref::values(x), n, ref::values(w), ref::values(b));
    const double tol = std::is_same_v<V, float> ? 2e-3 : 1e-9;  // float holds 100.0x to ~1e-5

    SECTION("into a new tensor") {
        const shaped::Tensor<V, B, T, N> y = shaped::layer_norm(x, w, b);
        ref::require_close(ref::values(y), want, tol);
    }
    SECTION("in place") {
        x = shaped::layer_norm(x, w, b);
        ref::require_close(ref::values(x), want, tol);
    }
    SECTION("without a bias") {
        const shaped::Tensor<V, B, T, N> y = shaped::layer_norm(x, w, nullptr);
        ref::require_close(ref::values(y), naive_layer_norm(ref::values(x), n, ref::values(w), {}), tol);
    }
    SECTION("of an elementwise expression, inside another one") {
        const shaped::Tensor<V, B, T, N> y = shaped::layer_norm(x - V(100), w, b) * V(2);
        auto twice = want;
        for (double& v : twice) v *= 2;
        ref::require_close(ref::values(y), twice, tol);
    }
    SECTION("into a strided view") {
        shaped::Tensor<V, B, T, N> storage(N{2 * n});
        auto view = shaped::slice<N>(storage, 0, n);
        view = shaped::layer_norm(x, w, b);
        ref::require_close(ref::values(view), want, tol);
    }
    SECTION("a weight of another extent is a shape_error") {
        shaped::Tensor<V, N> w2(N{n + 1});
        REQUIRE_THROWS_AS(shaped::layer_norm(x, w2, b), shaped::shape_error);
    }
}

TEST_CASE("nn::LayerNorm: ones and zeros, eps 1e-5, over the last dim", "[block][layer_norm]") {
    using C = shaped::dim<"C", 12>;
    shaped::Generator gen(5);
    shaped::nn::LayerNorm<C> ln(gen);
    REQUIRE(ref::values(ln.weight) == std::vector<double>(12, 1.0));
    REQUIRE(ref::values(ln.bias) == std::vector<double>(12, 0.0));
    ref::fill(ln.weight, 6);
    ref::fill(ln.bias, 7);
    const auto t = GENERATE(1, 5, 19);
    const auto x = shaped::randn<float, B, Td, C>(gen, Td{static_cast<std::size_t>(t)});
    const shaped::Tensor<float, B, Td, C> y = ln(x);
    ref::require_close(ref::values(y), naive_layer_norm(ref::values(x), 12, ref::values(ln.weight), ref::values(ln.bias)),
                       1e-5);
    shaped::nn::LayerNorm<C, false> plain(gen);
    const shaped::Tensor<float, B, Td, C> z = plain(x);
    ref::require_close(ref::values(z), naive_layer_norm(ref::values(x), 12, std::vector<double>(12, 1.0), {}), 1e-5);
    // A 2-d input (rows of C) is fine too.
    const auto rows = shaped::randn<float, Td, C>(gen, Td{3});
    ref::require_close(ref::values(ln(rows)),
                       naive_layer_norm(ref::values(rows), 12, ref::values(ln.weight), ref::values(ln.bias)), 1e-5);
    // A dynamic channel dim of the wrong extent is caught at run time.
    using Cd = shaped::dim<"C">;
    const auto wide = shaped::randn<float, B, Cd>(gen, Cd{13});
    REQUIRE_THROWS_AS(ln(wide), shaped::shape_error);
}

TEMPLATE_TEST_CASE("gelu is x * Phi(x), the erf form", "[block][gelu]", float, double) {
    const auto n = static_cast<std::size_t>(GENERATE(1, 7, 64, 1001));
    check_activation<TestType>([](const auto& x) { return shaped::gelu(x); }, naive_gelu, n, 9);
}

TEMPLATE_TEST_CASE("gelu_tanh is GPT-2's gelu_new, the tanh approximation", "[block][gelu]", float, double) {
    const auto n = static_cast<std::size_t>(GENERATE(1, 7, 64, 1001));
    const auto inputs =
        check_activation<TestType>([](const auto& x) { return shaped::gelu_tanh(x); }, naive_gelu_tanh, n, 10);
    // Not the erf form: the two differ by up to ~1e-3 over [-6, 6).
    double most = 0;
    for (double v : inputs) most = std::max(most, std::abs(naive_gelu_tanh(v) - naive_gelu(v)));
    CHECK(most > 1e-4);
}

// ---- MLP and Block ---------------------------------------------------------------------------

namespace {

using C = shaped::dim<"C", 12>;
using NH = shaped::dim<"NH", 3>;
using HS = shaped::dim<"HS", 4>;
using S = shaped::dim<"S", 16>;
using Block = shaped::nn::Block<C, NH, HS>;
using Mlp = shaped::nn::MLP<C>;

// x (rows x in) @ w^T (w: out x in) + bias, each row.
std::vector<double> naive_linear(const std::vector<double>& x, std::size_t in, const std::vector<double>& w,
                                 std::size_t out, const std::vector<double>& bias) {
    const std::size_t rows = x.size() / in;
    std::vector<double> y(rows * out);
    for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t o = 0; o < out; ++o) {
            double s = bias.empty() ? 0.0 : bias[o];
            for (std::size_t i = 0; i < in; ++i) s += x[r * in + i] * w[o * in + i];
            y[r * out + o] = s;
        }
    return y;
}

template <class Layer>
std::vector<double> naive_mlp(const Layer& mlp, const std::vector<double>& x) {
    constexpr std::size_t c = Layer::channel_dim::extent, hidden = Layer::hidden_dim::extent;
    auto h = naive_linear(x, c, ref::values(mlp.c_fc.weight), hidden, ref::values(mlp.c_fc.bias));
    for (double& v : h) v = naive_gelu(v);
    return naive_linear(h, hidden, ref::values(mlp.c_proj.weight), c, ref::values(mlp.c_proj.bias));
}

// nanoGPT's CausalSelfAttention over x (batch x t x C), from the definition.
template <class Attention>
std::vector<double> naive_attention(const Attention& attn, const std::vector<double>& x, std::size_t batch,
                                    std::size_t t) {
    const std::size_t c = C::extent, hs = HS::extent;
    const auto qkv = naive_linear(x, c, ref::values(attn.c_attn.weight), 3 * c, ref::values(attn.c_attn.bias));
    std::vector<double> y(batch * t * c);
    const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
    for (std::size_t b = 0; b < batch; ++b)
        for (std::size_t h = 0; h < NH::extent; ++h)
            for (std::size_t i = 0; i < t; ++i) {
                const auto at = [&](std::size_t pos, std::size_t part, std::size_t d) {
                    return qkv[(b * t + pos) * 3 * c + part * c + h * hs + d];
                };
                std::vector<double> w(i + 1);
                double max = -INFINITY, z = 0;
                for (std::size_t j = 0; j <= i; ++j) {
                    double s = 0;
                    for (std::size_t d = 0; d < hs; ++d) s += at(i, 0, d) * at(j, 1, d);
                    max = std::max(max, w[j] = s * scale);
                }
                for (double& e : w) z += (e = std::exp(e - max));
                for (std::size_t d = 0; d < hs; ++d) {
                    double s = 0;
                    for (std::size_t j = 0; j <= i; ++j) s += w[j] / z * at(j, 2, d);
                    y[(b * t + i) * c + h * hs + d] = s;
                }
            }
    return naive_linear(y, c, ref::values(attn.c_proj.weight), c, ref::values(attn.c_proj.bias));
}

// x + attn(ln_1(x)), then x + mlp(ln_2(x)).
template <class AnyBlock>
std::vector<double> naive_block(const AnyBlock& block, std::vector<double> x, std::size_t batch, std::size_t t) {
    const std::size_t c = C::extent;
    const auto a = naive_attention(
        block.attn, naive_layer_norm(x, c, ref::values(block.ln_1.weight), ref::values(block.ln_1.bias)), batch, t);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += a[i];
    const auto m = naive_mlp(block.mlp, naive_layer_norm(x, c, ref::values(block.ln_2.weight), ref::values(block.ln_2.bias)));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += m[i];
    return x;
}

// A block with every parameter random (LayerNorm's ones and zeros would hide a swapped weight).
template <class AnyBlock = Block>
AnyBlock random_block(std::uint64_t seed) {
    shaped::Generator gen(seed);
    AnyBlock block(gen);
    ref::fill(block.ln_1.weight, seed + 1);
    ref::fill(block.ln_1.bias, seed + 2);
    ref::fill(block.ln_2.weight, seed + 3);
    ref::fill(block.ln_2.bias, seed + 4);
    return block;
}

}  // namespace

TEST_CASE("nn::MLP is c_proj(gelu(c_fc(x))), 4C wide", "[block][mlp]") {
    static_assert(Mlp::hidden_dim::extent == 48);
    shaped::Generator gen(11);
    const Mlp mlp(gen);
    const auto t = static_cast<std::size_t>(GENERATE(1, 4, 23));
    SECTION("dynamic T") {
        const auto x = shaped::randn<float, B, Td, C>(gen, Td{t});
        const auto y = mlp(x);
        STATIC_REQUIRE(std::is_same_v<std::remove_cvref_t<decltype(y)>, shaped::Tensor<float, B, Td, C>>);
        ref::require_close(ref::values(y), naive_mlp(mlp, ref::values(x)), 1e-5);
    }
    SECTION("static T, and a lazy input") {
        using T3 = shaped::dim<"T", 3>;
        const auto x = shaped::randn<float, B, T3, C>(gen);
        auto want_in = ref::values(x);
        for (double& v : want_in) v *= 2;
        ref::require_close(ref::values(mlp(x * 2.0f)), naive_mlp(mlp, want_in), 1e-5);
    }
    SECTION("another hidden width, without bias") {
        using F = shaped::dim<"F", 20>;
        const shaped::nn::MLP<C, F, false> narrow(gen);
        const auto x = shaped::randn<float, B, Td, C>(gen, Td{t});
        auto h = naive_linear(ref::values(x), 12, ref::values(narrow.c_fc.weight), 20, {});
        for (double& v : h) v = naive_gelu(v);
        ref::require_close(ref::values(narrow(x)), naive_linear(h, 20, ref::values(narrow.c_proj.weight), 12, {}), 1e-5);
    }
    SECTION("a dynamic channel dim of the wrong extent is a shape_error") {
        using Cd = shaped::dim<"C">;
        const auto x = shaped::randn<float, B, Td, Cd>(gen, Td{t}, Cd{13});
        REQUIRE_THROWS_AS(mlp(x), shaped::shape_error);
    }
}

TEST_CASE("nn::Block is x + attn(ln_1(x)), then + mlp(ln_2(x))", "[block]") {
    const Block block = random_block(21);
    shaped::Generator gen(22);
    const auto t = static_cast<std::size_t>(GENERATE(1, 2, 5, 16, 37));
    const auto x = shaped::randn<float, B, Td, C>(gen, Td{t});
    const auto y = block(x);
    STATIC_REQUIRE(std::is_same_v<std::remove_cvref_t<decltype(y)>, shaped::Tensor<float, B, Td, C>>);
    ref::require_close(ref::values(y), naive_block(block, ref::values(x), 2, t), 1e-5);
    SECTION("static T") {
        using T5 = shaped::dim<"T", 5>;
        const auto xs = shaped::randn<float, B, T5, C>(gen);
        ref::require_close(ref::values(block(xs)), naive_block(block, ref::values(xs), 2, 5), 1e-5);
    }
    SECTION("a dynamic channel dim of the wrong extent is a shape_error") {
        using Cd = shaped::dim<"C">;
        const auto wide = shaped::randn<float, B, Td, Cd>(gen, Td{t}, Cd{13});
        REQUIRE_THROWS_AS(block(wide), shaped::shape_error);
    }
}

TEST_CASE("nn::Block decodes with its attention's cache as its full forward computes", "[block][decode]") {
    const Block block = random_block(31);
    shaped::Generator gen(32);
    const std::size_t total = S::extent;
    const auto x = shaped::randn<float, B, Td, C>(gen, Td{total});
    const auto full = block(x);

    SECTION("prefill, then token by token") {
        const std::size_t prompt = GENERATE(1, 3, 7);
        Block::cache_type<B, S> cache;
        ref::require_rows_match(block(shaped::slice<Td>(x, 0, prompt), cache), full, 0);
        for (std::size_t pos = prompt; pos < total; ++pos) {
            const auto y = block(shaped::slice<Td>(x, pos, pos + 1), cache);
            REQUIRE(cache.length() == pos + 1);
            ref::require_rows_match(y, full, pos);
        }
        REQUIRE_THROWS_AS(block(shaped::slice<Td>(x, 0, 1), cache), shaped::nn::cache_overflow);
    }
    SECTION("in chunks") {
        const std::size_t chunk = GENERATE(2, 5);
        Block::cache_type<B, S> cache;
        for (std::size_t pos = 0; pos < total; pos += chunk) {
            const std::size_t end = std::min(total, pos + chunk);
            ref::require_rows_match(block(shaped::slice<Td>(x, pos, end), cache), full, pos);
        }
    }
    SECTION("a ragged batch: each row as its own prefix, padding 0") {
        Block::cache_type<B, S> cache;
        const auto y = block(shaped::slice<Td>(x, 0, 4), cache, Block::cache_type<B, S>::lengths_type{4, 2});
        REQUIRE(cache.lengths() == Block::cache_type<B, S>::lengths_type{4, 2});
        const auto prefix = shaped::eval(shaped::slice<Td>(x, 0, 2));
        const auto row1 = block(shaped::slice<B>(prefix, 1, 2));
        for (std::size_t i = 0; i < 4; ++i)
            for (std::size_t d = 0; d < C::extent; ++d) {
                REQUIRE(std::abs(y(0, i, d) - full(0, i, d)) <= 1e-5 * (1 + std::abs(full(0, i, d))));
                if (i < 2) REQUIRE(std::abs(y(1, i, d) - row1(0, i, d)) <= 1e-5 * (1 + std::abs(row1(0, i, d))));
                else REQUIRE(y(1, i, d) == 0.0f);
            }
    }
}

TEST_CASE("a float64 Block meets the naive reference to double precision, in full and decoding", "[block][decode]") {
    using Block64 = shaped::nn::Block<C, NH, HS, true, double>;
    const auto block = random_block<Block64>(61);
    STATIC_REQUIRE(std::is_same_v<std::remove_cvref_t<decltype(block.attn.c_attn.weight)>,
                                  shaped::Tensor<double, Block64::attention_type::fused_dim, C>>);
    STATIC_REQUIRE(std::is_same_v<Block64::cache_type<B, S>::value_type, double>);
    shaped::Generator gen(62);
    const std::size_t total = 11;
    const auto x = shaped::randn<double, B, Td, C>(gen, Td{total});
    const auto full = block(x);
    STATIC_REQUIRE(std::is_same_v<std::remove_cvref_t<decltype(full)>, shaped::Tensor<double, B, Td, C>>);
    // float's rounding alone is ~1e-7 here: 1e-12 holds only if every step ran in double.
    ref::require_close(ref::values(full), naive_block(block, ref::values(x), 2, total), 1e-12);
    Block64::cache_type<B, S> cache;
    for (std::size_t pos = 0; pos < total; ++pos)
        ref::require_rows_match(block(shaped::slice<Td>(x, pos, pos + 1), cache), full, pos, 1e-12);
}

TEST_CASE("a stack of two blocks decodes token by token as it runs in full", "[block][decode]") {
    const Block first = random_block(41), second = random_block(51);
    shaped::Generator gen(42);
    const std::size_t total = 9;
    const auto x = shaped::randn<float, B, Td, C>(gen, Td{total});
    const auto full = second(first(x));
    Block::cache_type<B, S> cache_1, cache_2;
    for (std::size_t pos = 0; pos < total; ++pos) {
        const auto y = second(first(shaped::slice<Td>(x, pos, pos + 1), cache_1), cache_2);
        ref::require_rows_match(y, full, pos);
    }
}

TEST_CASE("LayerNorm, MLP and Block name their parameters as nanoGPT's state_dict does", "[block][io]") {
    const auto names = [](auto& layer) {
        std::vector<std::string> out;
        shaped::nn::for_each_parameter(layer, [&](std::string_view name, auto&) { out.emplace_back(name); });
        return out;
    };
    shaped::nn::LayerNorm<C> ln;
    CHECK(names(ln) == std::vector<std::string>{"weight", "bias"});
    const shaped::nn::LayerNorm<C, false> ln_plain;
    CHECK(names(ln_plain) == std::vector<std::string>{"weight"});
    Mlp mlp;
    CHECK(names(mlp) == std::vector<std::string>{"c_fc.weight", "c_fc.bias", "c_proj.weight", "c_proj.bias"});
    const Block block;
    CHECK(names(block) == std::vector<std::string>{"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
                                                   "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
                                                   "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight",
                                                   "mlp.c_proj.bias"});
    const shaped::nn::Block<C, NH, HS, false> plain;
    CHECK(names(plain) == std::vector<std::string>{"ln_1.weight", "attn.c_attn.weight", "attn.c_proj.weight",
                                                   "ln_2.weight", "mlp.c_fc.weight", "mlp.c_proj.weight"});

    SECTION("a block saved and loaded back computes the same") {
        const Block source = random_block(61);
        const auto path = std::filesystem::temp_directory_path() / "shaped_block_test.safetensors";
        shaped::io::save_parameters(path, source, {}, "transformer.h.0.");
        Block loaded;
        shaped::io::load_parameters(loaded, path, "transformer.h.0.");
        std::filesystem::remove(path);
        shaped::Generator gen(62);
        const auto x = shaped::randn<float, B, Td, C>(gen, Td{6});
        REQUIRE(ref::values(loaded(x)) == ref::values(source(x)));
    }
}
