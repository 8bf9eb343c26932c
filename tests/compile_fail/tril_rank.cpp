// Rule: tril works on the last two dims, so its operand needs at least two.
// expect-error: shaped: axis out of range for the tensor's rank
// expect-error: axis_out_of_range<shaped::op::tril, shaped::diag::axis<-2>, shaped::diag::rank<1>
#include <shaped/shaped.hpp>

using T = shaped::dim<"T", 4>;

int main() {
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    auto mask = shaped::tril(shaped::ones<float, T, T>());
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    auto mask = shaped::eval(shaped::tril(shaped::ones<float, T>()) == 0.0f);
#else
    auto mask = shaped::tril(shaped::ones<float, T>());
#endif
    (void)mask;
}
