// A user's attention variant, written from the guide: QK-norm attention (each head's queries and
// keys RMS-normalised before their scores), a layer of its own run by nn::causal_self_attention,
// checked against the same attention written out op by op. `make compile-times` times this
// program as a user's edit-compile loop would.
#include <shaped/shaped.hpp>

#include <cmath>
#include <iostream>
#include <limits>
#include <span>
#include <tuple>

using namespace shaped;

template <StaticDim C, StaticDim NH, StaticDim HS, class T = float>
class QKNormAttention {
public:
    using value_type = T;
    using channel_dim = C;
    using heads_dim = NH;
    using head_size_dim = HS;
    using fused_dim = dim<"QKV", 3 * C::extent>;
    using part_dim = dim<"QKV", 3>;
    template <StaticDim B, StaticDim S>
    using cache_type = nn::KVCache<T, B, NH, S, HS>;

    explicit QKNormAttention(Generator& gen) : c_attn(gen), c_proj(gen), q_norm(gen), k_norm(gen) {}

    template <Expression X>
    auto operator()(const X& x) const { return nn::causal_self_attention(*this, x); }

    BOOST_HANA_DEFINE_STRUCT(QKNormAttention,
        (nn::Linear<C, fused_dim, false, T>, c_attn),
        (nn::Linear<C, C, false, T>, c_proj),
        (nn::RMSNorm<HS, T>, q_norm),
        (nn::RMSNorm<HS, T>, k_norm));

    // The parts causal_self_attention runs (nn/causal_self_attention.hpp).
    using merged_dim = C;
    template <class X>
    auto project(const X& x) const { return tensor_for<T, replace_at<2, fused_dim, dims_of<X>>>(c_attn(x)); }
    template <class QKV>
    static auto heads(QKV& qkv) {
        auto heads = split<C, NH, HS>(split<fused_dim, part_dim, C>(qkv));
        auto part = [&](std::size_t which) { return view_of(transpose<1, 2>(select<part_dim>(heads, which))); };
        return std::tuple{part(0), part(1), part(2)};
    }
    // The variant: queries and keys normalised over the head size, in place.
    template <class Q, class K>
    void encode_positions(const Q& q, const K& k, std::span<const std::size_t>) const {
        q = q_norm(q);
        k = k_norm(k);
    }
    template <class M>
    static auto heads_of(M& merged) { return view_of(transpose<1, 2>(split<C, NH, HS>(merged))); }
    template <class M>
    auto project_out(const M& merged) const { return M(c_proj(merged)); }
};

using B = dim<"B", 2>;
using T = dim<"T", 7>;
using C = dim<"C", 32>;
using NH = dim<"NH", 4>;
using HS = dim<"HS", 8>;

int main() {
    Generator gen(5);
    QKNormAttention<C, NH, HS> layer(gen);
    layer.q_norm.weight = randn<float, HS>(gen);
    layer.k_norm.weight = randn<float, HS>(gen);
    const auto x = randn<float, B, T, C>(gen);
    const Tensor<float, B, T, C> y = layer(x);

    // The same attention, op by op.
    using QKV = QKNormAttention<C, NH, HS>::fused_dim;
    using Part = QKNormAttention<C, NH, HS>::part_dim;
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
    return worst < 1e-5f ? 0 : 1;
}
