// Rule: a cache's capacity (and every other dim of it) is static: its storage is allocated once.
// expect-error: shaped::nn::KVCache: a cache's dims are static, \(B, S, HS\) or \(B, NH, S, HS\), S the capacity
// expect-error: cache_layout<.*name<'B'>, 2>, .*name<'S'> ?>, .*name<'H'>, 16> ?>
#include <shaped/shaped.hpp>

using B = shaped::dim<"B", 2>;
using H = shaped::dim<"H", 16>;

int main() {
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    shaped::nn::KVCache<float, B, shaped::dim<"S", 1024>, H> cache;
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    shaped::Generator gen(0);
    shaped::nn::Head<shaped::dim<"C", 6>, H> head(gen);
    shaped::nn::KVCache<float, B, shaped::dim<"S">, H> cache;
    auto p = shaped::softmax<-1>(head(shaped::randn<float, B, shaped::dim<"T", 1>, shaped::dim<"C", 6>>(gen), cache));
    (void)p;
#else
    shaped::nn::KVCache<float, B, shaped::dim<"S">, H> cache;
#endif
    (void)cache;
}
