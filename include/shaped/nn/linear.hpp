#pragma once
// nn::Linear<In, Out, Bias, T>: y = x @ W^T (+ b), with PyTorch's layout — weight is (Out, In) —
// and PyTorch's default initialisation, uniform in +-1/sqrt(in_features). T is the element
// type of the parameters (float by default; double for reference computations).

#include <shaped/kernels.hpp>
#include <shaped/nn/diagnostics.hpp>
#include <shaped/nn/module.hpp>
#include <shaped/tensor.hpp>

#include <cmath>
#include <utility>

namespace shaped::nn {

namespace detail {
// x is (..., C), C a layer's channel dim (its in_features, for a Linear).
template <Dim C, class X>
inline constexpr bool last_dim_fits = [] {
    if constexpr (!Expression<X> || rank_of<X> == 0) return false;
    else return can_meet<dim_at<rank_of<X> - 1, dims_of<X>>, C>;
}();
}  // namespace detail

template <StaticDim In, StaticDim Out, bool Bias = true, class T = float>
class Linear {
public:
    using value_type = T;
    using in_dim = In;
    using out_dim = Out;
    static constexpr bool has_bias = Bias;

    // Parameters zero-filled, to be loaded.
    Linear() = default;

    explicit Linear(Generator& gen) {
        const double bound = 1.0 / std::sqrt(static_cast<double>(In::extent));
        gen.fill_uniform(weight.elements(), -bound, bound);
        if constexpr (Bias) gen.fill_uniform(bias.elements(), -bound, bound);
    }

    // x (..., In) -> (..., Out), lazy.
    // A misfit picks the overload only declared, whose return type is the failed check: the compiler
    // instantiates it at the caller's line, with no frame of ours around it.
    template <Expression X>
        requires detail::last_dim_fits<In, X>
    auto operator()(X&& x) const {
        if constexpr (Bias) return matmul(std::forward<X>(x), weight.mT()) + bias;
        else return matmul(std::forward<X>(x), weight.mT());
    }
    template <Expression X>
        requires(!detail::last_dim_fits<In, X>)
    diag::layer_input<Linear, In, dims_of<X>> operator()(X&&) const;

    // After a failed check in the input's expression: failed, with no second error.
    template <Failed X>
    failed operator()(X&&) const;

    // The parameters, named as in PyTorch's state_dict: "weight", then "bias" (absent without).
    using bias_type = std::conditional_t<Bias, Tensor<T, Out>, absent>;
    BOOST_HANA_DEFINE_STRUCT(Linear,
        (Tensor<T, Out, In>, weight),
        (bias_type, bias));
};

}  // namespace shaped::nn
