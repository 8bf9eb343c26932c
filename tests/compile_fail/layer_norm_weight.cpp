// Rule: layer_norm's weight (and bias) is one dim meeting the input's last: a weight of C(8)
// cannot normalise (T, C(12)).
// expect-error: shaped::broadcast: operands' aligned dims differ in name or extent
// expect-error: broadcast_dims<shaped::op::layer_norm, .*name<'C'>, 12>.*name<'C'>, 8>
#include <shaped/shaped.hpp>

using T = shaped::dim<"T", 4>;
using C = shaped::dim<"C", 12>;

int main() {
    shaped::Generator gen(0);
    auto x = shaped::randn<float, T, C>(gen);
#ifdef SHAPED_COMPILE_FAIL_CONTROL
    auto weight = shaped::ones<float, C>();
#else
    auto weight = shaped::ones<float, shaped::dim<"C", 8>>();
#endif
    auto y = shaped::layer_norm(x, weight, nullptr);
    (void)y;
}
