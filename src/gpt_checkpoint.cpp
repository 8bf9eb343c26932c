// What a GPT checkpoint says of its model (models/gpt_checkpoint.hpp): a Hugging Face GPT-2
// directory's config.json, or a nanoGPT state_dict's shapes; every value read is checked.

#include <shaped/models/gpt_checkpoint.hpp>

#include "config_json.hpp"
#include "untrusted_input.hpp"

#include <nlohmann/json.hpp>

#include <charconv>
#include <sstream>
#include <string>

namespace shaped::models {

namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail(const fs::path& path, const std::string& what) {
    throw io::io_error("shaped::models::read_gpt_config: " + path.string() + ": " + what);
}

std::size_t count_of(const nlohmann::json& config, const fs::path& path, std::initializer_list<const char*> keys) {
    for (const char* key : keys) {
        const auto found = config.find(key);
        if (found == config.end()) continue;
        if (!found->is_number_unsigned() || found->get<std::size_t>() == 0)
            fail(path, std::string("\"") + key + "\" is not a positive integer");
        return found->get<std::size_t>();
    }
    fail(path, std::string("has no \"") + *keys.begin() + "\"");
}

gpt_checkpoint_config read_config_json(const fs::path& path) {
    const std::string context = "shaped::models::read_gpt_config: " + path.string() + ": ";
    return detail::gpt2_config_from_json(
        detail::read_config_json(context, path, [&](const std::string& problem) { fail(path, problem); }), path);
}

// Whether the config's boolean `key` is `expected`, when it says one.
void require_flag(const nlohmann::json& config, const fs::path& path, const char* key, bool expected, const char* why) {
    const auto found = config.find(key);
    if (found == config.end() || found->is_null()) return;
    if (!found->is_boolean()) fail(path, std::string("\"") + key + "\" is not true or false");
    if (found->get<bool>() != expected) fail(path, std::string("has \"") + key + "\": " + found->dump() + ", " + why);
}

}  // namespace

gpt_checkpoint_config parse_gpt2_config(std::string_view text, const fs::path& path) {
    const auto fail_here = [&](const std::string& problem) { fail(path, problem); };
    const nlohmann::json config = detail::parse_json_object(text, fail_here);
    return detail::gpt2_config_from_json(config, path);
}

gpt_checkpoint_config detail::gpt2_config_from_json(const nlohmann::json& config, const fs::path& path) {
    detail::require_model_type(config, "gpt2", "GPT-2", [&](const std::string& problem) { fail(path, problem); });
    gpt_checkpoint_config out;
    out.vocab_size = count_of(config, path, {"vocab_size"});
    out.block_size = count_of(config, path, {"n_positions", "n_ctx"});
    out.n_layer = count_of(config, path, {"n_layer"});
    out.n_head = count_of(config, path, {"n_head"});
    out.n_embd = count_of(config, path, {"n_embd"});
    // Hugging Face's GPT2Config defaults.
    out.activation = "gelu_new";
    if (const auto act = config.find("activation_function"); act != config.end()) {
        if (!act->is_string()) fail(path, "\"activation_function\" is not a string");
        out.activation = act->get<std::string>();
    }
    if (const auto eps = config.find("layer_norm_epsilon"); eps != config.end()) {
        if (!eps->is_number()) fail(path, "\"layer_norm_epsilon\" is not a number");
        out.layer_norm_epsilon = eps->get<double>();
    }
    // What GPT2Config can say that shaped's GPT does not do; each would load and run, wrong.
    if (const auto inner = config.find("n_inner"); inner != config.end() && !inner->is_null()) {
        if (!inner->is_number_unsigned() || inner->get<std::size_t>() != 4 * out.n_embd)
            fail(path, "has \"n_inner\": " + inner->dump() + ", but shaped's GPT has an MLP of 4 n_embd, " +
                           std::to_string(4 * out.n_embd));
    }
    require_flag(config, path, "scale_attn_weights", true, "but shaped's GPT scales attention by 1/sqrt(head size)");
    require_flag(config, path, "scale_attn_by_inverse_layer_idx", false,
                 "which shaped's GPT does not do (it scales every layer's attention alike)");
    require_flag(config, path, "add_cross_attention", false, "which shaped's GPT does not have");
    return out;
}

