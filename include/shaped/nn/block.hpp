#pragma once
// nn::Block<C, NH, HS, Bias, T, Activation>: nanoGPT's Block, one decoder layer of a GPT, pre-LN:
//
//   x = x + attn(ln_1(x))     communication: attention is the only layer that mixes positions
//   x = x + mlp(ln_2(x))      computation: each position on its own
//
// Like the attention layers it runs two ways, block(x) the full causal forward and
// block(x, cache) decoding with its attention's KV cache (cache_type), so that a stack of
// blocks, each with its own cache, decodes token by token; both give the same numbers for the
// same positions. The output is one buffer: attention's result becomes it, x is added in place,
// and the MLP's output projection accumulates onto it.

#include <shaped/nn/attention.hpp>
#include <shaped/nn/layer_norm.hpp>
#include <shaped/nn/mlp.hpp>

#include <optional>
#include <type_traits>

namespace shaped::nn {

template <StaticDim C, StaticDim NH, StaticDim HS, bool Bias = true, class T = float,
          class Activation = activation::gelu>
class Block;
namespace detail {
template <StaticDim C, StaticDim NH, StaticDim HS, bool Bias, class T, class Activation>
inline constexpr bool layer_keeps_rules<Block<C, NH, HS, Bias, T, Activation>> = heads_fill_channels<C, NH, HS>;
}  // namespace detail

template <StaticDim C, StaticDim NH, StaticDim HS, bool Bias, class T, class Activation>
class Block : public causal_layer<Block<C, NH, HS, Bias, T, Activation>> {
public:
    using value_type = T;
    using channel_dim = C;
    using heads_dim = NH;
    using head_size_dim = HS;
    using attention_type = MultiHeadAttention<C, NH, HS, Bias, T>;
    using mlp_type = MLP<C, mlp_hidden<C>, Bias, T, Activation>;
    // The cache this block decodes with, its attention's: keys and values (B, NH, S, HS).
    template <StaticDim B, StaticDim S>
    using cache_type = typename attention_type::template cache_type<B, S>;

    // Parameters zero-filled, to be loaded.
    Block() = default;
    // PyTorch's initialisation, for ln_1, attn, ln_2 and mlp in that order.
    explicit Block(Generator& gen) : ln_1(gen), attn(gen), ln_2(gen), mlp(gen) {}

    // What the block's calls (nn::causal_layer's, checked first) run. The full causal forward:
    // x (B, T, C) -> (B, T, C).
    template <class X>
    auto forward(const X& x) const {
        auto out = attn(ln_1(x));
        residual(out, x);
        return out;
    }
    // Decoding: x (B, n, C) holds the next n positions of every batch row -> (B, n, C); a ragged
    // batch's padding positions are 0.
    template <class X, class Cache>
    auto forward(const X& x, Cache& cache, std::optional<typename Cache::lengths_type> counts) const {
        auto out = attn(ln_1(x), cache, counts);
        residual(out, x);
        if (counts) detail::zero_padding(out, *counts);
        return out;
    }

    // The sub-layers, named as nanoGPT's Block names them: "ln_1.weight", "attn.c_attn.weight", ...,
    // "mlp.c_proj.bias".
    BOOST_HANA_DEFINE_STRUCT(Block,
        (LayerNorm<C, Bias, T>, ln_1),
        (attention_type, attn),
        (LayerNorm<C, Bias, T>, ln_2),
        (mlp_type, mlp));

private:

    // out holds attn(ln_1(x)): x + out, then the MLP's half, both in place.
    template <class Out, class X>
    void residual(Out& out, const X& x) const {
        out = out + x;
        mlp.add_to(out, ln_2(out));
    }
};

}  // namespace shaped::nn
