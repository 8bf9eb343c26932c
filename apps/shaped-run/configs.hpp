#pragma once
// The configs shaped-run is compiled for: a config is a type, so a checkpoint of any other is
// refused, with the line to add here for it.

#include <shaped/models/gpt.hpp>
#include <shaped/models/llama.hpp>

#include <tuple>

namespace shaped_run {

using compiled_gpt_configs = std::tuple<
    shaped::models::gpt2_124m,
    shaped::models::gpt2_355m,
    shaped::models::gpt2_774m,
    // The parity fixtures' tiny GPT-2 (tests/parity/fixtures/hf_gpt2/) and nanoGPT GPT (gpt.safetensors).
    shaped::models::gpt_config<67, 64, 2, 3, 24, shaped::nn::activation::gelu_tanh>,
    shaped::models::gpt_config<67, 16, 2, 3, 24>,
    // shaped-train's presets (apps/shaped-train/presets.hpp): gpt-char and gpt-bpe.
    shaped::models::gpt_config<256, 64, 4, 4, 128>,
    shaped::models::gpt_config<50257, 64, 4, 4, 128>>;

using compiled_llama_configs = std::tuple<
    shaped::models::stories260k,
    shaped::models::stories15m,
    shaped::models::stories110m,
    // The parity fixtures' Hugging Face Llama (tests/parity/fixtures/hf_llama/).
    shaped::models::llama_config<67, 32, 2, 6, 2, 24, 40, false, shaped::nn::rotary_pairing::halves>,
    // shaped-train's llama-char preset (apps/shaped-train/presets.hpp).
    shaped::models::llama_config<256, 64, 4, 4, 2, 128, 352, true, shaped::nn::rotary_pairing::halves>,
    // The TinyStories models as llama.cpp's llama-quantize writes them in Q8_0 and Q4_0 (a GGUF's
    // types must be the compiled formats): the blocks multiplied by as they lie.
    shaped::models::llama_cpp_quantized<shaped::models::stories260k, shaped::q8_0>,
    shaped::models::llama_cpp_quantized<shaped::models::stories260k, shaped::q4_0>,
    shaped::models::llama_cpp_quantized<shaped::models::stories110m, shaped::q8_0>,
    shaped::models::llama_cpp_quantized<shaped::models::stories110m, shaped::q4_0>>;

}  // namespace shaped_run
