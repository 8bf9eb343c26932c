#pragma once
// nn::LayerNorm<C, Bias, T>: torch.nn.LayerNorm(C) (nanoGPT's LayerNorm, whose bias is optional):
// each position's C channels less their mean, over the square root of their biased variance
// plus eps, times weight, plus bias. layer(x) is lazy, and runs as one row kernel (mean,
// variance, normalise: three passes over a row in cache) when assigned or read by a matmul.

#include <shaped/kernels.hpp>
#include <shaped/nn/diagnostics.hpp>
#include <shaped/nn/linear.hpp>
#include <shaped/tensor.hpp>

#include <type_traits>
#include <utility>

namespace shaped::nn {

template <StaticDim C, bool Bias = true, class T = float>
class LayerNorm {
public:
    using value_type = T;
    using channel_dim = C;
    static constexpr bool has_bias = Bias;
    // torch.nn.LayerNorm's default.
    static constexpr double eps = 1e-5;

    // Parameters zero-filled, to be loaded.
    LayerNorm() = default;
    // PyTorch's initialisation: weight ones, bias zeros (nothing is drawn from gen).
    explicit LayerNorm(Generator&) : weight(ones<T, C>()) {}

    // x (..., C) -> (..., C), lazy.
    // A misfit picks the overload only declared, whose return type is the failed check: the compiler
    // instantiates it at the caller's line, with no frame of ours around it.
    template <Expression X>
        requires detail::last_dim_fits<C, X>
    auto operator()(X&& x) const {
        if constexpr (Bias) return layer_norm(std::forward<X>(x), weight, bias, eps);
        else return layer_norm(std::forward<X>(x), weight, nullptr, eps);
    }
    template <Expression X>
        requires(!detail::last_dim_fits<C, X>)
    diag::layer_input<LayerNorm, C, dims_of<X>> operator()(X&&) const;

    // After a failed check in the input's expression: failed, with no second error.
    template <Failed X>
    failed operator()(X&&) const;

    // The parameters, named as in PyTorch's state_dict: "weight", then "bias" (absent without).
    using bias_type = std::conditional_t<Bias, Tensor<T, C>, absent>;
    BOOST_HANA_DEFINE_STRUCT(LayerNorm,
        (Tensor<T, C>, weight),
        (bias_type, bias));
};

}  // namespace shaped::nn
