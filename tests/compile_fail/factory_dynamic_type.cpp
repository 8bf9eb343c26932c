// Rule: a factory takes each dynamic extent as a value of that dim; S{5} is no extent for T.
// expect-error: shaped: give one extent per dynamic dim, as values of those dims, in order
// expect-error: dynamic_extents<shaped::op::randn, .*dims<.*name<'T'> ?> ?>, .*name<'S'> ?>
#include <shaped/shaped.hpp>

using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T">;
using S = shaped::dim<"S">;

int main() {
    shaped::Generator gen(0);
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    auto x = shaped::randn<float, B, T>(gen, T{5});
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    shaped::Tensor<float, B, T> x = shaped::randn<float, B, T>(gen, S{5}) * 0.5f;
#else
    auto x = shaped::randn<float, B, T>(gen, S{5});
#endif
    (void)x;
}
