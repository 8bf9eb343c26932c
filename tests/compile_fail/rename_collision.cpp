// Rule: rename may not give a dim a name the tensor already has; rename<T, B> on (B, T, H) would make two B.
// expect-error: shaped::rename: the new name is already a dim of the tensor
// expect-error: rename_collision<.*name<'T'>, 4>, .*name<'B'>, 2>, .*dims<.*name<'B'>, 2>.*name<'T'>, 4>.*name<'H'>, 16>
#include <shaped/shaped.hpp>

using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 4>;
using H = shaped::dim<"H", 16>;
using S = shaped::dim<"S", 4>;

int main() {
    shaped::Generator gen(0);
    auto x = shaped::randn<float, B, T, H>(gen);
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    auto y = shaped::rename<T, S>(x);
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    shaped::Tensor<float, B, S, H> y = shaped::rename<T, B>(x);
#else
    auto y = shaped::rename<T, B>(x);
#endif
    (void)y;
}
