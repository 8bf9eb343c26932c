#pragma once
// Loading a Llama from a checkpoint, its config checked against the compiled one:
//
//   auto model = shaped::models::load_llama<shaped::models::stories260k>("stories260K.bin");
//
// A checkpoint is either
//   - llama2.c's version-0 file (export.py's legacy format): seven little-endian int32s of
//     config (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len; a negative
//     vocab_size means a classifier of its own), then float32 weights in its order, every
//     layer's of a kind together; its two legacy rotary tables are skipped (the model computes
//     the angles). The file must be exactly as long as the config says; or
//   - a Hugging Face Llama directory: config.json (hidden_size, intermediate_size,
//     num_hidden_layers, num_attention_heads, num_key_value_heads, vocab_size,
//     max_position_embeddings, rms_norm_eps, rope_theta, tie_word_embeddings; at most
//     max_config_json_bytes; rope_scaling, biases and a head_dim of its own refused) and
//     model.safetensors ("model.layers.N.self_attn.q_proj.weight", ...). Its q and k are stored
//     permuted for rotate_half, so it needs a config whose pairing is halves; or
//   - a GGUF file (llama.cpp's, `.gguf`): the `llama.*` metadata (embedding_length,
//     feed_forward_length, block_count, attention.head_count, attention.head_count_kv,
//     context_length, attention.layer_norm_rms_epsilon, rope.freq_base) and llama.cpp's tensor
//     names (token_embd, blk.N.attn_q, ..., output_norm, output, when not tied). llama.cpp's
//     rotary pairs adjacent elements, as llama2.c's does (its converters permute Hugging Face's q
//     and k rows into that order), so the config's pairing is adjacent. Weights in any format of
//     tensor/quantized.hpp (f32, f16, bf16, q8_0, q4_0, q4_K, q6_K) load dequantized, by ggml's
//     dequantization. Its llama.context_length is not held against the compiled context.
//
// Every weight must be finite, in either format (io::load_parameter's check and words). A config
// that is not the compiled one is an io_error naming every mismatch and the line that would
// compile the checkpoint's. Weights are read straight into the new model's parameters.
//
// Which family a checkpoint is, its config read once (shaped-run's way in):
//
//   const auto found = shaped::models::read_checkpoint_config(path);
//   if (const auto* llama = std::get_if<shaped::models::llama_checkpoint_config>(&found)) ...
//
// save_hf_llama writes a model as such a directory (a model trained here, for load_llama and
// Hugging Face's LlamaForCausalLM alike):
//
//   shaped::models::save_hf_llama(model, "out/", {{"tokenizer", "bytes"}});

#include <shaped/io/gguf.hpp>
#include <shaped/io/safetensors.hpp>
#include <shaped/models/gpt_checkpoint.hpp>
#include <shaped/models/llama.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace shaped::models {

// What a checkpoint says of its model, in llama2.c's names.
struct llama_checkpoint_config {
    std::size_t dim = 0;
    std::size_t hidden_dim = 0;
    std::size_t n_layers = 0;
    std::size_t n_heads = 0;
    std::size_t n_kv_heads = 0;
    std::size_t vocab_size = 0;
    std::size_t seq_len = 0;
    bool tied_classifier = true;
    nn::rotary_pairing rotary_pairing = nn::rotary_pairing::adjacent;
    double norm_eps = 1e-5;
    double rope_theta = 10000.0;
    // Whether seq_len must be the compiled context. A GGUF's llama.context_length does not: it is
    // the context the model was made for, which llama.cpp runs past (its llama2.c converter
    // writes 128 whatever the model's), and no weight depends on it.
    bool context_binds = true;
};

// The config of the checkpoint at `path`, whichever family's it is: a llama2.c .bin file's
// header, a directory's config.json (a Llama's when its "model_type" says "llama", else
// GPT-2's), read once; any other file a nanoGPT state_dict's. io_error as each family's
// read_*_config.
using checkpoint_config = std::variant<gpt_checkpoint_config, llama_checkpoint_config>;
checkpoint_config read_checkpoint_config(const std::filesystem::path& path);

// The config of the checkpoint at `path` (a llama2.c file or a Hugging Face directory);
// io_error for a missing, short or malformed one, or one that is no Llama's.
llama_checkpoint_config read_llama_config(const std::filesystem::path& path);

// llama2.c's header, the file's first 28 bytes; `path` names it in messages.
llama_checkpoint_config parse_llama2c_header(std::span<const std::byte> header, const std::filesystem::path& path);
inline constexpr std::size_t llama2c_header_bytes = 7 * sizeof(std::int32_t);

// A GGUF file's Llama config, from its `llama.*` metadata (the vocabulary from token_embd's rows).
llama_checkpoint_config gguf_llama_config(const io::gguf_file& file);

