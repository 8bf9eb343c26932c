// Rule: merge joins two adjacent dims, outer first; NH and HS of (B, NH, T, HS) are not adjacent.
// expect-error: shaped::merge: only two adjacent dims, in order, can merge
// expect-error: reshape_not_adjacent<.*name<'N', 'H'>, 3>, .*name<'H', 'S'>, 4>, .*dims<
#include <shaped/shaped.hpp>

using B = shaped::dim<"B", 2>;
using NH = shaped::dim<"NH", 3>;
using T = shaped::dim<"T", 5>;
using HS = shaped::dim<"HS", 4>;
using C = shaped::dim<"C", 12>;

int main() {
    auto y = shaped::zeros<float, B, NH, T, HS>();
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    auto merged = shaped::merge<NH, HS, C>(shaped::transpose<1, 2>(y));
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    shaped::Tensor<float, B, T, C> merged = shaped::merge<NH, HS, C>(y);
#else
    auto merged = shaped::merge<NH, HS, C>(y);
#endif
    (void)merged;
}
