// Rule: a layer's Window is shaped::window<W> or nn::no_window; any other type would be read as
// no window at all.
// expect-error: shaped::nn::GroupedQueryAttention: a layer's Window is shaped::window<W> \(a sliding window of W\) or nn::no_window
// expect-error: window_or_none<int>
#include <shaped/shaped.hpp>

using C = shaped::dim<"C", 16>;
using NH = shaped::dim<"NH", 4>;
using NKV = shaped::dim<"NKV", 2>;
using HS = shaped::dim<"HS", 4>;
using Rotary = shaped::nn::rotary_encoding<HS>;

int main() {
    shaped::Generator gen(0);
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    shaped::nn::GroupedQueryAttention<C, NH, NKV, HS, Rotary, float, shaped::window<4>> attention(gen);
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    shaped::nn::GroupedQueryAttention<C, NH, NKV, HS, Rotary, float, int> attention(gen);
    auto y = attention(shaped::randn<float, shaped::dim<"B", 2>, shaped::dim<"T", 3>, C>(gen)) * 2.0f;
    (void)y;
#else
    shaped::nn::GroupedQueryAttention<C, NH, NKV, HS, Rotary, float, int> attention(gen);
#endif
    (void)attention;
}
