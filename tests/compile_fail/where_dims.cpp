// Rule: where's condition and values broadcast together; a (T, S) condition does not meet (T, H) values.
// expect-error: shaped::where: condition and values do not broadcast together
// expect-error: where_dims<.*name<'T'>, 4>, .*name<'S'>, 4> ?>, .*name<'T'>, 4>, .*name<'H'>, 16> ?>
#include <shaped/shaped.hpp>

using T = shaped::dim<"T", 4>;
using S = shaped::dim<"S", 4>;
using H = shaped::dim<"H", 16>;

int main() {
    shaped::Generator gen(0);
    auto x = shaped::randn<float, T, H>(gen);
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    auto keep = shaped::randn<float, T, H>(gen) > 0.0f;
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    auto keep = shaped::randn<float, T, H>(gen) > 0.0f;
    auto z = shaped::exp(shaped::where(shaped::randn<float, T, S>(gen) > 0.0f, x, 0.0f));
    (void)z;
#else
    auto keep = shaped::randn<float, T, S>(gen) > 0.0f;
#endif
    auto y = shaped::where(keep, x, 0.0f);
    (void)y;
}
