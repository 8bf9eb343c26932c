// Rule: rename's old name must be a dim of the operand; (B, T, H) has no C to rename.
// expect-error: shaped: the tensor has no dim of that name
// expect-error: dim_not_found<shaped::op::rename, .*name<'C'>, 6>.*name<'B'>, 2>.*name<'T'>, 4>.*name<'H'>, 16>
#include <shaped/shaped.hpp>

using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 4>;
using C = shaped::dim<"C", 6>;
using H = shaped::dim<"H", 16>;
using S = shaped::dim<"S", 4>;

int main() {
    shaped::Generator gen(0);
    auto x = shaped::randn<float, B, T, H>(gen);
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    auto y = shaped::rename<T, S>(x);
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    auto y = shaped::eval(shaped::rename<C, S>(x) * 0.5f);
#else
    auto y = shaped::rename<C, S>(x);
#endif
    (void)y;
}
