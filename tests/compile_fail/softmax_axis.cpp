// Rule: a positional axis lies in [-rank, rank); softmax<3> on a rank-3 tensor does not.
// expect-error: shaped: axis out of range for the tensor's rank
// expect-error: axis_out_of_range<shaped::op::softmax, shaped::diag::axis<3>, shaped::diag::rank<3>
#include <shaped/shaped.hpp>

using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 4>;

int main() {
    shaped::Generator gen(0);
    auto wei = shaped::randn<float, B, T, T>(gen);
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    auto p = shaped::softmax<2>(wei);
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    shaped::Tensor<float, B, T, T> p = shaped::softmax<3>(wei);
#else
    auto p = shaped::softmax<3>(wei);
#endif
    (void)p;
}
