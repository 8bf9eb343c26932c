#pragma once
// The GPT configs shaped-run is compiled for: a config is a type, so a checkpoint of any other
// is refused, with the line to add here for it.

#include <shaped/models/gpt.hpp>

#include <tuple>

namespace shaped_run {

using compiled_configs = std::tuple<
    shaped::models::gpt2_124m,
    shaped::models::gpt2_355m,
    shaped::models::gpt2_774m,
    // The parity fixtures' tiny GPT-2 (tests/parity/fixtures/hf_gpt2/) and nanoGPT GPT (gpt.safetensors).
    shaped::models::gpt_config<67, 64, 2, 3, 24, shaped::nn::activation::gelu_tanh>,
    shaped::models::gpt_config<67, 16, 2, 3, 24>>;

}  // namespace shaped_run
