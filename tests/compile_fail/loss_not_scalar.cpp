// Rule: the loss given to train::value_and_grad returns a 0-d value computed from its arguments
// (a mean, a sum, a cross_entropy); a loss that returns a value of any other rank does not
// compile, and the diagnostic names the type it returned.
// expect-error: shaped::train::value_and_grad: the loss must be a 0-d value computed from its arguments
// expect-error: loss_is_0d<shaped::train::traced<double, .*'N'>, 16>.*'H'>, 4> ?> ?>
#include <shaped/shaped.hpp>

using C = shaped::dim<"C", 8>;
using H = shaped::dim<"H", 4>;
using N = shaped::dim<"N", 16>;

int main() {
    shaped::nn::Linear<C, H, true, double> model;
    const auto x = shaped::zeros<double, N, C>();
    const auto loss = [](const auto& m, const auto& x) {
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
        return eval(mean(m(x) * 2.0));
#else
        return eval(m(x) * 2.0);  // (N, H): never reduced to a scalar
#endif
    };
    const auto [value, grads] = shaped::train::value_and_grad(loss, model, x);
    (void)value;
}
