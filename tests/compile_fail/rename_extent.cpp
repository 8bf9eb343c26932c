// Rule: rename keeps the extent; T(4) cannot be called S(5).
// expect-error: shaped::rename: the new dim's extent differs from the renamed dim's
// expect-error: rename_extent<.*name<'T'>, 4>, .*name<'S'>, 5>
#include <shaped/shaped.hpp>

using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 4>;
using H = shaped::dim<"H", 16>;

int main() {
    shaped::Generator gen(0);
    auto x = shaped::randn<float, B, T, H>(gen);
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    auto y = shaped::rename<T, shaped::dim<"S", 4>>(x);
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    auto y = shaped::softmax<-1>(shaped::rename<T, shaped::dim<"S", 5>>(x));
#else
    auto y = shaped::rename<T, shaped::dim<"S", 5>>(x);
#endif
    (void)y;
}
