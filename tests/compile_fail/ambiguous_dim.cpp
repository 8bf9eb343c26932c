// Rule: a dim named in an operation must occur once; softmax<T> on (B, T, T) could mean either T.
// expect-error: shaped: the dim name appears more than once in the tensor
// expect-error: ambiguous_dim<shaped::op::softmax, .*name<'T'>, 4>.*name<'B'>, 2>.*name<'T'>, 4>.*name<'T'>, 4>
#include <shaped/shaped.hpp>

using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 4>;

int main() {
    shaped::Generator gen(0);
    auto wei = shaped::randn<float, B, T, T>(gen);
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    auto p = shaped::softmax<-1>(wei);
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    auto p = shaped::exp(shaped::softmax<T>(wei));
#else
    auto p = shaped::softmax<T>(wei);
#endif
    (void)p;
}
