// Rule: a sliding window holds at least one position: window<0> is no window.
// expect-error: shaped::window: a sliding window holds at least one position \(W > 0\)
// expect-error: window_holds_a_position<0>
#include <shaped/shaped.hpp>

using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 4>;
using H = shaped::dim<"H", 8>;

int main() {
    shaped::Generator gen(0);
    const auto q = shaped::randn<float, B, T, H>(gen);
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    auto out = shaped::eval(shaped::causal_attention(q, q, q, 0.5f, shaped::window<1>{}));
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    auto out = shaped::eval(shaped::exp(shaped::causal_attention(q, q, q, 0.5f, shaped::window<0>{})) + q);
#else
    auto out = shaped::eval(shaped::causal_attention(q, q, q, 0.5f, shaped::window<0>{}));
#endif
    (void)out;
}
