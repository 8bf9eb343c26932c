// Rule: transpose's axes lie in [-rank, rank); transpose<0, 5> on a rank-3 tensor does not.
// expect-error: shaped: axis out of range for the tensor's rank
// expect-error: axis_out_of_range<shaped::op::transpose, shaped::diag::axis<5>, shaped::diag::rank<3>
#include <shaped/shaped.hpp>

using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 4>;
using H = shaped::dim<"H", 16>;

int main() {
    shaped::Generator gen(0);
    auto x = shaped::randn<float, B, T, H>(gen);
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    auto y = shaped::transpose<0, 2>(x);
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    auto y = shaped::transpose<0, 5>(x) * 0.25f;
#else
    auto y = shaped::transpose<0, 5>(x);
#endif
    (void)y;
}
