#pragma once
// nn::RMSNorm<C, T>: Llama's normalisation (Zhang and Sennrich): each position's C channels over
// the square root of their mean square plus eps, times weight; no mean is taken away and there
// is no bias. layer(x) is lazy and runs as the LayerNorm row kernel does, in the element type
// (float for a float model, as llama2.c and Meta's code normalise).

#include <shaped/kernels.hpp>
#include <shaped/nn/diagnostics.hpp>
#include <shaped/nn/linear.hpp>
#include <shaped/tensor.hpp>

#include <utility>

namespace shaped::nn {

template <StaticDim C, class T = float>
class RMSNorm {
public:
    using value_type = T;
    using channel_dim = C;

    // Parameters zero-filled, to be loaded.
    RMSNorm() = default;
    // PyTorch's initialisation: weight ones (nothing is drawn from gen).
    explicit RMSNorm(Generator&) : weight(ones<T, C>()) {}

    // x (..., C) -> (..., C), lazy.
    // A misfit picks the overload only declared, whose return type is the failed check: the compiler
    // instantiates it at the caller's line, with no frame of ours around it.
    template <Expression X>
        requires detail::last_dim_fits<C, X>
    auto operator()(X&& x) const {
        return rms_norm(std::forward<X>(x), weight, eps);
    }
    template <Expression X>
        requires(!detail::last_dim_fits<C, X>)
    diag::layer_input<RMSNorm, C, dims_of<X>> operator()(X&&) const;

    // After a failed check in the input's expression: failed, with no second error.
    template <Failed X>
    failed operator()(X&&) const;

    // Added to the mean square: a model's config says it (llama2.c and Llama 2: 1e-5).
    double eps = 1e-5;

    // The parameter, named as in PyTorch's state_dict: "weight".
    BOOST_HANA_DEFINE_STRUCT(RMSNorm,
        (Tensor<T, C>, weight));
};

}  // namespace shaped::nn
