// Rule: a layer with a sliding window of W decodes with a ring of W positions; a RingKVCache of
// 8 positions is not the cache of a window of 4.
// expect-error: shaped::nn::attention: a layer with a sliding window of W decodes with a RingKVCache whose capacity is W
// expect-error: attention_cache_window<shaped::nn::GroupedQueryAttention<.*>, shaped::window<4>, shaped::nn::RingKVCache<float, .*name<'B'>, 2>, .*name<'N', 'K', 'V'>, 2>, .*name<'S'>, 8>, .*name<'H', 'S'>, 4> ?> ?>
#include <shaped/shaped.hpp>

using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 1>;
using C = shaped::dim<"C", 16>;
using NH = shaped::dim<"NH", 4>;
using NKV = shaped::dim<"NKV", 2>;
using HS = shaped::dim<"HS", 4>;
using Mistral = shaped::nn::GroupedQueryAttention<C, NH, NKV, HS, shaped::nn::rotary_encoding<HS>, float, shaped::window<4>>;

int main() {
    shaped::Generator gen(0);
    Mistral attention(gen);
    const auto x = shaped::randn<float, B, T, C>(gen);
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    shaped::nn::RingKVCache<float, B, NKV, shaped::dim<"S", 4>, HS> cache;
    auto out = attention(x, cache);
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    shaped::nn::RingKVCache<float, B, NKV, shaped::dim<"S", 8>, HS> cache;
    auto out = shaped::eval(shaped::exp(attention(x, cache)) + x);
#else
    shaped::nn::RingKVCache<float, B, NKV, shaped::dim<"S", 8>, HS> cache;
    auto out = attention(x, cache);
#endif
    (void)out;
}
