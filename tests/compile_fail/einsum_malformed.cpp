// Rule: einsum's pattern reads "inputs -> output": this one has no ->, only a >, at column 15.
// expect-error: shaped::einsum: the pattern must read as A B, B C -> A C
// expect-error: einsum_pattern<.*pattern<'B', ' ', 'T', .*column<15>
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
    auto wei = shaped::matmul(shaped::einsum<"B T HS, B S HS > B T S">(q, k), q);
#else
    auto wei = shaped::einsum<"B T HS, B S HS > B T S">(q, k);
#endif
    (void)wei;
}
