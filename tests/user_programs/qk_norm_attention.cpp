// A user's attention variant, written from the guide: QK-norm attention (each head's queries and
// keys RMS-normalised before their scores; qk_norm_gpt.hpp, the guide's "Training your own
// variant"), a layer of its own run by nn::causal_self_attention, checked against the same
// attention written out op by op, and decoded position by position with a KV cache (its
// encode_positions returns q and k, which the cache must hold encoded). `make compile-times`
// times this program as a user's edit-compile loop would.
#include "qk_norm_gpt.hpp"

#include <shaped/shaped.hpp>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>
#include <optional>

using namespace shaped;

using B = dim<"B", 2>;
using T = dim<"T", 7>;
using C = dim<"C", 32>;
using NH = dim<"NH", 4>;
using HS = dim<"HS", 8>;

int main() {
    Generator gen(5);
    using Layer = QKNormAttention<C, NH, HS>;
    Layer layer(gen);
    layer.q_norm.weight = randn<float, HS>(gen);
    layer.k_norm.weight = randn<float, HS>(gen);
    const auto x = randn<float, B, T, C>(gen);
    const Tensor<float, B, T, C> y = layer(x);

    // The same attention, op by op.
    using QKV = Layer::fused_dim;
    using Part = Layer::part_dim;
    const Tensor<float, B, T, QKV> qkv = layer.c_attn(x);
    const auto heads = split<C, NH, HS>(split<QKV, Part, C>(qkv));
    Tensor<float, B, NH, T, HS> q = transpose<1, 2>(select<Part>(heads, 0));
    Tensor<float, B, NH, T, HS> k = transpose<1, 2>(select<Part>(heads, 1));
    const Tensor<float, B, NH, T, HS> v = transpose<1, 2>(select<Part>(heads, 2));
    q = layer.q_norm(q);
    k = layer.k_norm(k);
    Tensor<float, B, NH, T, T> wei = matmul(q, k.mT()) * nn::attention_scale<HS>;
    wei = masked_fill(wei, tril(ones<float, T, T>()) == 0.0f, -std::numeric_limits<float>::infinity());
    wei = softmax<-1>(wei);
    const Tensor<float, B, NH, T, HS> out = matmul(wei, v);
    const Tensor<float, B, T, C> merged = merge<NH, HS, C>(transpose<1, 2>(out));
    const Tensor<float, B, T, C> expected = layer.c_proj(merged);

    float worst = 0;
    for (std::size_t b = 0; b < B::extent; ++b)
        for (std::size_t t = 0; t < T::extent; ++t)
            for (std::size_t c = 0; c < C::extent; ++c) worst = std::max(worst, std::abs(y(b, t, c) - expected(b, t, c)));
    std::cout << "QK-norm attention: largest difference from the op-by-op attention " << worst << "\n";

    // Decoding, one position at a time: each step's keys enter the cache normalised.
    nn::KVCache<float, B, NH, dim<"S", 8>, HS> cache;
    float decoded_worst = 0;
    for (std::size_t t = 0; t < T::extent; ++t) {
        const auto step = nn::causal_self_attention(layer, slice<T>(x, t, t + 1), cache, std::nullopt);
        for (std::size_t b = 0; b < B::extent; ++b)
            for (std::size_t c = 0; c < C::extent; ++c)
                decoded_worst = std::max(decoded_worst, std::abs(step(b, 0, c) - y(b, t, c)));
    }
    std::cout << "QK-norm attention: largest difference decoding with a KV cache " << decoded_worst << "\n";
    return worst < 1e-5f && decoded_worst < 1e-5f ? 0 : 1;
}
