#pragma once
// nn::SwiGLU<C, Hidden, T, Weights>: Llama's position-wise feed-forward (Shazeer's gated linear unit with
// SiLU), Meta's FeedForward:
//
//   w2(silu(w1(x)) * w3(x))     w1, w3 (Hidden, C), w2 (C, Hidden), no biases
//
// layer(x) runs w1 and w3 as one GEMM each, the gate in place over w1's output (one vectorised
// pass), and w2 as one GEMM; add_to(out, x) accumulates w2's product onto a residual instead.
// Weights says each projection's storage format (nn::dense_weights, nn/linear.hpp).

#include <shaped/nn/diagnostics.hpp>
#include <shaped/nn/linear.hpp>

namespace shaped::nn {

template <StaticDim C, StaticDim Hidden, class T = float, class Weights = dense_weights>
class SwiGLU {
public:
    using value_type = T;
    using channel_dim = C;
    using hidden_dim = Hidden;

    // Parameters zero-filled, to be loaded.
    SwiGLU() = default;
    // PyTorch's initialisation, drawn for w1, w2, w3 in that order.
    explicit SwiGLU(Generator& gen) : w1(gen), w2(gen), w3(gen) {}

    // x (..., C) -> (..., C).
    // A misfit picks the overload only declared, whose return type is the failed check: the compiler
    // instantiates it at the caller's line, with no frame of ours around it.
    template <Expression X>
        requires detail::last_dim_fits<C, X>
    auto operator()(const X& x) const {
        return eval(w2(gated(x)));
    }
    template <Expression X>
        requires(!detail::last_dim_fits<C, X>)
    diag::layer_input<SwiGLU, C, dims_of<X>> operator()(const X&) const;

    // After a failed check in the input's expression: failed, with no second error.
    template <Failed X>
    failed operator()(X&&) const;

    // out += layer(x), x and out (..., C) of the same extents: a residual connection, with w2's
    // GEMM accumulating onto out, so that the product needs no buffer.
    template <class Out, class X>
    void add_to(Out& out, const X& x) const {
        const auto h = gated(x);
        out = out + w2(h);
    }

    // The projections, named as Meta's FeedForward names them: "w1.weight", "w2.weight", "w3.weight".
    BOOST_HANA_DEFINE_STRUCT(SwiGLU,
        (Linear<C, Hidden, false, T, typename Weights::w1>, w1),
        (Linear<Hidden, C, false, T, typename Weights::w2>, w2),
        (Linear<C, Hidden, false, T, typename Weights::w3>, w3));

private:
    // silu(w1(x)) * w3(x), (..., Hidden).
    template <class X>
    auto gated(const X& x) const {
        auto gate = eval(w1(x));
        const auto up = eval(w3(x));
        gate = silu(gate) * up;
        return gate;
    }
};

}  // namespace shaped::nn
