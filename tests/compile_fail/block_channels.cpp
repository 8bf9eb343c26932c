// Rule: a Block's input is (B, T, C), C its channel dim; C(8) cannot feed a Block<C(12), ...>.
// expect-error: shaped::nn: the layer's input must be \(\.\.\., C\), C the layer's channel dim
// expect-error: layer_input<shaped::nn::Block<.*>, .*name<'C'>, 12>, .*dims<.*name<'B'>, 2>, .*name<'T'>, 4>, .*name<'C'>, 8>
#include <shaped/shaped.hpp>

using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 4>;
using C = shaped::dim<"C", 12>;

int main() {
    shaped::Generator gen(0);
    shaped::nn::Block<C, shaped::dim<"NH", 3>, shaped::dim<"HS", 4>> block(gen);
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    auto x = shaped::randn<float, B, T, C>(gen);
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    auto h = shaped::randn<float, B, T, shaped::dim<"C", 8>>(gen);
    auto x = block(h) + h;  // a residual, fed to the next block below
#else
    auto x = shaped::randn<float, B, T, shaped::dim<"C", 8>>(gen);
#endif
    auto y = block(x);
    (void)y;
}
