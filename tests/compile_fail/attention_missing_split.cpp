// Rule: a layer of several heads (heads_dim) hands the routine q, k and v split into heads,
// (B, NH, T, HS). One whose heads() give its channels unsplit, (B, T, C), is an error naming the
// part and both dim lists.
// expect-error: shaped::nn::attention: the layer's heads do not meet the routine's dims
// expect-error: attention_heads<UserAttention<UnsplitHeads> ?, shaped::diag::heads_part::queries, .*dims<.*name<'B'>, 2>, .*name<'N', 'H'>, 4>, .*name<'T'>, 8>, .*name<'H', 'S'>, 8> ?>, .*dims<.*name<'B'>, 2>, .*name<'T'>, 8>, .*name<'C'>, 32> ?>
#include <shaped/shaped.hpp>

#include "user_attention.hpp"

struct UnsplitHeads {
    template <class X>
    static auto of(X&& x) { return shaped::view_of(std::forward<X>(x)); }
};

int main() {
    shaped::Generator gen(0);
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    UserAttention<split_heads> attn(gen);
#else
    UserAttention<UnsplitHeads> attn(gen);
#endif
    auto y = attn(shaped::randn<float, B, T, C>(gen));
    (void)y;
}
