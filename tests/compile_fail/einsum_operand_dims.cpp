// Rule: each input of einsum's pattern names its operand's dims, in order: k is (B, S, HS), not
// (B, HS, S).
// expect-error: shaped::einsum: an input of the pattern must name its operand's dims, in order
// expect-error: einsum_operand_dims<.*operand<1>, .*names<.*name<'B'>, .*name<'H', 'S'>, .*name<'S'> ?>, .*dims<
#include <shaped/shaped.hpp>

using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 4>;
using S = shaped::dim<"S", 5>;
using HS = shaped::dim<"HS", 6>;

int main() {
    shaped::Generator gen(0);
    auto q = shaped::randn<float, B, T, HS>(gen);
    auto k = shaped::randn<float, B, S, HS>(gen);
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    auto wei = shaped::einsum<"B T HS, B S HS -> B T S">(q, k);
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    auto wei = shaped::einsum<"B T HS, B HS S -> B T S">(q, k) * 0.5f;
#else
    auto wei = shaped::einsum<"B T HS, B HS S -> B T S">(q, k);
#endif
    (void)wei;
}
