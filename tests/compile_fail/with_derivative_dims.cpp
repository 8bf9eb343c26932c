// Rule: a derivative written by hand (train::with_derivative) returns one gradient of each
// input's dims, in order: gradients swapped between two inputs do not compile, and the
// diagnostic names the dims.
// expect-error: shaped::train::with_derivative: the derivative returns one gradient of each input's dims, in order
// expect-error: gradients_of_inputs<std::tuple<shaped::Tensor<double, .*'C'>, 3> ?>, shaped::Tensor<double, .*'N'>, 4>
#include <shaped/shaped.hpp>

#include <tuple>

using N = shaped::dim<"N", 4>;
using C = shaped::dim<"C", 3>;

int main() {
    const auto x = shaped::zeros<double, N>();
    const auto w = shaped::zeros<double, C>();
    const auto derivative = [](const auto&) {
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
        return std::tuple{shaped::Tensor<double, N>(), shaped::Tensor<double, C>()};
#else
        return std::tuple{shaped::Tensor<double, C>(), shaped::Tensor<double, N>()};  // swapped
#endif
    };
    const auto y = shaped::train::with_derivative(shaped::Tensor<double, N, C>(), derivative, x, w);
    (void)y;
}
