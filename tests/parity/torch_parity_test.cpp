// shaped against PyTorch: the chapter's head run by torch 1.13 (tests/parity/make_fixtures.py)
// and by shaped on the same inputs and weights must agree to 1e-5.
#include <shaped/shaped.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>

namespace {

using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 4>;
using C = shaped::dim<"C", 6>;
using H = shaped::dim<"H", 16>;
using N = shaped::dim<"N", 5>;
using B1 = shaped::dim<"B", 1>;
using Tdyn = shaped::dim<"T">;

std::string fixture(const char* name) { return std::string(SHAPED_FIXTURE_DIR) + "/" + name + ".npy"; }

template <class Actual, class Expected>
void require_close(const Actual& actual, const Expected& expected) {
    REQUIRE(actual.extents() == expected.extents());
    for (std::size_t i = 0; i < actual.size(); ++i) {
        INFO("element " << i);
        REQUIRE(std::abs(actual.data()[i] - expected.data()[i]) <= 1e-5f);
    }
}

// The chapter's three projections, with the weights torch initialised.
struct Projections {
    shaped::nn::Linear<C, H, false> key, query, value;
    Projections() {
        key.weight = shaped::io::load_npy<float, H, C>(fixture("key_weight"));
        query.weight = shaped::io::load_npy<float, H, C>(fixture("query_weight"));
        value.weight = shaped::io::load_npy<float, H, C>(fixture("value_weight"));
    }
};

// The head as the chapter writes it, for a batch Bx and time TT (static or dynamic).
template <class Bx, class TT, class... Extent>
auto head(const Projections& p, const shaped::Tensor<float, Bx, TT, C>& x, float scale, Extent... t) {
    shaped::Tensor<float, Bx, TT, H> k = p.key(x);
    shaped::Tensor<float, Bx, TT, H> q = p.query(x);
    shaped::Tensor<float, Bx, TT, TT> wei = shaped::matmul(q, k.mT()) * scale;
    auto tril = shaped::tril(shaped::ones<float, TT, TT>(t..., t...));
    wei = shaped::masked_fill(wei, tril == 0.0f, -std::numeric_limits<float>::infinity());
    wei = shaped::softmax<-1>(wei);
    shaped::Tensor<float, Bx, TT, H> out = shaped::matmul(wei, p.value(x));
    return std::pair{wei, out};
}

}  // namespace

TEST_CASE("section 1: the head's attention weights and output match PyTorch", "[parity]") {
    const Projections p;
    const auto x = shaped::io::load_npy<float, B, T, C>(fixture("x"));
    const auto [wei, out] = head(p, x, 1.0f);
    require_close(wei, shaped::io::load_npy<float, B, T, T>(fixture("wei")));
    require_close(out, shaped::io::load_npy<float, B, T, H>(fixture("out")));
}

TEST_CASE("section 2: the scaled head matches PyTorch", "[parity]") {
    const Projections p;
    const auto x = shaped::io::load_npy<float, B, T, C>(fixture("x"));
    const auto [wei, out] = head(p, x, std::pow(16.0f, -0.5f));
    require_close(wei, shaped::io::load_npy<float, B, T, T>(fixture("wei_scaled")));
    require_close(out, shaped::io::load_npy<float, B, T, H>(fixture("out_scaled")));
}

TEST_CASE("a longer, dynamic-length sequence matches PyTorch", "[parity]") {
    const Projections p;
    const auto x = shaped::io::load_npy<float, B1, Tdyn, C>(fixture("x_long"));
    const std::size_t t = x.extents()[1];
    REQUIRE(t > T::extent);
    const auto [wei, out] = head(p, x, std::pow(16.0f, -0.5f), Tdyn{t});
    require_close(wei, shaped::io::load_npy<float, B1, Tdyn, Tdyn>(fixture("wei_long")));
    require_close(out, shaped::io::load_npy<float, B1, Tdyn, H>(fixture("out_long")));
}

