// Training's checks, compiled once.
#include <shaped/train/step.hpp>

namespace shaped::train::detail {

void check_targets(const std::int64_t* targets, std::size_t n, std::string_view vocab_name, std::size_t vocab) {
    for (std::size_t i = 0; i < n; ++i)
        if (targets[i] != -1 && (targets[i] < 0 || static_cast<std::size_t>(targets[i]) >= vocab))
            models::detail::throw_bad_target(static_cast<long long>(targets[i]), i, vocab_name, vocab);
}

}  // namespace shaped::train::detail
