#pragma once
// nn::MLP<C, Hidden, Bias, T>: nanoGPT's MLP, the position-wise half of a transformer block:
// c_fc (C -> Hidden, 4C by default), GELU (the exact, erf form, as torch.nn.GELU()), c_proj
// (Hidden -> C). Each position is transformed on its own; nothing mixes positions. (nanoGPT's
// dropout is the identity in evaluation and is left out.)
//
// layer(x) runs c_fc as one GEMM with its bias accumulated, GELU in place over the hidden
// activations (one vectorised pass), and c_proj as one GEMM: the hidden activations are the
// only buffer besides the output.

#include <shaped/nn/layer_norm.hpp>
#include <shaped/nn/linear.hpp>

#include <string_view>
#include <utility>

namespace shaped::nn {

// nanoGPT's hidden width, 4 x n_embd.
template <StaticDim C>
using mlp_hidden = dim<"FF", 4 * C::extent>;

template <StaticDim C, StaticDim NH, StaticDim HS, bool Bias, class T>
class Block;

template <StaticDim C, StaticDim Hidden = mlp_hidden<C>, bool Bias = true, class T = float>
class MLP {
public:
    using value_type = T;
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
        return tensor_for<T, replace_at<rank_of<X> - 1, C, dims_of<X>>>(c_proj(h));
    }
    template <Expression X>
        requires(!detail::last_dim_fits<C, X>)
    diag::layer_input<MLP, C, dims_of<X>> operator()(const X&) const;

    // After a failed check in the input's expression: failed, with no second error.
    template <Failed X>
    failed operator()(X&&) const;

    // Calls f(name, parameter) for each parameter, named as nanoGPT's MLP's state_dict names them:
    // "c_fc.weight", "c_fc.bias", "c_proj.weight", "c_proj.bias" (the biases only with Bias).
    template <class F>
    void for_each_parameter(F&& f) { visit_parameters(*this, f); }
    template <class F>
    void for_each_parameter(F&& f) const { visit_parameters(*this, f); }

    Linear<C, Hidden, Bias, T> c_fc;
    Linear<Hidden, C, Bias, T> c_proj;

private:
    template <class Self, class F>
    static void visit_parameters(Self& self, F& f) {
        self.c_fc.for_each_parameter(detail::prefixed("c_fc.", f));
        self.c_proj.for_each_parameter(detail::prefixed("c_proj.", f));
    }

    template <StaticDim, StaticDim, StaticDim, bool, class>
    friend class Block;

    // gelu(c_fc(x)), (..., Hidden).
    template <class X>
    auto hidden(const X& x) const {
        tensor_for<T, replace_at<rank_of<X> - 1, Hidden, dims_of<X>>> h = c_fc(x);
        h = gelu(h);
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
