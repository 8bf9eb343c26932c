#pragma once
// Private to the library's sources: a Hugging Face config.json read as a JSON object of one model
// type, for the checkpoint readers of models/, and the configs it describes.

#include <shaped/models/gpt_checkpoint.hpp>
#include <shaped/models/llama_checkpoint.hpp>

#include "untrusted_input.hpp"

#include <nlohmann/json.hpp>

#include <array>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <string>
#include <string_view>

namespace shaped::models::detail {

// text as a JSON object; anything else is fail(problem), which throws the caller's io_error.
template <class Fail>
nlohmann::json parse_json_object(std::string_view text, Fail&& fail) {
    nlohmann::json config;
    try {
        config = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& error) {
        fail(std::string("is not JSON: ") + error.what());
    }
    if (!config.is_object()) fail("is not a JSON object");
    return config;
}

// fail(problem) unless the config's "model_type", if it says one, is `model_type`; `model` names
// the model in the problem.
template <class Fail>
void require_model_type(const nlohmann::json& config, std::string_view model_type, std::string_view model, Fail&& fail) {
    if (const auto type = config.find("model_type"); type != config.end() && *type != model_type)
        fail("is the config of a \"" + (type->is_string() ? type->get<std::string>() : type->dump()) + "\" model, not of " +
             std::string(model));
}

// The bytes of a checkpoint's config.json (at most max_config_json_bytes) as a JSON object.
template <class Fail>
nlohmann::json read_config_json(const std::string& context, const std::filesystem::path& file, Fail&& fail) {
    return parse_json_object(io::detail::read_whole_file(context, file, "a config.json", max_config_json_bytes), fail);
}

// A config's number as messages and config lines show it: a whole number as one ("500000"),
// any other as the shortest text that reads back as it ("1e-05").
inline std::string number_text(double x) {
    if (x == std::floor(x) && std::fabs(x) < 1e15) return std::to_string(static_cast<long long>(x));
    std::array<char, 32> text{};
    const auto end = std::to_chars(text.data(), text.data() + text.size(), x).ptr;
    return std::string(text.data(), end);
}

// A config.json already parsed, as each family reads it; `path` names it in messages.
gpt_checkpoint_config gpt2_config_from_json(const nlohmann::json& config, const std::filesystem::path& path);
llama_checkpoint_config hf_llama_config_from_json(const nlohmann::json& config, const std::filesystem::path& path);

}  // namespace shaped::models::detail
