// Rule: matmul's batch dims broadcast as elementwise dims do; B(2) and B(3) do not.
// expect-error: shaped::matmul: the batch dims of lhs and rhs do not meet
// expect-error: matmul_batch_dims<.*name<'B'>, 2>.*name<'B'>, 3>
#include <shaped/shaped.hpp>

using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 4>;
using H = shaped::dim<"H", 16>;

int main() {
    shaped::Generator gen(0);
    auto q = shaped::randn<float, B, T, H>(gen);
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    auto k = shaped::randn<float, B, H, T>(gen);
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    auto k = shaped::randn<float, B, H, T>(gen);
    shaped::Tensor<float, B, T, T> w = shaped::matmul(q, shaped::randn<float, shaped::dim<"B", 3>, H, T>(gen)) * 0.25f;
    (void)w;
#else
    auto k = shaped::randn<float, shaped::dim<"B", 3>, H, T>(gen);
#endif
    auto wei = shaped::matmul(q, k);
    (void)wei;
}
