// Rule: the cache's batch is the input's; tokens of a batch of 2 cannot decode against a cache of 3.
// expect-error: shaped::nn::attention: the cache's batch dim does not meet the input's
// expect-error: attention_cache_batch<shaped::nn::Head<.*>, .*name<'B'>, 2>, .*name<'B'>, 3>
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
    shaped::nn::KVCache<float, shaped::dim<"B", 3>, S, H> other;
    auto p = shaped::softmax<-1>(head(shaped::randn<float, B, T, C>(gen), other));
    (void)p;
#else
    shaped::nn::KVCache<float, shaped::dim<"B", 3>, S, H> cache;
#endif
    auto out = head(shaped::randn<float, B, T, C>(gen), cache);
    (void)out;
}
