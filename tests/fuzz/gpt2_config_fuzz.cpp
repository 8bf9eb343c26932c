// libFuzzer target for a GPT-2 directory's config.json (models::parse_gpt2_config): arbitrary
// bytes, then what load_gpt does with a config it returns (compare it with compiled configs,
// spell it). io_error is the reader's answer to bad input; any other exception, a broken
// invariant or a sanitizer report is a bug.

#include <shaped/models/gpt_checkpoint.hpp>

#include "fuzz_support.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using fuzz_support::require;
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    shaped::models::gpt_checkpoint_config config;
    try {
        config = shaped::models::parse_gpt2_config(text, "fuzz/config.json");
    } catch (const shaped::io::io_error&) {
        return 0;
    }
    require(config.vocab_size > 0 && config.block_size > 0 && config.n_layer > 0 && config.n_embd > 0,
            "a config read has positive sizes");
    require(config.n_head && *config.n_head > 0, "a GPT-2 config names its heads");
    const auto mismatches = shaped::models::config_mismatches<shaped::models::gpt2_124m>(config);
    const bool is_124m = config.vocab_size == 50257 && config.block_size == 1024 && config.n_layer == 12 &&
                         *config.n_head == 12 && config.n_embd == 768 && config.activation == "gelu_new" &&
                         config.layer_norm_epsilon == 1e-5;
    require(mismatches.empty() == is_124m, "no mismatch exactly when the config is GPT-2 124M's");
    require(shaped::models::config_spelling(config).starts_with("shaped::models::gpt_config<"), "a config is spelled");
    return 0;
}
