#pragma once
// nn::Linear<In, Out, Bias>: y = x @ W^T (+ b), with PyTorch's layout — weight is (Out, In) —
// and PyTorch's default initialisation, uniform in +-1/sqrt(in_features).

#include <shaped/kernels.hpp>
#include <shaped/tensor.hpp>

#include <cmath>
#include <utility>

namespace shaped::nn {

template <StaticDim In, StaticDim Out, bool Bias = true>
class Linear {
public:
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

    // x's last dim must be In; the result has Out in its place.
    template <Expression X>
    auto operator()(X&& x) const {
        if constexpr (Bias) return matmul(std::forward<X>(x), weight.mT()) + bias;
        else return matmul(std::forward<X>(x), weight.mT());
    }

    Tensor<float, Out, In> weight;
    struct no_bias {};
    [[no_unique_address]] std::conditional_t<Bias, Tensor<float, Out>, no_bias> bias{};
};

}  // namespace shaped::nn
