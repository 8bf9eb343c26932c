// Rule: transpose by name needs each name to be a dim of the operand; (B, T, H) has no C.
// expect-error: shaped: the tensor has no dim of that name
// expect-error: dim_not_found<shaped::op::transpose, .*name<'C'>, 6>.*name<'B'>, 2>.*name<'T'>, 4>.*name<'H'>, 16>
#include <shaped/shaped.hpp>

using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 4>;
using C = shaped::dim<"C", 6>;
using H = shaped::dim<"H", 16>;

int main() {
    shaped::Generator gen(0);
    auto x = shaped::randn<float, B, T, H>(gen);
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    auto y = shaped::transpose<T, H>(x);
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    auto y = shaped::softmax<-1>(shaped::transpose<T, C>(x));
#else
    auto y = shaped::transpose<T, C>(x);
#endif
    (void)y;
}
