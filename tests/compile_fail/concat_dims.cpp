// Rule: concat joins along one dim; every other dim must meet (C(4) does not meet X(4)).
// expect-error: shaped::concat: the operands differ in a dim other than the one joined
// expect-error: concat_dims<.*name<'C'>, 4>.*name<'X'>, 4>
#include <shaped/shaped.hpp>

using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 3>;
using C = shaped::dim<"C", 4>;
using X = shaped::dim<"X", 4>;

int main() {
    auto a = shaped::zeros<float, B, T, C>();
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    auto b = shaped::zeros<float, B, T, C>();
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    auto b = shaped::concat<T>(a, shaped::zeros<float, B, T, X>()) * 0.25f;
#else
    auto b = shaped::zeros<float, B, T, X>();
#endif
    auto joined = shaped::concat<T>(a, b);
    (void)joined;
}