// A Hugging Face LlamaConfig's config.json text.
llama_checkpoint_config parse_hf_llama_config(std::string_view text, const std::filesystem::path& path);

// One line per way the checkpoint's config differs from Config; empty when it is Config.
template <class Config>
std::vector<std::string> config_mismatches(const llama_checkpoint_config& found);

// The one line of C++ that names a config: "llama_config<512, 512, 5, 8, 4, 64, 172>", with
// eps and theta when they are not the defaults (a value no config holds spelled as a comment;
// why_not_compilable says which).
std::string config_spelling(const llama_checkpoint_config& config);
template <class Config>
    requires requires { Config::hidden_dim; }  // a llama_config
std::string config_spelling();

// Why no llama_config can be the checkpoint's: one line per value that no config type holds
// (an eps that is not 1/N for a whole N, a theta that is not whole); empty when
// config_spelling(found) is a line that compiles it in.
std::vector<std::string> why_not_compilable(const llama_checkpoint_config& found);

// A new Llama with the parameters of the checkpoint at `path`; `found`, when given, is its config
// as read_llama_config (or read_checkpoint_config) has already read it.
template <class Config, class T = float>
std::unique_ptr<Llama<Config, T>> load_llama(const std::filesystem::path& path);
template <class Config, class T = float>
std::unique_ptr<Llama<Config, T>> load_llama(const std::filesystem::path& path, const llama_checkpoint_config& found);

// ---- implementation ------------------------------------------------------------------------

namespace detail {

template <class Config>
llama_checkpoint_config compiled_llama_config() {
    return {Config::dim,        Config::hidden_dim, Config::n_layers,        Config::n_heads,
            Config::n_kv_heads, Config::vocab_size, Config::seq_len,         Config::tied_classifier,
            Config::rotary_pairing, Config::norm_eps, Config::rope_theta};
}

std::vector<std::string> llama_config_mismatches(const llama_checkpoint_config& found,
                                                 const llama_checkpoint_config& compiled);
[[noreturn]] void throw_llama_config_mismatch(const std::filesystem::path& path, const llama_checkpoint_config& found,
                                              const std::vector<std::string>& mismatches);

// A llama2.c file read front to back, its size checked against its config when opened.
class llama2c_reader {
public:
    llama2c_reader(const std::filesystem::path& path, const llama_checkpoint_config& config);
    // The next n floats into out, each checked finite (io::load_parameter's words); `what` names
    // them in messages.
    void read(std::span<float> out, std::string_view what);
    void skip(std::size_t floats, std::string_view what);

private:
    std::filesystem::path path_;
    std::ifstream in_;
};

template <class P>
void read_parameter(llama2c_reader& reader, P& parameter, std::string_view what) {
    using T = value_type_of<P>;
    if constexpr (std::is_same_v<T, float>) {
        reader.read(std::span<float>(parameter.data(), parameter.size()), what);
    } else {
        std::vector<float> stored(parameter.size());
        reader.read(stored, what);
        std::copy(stored.begin(), stored.end(), parameter.data());
    }
}

template <class Config, class T>
void load_llama2c(Llama<Config, T>& model, const std::filesystem::path& path, const llama_checkpoint_config& found) {
    llama2c_reader reader(path, found);
    read_parameter(reader, model.tok_embeddings.weight, "tok_embeddings.weight");
    // Each kind of weight for every layer in turn, as export.py writes them.
    const auto each_layer = [&](std::string_view what, auto member) {
        for (std::size_t i = 0; i < Config::n_layers; ++i)
            read_parameter(reader, member(model.layers[i]), "layers." + std::to_string(i) + "." + std::string(what));
    };
    each_layer("attention_norm.weight", [](auto& l) -> auto& { return l.attention_norm.weight; });
    each_layer("attention.wq.weight", [](auto& l) -> auto& { return l.attention.wq.weight; });
    each_layer("attention.wk.weight", [](auto& l) -> auto& { return l.attention.wk.weight; });
    each_layer("attention.wv.weight", [](auto& l) -> auto& { return l.attention.wv.weight; });
    each_layer("attention.wo.weight", [](auto& l) -> auto& { return l.attention.wo.weight; });
    each_layer("ffn_norm.weight", [](auto& l) -> auto& { return l.ffn_norm.weight; });
    each_layer("feed_forward.w1.weight", [](auto& l) -> auto& { return l.feed_forward.w1.weight; });
    each_layer("feed_forward.w2.weight", [](auto& l) -> auto& { return l.feed_forward.w2.weight; });
    each_layer("feed_forward.w3.weight", [](auto& l) -> auto& { return l.feed_forward.w3.weight; });
    read_parameter(reader, model.norm.weight, "norm.weight");
    constexpr std::size_t table = Config::seq_len * (Config::dim / Config::n_heads) / 2;
    reader.skip(table, "freq_cis_real");
    reader.skip(table, "freq_cis_imag");
    if constexpr (!Config::tied_classifier) read_parameter(reader, model.output.weight, "output.weight");
}

// Hugging Face's name of the model's parameter `name`.
std::string hf_llama_name(std::string_view name);

// Writes `config` as a Hugging Face Llama config.json at `path` (beside, then renamed over it).
void write_hf_llama_config(const std::filesystem::path& path, const llama_checkpoint_config& config);

// A Hugging Face Llama's tensors by the model's parameter names, an io::TensorSource.
class hf_llama_tensors {
public:
    explicit hf_llama_tensors(const io::safetensors_file& file) : file_(file) {}

