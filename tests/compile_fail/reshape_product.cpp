// Rule: reshape keeps the product of the extents: (H, W) = 3 x 4 cannot become (P, Q) = 5 x 2.
// expect-error: shaped::reshape: the product of the new extents differs from the old extent
// expect-error: reshape_product<shaped::op::reshape, .*dims<.*name<'H'>, 3>, .*name<'W'>, 4> ?>, .*dims<.*name<'P'>, 5>, .*name<'Q'>, 2> ?>
#include <shaped/shaped.hpp>

using B = shaped::dim<"B", 2>;
using H = shaped::dim<"H", 3>;
using W = shaped::dim<"W", 4>;
using Q = shaped::dim<"Q", 2>;

int main() {
    shaped::Generator gen(0);
    const auto x = shaped::randn<float, B, H, W>(gen);
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    auto y = shaped::reshape<shaped::dims<H, W>, shaped::dims<shaped::dim<"P", 6>, Q>>(x);
#else
    auto y = shaped::reshape<shaped::dims<H, W>, shaped::dims<shaped::dim<"P", 5>, Q>>(x);
#endif
    (void)y;
}
