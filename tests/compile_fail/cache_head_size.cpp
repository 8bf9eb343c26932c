// Rule: a head decodes with a cache of its own head size; Head<C, H(16)> cannot use a cache of H(8).
// expect-error: shaped::nn::attention: the cache's head size does not meet the layer's
// expect-error: attention_cache_head_size<shaped::nn::Head<.*>, .*name<'H'>, 16>, .*name<'H'>, 8>
#include <shaped/shaped.hpp>

using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 1>;
using C = shaped::dim<"C", 6>;
using H = shaped::dim<"H", 16>;
using S = shaped::dim<"S", 32>;

int main() {
    shaped::Generator gen(0);
    shaped::nn::Head<C, H> head(gen);
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    shaped::nn::KVCache<float, B, S, H> cache;
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    shaped::nn::KVCache<float, B, S, H> cache;
    shaped::nn::KVCache<float, B, S, shaped::dim<"H", 8>> small;
    auto scaled = head(shaped::randn<float, B, T, C>(gen), small) * 0.25f;
    (void)scaled;
#else
    shaped::nn::KVCache<float, B, S, shaped::dim<"H", 8>> cache;
#endif
    auto out = head(shaped::randn<float, B, T, C>(gen), cache);
    (void)out;
}
