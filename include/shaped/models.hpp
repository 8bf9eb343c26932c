#pragma once
// Layer 7: whole models, plain structs of nn layers reflected as modules (nn/module.hpp).
#include <shaped/models/gpt.hpp>
#include <shaped/models/gpt_checkpoint.hpp>
#include <shaped/models/generate.hpp>
#include <shaped/models/llama.hpp>
#include <shaped/models/llama_checkpoint.hpp>
#include <shaped/models/llama_gguf.hpp>
