// Rule: unsqueeze inserts a dim of a new name; unsqueeze<1, T(1)> on (B, T, H) would make two T.
// expect-error: shaped::unsqueeze: the new dim's name is already a dim of the tensor
// expect-error: unsqueeze_collision<.*name<'T'>, 1>, .*dims<.*name<'B'>, 2>.*name<'T'>, 4>.*name<'H'>, 16>
#include <shaped/shaped.hpp>

using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 4>;
using H = shaped::dim<"H", 16>;

int main() {
    shaped::Generator gen(0);
    auto x = shaped::randn<float, B, T, H>(gen);
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    auto y = shaped::unsqueeze<1, shaped::dim<"U", 1>>(x);
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    auto y = shaped::eval(shaped::unsqueeze<1, shaped::dim<"T", 1>>(x * 2.0f) + 1.0f);
#else
    auto y = shaped::unsqueeze<1, shaped::dim<"T", 1>>(x);
#endif
    (void)y;
}
