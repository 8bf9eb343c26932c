// Rule: a window counts back from the causal diagonal, so it cannot stand with a mask that
// replaces causality (a prefix-LM's prefix sees keys after its queries): one error saying so.
// expect-error: shaped::and_masks: causality and a window count from the causal diagonal, so a mask that replaces causality takes neither
#include <shaped/shaped.hpp>

using T = shaped::dim<"T", 6>;
using D = shaped::dim<"D", 4>;

int main() {
    shaped::Generator gen(0);
    const auto q = shaped::randn<float, T, D>(gen);
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    const auto keeps = shaped::and_masks(shaped::window<2>{}, shaped::causal_mask{});
#else
    const auto keeps = shaped::and_masks(shaped::window<2>{}, shaped::nn::prefix_lm{3});
#endif
    const auto out = shaped::eval(shaped::causal_attention(
        q, q, q, 0.5f, shaped::attention_modifiers<shaped::unmodified_scores, std::remove_const_t<decltype(keeps)>>{{}, keeps}));
    (void)out;
}
