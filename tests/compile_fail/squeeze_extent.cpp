// Rule: squeeze drops only a dim of extent 1; squeeze<T> of (B, T(4), H) would lose elements.
// expect-error: shaped::squeeze: only a dim of extent 1 can be squeezed
// expect-error: squeeze_extent<.*name<'T'>, 4>, .*dims<.*name<'B'>, 2>.*name<'T'>, 4>.*name<'H'>, 16>
#include <shaped/shaped.hpp>

using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 4>;
using H = shaped::dim<"H", 16>;

int main() {
    shaped::Generator gen(0);
    auto x = shaped::randn<float, B, T, H>(gen);
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    auto y = shaped::squeeze<T>(shaped::sum<T, shaped::keepdim>(x));
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    shaped::Tensor<float, B, H> y = shaped::squeeze<T>(x * x);
#else
    auto y = shaped::squeeze<T>(x);
#endif
    (void)y;
}
