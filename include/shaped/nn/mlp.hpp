#pragma once
// nn::MLP<C, Hidden, Bias, T, Activation>: nanoGPT's MLP, the position-wise half of a transformer
// block: c_fc (C -> Hidden, 4C by default), GELU (the exact, erf form, as torch.nn.GELU(), or
// GPT-2's tanh approximation, gelu_new), c_proj (Hidden -> C). Each position is transformed on its own; nothing mixes positions. (nanoGPT's
// dropout is the identity in evaluation and is left out.)
//
// layer(x) runs c_fc as one GEMM with its bias accumulated, GELU in place over the hidden
// activations (one vectorised pass), and c_proj as one GEMM: the hidden activations are the
// only buffer besides the output.

#include <shaped/nn/layer_norm.hpp>
#include <shaped/nn/linear.hpp>

#include <utility>

namespace shaped::nn {

// nanoGPT's hidden width, 4 x n_embd.
template <StaticDim C>
using mlp_hidden = dim<"FF", 4 * C::extent>;

// The MLP's nonlinearity: nanoGPT's exact GELU, or GPT-2's (Hugging Face's "gelu_new").
namespace activation {
struct gelu {
    template <class X>
    auto operator()(X&& x) const { return shaped::gelu(std::forward<X>(x)); }
};
struct gelu_tanh {
    template <class X>
    auto operator()(X&& x) const { return shaped::gelu_tanh(std::forward<X>(x)); }
};
}  // namespace activation

template <StaticDim C, StaticDim NH, StaticDim HS, bool Bias, class T, class Activation>
class Block;

template <StaticDim C, StaticDim Hidden = mlp_hidden<C>, bool Bias = true, class T = float,
          class Activation = activation::gelu>
class MLP {
public:
    using value_type = T;
    using activation_type = Activation;
    using channel_dim = C;
    using hidden_dim = Hidden;
    static constexpr bool has_bias = Bias;

    // Parameters zero-filled, to be loaded.
    MLP() = default;
    // PyTorch's initialisation, drawn for c_fc, then c_proj.
    explicit MLP(Generator& gen) : c_fc(gen), c_proj(gen) {}

    // x (..., C) -> (..., C).
    // A misfit picks the overload only declared, whose return type is the failed check: the compiler
    // instantiates it at the caller's line, with no frame of ours around it.
    template <Expression X>
        requires detail::last_dim_fits<C, X>
    auto operator()(const X& x) const {
        auto h = hidden(x);
        return eval(c_proj(h));
    }
    template <Expression X>
        requires(!detail::last_dim_fits<C, X>)
    diag::layer_input<MLP, C, dims_of<X>> operator()(const X&) const;

    // After a failed check in the input's expression: failed, with no second error.
    template <Failed X>
    failed operator()(X&&) const;

    // The sub-layers, named as nanoGPT's MLP names them: "c_fc.weight", ..., "c_proj.bias".
    BOOST_HANA_DEFINE_STRUCT(MLP,
        (Linear<C, Hidden, Bias, T>, c_fc),
        (Linear<Hidden, C, Bias, T>, c_proj));

private:

    template <StaticDim, StaticDim, StaticDim, bool, class, class>
    friend class Block;

    // activation(c_fc(x)), (..., Hidden).
    template <class X>
    auto hidden(const X& x) const {
        auto h = eval(c_fc(x));
        h = Activation{}(h);
        return h;
    }

    // out += mlp(x), x and out (..., C) of the same extents: a residual connection, with c_proj's
    // GEMM accumulating onto out (its bias added first), so that the product needs no buffer.
    template <class Out, class X>
    void add_to(Out& out, const X& x) const {
        const auto h = hidden(x);
        if constexpr (Bias) out = out + c_proj.bias;
        out = out + matmul(h, c_proj.weight.mT());
    }
};

}  // namespace shaped::nn
