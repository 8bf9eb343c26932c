// What a Llama checkpoint says of its model (models/llama_checkpoint.hpp): llama2.c's header or
// a Hugging Face config.json, every value read checked; and llama2.c's weights, read in order.

#include <shaped/models/llama_checkpoint.hpp>

#include "config_json.hpp"
#include "temporary_file.hpp"
#include "untrusted_input.hpp"

#include <nlohmann/json.hpp>

#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>

namespace shaped::models {

namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail(const fs::path& path, const std::string& what) {
    throw io::io_error("shaped::models::read_llama_config: " + path.string() + ": " + what);
}

// The heads divide the channels, the key/value heads the heads, and a head is rotary pairs:
// what any Llama's config must say, before a byte count is computed from it.
void check_shapes(const llama_checkpoint_config& config, const fs::path& path) {
    if (config.dim % config.n_heads != 0)
        fail(path, "dim " + std::to_string(config.dim) + " is not a multiple of n_heads " + std::to_string(config.n_heads));
    if (config.n_heads % config.n_kv_heads != 0)
        fail(path, "n_heads " + std::to_string(config.n_heads) + " is not a multiple of n_kv_heads " +
                       std::to_string(config.n_kv_heads));
    if ((config.dim / config.n_heads) % 2 != 0)
        fail(path, "the head size " + std::to_string(config.dim / config.n_heads) + " is odd: rotary needs pairs");
}

// The float32s a llama2.c file holds after its header, or nothing when the count overflows.
std::optional<std::size_t> llama2c_floats(const llama_checkpoint_config& c) {
    const std::size_t head_size = c.dim / c.n_heads, kv_dim = head_size * c.n_kv_heads;
    std::size_t total = 0;
    bool overflow = false;
    const auto add = [&](std::initializer_list<std::size_t> factors) {
        std::size_t product = 1;
        for (std::size_t f : factors) overflow |= __builtin_mul_overflow(product, f, &product);
        overflow |= __builtin_add_overflow(total, product, &total);
    };
    add({c.vocab_size, c.dim});                     // token embedding
    add({c.n_layers, c.dim});                       // attention norms
    add({c.n_layers, c.dim, c.dim});                // wq
    add({2, c.n_layers, kv_dim, c.dim});            // wk, wv
    add({c.n_layers, c.dim, c.dim});                // wo
    add({c.n_layers, c.dim});                       // ffn norms
    add({3, c.n_layers, c.hidden_dim, c.dim});      // w1, w2, w3
    add({c.dim});                                   // final norm
    add({c.seq_len, head_size});                    // the two legacy rotary tables, each half a head
    if (!c.tied_classifier) add({c.vocab_size, c.dim});
    overflow |= total > std::numeric_limits<std::size_t>::max() / sizeof(float) - llama2c_header_bytes;
    if (overflow) return std::nullopt;
    return total;
}

std::size_t positive(const nlohmann::json& config, const fs::path& path, const char* key) {
    const auto found = config.find(key);
    if (found == config.end()) fail(path, std::string("has no \"") + key + "\"");
    if (!found->is_number_unsigned() || found->get<std::size_t>() == 0)
        fail(path, std::string("\"") + key + "\" is not a positive integer");
    return found->get<std::size_t>();
}

double positive_number(const nlohmann::json& config, const fs::path& path, const char* key, double otherwise) {
    const auto found = config.find(key);
    if (found == config.end()) return otherwise;
    if (!found->is_number() || !(found->get<double>() > 0) || !std::isfinite(found->get<double>()))
        fail(path, std::string("\"") + key + "\" is not a positive number");
    return found->get<double>();
}

std::string describe_pairing(nn::rotary_pairing pairing) {
    return pairing == nn::rotary_pairing::adjacent ? "adjacent" : "halves";
}

// llama_config's NormEpsInverse for `eps`: the whole N with 1.0 / N exactly eps, if there is one.
std::optional<std::size_t> eps_inverse(double eps) {
    const double n = std::round(1.0 / eps);
    if (!(n >= 1 && n < 1e19)) return std::nullopt;
    const auto whole = static_cast<std::size_t>(n);
    if (1.0 / static_cast<double>(whole) != eps) return std::nullopt;
    return whole;
}

// llama_config's RopeTheta for `theta`, if it is a whole number.
std::optional<std::size_t> whole_theta(double theta) {
    if (!(theta >= 1 && theta < 1e19) || theta != std::floor(theta)) return std::nullopt;
    return static_cast<std::size_t>(theta);
}

constexpr double default_norm_eps = 1e-5, default_rope_theta = 10000.0;

// GGUF's counts: llama.cpp writes uint32, another writer may use any integer type; positive.
std::size_t gguf_count(const io::gguf_file& file, const std::string& key) {
    const io::gguf_value& value = file.value(key);
    const std::optional<std::uint64_t> count = std::visit(
        [](const auto& v) -> std::optional<std::uint64_t> {
            using V = std::remove_cvref_t<decltype(v)>;
            if constexpr (std::is_integral_v<V> && !std::is_same_v<V, bool>) {
                if (v > 0) return static_cast<std::uint64_t>(v);
            }
            return std::nullopt;
        },
        value);
    if (!count) fail(file.path(), "\"" + key + "\" is " + io::describe_type(value) + ", not a positive integer");
    return static_cast<std::size_t>(*count);
}

// GGUF's float32 of a config's value: eps as the 1 / N whose float it is (1e-5, not
// 9.99999974737875e-06), theta as written; a float64 as it is.
double gguf_number(const io::gguf_file& file, const std::string& key, double otherwise, bool inverse_of_whole) {
    const io::gguf_value* value = file.find(key);
    if (value == nullptr) return otherwise;
    double number = 0;
    if (const auto* single = std::get_if<float>(value)) {
        number = *single;
        const double n = std::round(inverse_of_whole ? 1.0 / number : number);
        const double exact = inverse_of_whole ? 1.0 / n : n;
        if (n >= 1 && static_cast<float>(exact) == *single) number = exact;
    } else if (const auto* twice = std::get_if<double>(value)) {
        number = *twice;
    } else {
        fail(file.path(), "\"" + key + "\" is " + io::describe_type(*value) + ", not a float32");
    }
    if (!(number > 0) || !std::isfinite(number)) fail(file.path(), "\"" + key + "\" is not a positive number");
    return number;
}

}  // namespace

