// Rule: a layer's mask_mod() says whether a query sees a key, given the batch row, the head and
// both positions: a mask that takes the head where the batch row goes is one error naming the
// layer, the part and the mask.
// expect-error: shaped::nn::attention: a layer's score_mod\(\) returns a function
// expect-error: attention_modifier<ModifiedHead<SwappedDocuments>, shaped::diag::modifier_part::mask_mod
#include "modified_head.hpp"

struct SwappedDocuments {
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    auto mask_mod() const {
        return [](shaped::batch_index b, shaped::head_index, shaped::query_position q, shaped::key_position kv) {
            return q.value / (4 + b.value) == kv.value / (4 + b.value);
        };
    }
#else
    auto mask_mod() const {
        return [](shaped::head_index, shaped::batch_index b, shaped::query_position q, shaped::key_position kv) {
            return q.value / (4 + b.value) == kv.value / (4 + b.value);
        };
    }
#endif
};

int main() {
    shaped::Generator gen(0);
    ModifiedHead<SwappedDocuments> head(gen);
    auto y = head(shaped::randn<float, B, T, C>(gen));
    (void)y;
}
