// Rule: einsum's pattern has one input per operand: a pattern of two inputs given one operand.
// expect-error: shaped::einsum: the pattern has one input per operand
// expect-error: einsum_operands<.*pattern<'B', ' ', 'T', .*operand<1>
#include <shaped/shaped.hpp>

using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 4>;
using HS = shaped::dim<"HS", 6>;

int main() {
    shaped::Generator gen(0);
    auto q = shaped::randn<float, B, T, HS>(gen);
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    auto n = shaped::einsum<"B T HS, B T HS -> B T">(q, q);
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    auto n = shaped::sqrt(shaped::einsum<"B T HS, B T HS -> B T">(q));
#else
    auto n = shaped::einsum<"B T HS, B T HS -> B T">(q);
#endif
    (void)n;
}
