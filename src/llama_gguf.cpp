// A Llama checkpoint written as llama.cpp's converters and llama-quantize would write it
// (models/llama_gguf.hpp): the checkpoint as GGUF parts (metadata, tensors read on demand), each
// tensor's type chosen by llama-quantize's rules, then quantized row by row and written.

#include <shaped/models/llama_gguf.hpp>

#include <shaped/io/gguf.hpp>
#include <shaped/io/safetensors.hpp>
#include <shaped/models/llama_checkpoint.hpp>
#include <shaped/text/llama_tokenizer.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <tuple>
#include <utility>

namespace shaped::models {

namespace {

namespace fs = std::filesystem;
using io::gguf_kv;

// ---- a checkpoint as a GGUF's parts ------------------------------------------------------------

struct source_tensor {
    std::string name;  // llama.cpp's
    ggml_type type;    // as stored: f32 for a converted checkpoint's
    std::vector<std::uint64_t> ne;
    std::function<std::vector<std::byte>()> read;  // its bytes as ggml lays them out
};

struct gguf_parts {
    std::vector<gguf_kv> metadata;
    std::vector<source_tensor> tensors;
    bool converted = false;  // from a .bin or a directory: the converter's file, before llama-quantize
};

[[noreturn]] void fail(const fs::path& path, const std::string& what) {
    throw io::io_error("shaped::models::write_llama_gguf: " + path.string() + ": " + what);
}

std::vector<std::byte> bytes_of(std::span<const float> values) {
    const auto bytes = std::as_bytes(values);
    return {bytes.begin(), bytes.end()};
}

// A Llama's tensors by Meta's names, in the order llama-convert-llama2c-to-ggml writes them, with
// their ggml dims (a PyTorch (out, in) weight is ne {in, out}).
struct named_shape {
    std::string meta_name;
    std::vector<std::uint64_t> ne;
};

std::vector<named_shape> converter_order(const llama_checkpoint_config& c, bool with_output) {
    const std::uint64_t kv_dim = c.dim / c.n_heads * c.n_kv_heads;
    std::vector<named_shape> out{{"tok_embeddings.weight", {c.dim, c.vocab_size}}, {"norm.weight", {c.dim}}};
    if (with_output) out.push_back({"output.weight", {c.dim, c.vocab_size}});
    for (std::size_t i = 0; i < c.n_layers; ++i) {
        const std::string layer = "layers." + std::to_string(i) + ".";
        for (named_shape tensor : std::vector<named_shape>{{"attention.wq.weight", {c.dim, c.dim}},
                                                           {"attention.wk.weight", {c.dim, kv_dim}},
                                                           {"attention.wv.weight", {c.dim, kv_dim}},
                                                           {"attention.wo.weight", {c.dim, c.dim}},
                                                           {"attention_norm.weight", {c.dim}},
                                                           {"feed_forward.w1.weight", {c.dim, c.hidden_dim}},
                                                           {"feed_forward.w2.weight", {c.hidden_dim, c.dim}},
                                                           {"feed_forward.w3.weight", {c.dim, c.hidden_dim}},
                                                           {"ffn_norm.weight", {c.dim}}}) {
            tensor.meta_name = layer + tensor.meta_name;
            out.push_back(std::move(tensor));
        }
    }
    return out;
}

std::size_t elements(const std::vector<std::uint64_t>& ne) {
    std::size_t n = 1;
    for (const std::uint64_t e : ne) n *= static_cast<std::size_t>(e);
    return n;
}

// The vocabulary of a llama2.c tokenizer.bin as llama-convert-llama2c-to-ggml writes it: ids 0-2
// renamed <unk>, <s>, </s>; a token spelled <0xXX> a byte token; spaces as U+2581.
std::vector<gguf_kv> vocabulary(const fs::path& file, std::size_t vocab_size) {
    enum token_type : std::int32_t { normal = 1, unknown = 2, control = 3, byte = 6 };
    const text::llama_tokenizer tokenizer(file, vocab_size);
    std::vector<std::string> tokens(vocab_size);
    std::vector<float> scores(vocab_size);
    std::vector<std::int32_t> types(vocab_size);
    for (std::size_t id = 0; id < vocab_size; ++id) {
        const auto token = static_cast<text::token_id>(id);
        std::string spelled(tokenizer.token(token));
        scores[id] = tokenizer.score(token);
        unsigned char value = 0;
        if (id == 0) spelled = "<unk>", types[id] = unknown;
        else if (id == 1) spelled = "<s>", types[id] = control;
        else if (id == 2) spelled = "</s>", types[id] = control;
        // The converter's own test, sscanf's, whatever follows the digits.
        else if (std::sscanf(spelled.c_str(), "<0x%02hhX>", &value) == 1) types[id] = byte;
        else types[id] = normal;
        for (std::size_t at; (at = spelled.find(' ')) != std::string::npos;) spelled.replace(at, 1, "\xE2\x96\x81");
        tokens[id] = std::move(spelled);
    }
    return {{"tokenizer.ggml.tokens", io::gguf_array(std::move(tokens))},
            {"tokenizer.ggml.scores", io::gguf_array(std::move(scores))},
            {"tokenizer.ggml.token_type", io::gguf_array(std::move(types))},
            {"tokenizer.ggml.model", std::string("llama")}};
}

// The converter's key/values, in its order.
std::vector<gguf_kv> converter_metadata(const llama_checkpoint_config& c, std::size_t context_length,
                                        const std::optional<fs::path>& tokenizer) {
    std::vector<gguf_kv> out;
    if (tokenizer) out = vocabulary(*tokenizer, c.vocab_size);
    out.push_back({"general.architecture", std::string("llama")});
    out.push_back({"general.name", std::string("llama")});
    if (tokenizer) {
        constexpr std::uint32_t none = 0xFFFFFFFF;  // -1, as the converter writes "no such token"
        out.push_back({"tokenizer.ggml.unknown_token_id", std::uint32_t{0}});
        out.push_back({"tokenizer.ggml.bos_token_id", std::uint32_t{1}});
        out.push_back({"tokenizer.ggml.eos_token_id", std::uint32_t{2}});
        out.push_back({"tokenizer.ggml.seperator_token_id", none});  // llama.cpp's spelling
        out.push_back({"tokenizer.ggml.padding_token_id", none});
    }
    const auto count = [](std::size_t n) { return static_cast<std::uint32_t>(n); };
    out.push_back({"llama.context_length", count(context_length)});
    out.push_back({"llama.embedding_length", count(c.dim)});
    out.push_back({"llama.feed_forward_length", count(c.hidden_dim)});
    out.push_back({"llama.attention.head_count", count(c.n_heads)});
    out.push_back({"llama.attention.head_count_kv", count(c.n_kv_heads)});
    out.push_back({"llama.block_count", count(c.n_layers)});
    out.push_back({"llama.rope.dimension_count", count(c.dim / c.n_heads)});
    out.push_back({"llama.attention.layer_norm_rms_epsilon", static_cast<float>(c.norm_eps)});
    // llama.cpp's default theta is 10000: another is written, as convert_hf_to_gguf.py does.
    if (c.rope_theta != 10000.0) out.push_back({"llama.rope.freq_base", static_cast<float>(c.rope_theta)});
    return out;
}

gguf_parts llama2c_parts(const fs::path& path, const llama_checkpoint_config& c, const std::optional<fs::path>& tokenizer) {
    // The file's order: every layer's weights of one kind together, as export.py writes them.
    auto weights = std::make_shared<std::map<std::string, std::vector<float>>>();
    const std::vector<named_shape> order = converter_order(c, !c.tied_classifier);
    const auto shape_of = [&](const std::string& meta_name) {
        return std::find_if(order.begin(), order.end(), [&](const named_shape& s) { return s.meta_name == meta_name; })->ne;
    };
    detail::llama2c_reader reader(path, c);
    const auto read = [&](const std::string& meta_name) {
        std::vector<float>& values = (*weights)[meta_name];
        values.resize(elements(shape_of(meta_name)));
        reader.read(values, meta_name);
    };
    read("tok_embeddings.weight");
    for (const char* kind : {"attention_norm.weight", "attention.wq.weight", "attention.wk.weight", "attention.wv.weight",
                             "attention.wo.weight", "ffn_norm.weight", "feed_forward.w1.weight",
                             "feed_forward.w2.weight", "feed_forward.w3.weight"})
        for (std::size_t i = 0; i < c.n_layers; ++i) read("layers." + std::to_string(i) + "." + kind);
    read("norm.weight");
    const std::size_t table = c.seq_len * (c.dim / c.n_heads) / 2;
    reader.skip(table, "freq_cis_real");
    reader.skip(table, "freq_cis_imag");
    if (!c.tied_classifier) read("output.weight");

    // llama.cpp's converter writes 128 whatever the model's context, and the tied classifier as a
    // copy of the embedding.
    gguf_parts parts{converter_metadata(c, 128, tokenizer), {}, true};
    for (const named_shape& tensor : converter_order(c, true)) {
        const std::string stored = tensor.meta_name == "output.weight" && c.tied_classifier ? "tok_embeddings.weight"
                                                                                            : tensor.meta_name;
        parts.tensors.push_back({detail::gguf_llama_name(tensor.meta_name), ggml_type::f32, tensor.ne,
                                 [weights, stored] { return bytes_of(weights->at(stored)); }});
    }
    return parts;
}

// Hugging Face's q and k rows pair each head's halves for rotate_half; llama.cpp rotates adjacent
// rows. convert_hf_to_gguf.py's permute: row h*head + 2j + i is stored row h*head + i*head/2 + j.
std::vector<float> adjacent_rotary_rows(const std::vector<float>& w, std::size_t heads, std::size_t row) {
    const std::size_t head = w.size() / row / heads, half = head / 2;
    std::vector<float> out(w.size());
    for (std::size_t h = 0; h < heads; ++h)
        for (std::size_t j = 0; j < half; ++j)
            for (std::size_t i = 0; i < 2; ++i)
                std::copy_n(w.begin() + static_cast<std::ptrdiff_t>((h * head + i * half + j) * row), row,
                            out.begin() + static_cast<std::ptrdiff_t>((h * head + 2 * j + i) * row));
    return out;
}

std::vector<float> hf_floats(const io::safetensors_file& file, const std::string& name, const std::vector<std::uint64_t>& ne) {
    const io::safetensors_info& info = file.info(name);
    const std::vector<std::size_t> shape(ne.rbegin(), ne.rend());
    if (info.shape != shape) {
        std::string want;
        for (const std::size_t e : shape) want += (want.empty() ? "" : ", ") + std::to_string(e);
        throw io::io_error("shaped::models::write_llama_gguf: " + file.where(name) + " is not of shape (" + want +
                           ") as config.json says");
    }
    std::vector<float> values(elements(ne));
    const auto stored_type = info.dtype == "F32" ? std::optional(ggml_type::f32)
                             : info.dtype == "F16"  ? std::optional(ggml_type::f16)
                             : info.dtype == "BF16" ? std::optional(ggml_type::bf16)
                                                    : std::nullopt;
    if (!stored_type)
        throw io::io_error("shaped::models::write_llama_gguf: " + file.where(name) + " is " + info.dtype +
                           ", not F32, F16 or BF16");
    if (*stored_type == ggml_type::f32) {
        file.read(name, std::as_writable_bytes(std::span(values)));
    } else {
        std::vector<std::byte> stored(values.size() * 2);
        file.read(name, stored);
        io::detail::dequantize_rows(*stored_type, stored, static_cast<std::size_t>(ne[0]), values);
    }
    io::detail::require_finite(values, "shaped::models::write_llama_gguf: " + file.where(name));
    return values;
}

gguf_parts hf_parts(const fs::path& dir, const llama_checkpoint_config& c, const std::optional<fs::path>& tokenizer) {
    const auto file = std::make_shared<io::safetensors_file>(dir / "model.safetensors");
    // convert_hf_to_gguf.py writes no output.weight for a tied classifier: llama.cpp then uses the
    // embedding.
    gguf_parts parts{converter_metadata(c, c.seq_len, tokenizer), {}, true};
    for (const named_shape& tensor : converter_order(c, !c.tied_classifier)) {
        const std::string hf_name = detail::hf_llama_name(tensor.meta_name);
        if (!file->contains(hf_name)) fail(file->path(), "has no tensor \"" + hf_name + "\"");
        std::size_t rotary_heads = 0;
        if (tensor.meta_name.ends_with("attention.wq.weight")) rotary_heads = c.n_heads;
        if (tensor.meta_name.ends_with("attention.wk.weight")) rotary_heads = c.n_kv_heads;
        parts.tensors.push_back({detail::gguf_llama_name(tensor.meta_name), ggml_type::f32, tensor.ne,
                                 [file, hf_name, ne = tensor.ne, rotary_heads] {
                                     std::vector<float> values = hf_floats(*file, hf_name, ne);
                                     if (rotary_heads != 0)
                                         values = adjacent_rotary_rows(values, rotary_heads, static_cast<std::size_t>(ne[0]));
                                     return bytes_of(values);
                                 }});
    }
    return parts;
}

gguf_parts gguf_file_parts(const fs::path& path) {
    const io::gguf_file file(path);
    gguf_parts parts{file.metadata(), {}, false};
    for (const io::gguf_tensor_info& info : file.tensors())
        parts.tensors.push_back({info.name, info.type, info.ne, [file, name = info.name] {
                                     const std::span<const std::byte> stored = file.bytes(name);
                                     return std::vector<std::byte>(stored.begin(), stored.end());
                                 }});
    return parts;
}

// ---- llama-quantize's choice of type (llama-quant.cpp) ----------------------------------------

bool is_block_quantized(ggml_type type) { return type != ggml_type::f32 && type != ggml_type::f16 && type != ggml_type::bf16; }

std::size_t block_width(ggml_type type) { return io::ggml_traits(type).block_size; }

ggml_type default_type(gguf_file_type type) {
    switch (type) {
        case gguf_file_type::f32: return ggml_type::f32;
        case gguf_file_type::f16: return ggml_type::f16;
        case gguf_file_type::q4_0: return ggml_type::q4_0;
        case gguf_file_type::q8_0: return ggml_type::q8_0;
        case gguf_file_type::q4_K: return ggml_type::q4_K;
        case gguf_file_type::q6_K: return ggml_type::q6_K;
    }
    return ggml_type::f32;
}

// tensor_allows_quantization, for the tensors a Llama has: 2-d (or more) weights but the norms.
bool quantizable(const source_tensor& t) {
    return t.ne.size() >= 2 && t.name.ends_with("weight") && t.name.find("_norm.weight") == std::string::npos;
}

// llama_tensor_get_type with no importance matrix and no overrides, for the file types here; its
// counters run over the tensors in the order they are written, as llama-quantize's do.
class type_rules {
public:
    type_rules(gguf_file_type file_type, const std::vector<source_tensor>& tensors) : file_type_(file_type) {
        for (const source_tensor& t : tensors) {
            n_attention_wv_ += t.name.find("attn_v.weight") != std::string::npos;
            n_ffn_down_ += t.name.find("ffn_down") != std::string::npos;  // one a layer: its n_layer
            tied_embeddings_ &= t.name != "output.weight";
        }
    }

