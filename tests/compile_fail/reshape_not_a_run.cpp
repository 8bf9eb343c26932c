// Rule: reshape takes adjacent dims of the tensor, named in its order: H and C of (B, H, W, C)
// are not adjacent.
// expect-error: shaped::reshape: the dims reshaped must be adjacent dims of the tensor, in its order
// expect-error: reshape_not_a_run<.*dims<.*name<'H'>, 3>, .*name<'C'>, 5> ?>, .*dims<
#include <shaped/shaped.hpp>

using B = shaped::dim<"B", 2>;
using H = shaped::dim<"H", 3>;
using W = shaped::dim<"W", 4>;
using C = shaped::dim<"C", 5>;

int main() {
    shaped::Generator gen(0);
    const auto x = shaped::randn<float, B, H, W, C>(gen);
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    auto y = shaped::reshape<shaped::dims<W, C>, shaped::dims<shaped::dim<"P", 20>>>(x);
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    auto y = shaped::exp(shaped::reshape<shaped::dims<H, C>, shaped::dims<shaped::dim<"P", 15>>>(x) * 2.0f);
#else
    auto y = shaped::reshape<shaped::dims<H, C>, shaped::dims<shaped::dim<"P", 15>>>(x);
#endif
    (void)y;
}
