#pragma once
// A Llama checkpoint written as the GGUF file llama.cpp's own tools would make of it, in one of
// the formats of tensor/quantized.hpp (shaped-quantize's work):
//
//   const auto written = shaped::models::write_llama_gguf(
//       "stories260K.bin", "stories260K.q8_0.gguf", {shaped::models::gguf_file_type::q8_0, "tokenizer.bin"});
//   for (const auto& tensor : written.tensors)
//       if (!tensor.fallback.empty()) std::cerr << tensor.fallback << '\n';
//
// The checkpoint is a llama2.c .bin file, a Hugging Face Llama directory or a GGUF file, its config
// read at run time (no llama_config is compiled). What is written is what llama.cpp writes:
//   1. a .bin file or a directory becomes what llama-convert-llama2c-to-ggml writes (its tensor
//      names, order and metadata, every tensor F32, llama.context_length its fixed 128; a
//      directory's own context, eps and theta; its q and k rows permuted from Hugging Face's
//      rotate_half halves into the adjacent pairs llama.cpp rotates, as convert_hf_to_gguf.py
//      does, and no output.weight when the classifier is tied, as that script writes);
//   2. then, for any type but f32, and for a GGUF always, what `llama-quantize IN OUT TYPE` makes
//      of that: the tensors in its order (the non-layer ones, then layer by layer, each by name),
//      general.quantization_version 2 and general.file_type appended, every 2-d weight but the
//      norms re-typed by its rules (llama_tensor_get_type, no importance matrix): output.weight
//      (token_embd.weight when there is none) Q6_K, or Q8_0 when its rows do not divide into the
//      type's blocks; for q4_k, llama.cpp's Q4_K_M mixture (attn_v and ffn_down Q6_K in the layers
//      use_more_bits picks; its rules for 70B models and experts aside). A tensor already of its
//      type is copied, not requantized.
// A row that the chosen type's blocks do not divide falls back as llama.cpp's does: Q6_K to Q8_0,
// Q4_K to Q8_0 (llama.cpp takes Q5_0, which shaped does not write), and to F16 when 32 does not
// divide it either; the tensor's `fallback` is then llama-quantize's warning line. Quantizing is
// ggml's reference quantizers byte for byte (tests/apps/shaped_quantize_test.cpp: llama.cpp's
// stories260K files, tests/parity/fixtures/llama_cpp, come out identical).
//
// The vocabulary: from a llama2.c tokenizer.bin (`tokenizer`), as the converter writes it
// (tokenizer.ggml.tokens with U+2581 for spaces, scores, token types, the special ids); a GGUF's
// own is copied, and a tokenizer given with one is refused. Without one the file has none, and
// llama.cpp will not load it (written.has_vocabulary says so).
//
// io_error, naming the file, for a checkpoint that is missing, truncated or corrupt, a non-finite
// weight (naming the tensor), or a tokenizer that is not the model's.

#include <shaped/tensor/quantized.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shaped::models {

// The types a file can be written in, with llama.cpp's ids (llama_ftype, general.file_type):
// q4_K is llama-quantize's Q4_K, which is Q4_K_M.
enum class gguf_file_type : std::uint32_t { f32 = 0, f16 = 1, q4_0 = 2, q8_0 = 7, q4_K = 15, q6_K = 18 };

// "f32", "f16", "q4_0", "q8_0", "q4_k", "q6_k": shaped-quantize's --type.
std::string_view gguf_file_type_name(gguf_file_type type);
std::optional<gguf_file_type> gguf_file_type_named(std::string_view name);
inline constexpr gguf_file_type all_gguf_file_types[] = {gguf_file_type::q8_0, gguf_file_type::q4_0, gguf_file_type::q4_K,
                                                         gguf_file_type::q6_K, gguf_file_type::f16, gguf_file_type::f32};

struct llama_gguf_options {
    gguf_file_type type = gguf_file_type::q8_0;
    std::optional<std::filesystem::path> tokenizer;  // llama2.c's tokenizer.bin, for a .bin or a directory
};

// One tensor as written.
struct gguf_written_tensor {
    std::string name;
    ggml_type type;
    std::vector<std::uint64_t> ne;  // ggml order, row length first
    std::string fallback;           // llama-quantize's warning when its rows forced another type; else empty
};

struct gguf_written {
    std::vector<gguf_written_tensor> tensors;  // in the file's order
    bool has_vocabulary = false;               // tokenizer.ggml.tokens, without which llama.cpp loads nothing
};

gguf_written write_llama_gguf(const std::filesystem::path& checkpoint, const std::filesystem::path& out,
                              const llama_gguf_options& options);

}  // namespace shaped::models