    std::pair<ggml_type, std::string> choose(const source_tensor& t) {
        if (!quantizable(t)) return {t.type, {}};
        ggml_type type = default_type(file_type_);
        if (!is_block_quantized(type)) return {type, {}};
        const bool q4_K_M = file_type_ == gguf_file_type::q4_K;
        if (t.name == "output.weight" || (tied_embeddings_ && t.name == "token_embd.weight")) {
            if (t.ne[0] % block_width(type) != 0) type = ggml_type::q8_0;
            else if (type != ggml_type::q8_0) type = ggml_type::q6_K;
        } else if (t.name.find("attn_v.weight") != std::string::npos) {
            if (q4_K_M && use_more_bits(i_attention_wv_, n_attention_wv_)) type = ggml_type::q6_K;
            ++i_attention_wv_;
        } else if (t.name.find("ffn_down") != std::string::npos) {
            if (q4_K_M && use_more_bits(i_ffn_down_, n_ffn_down_)) type = ggml_type::q6_K;
            ++i_ffn_down_;
        }
        return fallback(t, type);
    }

private:
    static bool use_more_bits(int i_layer, int n_layers) {
        return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
    }

    // tensor_type_fallback: a row the type's blocks do not divide takes another type, with its warning.
    static std::pair<ggml_type, std::string> fallback(const source_tensor& t, ggml_type type) {
        const std::uint64_t ncols = t.ne[0];
        if (ncols % block_width(type) == 0) return {type, {}};
        std::string warning = "warning: " + t.name + " - ncols " + std::to_string(ncols) + " not divisible by " +
                              std::to_string(block_width(type)) + " (required for type " +
                              std::string(io::ggml_traits(type).name) + ") ";
        const ggml_type wanted = type;
        // Q6_K's fallback is llama.cpp's; Q4_K's would be Q5_0, which shaped does not write.
        type = type == ggml_type::q6_K || type == ggml_type::q4_K ? ggml_type::q8_0 : ggml_type::f16;
        if (ncols % block_width(type) != 0 || type == ggml_type::f16) {
            warning += "(WARNING: must use F16 due to unusual shape) ";
            type = ggml_type::f16;
        }
        warning += "-> falling back to " + std::string(io::ggml_traits(type).name);
        if (wanted == ggml_type::q4_K && type == ggml_type::q8_0) warning += " (llama.cpp's is q5_0, which shaped does not write)";
        return {type, warning};
    }

