#pragma once
// What shaped-train is compiled for: a preset is a model config (a type) with the batch it trains
// on (B rows of T positions, also types) and the tokenizer its ids come from. To train another,
// add its line here (and to `presets` below) and its file presets/<name>.cpp, as the others are.

#include <shaped/models/gpt.hpp>
#include <shaped/models/llama.hpp>

#include <cstddef>
#include <string_view>
#include <tuple>

namespace shaped_train {

enum class tokenizer_kind { bytes, gpt2 };

template <class Model, std::size_t Batch, std::size_t Time, tokenizer_kind Tokenizer>
struct preset {
    using model_type = Model;
    using batch_dim = shaped::dim<"B", Batch>;
    using time_dim = shaped::dim<"T", Time>;
    static constexpr tokenizer_kind tokenizer = Tokenizer;
};

// A character-level GPT (nanoGPT's shakespeare_char, smaller): bytes, context 64, 4 layers,
// 4 heads, 128 channels, batches of 16 x 64.
struct gpt_char : preset<shaped::models::GPT<shaped::models::gpt_config<256, 64, 4, 4, 128>>, 16, 64, tokenizer_kind::bytes> {
    static constexpr std::string_view name = "gpt-char";
};
// The same GPT over GPT-2's BPE vocabulary.
struct gpt_bpe : preset<shaped::models::GPT<shaped::models::gpt_config<50257, 64, 4, 4, 128>>, 8, 64, tokenizer_kind::gpt2> {
    static constexpr std::string_view name = "gpt-bpe";
};

// A character-level Llama of the same size: 4 heads over 2 key/value heads, SwiGLU's hidden 352
// (llama2.c's 2/3 of 4 x 128, to a multiple of 32), rotating halves as Hugging Face's layout,
// which its checkpoint is written in.
struct llama_char
    : preset<shaped::models::Llama<shaped::models::llama_config<256, 64, 4, 4, 2, 128, 352, true, shaped::nn::rotary_pairing::halves>>,
             16, 64, tokenizer_kind::bytes> {
    static constexpr std::string_view name = "llama-char";
};

using presets = std::tuple<gpt_char, gpt_bpe, llama_char>;

}  // namespace shaped_train