TEST_CASE("section 2: softmax sharpening and the unbiased variance match PyTorch", "[parity]") {
    const auto logits = shaped::io::load_npy<float, N>(fixture("logits"));
    require_close(shaped::eval(shaped::softmax<-1>(logits)), shaped::io::load_npy<float, N>(fixture("prob1")));
    require_close(shaped::eval(shaped::softmax<-1>(logits * 6.0f)), shaped::io::load_npy<float, N>(fixture("prob2")));
    const auto input = shaped::io::load_npy<float, B, T, H>(fixture("var_input"));
    const float expected = shaped::io::load_npy<float>(fixture("var_value")).item();
    REQUIRE(std::abs(shaped::var(input).item() - expected) <= 1e-5f);
}

TEST_CASE("a fixture that does not fit the declared dims is refused", "[parity]") {
    using Wrong = shaped::dim<"T", 5>;
    REQUIRE_THROWS_AS((shaped::io::load_npy<float, B, Wrong, C>(fixture("x"))), shaped::shape_error);
    REQUIRE_THROWS_WITH((shaped::io::load_npy<float, B, Wrong, C>(fixture("x"))),
                        Catch::Contains("x.npy") && Catch::Contains("the file's shape (2, 4, 6)") &&
                            Catch::Contains("the declared shape (B=2, T=5, C=6)") &&
                            Catch::Contains("T is 4 in the file, not 5"));
    REQUIRE_THROWS_AS((shaped::io::load_npy<double, B, T, C>(fixture("x"))), shaped::io::io_error);
    REQUIRE_THROWS_AS((shaped::io::load_npy<float, B, T>(fixture("x"))), shaped::shape_error);
}

TEST_CASE("nanoGPT's CausalSelfAttention loaded from its state_dict as safetensors matches PyTorch", "[parity][safetensors]") {
    using C12 = shaped::dim<"C", 12>;
    using NH = shaped::dim<"NH", 3>;
    using HS = shaped::dim<"HS", 4>;
    using T5 = shaped::dim<"T", 5>;
    const shaped::io::safetensors_file file(std::string(SHAPED_FIXTURE_DIR) + "/mha.safetensors");
    // The state_dict holds nanoGPT's causal-mask buffer "bias" too, which the layer does not name.
    REQUIRE(file.contains("bias"));
    REQUIRE(file.metadata().at("format") == "pt");

    shaped::nn::MultiHeadAttention<C12, NH, HS> attn;
    shaped::io::load_parameters(attn, file);
    const auto x = shaped::io::load_npy<float, B, T5, C12>(fixture("mha_x"));
    require_close(attn(x), shaped::io::load_npy<float, B, T5, C12>(fixture("mha_y")));
    // The same with the time extent known only at run time.
    const auto x_dynamic = shaped::io::load_npy<float, B, Tdyn, C12>(fixture("mha_x"));
    require_close(attn(x_dynamic), shaped::io::load_npy<float, B, Tdyn, C12>(fixture("mha_y")));
}

TEST_CASE("nanoGPT's Block loaded from its state_dict as safetensors matches PyTorch", "[parity][safetensors][block]") {
    using C12 = shaped::dim<"C", 12>;
    using NH = shaped::dim<"NH", 3>;
    using HS = shaped::dim<"HS", 4>;
    using T5 = shaped::dim<"T", 5>;
    using Block = shaped::nn::Block<C12, NH, HS>;
    const shaped::io::safetensors_file file(std::string(SHAPED_FIXTURE_DIR) + "/block.safetensors");
    Block block;
    shaped::io::load_parameters(block, file);
    const auto x = shaped::io::load_npy<float, B, T5, C12>(fixture("block_x"));
    const auto y = shaped::io::load_npy<float, B, T5, C12>(fixture("block_y"));
    require_close(block(x), y);
    // Decoding token by token with the block's cache gives torch's full forward too.
    const auto x_dynamic = shaped::io::load_npy<float, B, Tdyn, C12>(fixture("block_x"));
    Block::cache_type<B, shaped::dim<"S", 8>> cache;
    for (std::size_t t = 0; t < 5; ++t) {
        const auto step = block(shaped::slice<Tdyn>(x_dynamic, t, t + 1), cache);
        for (std::size_t b = 0; b < 2; ++b)
            for (std::size_t c = 0; c < 12; ++c) {
                INFO("batch row " << b << ", position " << t << ", channel " << c);
                REQUIRE(std::abs(step(b, 0, c) - y(b, t, c)) <= 1e-5f);
            }
    }
}
