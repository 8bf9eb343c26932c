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

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

namespace shaped::models {

// The kinds of a Llama's weights, as nn::dense_weights names them, in this order.
inline constexpr std::array<std::string_view, 9> llama_weight_kinds{"tok_embeddings", "wq", "wk", "wv", "wo",
                                                                    "w1", "w2", "w3", "output"};

// How a checkpoint stores one weight: its tensor's name in the file, its kind (an index into
// llama_weight_kinds) and its type.
struct stored_weight_type {
    std::string tensor;
    std::size_t kind;
    ggml_type type;
};

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
    // Each weight's type, for a file that stores them in several (a GGUF's); empty for a float
    // checkpoint, which a model of any formats loads, quantizing.
    std::vector<stored_weight_type> weight_types;
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

// One line per way the checkpoint's config differs from Config; empty when it is Config. A
// quantized weight format of Config's must be the type a file stores it in (a float checkpoint's
// weights are quantized on loading); a dense one takes any, dequantized.
template <class Config>
std::vector<std::string> config_mismatches(const llama_checkpoint_config& found);

// Whether Config keeps every weight as the checkpoint stores it: each of its formats the file's
// type (f32 for a float checkpoint's), so that loading neither dequantizes nor quantizes.
template <class Config>
bool keeps_stored_weights(const llama_checkpoint_config& found);

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
            Config::rotary_pairing, Config::norm_eps, Config::rope_theta, true, {}};
}

// The formats of a config's weights, by kind (llama_weight_kinds' order).
template <class Config>
std::array<ggml_type, llama_weight_kinds.size()> compiled_weight_formats() {
    using W = typename weight_formats_of<Config>::type;
    return {W::tok_embeddings::type, W::wq::type, W::wk::type, W::wv::type, W::wo::type,
            W::w1::type,             W::w2::type, W::w3::type, W::output::type};
}

std::vector<std::string> llama_config_mismatches(const llama_checkpoint_config& found,
                                                 const llama_checkpoint_config& compiled,
                                                 const std::array<ggml_type, llama_weight_kinds.size()>& formats);
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

// A quantized weight (tensor/quantized.hpp): a float checkpoint's floats are quantized into it, by
// ggml's reference quantizer.
template <class P>
concept quantized_parameter = requires { typename P::format; };

// parameter = floats, in the parameter's element type, or quantized into its format.
template <class P, Dim... Ds>
void assign_floats(P& parameter, const Tensor<float, Ds...>& floats) {
    if constexpr (quantized_parameter<P>) parameter = quantize<typename P::format>(floats);
    else if constexpr (std::is_same_v<value_type_of<P>, float>) parameter = floats;
    else std::copy(floats.data(), floats.data() + floats.size(), parameter.data());
}

// The float tensor a parameter is loaded through. (A lambda in decltype would crash clang 14
// reading it back from a precompiled header.)
template <class Dims>
struct float_tensor;
template <Dim... Ds>
struct float_tensor<dims<Ds...>> {
    using type = Tensor<float, Ds...>;
};
template <class P>
using floats_of = typename float_tensor<dims_of<P>>::type;

template <class P>
void read_parameter(llama2c_reader& reader, P& parameter, std::string_view what) {
    using T = value_type_of<P>;
    if constexpr (quantized_parameter<P>) {
        floats_of<P> stored;
        read_parameter(reader, stored, what);
        assign_floats(parameter, stored);
    } else if constexpr (std::is_same_v<T, float>) {
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
    // A tied checkpoint's embedding is also an untied model's classifier (config_mismatches). A
    // float embedding is read in place, with no copy, and the classifier copied from it; any
    // other is read through floats, kept for the classifier.
    using embedding_type = std::remove_cvref_t<decltype(model.tok_embeddings.weight)>;
    constexpr bool embedding_in_place = std::is_same_v<embedding_type, floats_of<embedding_type>>;
    using embedding_floats_type = std::conditional_t<embedding_in_place, std::nullptr_t, floats_of<embedding_type>>;
    [[maybe_unused]] embedding_floats_type embedding_floats{};
    if constexpr (embedding_in_place) {
        read_parameter(reader, model.tok_embeddings.weight, "tok_embeddings.weight");
    } else {
        read_parameter(reader, embedding_floats, "tok_embeddings.weight");
        assign_floats(model.tok_embeddings.weight, embedding_floats);
    }
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
    if constexpr (!Config::tied_classifier) {
        if (!found.tied_classifier) read_parameter(reader, model.output.weight, "output.weight");
        else if constexpr (embedding_in_place) assign_floats(model.output.weight, model.tok_embeddings.weight);
        else assign_floats(model.output.weight, embedding_floats);
    }
}

// A llama2.c file written front to back: the header of `config` when opened, each run of floats
// as given, the file in place only at commit (src/llama_checkpoint.cpp).
class llama2c_writer {
public:
    llama2c_writer(const std::filesystem::path& path, const llama_checkpoint_config& config);
    ~llama2c_writer();
    void write(std::span<const float> floats);
    void commit();

private:
    struct file;
    std::filesystem::path path_;
    std::unique_ptr<file> file_;
};

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
        using P = std::remove_cvref_t<decltype(parameter)>;
        // A tied file's embedding is also an untied model's classifier (config_mismatches).
        const std::string_view stored = name == "output.weight" && !file.contains("output.weight") ? "tok_embeddings.weight" : name;
        // A quantized weight keeps the file's blocks: its format must be the file's.
        if constexpr (quantized_parameter<P>)
            parameter = file.load_quantized<typename P::format, typename P::rows_dim, typename P::row_dim>(
                gguf_llama_name(stored));
        else parameter = io::load_parameter<P>(tensors, stored);
    });
}

