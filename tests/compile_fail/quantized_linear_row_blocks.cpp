// Rule: a layer's quantized weight takes whole blocks a row: a Q8_0 Linear of In(100) inputs has
// rows of 100 weights, in no 32-block (llama.cpp learns it at run time and falls back to F16).
// expect-error: shaped::QuantizedMatrix: the format's block width must divide the row dim
// expect-error: block_width_divides_row<.*q8_0, .*block_width<32>, .*name<'I', 'n'>, 100>
#include <shaped/nn/linear.hpp>

using Out = shaped::dim<"Out", 4>;
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
using In = shaped::dim<"In", 96>;
#else
using In = shaped::dim<"In", 100>;
#endif

int main() {
    shaped::nn::Linear<In, Out, false, float, shaped::q8_0> layer;
    (void)layer;
}