llama_checkpoint_config parse_llama2c_header(std::span<const std::byte> header, const fs::path& path) {
    if (header.size() < llama2c_header_bytes)
        fail(path, "is " + std::to_string(header.size()) + " bytes, shorter than llama2.c's header of " +
                       std::to_string(llama2c_header_bytes));
    std::array<std::int32_t, 7> fields{};
    std::memcpy(fields.data(), header.data(), llama2c_header_bytes);
    constexpr std::array<const char*, 7> names{"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"};
    for (std::size_t i = 0; i < fields.size(); ++i) {
        // vocab_size alone may be negative (a separate classifier); INT32_MIN has no magnitude.
        const bool allowed = fields[i] > 0 || (i == 5 && fields[i] < 0 && fields[i] != std::numeric_limits<std::int32_t>::min());
        if (!allowed)
            fail(path, std::string("header field ") + names[i] + " is " + std::to_string(fields[i]) +
                           ", not a positive count (is this a llama2.c version-0 checkpoint?)");
    }
    llama_checkpoint_config out;
    out.dim = static_cast<std::size_t>(fields[0]);
    out.hidden_dim = static_cast<std::size_t>(fields[1]);
    out.n_layers = static_cast<std::size_t>(fields[2]);
    out.n_heads = static_cast<std::size_t>(fields[3]);
    out.n_kv_heads = static_cast<std::size_t>(fields[4]);
    out.tied_classifier = fields[5] > 0;
    out.vocab_size = static_cast<std::size_t>(fields[5] > 0 ? fields[5] : -fields[5]);
    out.seq_len = static_cast<std::size_t>(fields[6]);
    check_shapes(out, path);
    return out;
}

