// Rule: elementwise operands broadcast aligned from the right, and aligned dims must share a name.
// expect-error: shaped::broadcast: operands' aligned dims differ in name or extent
// expect-error: broadcast_dims<.*name<'H'>, 16>.*name<'C'>, 16>
#include <shaped/shaped.hpp>

using T = shaped::dim<"T", 4>;
using H = shaped::dim<"H", 16>;
using C = shaped::dim<"C", 16>;

int main() {
    shaped::Generator gen(0);
    auto x = shaped::randn<float, T, H>(gen);
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    auto y = shaped::randn<float, T, H>(gen);
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    auto y = shaped::softmax<-1>(x + shaped::randn<float, T, C>(gen));
#else
    auto y = shaped::randn<float, T, C>(gen);
#endif
    auto z = x + y;
    (void)z;
}
