// Rule: gradients pair with parameters by type: an optimizer step (or any visit of parameters
// beside gradients) given the gradients of another module does not compile, and the diagnostic
// names both module types.
// expect-error: shaped::train: the gradients are of another module's type than the parameters'
// expect-error: gradients_of_module<shaped::nn::Linear<.*shaped::train::gradients<shaped::nn::Linear<
#include <shaped/shaped.hpp>

using C = shaped::dim<"C", 8>;
using H = shaped::dim<"H", 4>;

int main() {
    shaped::nn::Linear<C, H> layer;
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    shaped::train::gradients<shaped::nn::Linear<C, H>> grads;
#else
    shaped::train::gradients<shaped::nn::Linear<H, C>> grads;
#endif
    shaped::train::AdamW<shaped::nn::Linear<C, H>> opt;
    opt.step(layer, grads, 1e-3);
}