llama_checkpoint_config parse_hf_llama_config(std::string_view text, const fs::path& path) {
    return detail::hf_llama_config_from_json(
        detail::parse_json_object(text, [&](const std::string& problem) { fail(path, problem); }), path);
}

llama_checkpoint_config detail::hf_llama_config_from_json(const nlohmann::json& config, const fs::path& path) {
    detail::require_model_type(config, "llama", "Llama", [&](const std::string& problem) { fail(path, problem); });
    if (const auto act = config.find("hidden_act"); act != config.end() && *act != "silu")
        fail(path, "\"hidden_act\" is " + act->dump() + ": shaped's Llama has SwiGLU, \"silu\"");
    llama_checkpoint_config out;
    out.dim = positive(config, path, "hidden_size");
    out.hidden_dim = positive(config, path, "intermediate_size");
    out.n_layers = positive(config, path, "num_hidden_layers");
    out.n_heads = positive(config, path, "num_attention_heads");
    // LlamaConfig's default: as many key/value heads as heads.
    out.n_kv_heads = config.contains("num_key_value_heads") ? positive(config, path, "num_key_value_heads") : out.n_heads;
    out.vocab_size = positive(config, path, "vocab_size");
    out.seq_len = positive(config, path, "max_position_embeddings");
    if (const auto tied = config.find("tie_word_embeddings"); tied != config.end()) {
        if (!tied->is_boolean()) fail(path, "\"tie_word_embeddings\" is not true or false");
        out.tied_classifier = tied->get<bool>();
    }
    // Hugging Face's q and k are permuted for rotate_half.
    out.rotary_pairing = nn::rotary_pairing::halves;
    out.norm_eps = positive_number(config, path, "rms_norm_eps", 1e-6);
    out.rope_theta = positive_number(config, path, "rope_theta", 10000.0);
    if (const auto scaling = config.find("rope_scaling"); scaling != config.end() && !scaling->is_null())
        fail(path, "has \"rope_scaling\", which shaped's rotary encoding does not do");
    // Biases shaped's Llama does not have: their tensors would be left unread, and the model wrong.
    for (const char* key : {"attention_bias", "mlp_bias"}) {
        const auto bias = config.find(key);
        if (bias == config.end() || bias->is_null() || *bias == false) continue;
        fail(path, std::string("has \"") + key + "\": " + bias->dump() + ", but shaped's Llama has no biases");
    }
    check_shapes(out, path);
    if (const auto head = config.find("head_dim"); head != config.end() && !head->is_null()) {
        if (!head->is_number_unsigned() || head->get<std::size_t>() != out.dim / out.n_heads)
            fail(path, "has \"head_dim\": " + head->dump() + ", but shaped's Llama's heads are hidden_size / "
                       "num_attention_heads, " + std::to_string(out.dim / out.n_heads));
    }
    return out;
}

