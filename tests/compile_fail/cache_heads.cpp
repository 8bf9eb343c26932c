// Rule: a single head decodes with a cache (B, S, HS); a multi-head cache (B, NH, S, HS) is not one.
// expect-error: shaped::nn::attention: the cache's heads do not meet the layer's
// expect-error: attention_cache_heads<shaped::nn::Head<.*>, .*dims<>, .*dims<.*name<'B'>, 2>, .*name<'N', 'H'>, 6>, .*name<'S'>, 32>, .*name<'H', 'S'>, 64>
#include <shaped/shaped.hpp>

using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 1>;
using C = shaped::dim<"C", 384>;
using NH = shaped::dim<"NH", 6>;
using HS = shaped::dim<"HS", 64>;
using S = shaped::dim<"S", 32>;

int main() {
    shaped::Generator gen(0);
    shaped::nn::Head<C, HS> head(gen);
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    shaped::nn::KVCache<float, B, S, HS> cache;
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    shaped::nn::KVCache<float, B, S, HS> cache;
    shaped::nn::KVCache<float, B, NH, S, HS> multi;
    auto act = shaped::exp(head(shaped::randn<float, B, T, C>(gen), multi));
    (void)act;
#else
    shaped::nn::KVCache<float, B, NH, S, HS> cache;
#endif
    auto out = head(shaped::randn<float, B, T, C>(gen), cache);
    (void)out;
}
