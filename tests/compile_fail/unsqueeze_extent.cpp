// Rule: unsqueeze's new dim has the static extent 1; U(2) (or a dynamic U) would need elements
// that are not there.
// expect-error: shaped::unsqueeze: the new dim must have the static extent 1
// expect-error: unsqueeze_extent<.*name<'U'>, 2>, .*dims<.*name<'B'>, 2>.*name<'T'>, 4>.*name<'H'>, 16>
#include <shaped/shaped.hpp>

using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 4>;
using H = shaped::dim<"H", 16>;

int main() {
    shaped::Generator gen(0);
    auto x = shaped::randn<float, B, T, H>(gen);
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    auto y = shaped::unsqueeze<0, shaped::dim<"U", 1>>(x);
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    shaped::Tensor<float, shaped::dim<"U", 2>, B, T, H> y = shaped::unsqueeze<0, shaped::dim<"U", 2>>(shaped::exp(x));
#else
    auto y = shaped::unsqueeze<0, shaped::dim<"U", 2>>(x);
#endif
    (void)y;
}
