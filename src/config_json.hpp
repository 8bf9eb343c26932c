#pragma once
// Private to the library's sources: a Hugging Face config.json read as a JSON object of one model
// type, for the checkpoint readers of models/.

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace shaped::models::detail {

// text as a JSON object whose "model_type", if it says one, is `model_type`; anything else is
// fail(problem), which throws the caller's io_error. `model` names the model in the problem.
template <class Fail>
nlohmann::json parse_config_json(std::string_view text, std::string_view model_type, std::string_view model, Fail&& fail) {
    nlohmann::json config;
    try {
        config = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& error) {
        fail(std::string("is not JSON: ") + error.what());
    }
    if (!config.is_object()) fail("is not a JSON object");
    if (const auto type = config.find("model_type"); type != config.end() && *type != model_type)
        fail("is the config of a \"" + (type->is_string() ? type->get<std::string>() : type->dump()) + "\" model, not of " +
             std::string(model));
    return config;
}

}  // namespace shaped::models::detail
