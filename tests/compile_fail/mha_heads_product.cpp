// Rule: MultiHeadAttention's heads share the channels: NH(5) x HS(4) is not C(12).
// expect-error: shaped::nn::MultiHeadAttention: heads x head size must equal the channel dim
// expect-error: heads_fill_channels<.*name<'C'>, 12>, .*name<'N', 'H'>, 5>, .*name<'H', 'S'>, 4>
#include <shaped/shaped.hpp>

using C = shaped::dim<"C", 12>;
using HS = shaped::dim<"HS", 4>;

int main() {
    shaped::Generator gen(0);
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    shaped::nn::MultiHeadAttention<C, shaped::dim<"NH", 3>, HS> mha(gen);
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    shaped::nn::MultiHeadAttention<C, shaped::dim<"NH", 5>, HS> mha(gen);
    auto x = shaped::randn<float, shaped::dim<"B", 2>, shaped::dim<"T", 4>, C>(gen);
    auto y = mha(x) + x;
    (void)y;
#else
    shaped::nn::MultiHeadAttention<C, shaped::dim<"NH", 5>, HS> mha(gen);
#endif
    (void)mha;
}
