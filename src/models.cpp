// The run-time messages of models/: inputs past a model's context, targets outside its vocabulary.

#include <shaped/models/decoder.hpp>
#include <shaped/models/gpt.hpp>

#include <string>

namespace shaped::models::detail {

void throw_past_context(std::string_view where, std::size_t positions, std::string_view context_name,
                        std::size_t context) {
    throw shape_error(std::string(where) + ": " + std::to_string(positions) + " positions do not fit the context " +
                      shaped::detail::describe_dim(context_name, context));
}

void throw_bad_target(long long target, std::size_t at, std::string_view vocab_name, std::size_t vocab) {
    throw shape_error("shaped::models::cross_entropy: target " + std::to_string(target) + " (element " +
                      std::to_string(at) + " of the targets) is neither -1 (ignored) nor one of the " +
                      shaped::detail::describe_dim(vocab_name, vocab) + " classes");
}

}  // namespace shaped::models::detail