    gguf_file_type file_type_;
    int n_attention_wv_ = 0, i_attention_wv_ = 0;
    int n_ffn_down_ = 0, i_ffn_down_ = 0;
    bool tied_embeddings_ = true;
};

// llama-quantize's order, its loader's weight_name_comparer: tensors of no layer first, then layer
// by layer, each by name.
bool llama_quantize_order(const source_tensor& a, const source_tensor& b) {
    const auto layer = [](const std::string& name) {
        int n = -1;
        std::sscanf(name.c_str(), "blk.%d.", &n);
        return n;
    };
    const int la = layer(a.name), lb = layer(b.name);
    return la != lb ? la < lb : a.name < b.name;
}

// ---- converting rows ---------------------------------------------------------------------------

using written_formats = std::tuple<f32, f16, bf16, q8_0, q4_0, q4_K, q6_K>;

std::vector<std::byte> quantized_rows(ggml_type type, std::span<const float> values, std::size_t row) {
    std::vector<std::byte> out;
    std::apply([&](auto... format) {
        const auto try_format = [&]<class F>(F) {
            if (type != F::type) return;
            const std::size_t blocks = row / F::block_width, row_bytes = blocks * F::bytes_per_block;
            const std::size_t rows = row == 0 ? 0 : values.size() / row;
            out.resize(rows * row_bytes);
            std::vector<typename F::block_type> staged(blocks);
            for (std::size_t r = 0; r < rows; ++r) {
                F::quantize_row(values.subspan(r * row, row), staged);
                std::memcpy(out.data() + r * row_bytes, staged.data(), row_bytes);
            }
        };
        (try_format(format), ...);
    }, written_formats{});
    return out;
}

// The tensor's bytes in `type`: its own when it is of that type already, else dequantized to
// floats, checked finite, and quantized row by row.
std::vector<std::byte> bytes_as(const source_tensor& t, ggml_type type, const fs::path& checkpoint) {
    std::vector<std::byte> stored = t.read();
    if (type == t.type) return stored;
    const std::size_t row = t.ne.empty() ? 1 : static_cast<std::size_t>(t.ne[0]);
    std::vector<float> values(elements(t.ne));
    if (!io::detail::dequantize_rows(t.type, stored, row, values))
        fail(checkpoint, "tensor \"" + t.name + "\" is " + std::string(io::ggml_traits(t.type).name) +
                             ", which shaped cannot convert");
    io::detail::require_finite(values, "shaped::models::write_llama_gguf: " + checkpoint.string() + ": tensor \"" + t.name + "\"");
    return quantized_rows(type, values, row);
}

void set_last(std::vector<gguf_kv>& metadata, std::string key, io::gguf_value value) {
    // As llama.cpp's gguf_set_val_*: the old key removed, the new one appended.
    std::erase_if(metadata, [&](const gguf_kv& kv) { return kv.key == key; });
    metadata.push_back({std::move(key), std::move(value)});
}

}  // namespace

std::string_view gguf_file_type_name(gguf_file_type type) {
    switch (type) {
        case gguf_file_type::f32: return "f32";
        case gguf_file_type::f16: return "f16";
        case gguf_file_type::q4_0: return "q4_0";
        case gguf_file_type::q8_0: return "q8_0";
        case gguf_file_type::q4_K: return "q4_k";
        case gguf_file_type::q6_K: return "q6_k";
    }
    return "?";
}

std::optional<gguf_file_type> gguf_file_type_named(std::string_view name) {
    for (const gguf_file_type type : all_gguf_file_types)
        if (gguf_file_type_name(type) == name) return type;
    return std::nullopt;
}

gguf_written write_llama_gguf(const fs::path& checkpoint, const fs::path& out, const llama_gguf_options& options) {
    const bool is_gguf = !fs::is_directory(checkpoint) && checkpoint.extension() == ".gguf";
    if (is_gguf && options.tokenizer)
        fail(checkpoint, "a GGUF file's vocabulary is its own: no tokenizer is taken with one");
    gguf_parts parts;
    if (is_gguf) {
        parts = gguf_file_parts(checkpoint);
    } else {
        const llama_checkpoint_config config = read_llama_config(checkpoint);
        parts = fs::is_directory(checkpoint) ? hf_parts(checkpoint, config, options.tokenizer)
                                             : llama2c_parts(checkpoint, config, options.tokenizer);
    }

    // The converter's file as it is, or what llama-quantize makes of it.
    const bool quantized = !(parts.converted && options.type == gguf_file_type::f32);
    if (quantized) {
        std::stable_sort(parts.tensors.begin(), parts.tensors.end(), llama_quantize_order);
        set_last(parts.metadata, "general.quantization_version", std::uint32_t{2});
        set_last(parts.metadata, "general.file_type", static_cast<std::uint32_t>(options.type));
    }
    type_rules rules(options.type, parts.tensors);
    io::gguf_writer writer;
    gguf_written written;
    for (gguf_kv& kv : parts.metadata) {
        written.has_vocabulary |= kv.key == "tokenizer.ggml.tokens";
        writer.add(std::move(kv.key), std::move(kv.value));
    }
    for (const source_tensor& tensor : parts.tensors) {
        auto [type, fallback] = quantized ? rules.choose(tensor) : std::pair{tensor.type, std::string()};
        writer.add_tensor(tensor.name, type, tensor.ne, bytes_as(tensor, type, checkpoint));
        written.tensors.push_back({tensor.name, type, tensor.ne, std::move(fallback)});
    }
    writer.save(out);
    return written;
}

}  // namespace shaped::models
