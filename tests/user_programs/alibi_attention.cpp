// A user's attention variant, written from the guide: ALiBi (Press et al., "Train short, test
// long"): no position embeddings; each head adds slope_h x (key position - query position) to
// its scores, slope_h = 2^(-8 (h + 1) / NH). The layer writes its scores out op by op, runs the
// full causal forward and decodes through a KV cache, and its decoding is checked position by
// position against its forward. `make compile-times` times this program as a user's
// edit-compile loop would.
#include <shaped/shaped.hpp>

#include <cmath>
#include <iostream>
#include <limits>

using namespace shaped;

template <StaticDim C, StaticDim NH, StaticDim HS, class T = float>
class ALiBiAttention {
public:
    using fused_dim = dim<"QKV", 3 * C::extent>;
    using part_dim = dim<"QKV", 3>;
    template <StaticDim B, StaticDim S>
    using cache_type = nn::KVCache<T, B, NH, S, HS>;

    explicit ALiBiAttention(Generator& gen) : c_attn(gen), c_proj(gen) {
        for (std::size_t h = 0; h < NH::extent; ++h)
            slopes(h) = static_cast<T>(std::pow(2.0, -8.0 * static_cast<double>(h + 1) / NH::extent));
    }

    // The full causal forward: x (B, T, C) -> (B, T, C).
    template <Expression X>
    auto operator()(const X& x) const {
        const auto [q, k, v] = project(x);
        return attend(q, k, v, 0);
    }

    // Decoding: x holds the next positions of every batch row; their keys and values join the
    // cache, and their queries attend over all it holds.
    template <Expression X, class Cache>
    auto operator()(const X& x, Cache& cache) const {
        const std::size_t start = cache.length();
        const auto [q, k, v] = project(x);
        cache.append(k, v);
        return attend(q, cache.keys(), cache.values(), start);
    }

    BOOST_HANA_DEFINE_STRUCT(ALiBiAttention,
        (nn::Linear<C, fused_dim, false, T>, c_attn),
        (nn::Linear<C, C, false, T>, c_proj));

    Tensor<T, NH> slopes;

private:
    // q, k and v (B, NH, T, HS), each a tensor of its own.
    template <class X>
    auto project(const X& x) const {
        using B = dim_at<0, dims_of<X>>;
        using Tx = dim_at<1, dims_of<X>>;
        const auto qkv = eval(c_attn(x));
        const auto heads = split<C, NH, HS>(split<fused_dim, part_dim, C>(qkv));
        using Heads = Tensor<T, B, NH, Tx, HS>;
        return std::tuple{Heads(transpose<1, 2>(select<part_dim>(heads, 0))),
                          Heads(transpose<1, 2>(select<part_dim>(heads, 1))),
                          Heads(transpose<1, 2>(select<part_dim>(heads, 2)))};
    }

    // Queries at positions start, start + 1, ... against keys and values at 0, 1, ...
    template <class Q, class K, class V>
    auto attend(const Q& q, const K& k, const V& v, std::size_t start) const {
        using B = dim_at<0, dims_of<Q>>;
        using Tq = dim_at<2, dims_of<Q>>;
        auto wei = eval(matmul(q, k.mT()) * nn::attention_scale<HS, T>);
        const auto e = wei.extents();
        for (std::size_t b = 0; b < e[0]; ++b)
            for (std::size_t h = 0; h < e[1]; ++h)
                for (std::size_t i = 0; i < e[2]; ++i)
                    for (std::size_t j = 0; j < e[3]; ++j) {
                        const double distance = static_cast<double>(j) - static_cast<double>(start + i);
                        if (distance > 0) wei(b, h, i, j) = -std::numeric_limits<T>::infinity();
                        else wei(b, h, i, j) += static_cast<T>(slopes(h) * distance);
                    }
        wei = softmax<-1>(wei);
        const auto out = eval(matmul(wei, v));
        const Tensor<T, B, Tq, C> merged = merge<NH, HS, C>(transpose<1, 2>(out));
        return Tensor<T, B, Tq, C>(c_proj(merged));
    }
};

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

    // A prompt of three positions, then one position a step.
    ALiBiAttention<C, NH, HS>::cache_type<B, dim<"S", 8>> cache;
    float worst = 0;
    const auto compare = [&](const auto& got, std::size_t from) {
        for (std::size_t b = 0; b < B::extent; ++b)
            for (std::size_t t = 0; t < got.extents()[1]; ++t)
                for (std::size_t c = 0; c < C::extent; ++c)
                    worst = std::max(worst, std::abs(got(b, t, c) - y(b, from + t, c)));
    };
    compare(layer(slice<T>(x, 0, 3), cache), 0);
    for (std::size_t t = 3; t < T::extent; ++t) compare(layer(slice<T>(x, t, t + 1), cache), t);
    std::cout << "ALiBi attention: decoded " << cache.length()
              << " positions; largest difference from the full forward " << worst << "\n";
    return cache.length() == T::extent && worst < 1e-5f ? 0 : 1;
}
