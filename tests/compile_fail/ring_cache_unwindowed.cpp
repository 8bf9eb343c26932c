// Rule: only a layer with a sliding window decodes with a ring: a layer without one must see
// every earlier position, and a ring forgets them.
// expect-error: shaped::nn::attention: a layer with a sliding window of W decodes with a RingKVCache whose capacity is W, a layer without one with a KVCache
// expect-error: attention_cache_window<shaped::nn::GroupedQueryAttention<.*>, shaped::nn::no_window, shaped::nn::RingKVCache<float, .*name<'S'>, 4>, .*name<'H', 'S'>, 4> ?> ?>
#include <shaped/shaped.hpp>

using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 1>;
using C = shaped::dim<"C", 16>;
using NH = shaped::dim<"NH", 4>;
using NKV = shaped::dim<"NKV", 2>;
using HS = shaped::dim<"HS", 4>;
using S = shaped::dim<"S", 4>;
using Llama = shaped::nn::GroupedQueryAttention<C, NH, NKV, HS, shaped::nn::rotary_encoding<HS>, float>;

int main() {
    shaped::Generator gen(0);
    Llama attention(gen);
    const auto x = shaped::randn<float, B, T, C>(gen);
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    shaped::nn::KVCache<float, B, NKV, S, HS> cache;
#else
    shaped::nn::RingKVCache<float, B, NKV, S, HS> cache;
#endif
    auto out = attention(x, cache);
    (void)out;
}
