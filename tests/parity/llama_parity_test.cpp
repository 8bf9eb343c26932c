// The Llama family against PyTorch (tests/parity/make_fixtures.py's reference, written from
// llama2.c's model.py): the real stories260K checkpoint greedy-decoded from BOS, and a Hugging
// Face layout Llama with random weights and grouped heads.
#include <shaped/shaped.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>

namespace {

std::string fixture(const char* name) { return std::string(SHAPED_FIXTURE_DIR) + "/" + name + ".npy"; }
const std::string stories260k_path = std::string(SHAPED_MODELS_DIR) + "/stories260K.bin";

using Stories = shaped::models::Llama<shaped::models::stories260k>;
using One = shaped::dim<"B", 1>;
using Steps = shaped::dim<"N", 256>;

// make_fixtures.py's HF_LLAMA config: vocab 67, context 32, 2 layers, 6 heads over 2 key/value
// heads, 24 channels, FFN 40, its own lm_head, rotate_half.
using HFLlama = shaped::models::Llama<
    shaped::models::llama_config<67, 32, 2, 6, 2, 24, 40, false, shaped::nn::rotary_pairing::halves>>;

}  // namespace

TEST_CASE("stories260K greedy from BOS: PyTorch's 256 ids, and its logits to 1e-4 at every step",
          "[parity][llama]") {
    const auto model = shaped::models::load_llama<shaped::models::stories260k>(stories260k_path);
    const auto want_ids = shaped::io::load_npy<std::int64_t, Steps>(fixture("stories260k_greedy"));
    const auto want_logits = shaped::io::load_npy<float, Steps, Stories::vocab_dim>(fixture("stories260k_logits"));
    auto caches = std::make_unique<Stories::cache_type<One>>();
    shaped::Tensor<shaped::text::token_id, One, shaped::dim<"T", 1>> next;
    next(0, 0) = 1;  // BOS
    double most = 0;
    for (std::size_t step = 0; step < Steps::extent; ++step) {
        const auto logits = model->next_logits(next, *caches);
        const float* row = logits.data();
        for (std::size_t v = 0; v < Stories::vocab_dim::extent; ++v)
            most = std::max(most, static_cast<double>(std::abs(row[v] - want_logits(step, v))));
        const auto id = std::max_element(row, row + Stories::vocab_dim::extent) - row;
        INFO("step " << step);
        REQUIRE(id == want_ids(step));
        next(0, 0) = static_cast<shaped::text::token_id>(id);
    }
    INFO("largest |logit - PyTorch's| " << most);
    CHECK(most <= 1e-4);
}

TEST_CASE("stories260K through generate and through a full forward gives the same ids", "[parity][llama]") {
    const auto model = shaped::models::load_llama<shaped::models::stories260k>(stories260k_path);
    const auto want_ids = shaped::io::load_npy<std::int64_t, Steps>(fixture("stories260k_greedy"));
    shaped::Generator gen(0);
    const auto out = shaped::models::generate(*model, {{1}}, {.max_new_tokens = 64, .how = {.temperature = 0}}, gen);
    REQUIRE(out[0].ids.size() == 64);
    for (std::size_t i = 0; i < 64; ++i) REQUIRE(out[0].ids[i] == want_ids(i));
    // The whole prefix at once, as the full causal forward runs it: the same greedy choices.
    using Tdyn = shaped::dim<"T">;
    shaped::Tensor<shaped::text::token_id, One, Tdyn> fed{shaped::Shape<One, Tdyn>({1, 64})};
    fed(0, 0) = 1;
    for (std::size_t i = 1; i < 64; ++i) fed(0, i) = out[0].ids[i - 1];
    const auto logits = (*model)(fed);
    for (std::size_t t = 0; t < 64; ++t) {
        const float* row = logits.data() + t * Stories::vocab_dim::extent;
        INFO("position " << t);
        REQUIRE(std::max_element(row, row + Stories::vocab_dim::extent) - row == want_ids(t));
    }
}

TEST_CASE("a Hugging Face Llama directory with grouped heads matches PyTorch's logits to 1e-5", "[parity][llama]") {
    using B = shaped::dim<"B", 2>;
    using Tdyn = shaped::dim<"T">;
    const auto model = shaped::models::load_llama<HFLlama::config>(std::string(SHAPED_FIXTURE_DIR) + "/hf_llama");
    const auto idx = shaped::io::load_npy<std::int64_t, B, Tdyn>(fixture("hf_llama_idx"));
    const auto want = shaped::io::load_npy<float, B, Tdyn, HFLlama::vocab_dim>(fixture("hf_llama_logits"));
    const auto logits = (*model)(idx);
    REQUIRE(logits.extents() == want.extents());
    for (std::size_t i = 0; i < logits.size(); ++i) {
        INFO("element " << i);
        REQUIRE(std::abs(logits.data()[i] - want.data()[i]) <= 1e-5f);
    }
    // Decoding, a chunk of 3 then a token a step, through caches of the 2 key/value heads.
    using Cache = HFLlama::cache_type<B>::value_type;
    static_assert(shaped::dim_at<1, Cache::dims_type>::extent == 2);
    HFLlama::cache_type<B> caches;
    const std::size_t total = idx.extents()[1];
    for (std::size_t at = 0; at < total;) {
        const std::size_t n = at == 0 ? 3 : 1;
        const auto step = (*model)(shaped::slice<Tdyn>(idx, at, at + n), caches);
        for (std::size_t b = 0; b < 2; ++b)
            for (std::size_t t = 0; t < n; ++t)
                for (std::size_t v = 0; v < HFLlama::vocab_dim::extent; ++v) {
                    INFO("batch row " << b << ", position " << at + t << ", vocab " << v);
                    REQUIRE(std::abs(step(b, t, v) - want(b, at + t, v)) <= 1e-5f);
                }
        at += n;
    }
}
