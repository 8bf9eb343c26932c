// Rule: what a layer hands the attention routine is checked by name. A layer whose heads() and
// heads_of() give (B, T, NH, HS), the split without the transpose, would attend across heads
// instead of across time; it is an error naming the part and both dim lists.
// expect-error: shaped::nn::attention: the layer's heads do not meet the routine's dims
// expect-error: attention_heads<UserAttention<SwappedHeads> ?, shaped::diag::heads_part::queries, .*dims<.*name<'B'>, 2>, .*name<'N', 'H'>, 4>, .*name<'T'>, 8>, .*name<'H', 'S'>, 8> ?>, .*dims<.*name<'B'>, 2>, .*name<'T'>, 8>, .*name<'N', 'H'>, 4>, .*name<'H', 'S'>, 8> ?>
#include <shaped/shaped.hpp>

#include "user_attention.hpp"

struct SwappedHeads {
    template <class X>
    static auto of(X&& x) { return shaped::view_of(shaped::split<C, NH, HS>(std::forward<X>(x))); }
};

int main() {
    shaped::Generator gen(0);
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    UserAttention<split_heads> attn(gen);
#else
    UserAttention<SwappedHeads> attn(gen);
#endif
#if defined(SHAPED_COMPILE_FAIL_NESTED)
    // The routine called directly, inside an expression: the same one error.
    auto y = shaped::exp(shaped::nn::causal_self_attention(attn, shaped::randn<float, B, T, C>(gen)));
#else
    auto y = attn(shaped::randn<float, B, T, C>(gen));
#endif
    (void)y;
}
