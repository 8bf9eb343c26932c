// Rule: appended keys and values have the cache's batch, heads and head size; HS(8) is not HS(4).
// expect-error: shaped::nn::KVCache::append: the new keys' or values' dims do not meet the cache's
// expect-error: cache_append_dims<.*dims<.*name<'H', 'S'>, 4> ?>, .*dims<.*name<'T'>, 1>, .*name<'H', 'S'>, 8> ?>
#include <shaped/shaped.hpp>

using B = shaped::dim<"B", 2>;
using NH = shaped::dim<"NH", 3>;
using T = shaped::dim<"T", 1>;
using S = shaped::dim<"S", 32>;
using HS = shaped::dim<"HS", 4>;

int main() {
    shaped::Generator gen(0);
    shaped::nn::KVCache<float, B, NH, S, HS> cache;
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    auto k = shaped::randn<float, B, NH, T, HS>(gen);
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    auto k = shaped::randn<float, B, NH, T, HS>(gen);
    auto v = shaped::randn<float, B, NH, T, shaped::dim<"HS", 8>>(gen);
    cache.append(v * 0.5f, shaped::exp(v));  // append is void: its operands are the expressions
#else
    auto k = shaped::randn<float, B, NH, T, shaped::dim<"HS", 8>>(gen);
#endif
    cache.append(k, k);
}