    template <class T, Dim... Ds>
    Tensor<T, Ds...> load(std::string_view name) const {
        return file_.load<T, Ds...>(hf_llama_name(name));
    }
    std::string where(std::string_view name) const { return file_.where(hf_llama_name(name)); }

private:
    const io::safetensors_file& file_;
};

// llama.cpp's name of the model's parameter `name` in a GGUF file.
std::string gguf_llama_name(std::string_view name);

// A GGUF Llama's tensors by the model's parameter names, dequantized to floats, an
// io::TensorSource.
class gguf_llama_tensors {
public:
    explicit gguf_llama_tensors(const io::gguf_file& file) : file_(file) {}

    template <class T, Dim... Ds>
    Tensor<T, Ds...> load(std::string_view name) const {
        static_assert(std::is_same_v<T, float>, "shaped::models::load_llama: a GGUF file's weights load as float");
        return file_.dequantize<Ds...>(gguf_llama_name(name));
    }
    std::string where(std::string_view name) const { return file_.where(gguf_llama_name(name)); }

private:
    const io::gguf_file& file_;
};

template <class Config, class T>
void load_gguf_llama(Llama<Config, T>& model, const std::filesystem::path& path) {
    const io::gguf_file file(path);
    const gguf_llama_tensors tensors(file);
    nn::for_each_parameter(model, [&](std::string_view name, auto& parameter) {
        parameter = io::load_parameter<std::remove_cvref_t<decltype(parameter)>>(tensors, name);
    });
}

template <class Config, class T>
void load_hf_llama(Llama<Config, T>& model, const std::filesystem::path& path) {
    const io::safetensors_file file(path / "model.safetensors");
    const hf_llama_tensors tensors(file);
    nn::for_each_parameter(model, [&](std::string_view name, auto& parameter) {
        parameter = io::load_parameter<std::remove_cvref_t<decltype(parameter)>>(tensors, name);
    });
}

}  // namespace detail

template <class Config>
std::vector<std::string> config_mismatches(const llama_checkpoint_config& found) {
    return detail::llama_config_mismatches(found, detail::compiled_llama_config<Config>());
}

template <class Config>
    requires requires { Config::hidden_dim; }
std::string config_spelling() {
    return config_spelling(detail::compiled_llama_config<Config>());
}

template <class Config, class T>
std::unique_ptr<Llama<Config, T>> load_llama(const std::filesystem::path& path) {
    return load_llama<Config, T>(path, read_llama_config(path));
}

template <class Config, class T>
std::unique_ptr<Llama<Config, T>> load_llama(const std::filesystem::path& path, const llama_checkpoint_config& found) {
    if (const auto mismatches = config_mismatches<Config>(found); !mismatches.empty())
        detail::throw_llama_config_mismatch(path, found, mismatches);
    auto model = std::make_unique<Llama<Config, T>>();
    if (std::filesystem::is_directory(path)) detail::load_hf_llama(*model, path);
    else if (path.extension() == ".gguf") detail::load_gguf_llama(*model, path);
    else detail::load_llama2c(*model, path, found);
    return model;
}

// `dir` (created if missing) gets config.json and model.safetensors, Hugging Face's names, with
// `metadata`; each file is written beside and renamed over the old. Hugging Face's q and k rotate
// halves, so the config's pairing must be halves: a model that rotates adjacent pairs would load
// back and run, wrong.
template <class Config, class T>
void save_hf_llama(const Llama<Config, T>& model, const std::filesystem::path& dir,
                   const io::safetensors_metadata& metadata = {}) {
    static_assert(Config::rotary_pairing == nn::rotary_pairing::halves,
                  "shaped::models::save_hf_llama: Hugging Face's layout rotates halves; the config's pairing must be "
                  "nn::rotary_pairing::halves");
    std::filesystem::create_directories(dir);
    detail::write_hf_llama_config(dir / "config.json", detail::compiled_llama_config<Config>());
    auto tensors = io::parameter_bytes(model);
    for (io::tensor_bytes& tensor : tensors) tensor.name = detail::hf_llama_name(tensor.name);
    io::write_safetensors(dir / "model.safetensors", io::safetensors_views(std::move(tensors)), metadata);
}

}  // namespace shaped::models
