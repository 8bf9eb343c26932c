// Rule: train::value_and_grad adds into the gradients of the model's own type: given a
// train::gradients of another model, the call does not compile, and the diagnostic names both.
// expect-error: shaped::train: the gradients are of another module's type than the parameters'
// expect-error: gradients_of_module<shaped::nn::Linear<.*'C'>, 8>.*'H'>, 4>.*shaped::train::gradients<shaped::nn::Linear<.*'H'>, 4>.*'C'>, 8>
#include <shaped/shaped.hpp>

using C = shaped::dim<"C", 8>;
using H = shaped::dim<"H", 4>;
using N = shaped::dim<"N", 16>;

int main() {
    shaped::nn::Linear<C, H, true, double> model;
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    shaped::train::gradients<shaped::nn::Linear<C, H, true, double>> grads;
#else
    shaped::train::gradients<shaped::nn::Linear<H, C, true, double>> grads;
#endif
    const auto x = shaped::zeros<double, N, C>();
    const auto loss = [](const auto& m, const auto& x) { return eval(mean(square(m(x)))); };
    const double value = shaped::train::value_and_grad(loss, model, grads, x);
    (void)value;
}
