// Rule: rotary_encoding turns pairs of channels within the head: R(5) rotated dims are no pairs
// (the flat form), and R(10) do not fit a head of HS(8) (the nested form).
// expect-error: shaped::nn::rotary_encoding: the rotated dims must be pairs that fit the head
// expect-error: rotary_fits_head<.*name<'H', 'S'>, 8>, (5|10)>
#include <shaped/shaped.hpp>

using HS = shaped::dim<"HS", 8>;
using shaped::nn::rotary_pairing;

int main() {
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    shaped::nn::rotary_encoding<HS, rotary_pairing::adjacent, 6> rope;
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    shaped::nn::rotary_encoding<HS, rotary_pairing::adjacent, 6> rope;
    const auto encodings = std::tuple{rope, shaped::nn::rotary_encoding<HS, rotary_pairing::halves, 10>{}};
    (void)encodings;
#else
    shaped::nn::rotary_encoding<HS, rotary_pairing::adjacent, 5> rope;
#endif
    (void)rope;
}
