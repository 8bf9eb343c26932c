// Rule: elementwise operands broadcast aligned from the right; same-named dims of extents 16 and 8 do not.
// expect-error: shaped::broadcast: operands' aligned dims differ in name or extent
// expect-error: broadcast_dims<.*name<'H'>, 16>.*name<'H'>, 8>
#include <shaped/shaped.hpp>

using T = shaped::dim<"T", 4>;
using H = shaped::dim<"H", 16>;

int main() {
    shaped::Generator gen(0);
    auto x = shaped::randn<float, T, H>(gen);
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    auto y = shaped::randn<float, shaped::dim<"H", 1>>(gen);
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    auto y = shaped::exp(x * shaped::randn<float, shaped::dim<"H", 8>>(gen));
#else
    auto y = shaped::randn<float, shaped::dim<"H", 8>>(gen);
#endif
    auto z = x * y;
    (void)z;
}
