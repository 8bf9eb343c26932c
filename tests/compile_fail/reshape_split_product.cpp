// Rule: split's new extents must multiply to the old one; C(12) cannot split into NH(4) x HS(4).
// expect-error: shaped::reshape: the product of the new extents differs from the old extent
// expect-error: reshape_product<shaped::op::split, .*name<'C'>, 12>, .*name<'N', 'H'>, 4>, .*name<'H', 'S'>, 4>
#include <shaped/shaped.hpp>

using B = shaped::dim<"B", 2>;
using C = shaped::dim<"C", 12>;
using HS = shaped::dim<"HS", 4>;

int main() {
    auto x = shaped::zeros<float, B, C>();
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    auto heads = shaped::split<C, shaped::dim<"NH", 3>, HS>(x);
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    auto heads = shaped::softmax<-1>(shaped::split<C, shaped::dim<"NH", 4>, HS>(x));
#else
    auto heads = shaped::split<C, shaped::dim<"NH", 4>, HS>(x);
#endif
    (void)heads;
}