llama_checkpoint_config gguf_llama_config(const io::gguf_file& file) {
    const std::string& architecture = file.get<std::string>("general.architecture");
    if (architecture != "llama")
        fail(file.path(), "\"general.architecture\" is \"" + architecture + "\", not \"llama\"");
    llama_checkpoint_config out;
    out.dim = gguf_count(file, "llama.embedding_length");
    out.hidden_dim = gguf_count(file, "llama.feed_forward_length");
    out.n_layers = gguf_count(file, "llama.block_count");
    out.n_heads = gguf_count(file, "llama.attention.head_count");
    out.n_kv_heads = file.has_key("llama.attention.head_count_kv") ? gguf_count(file, "llama.attention.head_count_kv")
                                                                    : out.n_heads;
    out.seq_len = gguf_count(file, "llama.context_length");
    out.context_binds = false;
    const io::gguf_tensor_info& embedding = file.info("token_embd.weight");
    if (embedding.ne.size() != 2 || embedding.ne[1] == 0)
        fail(file.path(), "token_embd.weight is not a matrix of (dim, vocabulary) in ggml's order");
    out.vocab_size = static_cast<std::size_t>(embedding.ne[1]);
    // llama.cpp's llama2.c converter writes output.weight even for a tied model, as a copy of the
    // embedding: a copy is the tied classifier.
    if (file.contains("output.weight")) {
        const io::gguf_tensor_info& output = file.info("output.weight");
        const auto output_bytes = file.bytes("output.weight"), embedding_bytes = file.bytes("token_embd.weight");
        out.tied_classifier = output.type == embedding.type && output.ne == embedding.ne &&
                              std::equal(output_bytes.begin(), output_bytes.end(), embedding_bytes.begin(),
                                         embedding_bytes.end());
    }
    // Every weight's type, to be the compiled formats': llama.cpp's names, by kind.
    constexpr std::array<std::string_view, llama_weight_kinds.size()> tensor_kinds{
        "attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_down", "ffn_up"};
    out.weight_types.push_back({"token_embd.weight", 0, embedding.type});
    for (std::size_t layer = 0; layer < out.n_layers; ++layer)
        for (std::size_t k = 0; k < 7; ++k) {
            const std::string name = "blk." + std::to_string(layer) + "." + std::string(tensor_kinds[k]) + ".weight";
            if (file.contains(name)) out.weight_types.push_back({name, k + 1, file.info(name).type});
        }
    if (file.contains("output.weight"))
        out.weight_types.push_back({"output.weight", llama_weight_kinds.size() - 1, file.info("output.weight").type});
    out.rotary_pairing = nn::rotary_pairing::adjacent;  // llama.cpp's rope for "llama"
    out.norm_eps = gguf_number(file, "llama.attention.layer_norm_rms_epsilon", default_norm_eps, true);
    out.rope_theta = gguf_number(file, "llama.rope.freq_base", default_rope_theta, false);
    check_shapes(out, file.path());
    return out;
}

checkpoint_config read_checkpoint_config(const fs::path& path) {
    std::error_code error;
    if (fs::is_regular_file(path, error) && (path.extension() == ".bin" || path.extension() == ".gguf"))
        return read_llama_config(path);
    if (!fs::is_directory(path, error)) return read_gpt_config(path);
    // One read of config.json tells the family and gives its config.
    const fs::path file = path / "config.json";
    const std::string context = "shaped::models::read_checkpoint_config: " + file.string() + ": ";
    const auto fail_here = [&](const std::string& problem) {
        throw io::io_error("shaped::models::read_checkpoint_config: " + file.string() + ": " + problem);
    };
    const nlohmann::json config = detail::read_config_json(context, file, fail_here);
    if (const auto type = config.find("model_type"); type != config.end() && *type == "llama")
        return detail::hf_llama_config_from_json(config, file);
    return detail::gpt2_config_from_json(config, file);
}

llama_checkpoint_config read_llama_config(const fs::path& path) {
    const std::string context = "shaped::models::read_llama_config: " + path.string() + ": ";
    if (fs::is_directory(path)) {
        const fs::path file = path / "config.json";
        return detail::hf_llama_config_from_json(
            detail::read_config_json(context, file, [&](const std::string& problem) { fail(file, problem); }), file);
    }
    if (path.extension() == ".gguf") return gguf_llama_config(io::gguf_file(path));
    io::detail::require_regular_file(context, path, "a llama2.c checkpoint");
    std::ifstream in(path, std::ios::binary);
    if (!in) fail(path, std::string("cannot open: ") + std::strerror(errno));
    std::array<std::byte, llama2c_header_bytes> header{};
    in.read(reinterpret_cast<char*>(header.data()), header.size());
    return parse_llama2c_header(std::span(header.data(), static_cast<std::size_t>(in.gcount())), path);
}

