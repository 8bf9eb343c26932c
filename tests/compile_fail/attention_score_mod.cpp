// Rule: a layer's score_mod() is called with the score and its coordinates, each of its own type:
// a modifier that takes the key's position where the query's goes (ALiBi's distance the wrong
// way round) is one error naming the layer, the part and the modifier, not scores biased backwards.
// expect-error: shaped::nn::attention: a layer's score_mod\(\) returns a function score\(value_type s, batch_index
// expect-error: attention_modifier<ModifiedHead<SwappedAlibi>, shaped::diag::modifier_part::score_mod
#include "modified_head.hpp"

struct SwappedAlibi {
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    auto score_mod() const {
        return [](float s, shaped::batch_index, shaped::head_index, shaped::query_position q, shaped::key_position kv) {
            return s - 0.5f * static_cast<float>(q - kv);
        };
    }
#else
    auto score_mod() const {
        return [](float s, shaped::batch_index, shaped::head_index, shaped::key_position kv, shaped::query_position q) {
            return s - 0.5f * static_cast<float>(q - kv);
        };
    }
#endif
};

int main() {
    shaped::Generator gen(0);
    ModifiedHead<SwappedAlibi> head(gen);
    auto y = head(shaped::randn<float, B, T, C>(gen));
    (void)y;
}
