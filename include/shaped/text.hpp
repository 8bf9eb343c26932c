#pragma once
// Layer 6: tokenizers, every byte of their files checked. text/core.hpp is what they share.
#include <shaped/text/core.hpp>
#include <shaped/text/byte_tokenizer.hpp>
#include <shaped/text/gpt2_tokenizer.hpp>
#include <shaped/text/llama_tokenizer.hpp>