std::string config_spelling(const llama_checkpoint_config& c) {
    std::ostringstream out;
    out << "shaped::models::llama_config<" << c.vocab_size << ", " << c.seq_len << ", " << c.n_layers << ", "
        << c.n_heads << ", " << c.n_kv_heads << ", " << c.dim << ", " << c.hidden_dim;
    // Each optional parameter is spelled when it, or one after it, is not the default.
    const bool theta = c.rope_theta != default_rope_theta;
    const bool eps = theta || c.norm_eps != default_norm_eps;
    const bool pairing = eps || c.rotary_pairing != nn::rotary_pairing::adjacent;
    if (pairing || !c.tied_classifier) out << ", " << (c.tied_classifier ? "true" : "false");
    if (pairing)
        out << (c.rotary_pairing == nn::rotary_pairing::adjacent ? ", shaped::nn::rotary_pairing::adjacent"
                                                                 : ", shaped::nn::rotary_pairing::halves");
    if (eps) {
        if (const auto n = eps_inverse(c.norm_eps)) out << ", " << *n;
        else out << ", /* no whole N has 1 / N = " << detail::number_text(c.norm_eps) << " */";
    }
    if (theta) {
        if (const auto n = whole_theta(c.rope_theta)) out << ", " << *n;
        else out << ", /* theta " << detail::number_text(c.rope_theta) << " is not a whole number */";
    }
    out << ">";
    return out.str();
}

std::vector<std::string> why_not_compilable(const llama_checkpoint_config& found) {
    std::vector<std::string> out;
    if (!eps_inverse(found.norm_eps))
        out.push_back("rms_norm_eps " + detail::number_text(found.norm_eps) +
                      " is not 1/N for a whole N, as llama_config's eps is");
    if (!whole_theta(found.rope_theta))
        out.push_back("rope_theta " + detail::number_text(found.rope_theta) +
                      " is not a whole number, as llama_config's theta is");
    return out;
}

