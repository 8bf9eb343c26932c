// Rule: masked_fill's mask broadcasts to the tensor's dims; a (T, S) mask does not fit (B, T, T).
// expect-error: shaped::masked_fill: the mask's dims do not broadcast to the tensor's dims
// expect-error: masked_fill_mask<.*name<'T'>, 4>, .*name<'S'>, 4> ?>, .*name<'B'>, 2>.*name<'T'>, 4>.*name<'T'>, 4>
#include <shaped/shaped.hpp>

#include <limits>

using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 4>;
using S = shaped::dim<"S", 4>;

int main() {
    shaped::Generator gen(0);
    auto wei = shaped::randn<float, B, T, T>(gen);
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    auto tril = shaped::tril(shaped::ones<float, T, T>());
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    auto tril = shaped::tril(shaped::ones<float, T, T>());
    auto p = shaped::softmax<-1>(
        shaped::masked_fill(wei, shaped::tril(shaped::ones<float, T, S>()) == 0.0f, -std::numeric_limits<float>::infinity()));
    (void)p;
#else
    auto tril = shaped::tril(shaped::ones<float, T, S>());
#endif
    auto masked = shaped::masked_fill(wei, tril == 0.0f, -std::numeric_limits<float>::infinity());
    (void)masked;
}