namespace {

// The shape of the file's tensor `name` (GPT's name), which must have `rank` dims.
const std::vector<std::size_t>& shape_of(const io::safetensors_file& file, const std::string& name, std::size_t rank) {
    const auto& shape = file.info(detail::stored_name(file, name)).shape;
    if (shape.size() != rank)
        fail(file.path(), "tensor \"" + name + "\" has " + std::to_string(shape.size()) + " dims, not " + std::to_string(rank));
    return shape;
}

gpt_checkpoint_config read_state_dict(const fs::path& path) {
    const io::safetensors_file file(path);
    gpt_checkpoint_config out;
    const auto& wte = shape_of(file, "transformer.wte.weight", 2);
    const auto& wpe = shape_of(file, "transformer.wpe.weight", 2);
    out.vocab_size = wte[0];
    out.n_embd = wte[1];
    out.block_size = wpe[0];
    if (wpe[1] != out.n_embd)
        fail(path, "wte.weight has " + std::to_string(out.n_embd) + " channels, wpe.weight " + std::to_string(wpe[1]));
    while (file.contains(detail::stored_name(file, "transformer.h." + std::to_string(out.n_layer) + ".ln_1.weight")))
        ++out.n_layer;
    const auto& metadata = file.metadata();
    if (const auto heads = metadata.find("n_head"); heads != metadata.end()) {
        std::size_t n = 0;
        const auto [end, error] = std::from_chars(heads->second.data(), heads->second.data() + heads->second.size(), n);
        if (error != std::errc{} || end != heads->second.data() + heads->second.size() || n == 0)
            fail(path, "metadata \"n_head\" is not a positive integer: \"" + heads->second + "\"");
        out.n_head = n;
    }
    // nanoGPT's MLP has the exact GELU.
    const auto act = metadata.find("activation_function");
    out.activation = act == metadata.end() ? "gelu" : act->second;
    return out;
}

}  // namespace

gpt_checkpoint_config read_gpt_config(const fs::path& path) {
    if (fs::is_directory(path)) return read_config_json(path / "config.json");
    if (!fs::exists(path)) fail(path, "does not exist (a checkpoint is a GPT-2 directory or a safetensors file)");
    return read_state_dict(path);
}

std::vector<std::string> why_not_compilable(const gpt_checkpoint_config& found) {
    std::vector<std::string> out;
    if (!found.n_head) out.push_back("n_head: the checkpoint does not say (nanoGPT's metadata \"n_head\" would)");
    if (found.activation != "gelu_new" && found.activation != "gelu")
        out.push_back("activation_function: the checkpoint has " + found.activation +
                      "; shaped's GPT has gelu (erf) or gelu_new (tanh)");
    if (found.layer_norm_epsilon != nn::LayerNorm<dim<"C", 1>>::eps)
        out.push_back("layer_norm_epsilon: shaped's LayerNorm has " + detail::number_text(nn::LayerNorm<dim<"C", 1>>::eps) +
                      " in every config");
    return out;
}

std::string config_spelling(const gpt_checkpoint_config& config) {
    std::ostringstream out;
    out << "shaped::models::gpt_config<" << config.vocab_size << ", " << config.block_size << ", " << config.n_layer
        << ", " << (config.n_head ? std::to_string(*config.n_head) : std::string("/* n_head */")) << ", "
        << config.n_embd;
    if (config.activation == "gelu_new") out << ", shaped::nn::activation::gelu_tanh";
    else if (config.activation != "gelu") out << ", /* no shaped activation is \"" << config.activation << "\" */";
    if (config.layer_norm_epsilon != nn::LayerNorm<dim<"C", 1>>::eps)
        out << " /* layer_norm_epsilon " << detail::number_text(config.layer_norm_epsilon) << " */";
    out << ">";
    return out.str();
}

namespace detail {

fs::path tensor_file(const fs::path& path) { return fs::is_directory(path) ? path / "model.safetensors" : path; }

std::string stored_name(const io::safetensors_file& file, std::string_view name) {
    constexpr std::string_view prefix = "transformer.";
    if (file.contains(name) || !name.starts_with(prefix)) return std::string(name);
    const std::string bare(name.substr(prefix.size()));
    // Neither is in the file: the full name, which the error then names.
    return file.contains(bare) ? bare : std::string(name);
}

std::optional<std::string> layer_norm_eps_mismatch(const gpt_checkpoint_config& found) {
    // shaped's LayerNorm has torch's eps, 1e-5, in every config.
    constexpr double eps = nn::LayerNorm<dim<"C", 1>>::eps;
    if (found.layer_norm_epsilon == eps) return std::nullopt;
    return "layer_norm_epsilon: the checkpoint has " + detail::number_text(found.layer_norm_epsilon) +
           ", shaped's LayerNorm " + detail::number_text(eps);
}

void throw_config_mismatch(const fs::path& path, const gpt_checkpoint_config& found,
                           const std::vector<std::string>& mismatches, const std::string& compiled) {
    std::string message = "shaped::models::load_gpt: " + path.string() + ": the checkpoint's config, " +
                          config_spelling(found) + ", is not the compiled " + compiled + ":";
    for (const std::string& mismatch : mismatches) message += "\n  " + mismatch;
    throw io::io_error(message);
}

}  // namespace detail

}  // namespace shaped::models
