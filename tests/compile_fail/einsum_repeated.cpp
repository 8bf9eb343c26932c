// Rule: a term of einsum's pattern names each dim once: (B, T, T) scores repeat T, a diagonal
// einsum does not take.
// expect-error: shaped::einsum: a term names a dim twice
// expect-error: einsum_repeated<.*operand<0>, .*name<'T'> ?>
#include <shaped/shaped.hpp>

using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 4>;
using S = shaped::dim<"S", 4>;

int main() {
    shaped::Generator gen(0);
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    auto wei = shaped::randn<float, B, T, S>(gen);
    auto d = shaped::einsum<"B T S -> B S T">(wei);
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    auto wei = shaped::randn<float, B, T, T>(gen);
    auto d = shaped::exp(shaped::einsum<"B T T -> B T">(wei));
#else
    auto wei = shaped::randn<float, B, T, T>(gen);
    auto d = shaped::einsum<"B T T -> B T">(wei);
#endif
    (void)d;
}
