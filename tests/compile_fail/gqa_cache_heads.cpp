// Rule: a GroupedQueryAttention caches its NKV key/value heads, (B, NKV, S, HS); a cache of all
// NH query heads, (B, NH, S, HS), is not its cache.
// expect-error: shaped::nn::attention: the cache's heads do not meet the layer's
// expect-error: attention_cache_heads<shaped::nn::GroupedQueryAttention<.*dims<.*name<'N', 'K', 'V'>, 2> ?>, .*dims<.*name<'B'>, 2>, .*name<'N', 'H'>, 4>, .*name<'S'>, 32>, .*name<'H', 'S'>, 4>
#include <shaped/shaped.hpp>

using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 1>;
using C = shaped::dim<"C", 16>;
using NH = shaped::dim<"NH", 4>;
using NKV = shaped::dim<"NKV", 2>;
using HS = shaped::dim<"HS", 4>;
using S = shaped::dim<"S", 32>;

int main() {
    shaped::Generator gen(0);
    shaped::nn::GroupedQueryAttention<C, NH, NKV, HS> gqa(gen);
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    shaped::nn::KVCache<float, B, NKV, S, HS> cache;
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    shaped::nn::KVCache<float, B, NKV, S, HS> cache;
    shaped::nn::KVCache<float, B, NH, S, HS> every_head;
    auto act = shaped::exp(gqa(shaped::randn<float, B, T, C>(gen), every_head));
    (void)act;
#else
    shaped::nn::KVCache<float, B, NH, S, HS> cache;
#endif
    auto out = gqa(shaped::randn<float, B, T, C>(gen), cache);
    (void)out;
}
