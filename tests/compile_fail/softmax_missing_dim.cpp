// Rule: softmax names a dim of its operand; softmax<S> on (B, T, T) has none to normalize.
// expect-error: shaped: the tensor has no dim of that name
// expect-error: dim_not_found<shaped::op::softmax, .*name<'S'>, 4>.*name<'B'>, 2>.*name<'T'>, 4>.*name<'T'>, 4>
#include <shaped/shaped.hpp>

using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 4>;
using S = shaped::dim<"S", 4>;

int main() {
    shaped::Generator gen(0);
    auto wei = shaped::randn<float, B, T, T>(gen);
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    auto p = shaped::softmax<-1>(wei);
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    auto p = shaped::softmax<S>(wei) * wei;
#else
    auto p = shaped::softmax<S>(wei);
#endif
    (void)p;
}
