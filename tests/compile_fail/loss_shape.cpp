// Rule: a shape error inside a differentiated function is the same one diagnostic as in a
// forward: a Linear given (N, H) inside the loss names the layer's input rule and the dims.
// expect-error: shaped::nn: the layer's input must be \(\.\.\., C\)
// expect-error: layer_input<shaped::nn::Linear<.*'C'>, 8>.*'N'>, 16>.*'H'>, 4>
#include <shaped/shaped.hpp>

using C = shaped::dim<"C", 8>;
using H = shaped::dim<"H", 4>;
using N = shaped::dim<"N", 16>;
using Model = shaped::nn::Linear<C, H, true, double>;

int main() {
    Model model;
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    const auto x = shaped::zeros<double, N, C>();
    const auto loss = [](const Model& m, const shaped::train::traced<double, N, C>& x) {
        return eval(mean(m(x) * 2.0));
    };
#else
    const auto x = shaped::zeros<double, N, H>();
    const auto loss = [](const Model& m, const shaped::train::traced<double, N, H>& x) {
        return eval(mean(m(x) * 2.0));  // the Linear takes (..., C)
    };
#endif
    const auto [value, grads] = shaped::train::value_and_grad(loss, model, x);
    (void)value;
}
