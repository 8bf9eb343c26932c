#pragma once
// Loading a GPT from a checkpoint, its config checked against the compiled one:
//
//   auto model = shaped::models::load_gpt<shaped::models::gpt2_124m>("gpt2/");
//
// A checkpoint is either
//   - a Hugging Face GPT-2 directory: config.json (n_layer, n_head, n_embd, n_positions,
//     vocab_size, layer_norm_epsilon, activation_function; at most max_config_json_bytes; an
//     n_inner other than 4 n_embd, or attention scaled otherwise than GPT-2's, refused) and
//     model.safetensors, its names with or without "transformer.", its Conv1D weights stored
//     (in, out) and transposed on load, its attn.bias and attn.masked_bias buffers and
//     lm_head.weight (tied) not read; or
//   - a nanoGPT state_dict as one safetensors file: named as GPT's parameters are, the config
//     read off the shapes (the number of heads from the metadata's "n_head", if there).
//
// A config that is not the compiled one is an io_error naming every mismatch; shaped's
// LayerNorm has torch's eps, 1e-5, so a layer_norm_epsilon of any other is one. Every weight
// goes through io::load_parameter, which refuses a NaN or an infinity. The parameters are read
// one at a time into the new model, so loading needs the model's size and one tensor's more,
// not twice the model's.

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

// The most bytes a checkpoint's config.json may be: Hugging Face's are a few KiB, and 16 MiB
// leaves room for a long label map yet refuses, before reading it, what is no config.
inline constexpr std::size_t max_config_json_bytes = std::size_t{16} << 20;

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
// nn::activation::gelu_tanh>" (for a checkpoint's config, the line that would compile it in,
// unless why_not_compilable says why there is none).
std::string config_spelling(const gpt_checkpoint_config& config);
template <class Config>
    requires requires { Config::n_embd; }  // a gpt_config
std::string config_spelling();

// Why no gpt_config can be the checkpoint's: one line per value that no config type holds
// ("layer_norm_epsilon: shaped's LayerNorm has 1e-05 in every config"); empty
// when config_spelling(found) is a line that compiles it in.
std::vector<std::string> why_not_compilable(const gpt_checkpoint_config& found);

// A new GPT with the parameters of the checkpoint at `path`; `found`, when given, is its config
// as read_gpt_config (or read_checkpoint_config) has already read it.
template <class Config, class T = float>
std::unique_ptr<GPT<Config, T>> load_gpt(const std::filesystem::path& path);
template <class Config, class T = float>
std::unique_ptr<GPT<Config, T>> load_gpt(const std::filesystem::path& path, const gpt_checkpoint_config& found);

// ---- implementation ------------------------------------------------------------------------

namespace detail {

template <class A>
inline constexpr bool is_gelu_tanh = std::is_same_v<A, nn::activation::gelu_tanh>;

// The file that holds the tensors: path itself, or the directory's model.safetensors.
std::filesystem::path tensor_file(const std::filesystem::path& path);
// How the file names GPT's parameter `name`: as it is, or without "transformer.".
std::string stored_name(const io::safetensors_file& file, std::string_view name);
// "layer_norm_epsilon: the checkpoint has 1e-06, shaped's LayerNorm 1e-05", unless the
// checkpoint's eps is the LayerNorm's.
std::optional<std::string> layer_norm_eps_mismatch(const gpt_checkpoint_config& found);
[[noreturn]] void throw_config_mismatch(const std::filesystem::path& path, const gpt_checkpoint_config& found,
                                        const std::vector<std::string>& mismatches, const std::string& compiled);

// A checkpoint's tensors by GPT's parameter names, an io::TensorSource: each under the name the
// file has for it, a Hugging Face block's Conv1D weights transposed to (out, in) (and said to be,
// for a message's element index is the transpose's).
class gpt_tensors {
public:
    gpt_tensors(const io::safetensors_file& file, bool conv1d) : file_(file), conv1d_(conv1d) {}

    template <class T, Dim... Ds>
    Tensor<T, Ds...> load(std::string_view name) const {
        if constexpr (sizeof...(Ds) == 2) {
            if (conv1d(name)) {
                using D0 = dim_at<0, dims<Ds...>>;
                using D1 = dim_at<1, dims<Ds...>>;
                return Tensor<T, Ds...>(transpose<0, 1>(file_.load<T, D1, D0>(stored_name(file_, name))));
            }
        }
        return file_.load<T, Ds...>(stored_name(file_, name));
    }
    std::string where(std::string_view name) const {
        return file_.where(stored_name(file_, name)) + (conv1d(name) ? " (transposed on load)" : "");
    }

private:
    // Whether `name` is stored as Conv1D, (in, out): every matrix of a Hugging Face block.
    bool conv1d(std::string_view name) const {
        return conv1d_ && name.starts_with("transformer.h.") && file_.info(stored_name(file_, name)).shape.size() == 2;
    }

    const io::safetensors_file& file_;
    bool conv1d_;
};

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
    if (const auto eps = detail::layer_norm_eps_mismatch(found)) out.push_back(*eps);
    return out;
}

template <class Config>
    requires requires { Config::n_embd; }
std::string config_spelling() {
    return config_spelling({Config::vocab_size, Config::block_size, Config::n_layer, Config::n_head, Config::n_embd,
                            detail::is_gelu_tanh<typename Config::activation> ? "gelu_new" : "gelu", 1e-5});
}

template <class Config, class T>
std::unique_ptr<GPT<Config, T>> load_gpt(const std::filesystem::path& path) {
    return load_gpt<Config, T>(path, read_gpt_config(path));
}

template <class Config, class T>
std::unique_ptr<GPT<Config, T>> load_gpt(const std::filesystem::path& path, const gpt_checkpoint_config& found) {
    if (const auto mismatches = config_mismatches<Config>(found); !mismatches.empty())
        detail::throw_config_mismatch(path, found, mismatches, config_spelling<Config>());
    const io::safetensors_file file(detail::tensor_file(path));
    // Hugging Face's GPT-2 stores the blocks' projections as Conv1D, (in, out).
    const detail::gpt_tensors tensors(file, std::filesystem::is_directory(path));
    auto model = std::make_unique<GPT<Config, T>>();
    // One at a time, straight into the new model: a failure throws it away whole.
    nn::for_each_parameter(*model, [&](std::string_view name, auto& parameter) {
        parameter = io::load_parameter<std::remove_cvref_t<decltype(parameter)>>(tensors, name);
    });
    return model;
}

}  // namespace shaped::models
