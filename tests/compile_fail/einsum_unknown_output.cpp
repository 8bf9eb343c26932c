// Rule: each name of einsum's output is a dim of an input: no operand has a dim named U.
// expect-error: shaped::einsum: an output name must name a dim of an input
// expect-error: einsum_unknown_output<.*name<'U'>, .*dims<
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
    auto wei = shaped::eval(shaped::einsum<"B T HS, B S HS -> B T U">(q, k) + 1.0f);
#else
    auto wei = shaped::einsum<"B T HS, B S HS -> B T U">(q, k);
#endif
    (void)wei;
}
