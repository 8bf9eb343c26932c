// A user's attention variant, written from the guide ("Writing an attention variant"): ALiBi
// (Press et al., "Train short, test long"): no position embeddings; each head adds
// slope_h x (key position - query position) to its scores, slope_h = 2^(-8 (h + 1) / NH). The
// layer is nanoGPT's attention with nn::alibi as its score modifier, run in the fused kernel:
// its full forward is checked against the scores written out op by op (the dense reference,
// which is how this program wrote the layer before modifiers), and its decoding through a KV
// cache position by position against its forward. `make compile-times` times this program as a
// user's edit-compile loop would.
#include <shaped/shaped.hpp>

#include <cmath>
#include <iostream>
#include <limits>

using namespace shaped;

template <StaticDim C, StaticDim NH, StaticDim HS, class T = float>
struct ALiBiAttention : nn::extends<nn::MultiHeadAttention<C, NH, HS, false, T>, ALiBiAttention<C, NH, HS, T>> {
    // nanoGPT's attention: its parameters, constructors and heads.
    using ALiBiAttention::extends::extends;
    // The variant, in one line.
    nn::alibi<NH> score_mod() const { return {}; }
};

// The same layer with its scores written out: (B, NH, T, T) in memory, biased, masked, softmax.
template <class Layer, class X>
auto dense_alibi(const Layer& layer, const X& x) {
    using Tv = value_type_of<X>;
    using B = dim_at<0, dims_of<X>>;
    using Tx = dim_at<1, dims_of<X>>;
    using C = typename Layer::channel_dim;
    using NH = typename Layer::heads_dim;
    using HS = typename Layer::head_size_dim;
    auto qkv = eval(layer.c_attn(x));
    const auto [q, k, v] = Layer::heads(qkv);
    auto wei = eval(matmul(q, k.mT()) * nn::attention_scale<HS, Tv>);
    const auto e = wei.extents();
    for (std::size_t b = 0; b < e[0]; ++b)
        for (std::size_t h = 0; h < e[1]; ++h)
            for (std::size_t i = 0; i < e[2]; ++i)
                for (std::size_t j = 0; j < e[3]; ++j) {
                    const double distance = static_cast<double>(j) - static_cast<double>(i);
                    const double slope = std::pow(2.0, -8.0 * static_cast<double>(h + 1) / NH::extent);
                    if (distance > 0) wei(b, h, i, j) = -std::numeric_limits<Tv>::infinity();
                    else wei(b, h, i, j) += static_cast<Tv>(slope * distance);
                }
    wei = softmax<-1>(wei);
    const auto out = eval(matmul(wei, v));
    const Tensor<Tv, B, Tx, C> merged = merge<NH, HS, C>(transpose<1, 2>(out));
    return Tensor<Tv, B, Tx, C>(layer.c_proj(merged));
}

using B = dim<"B", 2>;
using T = dim<"T", 6>;
using C = dim<"C", 32>;
using NH = dim<"NH", 4>;
using HS = dim<"HS", 8>;

int main() {
    Generator gen(3);
    const ALiBiAttention<C, NH, HS> layer(gen);
    const auto x = randn<float, B, T, C>(gen);
    const Tensor<float, B, T, C> y = layer(x);

    float worst = 0;
    const auto compare = [&](const auto& got, std::size_t from) {
        for (std::size_t b = 0; b < B::extent; ++b)
            for (std::size_t t = 0; t < got.extents()[1]; ++t)
                for (std::size_t c = 0; c < C::extent; ++c)
                    worst = std::max(worst, std::abs(got(b, t, c) - y(b, from + t, c)));
    };
    compare(dense_alibi(layer, x), 0);
    const float dense = worst;

    // A prompt of three positions, then one position a step.
    nn::KVCache<float, B, NH, dim<"S", 8>, HS> cache;
    worst = 0;
    compare(layer(slice<T>(x, 0, 3), cache), 0);
    for (std::size_t t = 3; t < T::extent; ++t) compare(layer(slice<T>(x, t, t + 1), cache), t);
    std::cout << "ALiBi attention: the fused forward within " << dense << " of the dense scores; decoded "
              << cache.length() << " positions, largest difference from the full forward " << worst << "\n";
    return cache.length() == T::extent && worst < 1e-5f && dense < 1e-5f ? 0 : 1;
}
