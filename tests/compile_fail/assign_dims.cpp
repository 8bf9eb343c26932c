// Rule: a Tensor takes an expression only of its declared dims; q @ k.mT() is (B, T, T), not (B, T, H).
// expect-error: shaped::Tensor: the dims given do not meet the dims declared
// expect-error: assignable<.*name<'B'>, 2>.*name<'T'>, 4>.*name<'H'>, 16> ?>, .*name<'B'>, 2>.*name<'T'>, 4>.*name<'T'>, 4>
#include <shaped/shaped.hpp>

using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 4>;
using H = shaped::dim<"H", 16>;

int main() {
    shaped::Generator gen(0);
    auto q = shaped::randn<float, B, T, H>(gen);
    auto k = shaped::randn<float, B, T, H>(gen);
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    shaped::Tensor<float, B, T, T> w = shaped::matmul(q, k.mT());
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    shaped::Tensor<float, B, T, H> w = shaped::softmax<-1>(shaped::matmul(q, k.mT()) * 0.25f);
#else
    shaped::Tensor<float, B, T, H> w = shaped::matmul(q, k.mT());
#endif
    (void)w;
}
