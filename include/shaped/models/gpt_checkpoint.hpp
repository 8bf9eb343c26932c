#pragma once
// Loading a GPT from a checkpoint, its config checked against the compiled one:
//
//   auto model = shaped::models::load_gpt<shaped::models::gpt2_124m>("gpt2/");
//
// A checkpoint is either
//   - a Hugging Face GPT-2 directory: config.json (n_layer, n_head, n_embd, n_positions,
//     vocab_size, layer_norm_epsilon, activation_function) and model.safetensors, its names with
//     or without "transformer.", its Conv1D weights stored (in, out) and transposed on load, its
//     attn.bias and attn.masked_bias buffers and lm_head.weight (tied) not read; or
//   - a nanoGPT state_dict as one safetensors file: named as GPT's parameters are, the config
//     read off the shapes (the number of heads from the metadata's "n_head", if there).
//
// A config that is not the compiled one is an io_error naming every mismatch. The parameters
// are read one at a time into the new model, so loading needs the model's size and one tensor's
// more, not twice the model's.

#include <shaped/io/safetensors.hpp>
#include <shaped/models/gpt.hpp>

#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace shaped::models {

// What a checkpoint says of its model, in nanoGPT's names.
struct gpt_checkpoint_config {
    std::size_t vocab_size = 0;
    std::size_t block_size = 0;
    std::size_t n_layer = 0;
    std::optional<std::size_t> n_head;  // none when the checkpoint does not say
    std::size_t n_embd = 0;
    std::string activation;             // Hugging Face's name: "gelu_new" (tanh) or "gelu" (erf)
    double layer_norm_epsilon = 1e-5;
};

// The config of the checkpoint at `path` (a GPT-2 directory or a nanoGPT safetensors file).
// io_error for a missing or malformed config.json, or a file that is no GPT's.
gpt_checkpoint_config read_gpt_config(const std::filesystem::path& path);

// The config.json text of a GPT-2 directory; `path` names it in messages.
gpt_checkpoint_config parse_gpt2_config(std::string_view text, const std::filesystem::path& path);

// One line per way the checkpoint's config differs from Config ("n_layer: the checkpoint has
// 6, the compiled config 12"); empty when it is Config.
template <class Config>
std::vector<std::string> config_mismatches(const gpt_checkpoint_config& found);

// Config, written as the one line of C++ that names it: "gpt_config<50257, 1024, 12, 12, 768,
// nn::activation::gelu_tanh>" (for a checkpoint's config, the line that would compile it in).
std::string config_spelling(const gpt_checkpoint_config& config);
template <class Config>
std::string config_spelling();

// A new GPT with the parameters of the checkpoint at `path`.
template <class Config, class T = float>
std::unique_ptr<GPT<Config, T>> load_gpt(const std::filesystem::path& path);

// ---- implementation ------------------------------------------------------------------------

namespace detail {

template <class A>
inline constexpr bool is_gelu_tanh = std::is_same_v<A, nn::activation::gelu_tanh>;

// The file that holds the tensors: path itself, or the directory's model.safetensors.
std::filesystem::path tensor_file(const std::filesystem::path& path);
// How the file names GPT's parameter `name`: as it is, or without "transformer.".
std::string stored_name(const io::safetensors_file& file, std::string_view name);
[[noreturn]] void throw_config_mismatch(const std::filesystem::path& path, const gpt_checkpoint_config& found,
                                        const std::vector<std::string>& mismatches, const std::string& compiled);

template <class P>
P load_as(const io::safetensors_file& file, const std::string& name, bool transposed) {
    return [&]<class T, Dim... Ds>(std::type_identity<Tensor<T, Ds...>>) -> P {
        if constexpr (sizeof...(Ds) == 2) {
            if (transposed) {
                using D0 = dim_at<0, dims<Ds...>>;
                using D1 = dim_at<1, dims<Ds...>>;
                const auto stored = file.load<T, D1, D0>(name);
                return P(transpose<0, 1>(stored));
            }
        }
        return file.load<T, Ds...>(name);
    }(std::type_identity<P>{});
}

}  // namespace detail

template <class Config>
std::vector<std::string> config_mismatches(const gpt_checkpoint_config& found) {
    std::vector<std::string> out;
    const auto check = [&](std::string_view key, std::size_t got, std::size_t compiled) {
        if (got != compiled)
            out.push_back(std::string(key) + ": the checkpoint has " + std::to_string(got) + ", the compiled config " +
                          std::to_string(compiled));
    };
    check("vocab_size", found.vocab_size, Config::vocab_size);
    check("n_positions", found.block_size, Config::block_size);
    check("n_layer", found.n_layer, Config::n_layer);
    if (found.n_head) check("n_head", *found.n_head, Config::n_head);
    check("n_embd", found.n_embd, Config::n_embd);
    const std::string compiled_activation = detail::is_gelu_tanh<typename Config::activation> ? "gelu_new" : "gelu";
    if (found.activation != compiled_activation)
        out.push_back("activation_function: the checkpoint has " + found.activation + ", the compiled config " +
                      compiled_activation);
    // shaped's LayerNorm has torch's eps, 1e-5.
    if (found.layer_norm_epsilon != nn::LayerNorm<dim<"C", 1>>::eps)
        out.push_back("layer_norm_epsilon: the checkpoint has " + std::to_string(found.layer_norm_epsilon) +
                      ", shaped's LayerNorm 1e-05");
    return out;
}

template <class Config>
std::string config_spelling() {
    return config_spelling({Config::vocab_size, Config::block_size, Config::n_layer, Config::n_head, Config::n_embd,
                            detail::is_gelu_tanh<typename Config::activation> ? "gelu_new" : "gelu", 1e-5});
}

template <class Config, class T>
std::unique_ptr<GPT<Config, T>> load_gpt(const std::filesystem::path& path) {
    const gpt_checkpoint_config found = read_gpt_config(path);
    if (const auto mismatches = config_mismatches<Config>(found); !mismatches.empty())
        detail::throw_config_mismatch(path, found, mismatches, config_spelling<Config>());
    const io::safetensors_file file(detail::tensor_file(path));
    // Hugging Face's GPT-2 stores the blocks' projections as Conv1D, (in, out).
    const bool conv1d = std::filesystem::is_directory(path);
    auto model = std::make_unique<GPT<Config, T>>();
    nn::for_each_parameter(*model, [&](std::string_view name, auto& parameter) {
        using P = std::remove_cvref_t<decltype(parameter)>;
        const bool transposed = conv1d && name.starts_with("transformer.h.") && rank_of<P> == 2;
        parameter = detail::load_as<P>(file, detail::stored_name(file, name), transposed);
    });
    return model;
}

}  // namespace shaped::models
