#pragma once
// nn::LayerNorm<C, Bias, T>: torch.nn.LayerNorm(C) (nanoGPT's LayerNorm, whose bias is optional):
// each position's C channels less their mean, over the square root of their biased variance
// plus eps, times weight, plus bias. layer(x) is lazy, and runs as one row kernel (mean,
// variance, normalise: three passes over a row in cache) when assigned or read by a matmul.

#include <shaped/kernels.hpp>
#include <shaped/nn/diagnostics.hpp>
#include <shaped/tensor.hpp>

#include <string_view>
#include <type_traits>
#include <utility>

namespace shaped::nn {

namespace detail {
// x is (..., C), C the layer's.
template <Dim C, class X>
inline constexpr bool last_dim_fits = [] {
    if constexpr (rank_of<X> == 0) return false;
    else return can_meet<dim_at<rank_of<X> - 1, dims_of<X>>, C>;
}();
}  // namespace detail

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
    template <Expression X>
    auto operator()(X&& x) const {
        // The check is written here, in the function the user calls, so that a misuse is one error.
        if constexpr (!detail::last_dim_fits<C, X>) {
            (void)diag::layer_input<op::layer_norm, diag::show<C>, diag::show_dims<dims_of<X>>>{};
            return diag::failed{};
        } else if constexpr (Bias) {
            return layer_norm(std::forward<X>(x), weight, bias, eps);
        } else {
            return layer_norm(std::forward<X>(x), weight, nullptr, eps);
        }
    }

    // Calls f(name, parameter) for each parameter, named as in PyTorch's state_dict: "weight",
    // then "bias" (when there is one).
    template <class F>
    void for_each_parameter(F&& f) {
        f(std::string_view("weight"), weight);
        if constexpr (Bias) f(std::string_view("bias"), bias);
    }
    template <class F>
    void for_each_parameter(F&& f) const {
        f(std::string_view("weight"), weight);
        if constexpr (Bias) f(std::string_view("bias"), bias);
    }

    Tensor<T, C> weight;
    struct no_bias {};
    [[no_unique_address]] std::conditional_t<Bias, Tensor<T, C>, no_bias> bias{};
};

}  // namespace shaped::nn