namespace detail {

std::vector<std::string> llama_config_mismatches(const llama_checkpoint_config& found,
                                                 const llama_checkpoint_config& compiled,
                                                 const std::array<ggml_type, llama_weight_kinds.size()>& formats) {
    std::vector<std::string> out;
    const auto check = [&](std::string_view key, auto got, auto want, auto show) {
        if (got != want)
            out.push_back(std::string(key) + ": the checkpoint has " + show(got) + ", the compiled config " + show(want));
    };
    const auto count = [](std::size_t n) { return std::to_string(n); };
    const auto number = [](double x) { return detail::number_text(x); };
    check("dim", found.dim, compiled.dim, count);
    check("hidden_dim", found.hidden_dim, compiled.hidden_dim, count);
    check("n_layers", found.n_layers, compiled.n_layers, count);
    check("n_heads", found.n_heads, compiled.n_heads, count);
    check("n_kv_heads", found.n_kv_heads, compiled.n_kv_heads, count);
    check("vocab_size", found.vocab_size, compiled.vocab_size, count);
    if (found.context_binds) check("seq_len", found.seq_len, compiled.seq_len, count);
    // A tied checkpoint loads into a model with a classifier of its own as a copy of the embedding
    // (as llama.cpp's converter writes one, which its quantizer may store in another format); the
    // other way, the checkpoint's classifier would be lost.
    if (!(found.tied_classifier && !compiled.tied_classifier))
        check("classifier", found.tied_classifier, compiled.tied_classifier,
              [](bool tied) { return std::string(tied ? "tied to the embedding" : "its own"); });
    check("rotary pairing", found.rotary_pairing, compiled.rotary_pairing, describe_pairing);
    check("rms_norm_eps", found.norm_eps, compiled.norm_eps, number);
    check("rope_theta", found.rope_theta, compiled.rope_theta, number);
    // A quantized format keeps a file's blocks, so the file must store it (only a float checkpoint
    // is quantized on loading); a dense one takes any type, dequantized. A classifier tied to the
    // embedding is the embedding's.
    for (const stored_weight_type& weight : found.weight_types) {
        if (weight.kind == llama_weight_kinds.size() - 1 && compiled.tied_classifier) continue;
        const ggml_type expected = formats[weight.kind];
        if (expected != ggml_type::f32 && weight.type != expected)
            out.push_back("weights: " + weight.tensor + " is " + std::string(io::ggml_traits(weight.type).name) +
                          ", the compiled config's " + std::string(llama_weight_kinds[weight.kind]) + " " +
                          std::string(io::ggml_traits(expected).name));
    }
    return out;
}

void throw_llama_config_mismatch(const fs::path& path, const llama_checkpoint_config& found,
                                 const std::vector<std::string>& mismatches) {
    std::string message = "shaped::models::load_llama: " + path.string() + ": the checkpoint's config, " +
                          config_spelling(found) + ", is not the compiled one:";
    for (const std::string& mismatch : mismatches) message += "\n  " + mismatch;
    throw io::io_error(message);
}

struct llama2c_writer::file {
    io::detail::temporary_file temporary;
};

llama2c_writer::llama2c_writer(const fs::path& path, const llama_checkpoint_config& config)
    : path_(path), file_(new file{io::detail::temporary_file(path, "shaped::models::save_llama2c")}) {
    // A shared classifier is a positive vocab_size, its own a negative one.
    const auto count = [](std::size_t n) { return static_cast<std::int32_t>(n); };
    const std::array<std::int32_t, 7> header{count(config.dim),        count(config.hidden_dim), count(config.n_layers),
                                             count(config.n_heads),    count(config.n_kv_heads),
                                             config.tied_classifier ? count(config.vocab_size) : -count(config.vocab_size),
                                             count(config.seq_len)};
    file_->temporary.write(std::as_bytes(std::span(header)));
}
llama2c_writer::~llama2c_writer() = default;
void llama2c_writer::write(std::span<const float> floats) { file_->temporary.write(std::as_bytes(floats)); }
void llama2c_writer::commit() { file_->temporary.commit_as(path_); }

llama2c_reader::llama2c_reader(const fs::path& path, const llama_checkpoint_config& config)
    : path_(path), in_(path, std::ios::binary) {
    if (!in_) fail(path, std::string("cannot open: ") + std::strerror(errno));
    const auto floats = llama2c_floats(config);
    if (!floats) fail(path, "the header's config has more weights than a file can hold");
    std::error_code error;
    const auto size = fs::file_size(path, error);
    if (error) fail(path, "cannot read its size: " + error.message());
    const std::size_t expected = llama2c_header_bytes + *floats * sizeof(float);
    if (size != expected)
        fail(path, "is " + std::to_string(size) + " bytes; its header's config " + config_spelling(config) + " needs " +
                       std::to_string(expected) + (size < expected ? " (truncated?)" : " (trailing bytes?)"));
    in_.seekg(static_cast<std::streamoff>(llama2c_header_bytes));
}

void llama2c_reader::read(std::span<float> out, std::string_view what) {
    in_.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(out.size_bytes()));
    if (static_cast<std::size_t>(in_.gcount()) != out.size_bytes())
        fail(path_, "ends inside " + std::string(what) + " (the file changed while it was read?)");
    io::detail::require_finite(out, "shaped::models::load_llama: " + path_.string() + ": tensor \"" + std::string(what) + "\"");
}

void llama2c_reader::skip(std::size_t floats, std::string_view what) {
    in_.seekg(static_cast<std::streamoff>(floats * sizeof(float)), std::ios::cur);
    if (!in_) fail(path_, "ends inside " + std::string(what));
}

