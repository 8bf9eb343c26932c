// Rule: a quantized matrix's block width divides its row dim: Q4_K's super-blocks of 256 cannot
// hold rows of K(100). (The rule asserted in place, in the class: quantize_row_blocks.cpp is the
// same rule through quantize.)
// expect-error: shaped::QuantizedMatrix: the format's block width must divide the row dim
// expect-error: block_width_divides_row<.*q4_K, .*block_width<256>, .*name<'K'>, 100>
#include <shaped/tensor/quantized.hpp>

using N = shaped::dim<"N", 4>;
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
using K = shaped::dim<"K", 512>;
#else
using K = shaped::dim<"K", 100>;
#endif

int main() {
    shaped::QuantizedMatrix<shaped::q4_K, N, K> weight;
    (void)weight;
}
