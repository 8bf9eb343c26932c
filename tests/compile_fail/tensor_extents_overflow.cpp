// Rule: a Tensor's static extents must fit in memory: A(2^62) x B(8) floats span 2^67 bytes,
// whose count would wrap in a size_t.
// expect-error: shaped::Tensor: the extents' element count does not fit in memory
// expect-error: static_dims_fit<float, .*name<'A'>, 4611686018427387904>, .*name<'B'>, 8>
#include <shaped/shaped.hpp>

#if defined(SHAPED_COMPILE_FAIL_CONTROL)
using A = shaped::dim<"A", 4>;
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
using A = shaped::dim<"A", 4>;
// The oversized tensor where a user meets it inside larger code: a temporary passed on to an
// expression that is evaluated.
auto oversized() {
    return shaped::eval(shaped::exp(shaped::Tensor<float, shaped::dim<"A", 4611686018427387904ull>, shaped::dim<"B", 8>>()) * 0.5f);
}
#else
using A = shaped::dim<"A", 4611686018427387904ull>;
#endif
using B = shaped::dim<"B", 8>;

int main() {
    shaped::Tensor<float, A, B> t;
    (void)t;
}
