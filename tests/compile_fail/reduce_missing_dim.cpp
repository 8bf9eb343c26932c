// Rule: a reduction names a dim of its operand; sum<C> on (B, T, H) has none to reduce.
// expect-error: shaped: the tensor has no dim of that name
// expect-error: dim_not_found<shaped::op::sum, .*name<'C'>, 6>.*name<'B'>, 2>.*name<'T'>, 4>.*name<'H'>, 16>
#include <shaped/shaped.hpp>

using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 4>;
using C = shaped::dim<"C", 6>;
using H = shaped::dim<"H", 16>;

int main() {
    shaped::Generator gen(0);
    auto x = shaped::randn<float, B, T, H>(gen);
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    auto s = shaped::sum<H>(x);
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    auto s = x * shaped::sum<C>(x);
#else
    auto s = shaped::sum<C>(x);
#endif
    (void)s;
}
