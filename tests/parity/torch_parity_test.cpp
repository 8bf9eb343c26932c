// shaped against PyTorch: the chapter's head run by torch 1.13 (tests/parity/make_fixtures.py)
// and by shaped on the same inputs and weights must agree to 1e-5.
#include <shaped/shaped.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

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

// ---- nanoGPT's GPT ---------------------------------------------------------------------------

namespace {
// make_fixtures.py's GPT_CONFIG: vocab 67, context 16, 2 layers, 3 heads, 24 channels.
using TinyGPT = shaped::models::GPT<shaped::models::gpt_config<67, 16, 2, 3, 24>>;
using GB = shaped::dim<"B", 2>;
}  // namespace

TEST_CASE("nanoGPT's GPT loaded from its state_dict matches PyTorch's logits and loss", "[parity][gpt]") {
    const shaped::io::safetensors_file file(std::string(SHAPED_FIXTURE_DIR) + "/gpt.safetensors");
    // nanoGPT's checkpoint holds the tied lm_head.weight and the attention mask buffers too: not asked for.
    REQUIRE(file.contains("lm_head.weight"));
    REQUIRE(file.contains("transformer.h.0.attn.bias"));
    auto model = std::make_unique<TinyGPT>();
    shaped::io::load_parameters(*model, file);
    const auto idx = shaped::io::load_npy<std::int64_t, GB, Tdyn>(fixture("gpt_idx"));
    const auto targets = shaped::io::load_npy<std::int64_t, GB, Tdyn>(fixture("gpt_targets"));
    const auto want = shaped::io::load_npy<float, GB, Tdyn, TinyGPT::vocab_dim>(fixture("gpt_logits"));
    const auto logits = (*model)(idx);
    require_close(logits, want);
    const double loss = shaped::models::cross_entropy(logits, targets);
    CHECK(std::abs(loss - static_cast<double>(shaped::io::load_npy<float>(fixture("gpt_loss")).item())) <= 1e-5);

    // Decoding through the caches, prompt in a chunk of 4 then a token a step, gives the same logits.
    TinyGPT::cache_type<GB> caches;
    const std::size_t total = idx.extents()[1];
    std::size_t at = 0;
    while (at < total) {
        const std::size_t n = at == 0 ? 4 : 1;
        const auto step = (*model)(shaped::slice<Tdyn>(idx, at, at + n), caches);
        for (std::size_t b = 0; b < 2; ++b)
            for (std::size_t t = 0; t < n; ++t)
                for (std::size_t v = 0; v < TinyGPT::vocab_dim::extent; ++v) {
                    INFO("batch row " << b << ", position " << at + t << ", vocab " << v);
                    REQUIRE(std::abs(step(b, t, v) - want(b, at + t, v)) <= 1e-5f);
                }
        at += n;
    }
}

TEST_CASE("GPT-2 124M's parameters are named, shaped and counted as PyTorch's named_parameters()", "[parity][gpt][module]") {
    using GPT2 = shaped::models::GPT<shaped::models::gpt2_124m>;
    std::ifstream listing(std::string(SHAPED_FIXTURE_DIR) + "/gpt2_124m_parameters.txt");
    std::vector<std::string> want;
    std::string line;
    std::size_t total = 0;
    while (std::getline(listing, line)) {
        if (line.starts_with("total ")) total = std::stoull(line.substr(6));
        else want.push_back(line);
    }
    REQUIRE(want.size() == 2 + 12 * 12 + 2);
    const auto model = std::make_unique<GPT2>();
    std::vector<std::string> got;
    shaped::nn::for_each_parameter(*model, [&](std::string_view name, const auto& p) {
        std::string entry(name);
        for (const std::size_t extent : p.extents()) entry += " " + std::to_string(extent);
        got.push_back(entry);
    });
    CHECK(got == want);
    CHECK(shaped::nn::parameter_count<GPT2> == total);
    CHECK(shaped::nn::parameter_bytes<GPT2> == 4 * total);
}

TEST_CASE("a Hugging Face GPT-2 directory loads, Conv1D weights transposed, and matches PyTorch", "[parity][gpt][hf]") {
    using HfConfig = shaped::models::gpt_config<67, 64, 2, 3, 24, shaped::nn::activation::gelu_tanh>;
    const std::string dir = std::string(SHAPED_FIXTURE_DIR) + "/hf_gpt2";
    const auto model = shaped::models::load_gpt<HfConfig>(dir);
    const auto idx = shaped::io::load_npy<std::int64_t, GB, Tdyn>(fixture("hf_gpt2_idx"));
    const auto want = shaped::io::load_npy<float, GB, Tdyn, shaped::dim<"V", 67>>(fixture("hf_gpt2_logits"));
    require_close((*model)(idx), want);

    // Greedy continuation through the caches: PyTorch's ids, each the argmax of a full forward.
    const auto greedy = shaped::io::load_npy<std::int64_t, GB, Tdyn>(fixture("hf_gpt2_greedy"));
    std::vector<std::vector<shaped::models::token_id>> prompts(2);
    for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t t = 0; t < idx.extents()[1]; ++t) prompts[b].push_back(idx(b, t));
    shaped::Generator gen(0);
    const auto out = shaped::models::generate<2>(*model, prompts, {.max_new_tokens = 32, .how = {.temperature = 0}}, gen);
    for (std::size_t b = 0; b < 2; ++b) {
        std::vector<shaped::models::token_id> want_ids;
        for (std::size_t t = 0; t < greedy.extents()[1]; ++t) want_ids.push_back(greedy(b, t));
        CHECK(out[b].ids == want_ids);
        CHECK(out[b].stopped == shaped::models::stop_reason::max_new_tokens);
    }

    // The same tensors named as GPT2LMHeadModel saves them, with "transformer.": the same model.
    const auto scratch = std::filesystem::temp_directory_path() / ("shaped_hf_gpt2_" + std::to_string(std::random_device{}()));
    std::filesystem::create_directories(scratch);
    std::filesystem::copy_file(dir + "/config.json", scratch / "config.json");
    const shaped::io::safetensors_file hub(dir + "/model.safetensors");
    std::vector<std::vector<std::byte>> bytes;
    std::vector<shaped::io::safetensors_view> renamed;
    for (const std::string& name : hub.names()) {
        const auto& info = hub.info(name);
        bytes.emplace_back(info.data_end - info.data_begin);
        hub.read(name, bytes.back());
    }
    for (std::size_t i = 0; i < bytes.size(); ++i) {
        const std::string name = hub.names()[i];
        renamed.push_back({"transformer." + name, hub.info(name).dtype, hub.info(name).shape, bytes[i]});
    }
    shaped::io::write_safetensors(scratch / "model.safetensors", renamed);
    const auto prefixed = shaped::models::load_gpt<HfConfig>(scratch);
    require_close((*prefixed)(idx), want);
    std::filesystem::remove_all(scratch);

    // A config that is not the checkpoint's is refused, naming each mismatch.
    using Other = shaped::models::gpt_config<67, 64, 3, 3, 24>;
    try {
        (void)shaped::models::load_gpt<Other>(dir);
        FAIL("loaded a checkpoint into another config");
    } catch (const shaped::io::io_error& error) {
        const std::string message = error.what();
        CHECK(message.find("shaped::models::gpt_config<67, 64, 2, 3, 24, shaped::nn::activation::gelu_tanh>") != std::string::npos);
        CHECK(message.find("n_layer: the checkpoint has 2, the compiled config 3") != std::string::npos);
        CHECK(message.find("activation_function: the checkpoint has gelu_new, the compiled config gelu") != std::string::npos);
    }
}
