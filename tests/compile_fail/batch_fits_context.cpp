// Rule: a training batch's positions fit the model's context: a trainer of T 9 positions for a
// GPT that sees 8 does not compile, and the diagnostic names both dims.
// expect-error: shaped::train::trainer: a batch's positions T must be at most the model's context P
// expect-error: batch_fits_context<.*name<'T'>, 9>, .*name<'P'>, 8>
#include <shaped/shaped.hpp>

using Config = shaped::models::gpt_config<16, 8, 1, 2, 8>;
using Model = shaped::models::GPT<Config>;
using B = shaped::dim<"B", 2>;

int main() {
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    using T = shaped::dim<"T", 8>;
#else
    using T = shaped::dim<"T", 9>;
#endif
    // Static: a trainer holds its activations, too many for the stack.
    static shaped::train::trainer<Model, B, T> trainer;
    (void)trainer;
}
