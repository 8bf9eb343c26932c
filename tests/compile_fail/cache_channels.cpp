// Rule: a decoded token has the layer's channel dim; C(8) cannot feed a Head<C(6), H>.
// expect-error: shaped::nn: the layer's input must be \(\.\.\., C\), C the layer's channel dim
// expect-error: layer_input<shaped::nn::Head<.*>, .*name<'C'>, 6>, .*dims<.*name<'B'>, 2>, .*name<'T'>, 1>, .*name<'C'>, 8>
#include <shaped/shaped.hpp>

using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 1>;
using C = shaped::dim<"C", 6>;
using H = shaped::dim<"H", 16>;
using S = shaped::dim<"S", 32>;

int main() {
    shaped::Generator gen(0);
    shaped::nn::Head<C, H> head(gen);
    shaped::nn::KVCache<float, B, S, H> cache;
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    auto token = shaped::randn<float, B, T, C>(gen);
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    auto token = shaped::randn<float, B, T, C>(gen);
    auto prev = shaped::eval(head(shaped::randn<float, B, T, shaped::dim<"C", 8>>(gen), cache));
    (void)prev;
#else
    auto token = shaped::randn<float, B, T, shaped::dim<"C", 8>>(gen);
#endif
    auto out = head(token, cache);
    (void)out;
}
