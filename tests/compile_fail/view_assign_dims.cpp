// Rule: writing through a View takes an expression only of the view's dims; (T, H) is not (H, T).
// expect-error: shaped::assign: the dims given do not meet the dims declared
// expect-error: assign_dims<.*name<'T'>, 4>, .*name<'H'>, 16> ?>, .*name<'H'>, 16>, .*name<'T'>, 4> ?> ?>
#include <shaped/shaped.hpp>

using T = shaped::dim<"T", 4>;
using H = shaped::dim<"H", 16>;

int main() {
    shaped::Generator gen(0);
    auto x = shaped::zeros<float, T, H>();
    auto w = shaped::randn<float, H, T>(gen);
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    x.view() = shaped::mT(w);
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    x.view() = shaped::exp(w) * 0.5f;
#else
    x.view() = w;
#endif
}
