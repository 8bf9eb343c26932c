// Rule: a keepdim reduction names a dim of its operand, as a plain one does; mean<C, keepdim> on
// (B, T, H) has none to reduce.
// expect-error: shaped: the tensor has no dim of that name
// expect-error: dim_not_found<shaped::op::mean, .*name<'C'>, 6>.*name<'B'>, 2>.*name<'T'>, 4>.*name<'H'>, 16>
#include <shaped/shaped.hpp>

using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 4>;
using C = shaped::dim<"C", 6>;
using H = shaped::dim<"H", 16>;

int main() {
    shaped::Generator gen(0);
    auto x = shaped::randn<float, B, T, H>(gen);
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    auto y = x - shaped::mean<H, shaped::keepdim>(x);
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    auto y = shaped::eval((x - shaped::mean<C, shaped::keepdim>(x)) / shaped::sqrt(shaped::var<H, shaped::keepdim>(x) + 1e-5f));
#else
    auto y = shaped::mean<C, shaped::keepdim>(x);
#endif
    (void)y;
}
