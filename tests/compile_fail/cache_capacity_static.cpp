// Rule: a cache's capacity (and every other dim of it) is static: its storage is allocated once.
// expect-error: shaped::nn::KVCache: a cache's dims are static, \(B, S, HS\) or \(B, NH, S, HS\), S the capacity
// expect-error: cache_layout<.*dims<.*name<'B'>, 2>, .*name<'S'> ?>, .*name<'H'>, 16> ?>
#include <shaped/shaped.hpp>

using B = shaped::dim<"B", 2>;
using H = shaped::dim<"H", 16>;

int main() {
#ifdef SHAPED_COMPILE_FAIL_CONTROL
    shaped::nn::KVCache<float, B, shaped::dim<"S", 1024>, H> cache;
#else
    shaped::nn::KVCache<float, B, shaped::dim<"S">, H> cache;
#endif
    (void)cache;
}
