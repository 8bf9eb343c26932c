// Rule: a ring cache's window (and every other dim of it) is static: its storage is allocated once.
// expect-error: shaped::nn::RingKVCache: a cache's dims are static, \(B, S, HS\) or \(B, NH, S, HS\), S the capacity
// expect-error: cache_layout<.*name<'B'>, 2>, .*name<'W'> ?>, .*name<'H'>, 16> ?>
#include <shaped/shaped.hpp>

using B = shaped::dim<"B", 2>;
using H = shaped::dim<"H", 16>;

int main() {
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    shaped::nn::RingKVCache<float, B, shaped::dim<"W", 4096>, H> cache;
#else
    shaped::nn::RingKVCache<float, B, shaped::dim<"W">, H> cache;
#endif
    (void)cache;
}
