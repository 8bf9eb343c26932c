// Rule: GroupedQueryAttention's query heads fall into equal groups, one per key/value head:
// NH(6) query heads cannot be shared by NKV(4) key/value heads.
// expect-error: shaped::nn::GroupedQueryAttention: the query heads must be a multiple of the key/value heads
// expect-error: query_heads_group<.*name<'N', 'H'>, 6>, .*name<'N', 'K', 'V'>, 4>
#include <shaped/shaped.hpp>

using C = shaped::dim<"C", 24>;
using NH = shaped::dim<"NH", 6>;
using HS = shaped::dim<"HS", 4>;

int main() {
    shaped::Generator gen(0);
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    shaped::nn::GroupedQueryAttention<C, NH, shaped::dim<"NKV", 3>, HS> gqa(gen);
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    shaped::nn::GroupedQueryAttention<C, NH, shaped::dim<"NKV", 4>, HS> gqa(gen);
    auto x = shaped::randn<float, shaped::dim<"B", 2>, shaped::dim<"T", 4>, C>(gen);
    auto y = gqa(x) + x;
    (void)y;
#else
    shaped::nn::GroupedQueryAttention<C, NH, shaped::dim<"NKV", 4>, HS> gqa(gen);
#endif
    (void)gqa;
}
