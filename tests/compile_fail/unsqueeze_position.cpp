// Rule: unsqueeze's position lies in [-(rank + 1), rank]; unsqueeze<4> on a rank-3 tensor does not.
// expect-error: shaped: axis out of range for the tensor's rank
// expect-error: axis_out_of_range<shaped::op::unsqueeze, shaped::diag::axis<4>, shaped::diag::rank<3>
#include <shaped/shaped.hpp>

using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 4>;
using H = shaped::dim<"H", 16>;
using U = shaped::dim<"U", 1>;

int main() {
    shaped::Generator gen(0);
    auto x = shaped::randn<float, B, T, H>(gen);
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    auto y = shaped::unsqueeze<3, U>(x);
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    auto y = shaped::eval(shaped::sum<-1>(shaped::unsqueeze<4, U>(x)));
#else
    auto y = shaped::unsqueeze<4, U>(x);
#endif
    (void)y;
}