void write_hf_llama_config(const fs::path& path, const llama_checkpoint_config& config) {
    // What parse_hf_llama_config reads back, and transformers' LlamaConfig takes.
    const nlohmann::ordered_json json{
        {"architectures", {"LlamaForCausalLM"}},
        {"model_type", "llama"},
        {"hidden_act", "silu"},
        {"hidden_size", config.dim},
        {"intermediate_size", config.hidden_dim},
        {"num_hidden_layers", config.n_layers},
        {"num_attention_heads", config.n_heads},
        {"num_key_value_heads", config.n_kv_heads},
        {"vocab_size", config.vocab_size},
        {"max_position_embeddings", config.seq_len},
        {"rms_norm_eps", config.norm_eps},
        {"rope_theta", config.rope_theta},
        {"tie_word_embeddings", config.tied_classifier},
    };
    const std::string text = json.dump(2) + "\n";
    io::detail::temporary_file file(path, "shaped::models::save_hf_llama");
    file.write(std::as_bytes(std::span(text.data(), text.size())));
    file.commit_as(path);
}

namespace {

using name_pair = std::pair<std::string_view, std::string_view>;

// How another format names the parameters that have Meta's names: three whole names, the layers'
// prefix, and the parts of a layer's names.
struct parameter_naming {
    std::array<name_pair, 3> whole;  // tok_embeddings.weight, norm.weight, output.weight
    name_pair layers;                // "layers." and its replacement
    std::array<name_pair, 9> parts;
};

std::string renamed(std::string_view name, const parameter_naming& naming) {
    for (const auto& [meta, theirs] : naming.whole)
        if (name == meta) return std::string(theirs);
    std::string out(name);
    if (out.starts_with(naming.layers.first)) out.replace(0, naming.layers.first.size(), naming.layers.second);
    for (const auto& [meta, theirs] : naming.parts)
        if (const auto at = out.find(meta); at != std::string::npos) out.replace(at, meta.size(), theirs);
    return out;
}

constexpr parameter_naming llama_cpp_naming{
    {{{"tok_embeddings.weight", "token_embd.weight"}, {"norm.weight", "output_norm.weight"}, {"output.weight", "output.weight"}}},
    {"layers.", "blk."},
    {{{"attention.wq.", "attn_q."},
      {"attention.wk.", "attn_k."},
      {"attention.wv.", "attn_v."},
      {"attention.wo.", "attn_output."},
      {"feed_forward.w1.", "ffn_gate."},
      {"feed_forward.w2.", "ffn_down."},
      {"feed_forward.w3.", "ffn_up."},
      {"attention_norm.", "attn_norm."},
      {"ffn_norm.", "ffn_norm."}}},
};

constexpr parameter_naming hugging_face_naming{
    {{{"tok_embeddings.weight", "model.embed_tokens.weight"}, {"norm.weight", "model.norm.weight"},
      {"output.weight", "lm_head.weight"}}},
    {"layers.", "model.layers."},
    {{{"attention.wq.", "self_attn.q_proj."},
      {"attention.wk.", "self_attn.k_proj."},
      {"attention.wv.", "self_attn.v_proj."},
      {"attention.wo.", "self_attn.o_proj."},
      {"feed_forward.w1.", "mlp.gate_proj."},
      {"feed_forward.w2.", "mlp.down_proj."},
      {"feed_forward.w3.", "mlp.up_proj."},
      {"attention_norm.", "input_layernorm."},
      {"ffn_norm.", "post_attention_layernorm."}}},
};

}  // namespace

std::string gguf_llama_name(std::string_view name) { return renamed(name, llama_cpp_naming); }
std::string hf_llama_name(std::string_view name) { return renamed(name, hugging_face_naming); }

}  // namespace detail

}  // namespace shaped::models
