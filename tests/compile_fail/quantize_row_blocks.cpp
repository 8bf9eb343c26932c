// Rule: a quantized weight's block width divides its row dim: Q8_0's blocks of 32 cannot hold
// rows of K(100).
// expect-error: shaped::quantize: the format's block width must divide the row dim
// expect-error: rows_divide_into_blocks<.*q8_0, .*block_width<32>, .*name<'K'>, 100>
#include <shaped/tensor/quantized.hpp>

using N = shaped::dim<"N", 4>;
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
using K = shaped::dim<"K", 128>;
#else
using K = shaped::dim<"K", 100>;
#endif

int main() {
    shaped::Tensor<float, N, K> weight;
#if defined(SHAPED_COMPILE_FAIL_NESTED)
    auto back = shaped::dequantize(shaped::quantize<shaped::q8_0>(weight));
    (void)back;
#else
    auto quantized = shaped::quantize<shaped::q8_0>(weight);
    (void)quantized;
#endif
}
