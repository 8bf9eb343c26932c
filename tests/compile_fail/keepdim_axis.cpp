// Rule: a keepdim reduction's axis lies in [-rank, rank), as a plain one's does; sum<3, keepdim>
// on a rank-3 tensor does not.
// expect-error: shaped: axis out of range for the tensor's rank
// expect-error: axis_out_of_range<shaped::op::sum, shaped::diag::axis<3>, shaped::diag::rank<3>
#include <shaped/shaped.hpp>

using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 4>;
using H = shaped::dim<"H", 16>;

int main() {
    shaped::Generator gen(0);
    auto x = shaped::randn<float, B, T, H>(gen);
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    auto y = shaped::sum<2, shaped::keepdim>(x);
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    shaped::Tensor<float, B, T, H> y = x / shaped::sum<3, shaped::keepdim>(x);
#else
    auto y = shaped::sum<3, shaped::keepdim>(x);
#endif
    (void)y;
}
