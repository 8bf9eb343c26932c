// Rule: matmul contracts lhs's last dim with rhs's second-to-last; they must agree in name and extent.
// expect-error: shaped::matmul: the last dim of lhs does not meet the second-to-last dim of rhs
// expect-error: matmul_inner_dims<.*name<'H'>, 16>.*name<'T'>, 4>
#include <shaped/shaped.hpp>

using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 4>;
using H = shaped::dim<"H", 16>;

int main() {
    shaped::Generator gen(0);
    auto q = shaped::randn<float, B, T, H>(gen);
    auto k = shaped::randn<float, B, T, H>(gen);
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    auto wei = shaped::matmul(q, k.mT());
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    auto wei = shaped::matmul(q, k) * 0.25f;  // H(16) meets T(4)
#else
    auto wei = shaped::matmul(q, k);  // H(16) meets T(4)
#endif
    (void)wei;
}
