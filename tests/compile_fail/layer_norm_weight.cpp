// Rule: layer_norm's weight (and bias) is one dim meeting the input's last: a weight of C(8)
// cannot normalise (T, C(12)).
// expect-error: shaped::layer_norm: weight and bias must be \(C\), C the input's last dim
// expect-error: layer_norm_parameter<.*dims<.*name<'T'>, 4>, .*name<'C'>, 12> ?>, .*dims<.*name<'C'>, 8> ?>
#include <shaped/shaped.hpp>

using T = shaped::dim<"T", 4>;
using C = shaped::dim<"C", 12>;

int main() {
    shaped::Generator gen(0);
    auto x = shaped::randn<float, T, C>(gen);
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    auto weight = shaped::ones<float, C>();
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    auto weight = shaped::ones<float, C>();
    auto h = shaped::eval(shaped::layer_norm(x, shaped::ones<float, shaped::dim<"C", 8>>(), nullptr) + x);
    (void)h;
#else
    auto weight = shaped::ones<float, shaped::dim<"C", 8>>();
#endif
    auto y = shaped::layer_norm(x, weight, nullptr);
    (void)y;
}