template <class Config, class T>
void load_hf_llama(Llama<Config, T>& model, const std::filesystem::path& path) {
    const io::safetensors_file file(path / "model.safetensors");
    const hf_llama_tensors tensors(file);
    nn::for_each_parameter(model, [&](std::string_view name, auto& parameter) {
        using P = std::remove_cvref_t<decltype(parameter)>;
        // A tied checkpoint's embedding is also an untied model's classifier (config_mismatches).
        const std::string_view stored = name == "output.weight" && !file.contains(hf_llama_name(name)) ? "tok_embeddings.weight" : name;
        if constexpr (quantized_parameter<P>) assign_floats(parameter, io::load_parameter<floats_of<P>>(tensors, stored));
        else parameter = io::load_parameter<P>(tensors, stored);
    });
}

}  // namespace detail

template <class Config>
std::vector<std::string> config_mismatches(const llama_checkpoint_config& found) {
    return detail::llama_config_mismatches(found, detail::compiled_llama_config<Config>(),
                                           detail::compiled_weight_formats<Config>());
}

template <class Config>
bool keeps_stored_weights(const llama_checkpoint_config& found) {
    const auto formats = detail::compiled_weight_formats<Config>();
    if (found.weight_types.empty())
        return std::all_of(formats.begin(), formats.end(), [](ggml_type f) { return f == ggml_type::f32; });
    return std::all_of(found.weight_types.begin(), found.weight_types.end(), [&](const stored_weight_type& weight) {
        const bool tied_away = weight.kind == llama_weight_kinds.size() - 1 && Config::tied_classifier;
        return tied_away || formats[weight.kind] == weight.type;
    });
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

// `path` gets the model as llama2.c's export.py writes a checkpoint (its legacy version 0: the
// header, every weight in run.c's order, the rotary tables export.py writes and run.c skips, the
// classifier when it is not tied), beside and then renamed over the old file: run.c runs it, and
// llama.cpp's llama-convert-llama2c-to-ggml converts it. llama2.c rotates adjacent pairs, and its
// checkpoints hold float weights: the config's pairing must be adjacent and its weights dense.
template <class Config>
void save_llama2c(const Llama<Config, float>& model, const std::filesystem::path& path);

template <class Config>
void save_llama2c(const Llama<Config, float>& model, const std::filesystem::path& path) {
    static_assert(Config::rotary_pairing == nn::rotary_pairing::adjacent,
                  "shaped::models::save_llama2c: llama2.c rotates adjacent pairs; the config's pairing must be "
                  "nn::rotary_pairing::adjacent");
    static_assert(std::is_same_v<typename Llama<Config, float>::weight_formats, nn::dense_weights>,
                  "shaped::models::save_llama2c: a llama2.c checkpoint holds float weights");
    detail::llama2c_writer out(path, detail::compiled_llama_config<Config>());
    const auto write = [&](const auto& tensor) { out.write(std::span<const float>(tensor.data(), tensor.size())); };
    const auto each_layer = [&](auto member) {
        for (const auto& layer : model.layers) write(member(layer));
    };
    write(model.tok_embeddings.weight);
    each_layer([](const auto& l) -> const auto& { return l.attention_norm.weight; });
    each_layer([](const auto& l) -> const auto& { return l.attention.wq.weight; });
    each_layer([](const auto& l) -> const auto& { return l.attention.wk.weight; });
    each_layer([](const auto& l) -> const auto& { return l.attention.wv.weight; });
    each_layer([](const auto& l) -> const auto& { return l.attention.wo.weight; });
    each_layer([](const auto& l) -> const auto& { return l.ffn_norm.weight; });
    each_layer([](const auto& l) -> const auto& { return l.feed_forward.w1.weight; });
    each_layer([](const auto& l) -> const auto& { return l.feed_forward.w2.weight; });
    each_layer([](const auto& l) -> const auto& { return l.feed_forward.w3.weight; });
    write(model.norm.weight);
    // export.py's freq_cis_real and freq_cis_imag: cos and sin of each position's angles.
    constexpr std::size_t half = Config::dim / Config::n_heads / 2;
    std::vector<float> real(Config::seq_len * half), imag(Config::seq_len * half);
    for (std::size_t t = 0; t < Config::seq_len; ++t)
        for (std::size_t i = 0; i < half; ++i) {
            const double angle = static_cast<double>(t) * std::pow(Config::rope_theta, -static_cast<double>(2 * i) / (2.0 * half));
            real[t * half + i] = static_cast<float>(std::cos(angle));
            imag[t * half + i] = static_cast<float>(std::sin(angle));
        }
    out.write(real);
    out.write(imag);
    if constexpr (!Config::tied_classifier) write(model.output.weight);
    out.commit();
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
