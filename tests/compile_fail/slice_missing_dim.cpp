// Rule: slice names a dim of its operand; (B, T, H) has no C to slice.
// expect-error: shaped: the tensor has no dim of that name
// expect-error: dim_not_found<shaped::op::slice, .*name<'C'>, 6>.*name<'B'>, 2>.*name<'T'>, 4>.*name<'H'>, 16>
#include <shaped/shaped.hpp>

using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 4>;
using C = shaped::dim<"C", 6>;
using H = shaped::dim<"H", 16>;

int main() {
    shaped::Generator gen(0);
    auto x = shaped::randn<float, B, T, H>(gen);
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    auto first = shaped::slice<T>(x, 0, 2);
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    auto first = shaped::eval(shaped::slice<C>(x, 0, 2));
#else
    auto first = shaped::slice<C>(x, 0, 2);
#endif
    (void)first;
}
