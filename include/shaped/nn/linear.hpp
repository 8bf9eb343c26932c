#pragma once
// nn::Linear<In, Out, Bias, T>: y = x @ W^T (+ b), with PyTorch's layout — weight is (Out, In) —
// and PyTorch's default initialisation, uniform in +-1/sqrt(in_features). T is the element
// type of the parameters (float by default; double for reference computations).

#include <shaped/kernels.hpp>
#include <shaped/nn/diagnostics.hpp>
#include <shaped/tensor.hpp>

#include <cmath>
#include <string>
#include <string_view>
#include <utility>

namespace shaped::nn {

namespace detail {
// x is (..., C), C a layer's channel dim (its in_features, for a Linear).
template <Dim C, class X>
inline constexpr bool last_dim_fits = [] {
    if constexpr (!Expression<X> || rank_of<X> == 0) return false;
    else return can_meet<dim_at<rank_of<X> - 1, dims_of<X>>, C>;
}();

// f, called for a sublayer's parameters under `prefix`: f("key.weight", ...) for "weight".
template <class F>
auto prefixed(std::string_view prefix, F& f) {
    return [prefix, &f](std::string_view name, auto& parameter) {
        std::string full(prefix);
        full += name;
        f(std::string_view(full), parameter);
    };
}
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


    // Calls f(name, parameter) for each parameter, named as in PyTorch's state_dict: "weight",
    // then "bias" (when there is one). io::load_parameters and io::save_parameters use this.
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

    Tensor<T, Out, In> weight;
    struct no_bias {};
    [[no_unique_address]] std::conditional_t<Bias, Tensor<T, Out>, no_bias> bias{};
};

}  // namespace shaped::nn
