// Rule: permute names every dim exactly once; (C, B) leaves T out of a rank-3 tensor.
// expect-error: shaped::permute: the axes must name each dim exactly once
// expect-error: not_a_permutation<.*permute.*name<'C'>, 4>.*name<'B'>, 2>
#include <shaped/shaped.hpp>

using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 3>;
using C = shaped::dim<"C", 4>;

int main() {
    auto x = shaped::zeros<float, B, T, C>();
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    auto y = shaped::permute<C, B, T>(x);
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    auto y = shaped::eval(shaped::permute<C, B>(x));
#else
    auto y = shaped::permute<C, B>(x);
#endif
    (void)y;
}
