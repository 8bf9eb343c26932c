// Rule: an MLP's (or a LayerNorm's) input is (..., C), C its channel dim: (T, C(8)) cannot feed
// an MLP<C(12)>.
// expect-error: shaped::nn: the layer's input must be \(\.\.\., C\), C the layer's channel dim
// expect-error: layer_input<shaped::nn::MLP<.*>, .*name<'C'>, 12>, .*dims<.*name<'T'>, 4>, .*name<'C'>, 8>
#include <shaped/shaped.hpp>

using T = shaped::dim<"T", 4>;
using C = shaped::dim<"C", 12>;

int main() {
    shaped::Generator gen(0);
    shaped::nn::MLP<C> mlp(gen);
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    auto x = shaped::randn<float, T, C>(gen);
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    auto x = shaped::randn<float, T, C>(gen);
    shaped::nn::LayerNorm<C> ln(gen);
    auto h = ln(mlp(shaped::randn<float, T, shaped::dim<"C", 8>>(gen)));
    (void)h;
#else
    auto x = shaped::randn<float, T, shaped::dim<"C", 8>>(gen);
#endif
    auto y = mlp(x);
    (void)y;
}
