#pragma once
// Case 3's setting, shared by decode_bench.cpp (shaped) and decode_baseline_bench.cpp (the
// hand-written baselines): multi-head attention with C=384, 6 heads of 64, batch 1, a cache of
// 1024 positions, and `context` tokens of which the cache holds all but the last.

#include <shaped/shaped.hpp>

#include <cstddef>

namespace bench::decode {

using B = shaped::dim<"B", 1>;
using T = shaped::dim<"T">;
using C = shaped::dim<"C", 384>;
using NH = shaped::dim<"NH", 6>;
using HS = shaped::dim<"HS", 64>;
using S = shaped::dim<"S", 1024>;

using Attention = shaped::nn::MultiHeadAttention<C, NH, HS>;
using Cache = Attention::cache_type<B, S>;

// The layer, a sequence of `context` tokens, and a cache holding all but the last of them. Both
// benchmark files draw them from the same seed, so their baselines check against the same layer.
struct decoding {
    shaped::Generator gen{2024};
    Attention attention{gen};
    shaped::Tensor<float, B, T, C> x;
    Cache prefilled;

    explicit decoding(std::size_t context) : x(shaped::randn<float, B, T, C>(gen, T{context})) {
        attention(shaped::slice<T>(x, 0, context - 1), prefilled);
    }

    auto last_token() const { return shaped::slice<T>(x, x.extents()[1] - 1, x.extents()[1]); }
};

}  // namespace bench::decode
