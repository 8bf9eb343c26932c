// Masks stored as bool tensors, read by elementwise work that broadcasts them: masked_fill, where
// and && against loops over every element, for masks spread along leading and middle dims, in
// fixed-size and heap storage, and shapes that do and do not fill a SIMD batch.
#include <shaped/shaped.hpp>

#include <catch2/catch.hpp>

#include <limits>

namespace {

using Td = shaped::dim<"T">;

// An irregular pattern: no two rows of a short mask alike, so that a misplaced row shows.
template <class Mask>
void fill_pattern(Mask& mask, std::uint64_t seed) {
    shaped::Generator gen(seed);
    for (std::size_t i = 0; i < mask.size(); ++i) mask.data()[i] = gen.uniform() < 0.5;
}

// T is static or dynamic (`extents` holds its value then), so that both storages are covered.
template <std::size_t B, std::size_t H, class T, std::size_t S, class... Extent>
void check_masks(Extent... extents) {
    using Bd = shaped::dim<"B", B>;
    using Hd = shaped::dim<"H", H>;
    using H1 = shaped::dim<"H", 1>;
    using Sd = shaped::dim<"S", S>;
    shaped::Generator gen(B * 100 + H * 10 + S);
    const auto scores = shaped::randn<float, Bd, Hd, T, Sd>(gen, extents...);
    const std::size_t t_extent = scores.extents()[2];
    const float inf = std::numeric_limits<float>::infinity();
    INFO("B=" << B << " H=" << H << " T=" << t_extent << " S=" << S);

    // Spread along a middle dim: (B, 1, T, S) over (B, H, T, S).
    shaped::Tensor<bool, Bd, H1, T, Sd> middle = shaped::zeros<bool, Bd, H1, T, Sd>(extents...);
    fill_pattern(middle, 1);
    const shaped::Tensor<float, Bd, Hd, T, Sd> filled = shaped::masked_fill(scores, middle, -inf);
    // Spread along leading dims: (T, S) over (B, H, T, S).
    shaped::Tensor<bool, T, Sd> leading = shaped::zeros<bool, T, Sd>(extents...);
    fill_pattern(leading, 2);
    const shaped::Tensor<float, Bd, Hd, T, Sd> chosen = shaped::where(leading, 0.0f, scores);
    // Combined with a comparison.
    const shaped::Tensor<bool, Bd, Hd, T, Sd> both = middle && scores > 0.0f;

    for (std::size_t b = 0; b < B; ++b)
        for (std::size_t h = 0; h < H; ++h)
            for (std::size_t t = 0; t < t_extent; ++t)
                for (std::size_t s = 0; s < S; ++s) {
                    REQUIRE(filled(b, h, t, s) == (middle(b, 0, t, s) ? -inf : scores(b, h, t, s)));
                    REQUIRE(chosen(b, h, t, s) == (leading(t, s) ? 0.0f : scores(b, h, t, s)));
                    REQUIRE(both(b, h, t, s) == (middle(b, 0, t, s) && scores(b, h, t, s) > 0.0f));
                }
}

}  // namespace

TEST_CASE("a broadcast bool mask in fixed-size storage lands on the elements it names", "[elementwise][mask]") {
    check_masks<1, 2, shaped::dim<"T", 3>, 3>();
    check_masks<2, 3, shaped::dim<"T", 5>, 7>();
    check_masks<2, 6, shaped::dim<"T", 4>, 16>();
    check_masks<1, 4, shaped::dim<"T", 1>, 33>();
}

TEST_CASE("a broadcast bool mask in heap storage lands on the elements it names", "[elementwise][mask]") {
    check_masks<1, 2, Td, 3>(Td{3});
    check_masks<2, 3, Td, 7>(Td{5});
    check_masks<2, 6, Td, 16>(Td{4});
    check_masks<1, 4, Td, 33>(Td{1});
}
