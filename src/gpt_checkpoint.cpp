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
    return parse_gpt2_config(io::detail::read_whole_file(context, path, "a GPT-2 config.json"), path);
}

}  // namespace

gpt_checkpoint_config parse_gpt2_config(std::string_view text, const fs::path& path) {
    const nlohmann::json config =
        detail::parse_config_json(text, "gpt2", "GPT-2", [&](const std::string& problem) { fail(path, problem); });
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

std::string config_spelling(const gpt_checkpoint_config& config) {
    std::ostringstream out;
    out << "shaped::models::gpt_config<" << config.vocab_size << ", " << config.block_size << ", " << config.n_layer
        << ", " << (config.n_head ? std::to_string(*config.n_head) : std::string("/* n_head */")) << ", "
        << config.n_embd;
    if (config.activation == "gelu_new") out << ", shaped::nn::activation::gelu_tanh";
    else if (config.activation != "gelu") out << ", /* no shaped activation is \"" << config.activation << "\" */";
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

void throw_config_mismatch(const fs::path& path, const gpt_checkpoint_config& found,
                           const std::vector<std::string>& mismatches, const std::string& compiled) {
    std::string message = "shaped::models::load_gpt: " + path.string() + ": the checkpoint's config, " +
                          config_spelling(found) + ", is not the compiled " + compiled + ":";
    for (const std::string& mismatch : mismatches) message += "\n  " + mismatch;
    throw io::io_error(message);
}

}  // namespace detail

}  // namespace shaped::models
