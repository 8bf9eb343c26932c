// Rule: split's new extents must multiply to the old one, without wrapping: A(2^63 + 2) x B(2)
// is 2^64 + 4, which a size_t would wrap to C's 4.
// expect-error: shaped::reshape: the product of the new extents differs from the old extent
// expect-error: reshape_product<shaped::op::split, .*name<'C'>, 4>, .*name<'A'>, 9223372036854775810>, .*name<'B'>, 2>
#include <shaped/shaped.hpp>

using C = shaped::dim<"C", 4>;

int main() {
    auto x = shaped::zeros<float, C>();
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    auto parts = shaped::split<C, shaped::dim<"A", 2>, shaped::dim<"B", 2>>(x);
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    auto parts = shaped::exp(shaped::split<C, shaped::dim<"A", 9223372036854775810ull>, shaped::dim<"B", 2>>(x));
#else
    auto parts = shaped::split<C, shaped::dim<"A", 9223372036854775810ull>, shaped::dim<"B", 2>>(x);
#endif
    (void)parts;
}
