// Rule: a name in both of einsum's operands has one extent: HS(6) of q does not meet HS(8) of k.
// expect-error: shaped::einsum: a name's extent differs between the operands
// expect-error: einsum_extent<.*name<'H', 'S'>, 6>, .*name<'H', 'S'>, 8>
#include <shaped/shaped.hpp>

using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 4>;
using S = shaped::dim<"S", 5>;

int main() {
    shaped::Generator gen(0);
    auto q = shaped::randn<float, B, T, shaped::dim<"HS", 6>>(gen);
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    auto k = shaped::randn<float, B, S, shaped::dim<"HS", 6>>(gen);
    auto wei = shaped::einsum<"B T HS, B S HS -> B T S">(q, k);
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    auto k = shaped::randn<float, B, S, shaped::dim<"HS", 8>>(gen);
    auto wei = shaped::softmax<-1>(shaped::einsum<"B T HS, B S HS -> B T S">(q, k) * 0.25f);
#else
    auto k = shaped::randn<float, B, S, shaped::dim<"HS", 8>>(gen);
    auto wei = shaped::einsum<"B T HS, B S HS -> B T S">(q, k);
#endif
    (void)wei;
}
