// Rule: element access takes one index per dim; x(0, 1) on (B, T, H) gives two of three.
// expect-error: shaped::Tensor: an element access takes one index per dim
// expect-error: index_count<.*name<'B'>, 2>.*name<'T'>, 4>.*name<'H'>, 16>
#include <shaped/shaped.hpp>

using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 4>;
using H = shaped::dim<"H", 16>;

int main() {
    auto x = shaped::zeros<float, B, T, H>();
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    float v = x(0, 1, 2);
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    float v = x(0, 1) * 2.0f + 1.0f;
#else
    float v = x(0, 1);
#endif
    (void)v;
}
