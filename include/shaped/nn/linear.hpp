#pragma once
// nn::Linear<In, Out, Bias, T, Format>: y = x @ W^T (+ b), with PyTorch's layout — weight is
// (Out, In) — and PyTorch's default initialisation, uniform in +-1/sqrt(in_features). T is the
// element type of the parameters (float by default; double for reference computations).
//
// Format is how the weight is stored (tensor/quantized.hpp): shaped::f32, the default, a plain
// Tensor<T, Out, In>; any other format (shaped::q8_0, q4_0, q4_K, q6_K, f16, bf16) a
// QuantizedMatrix<Format, Out, In> of float weights, which the layer multiplies by as it lies
// (shaped::linear, kernels/quantized_matmul.hpp). The format's block width must divide In: a
// compile error naming the format, the block width and the dim otherwise. A quantized weight is
// for inference: it is loaded (a GGUF file's, models::load_llama) or drawn, not trained.

// Quantized first: a misfit format is then reported under the shortest chain of includes.
#include <shaped/tensor/quantized.hpp>
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

// The storage format of each weight of the Llama family's layers, by the member's name:
// GroupedQueryAttention reads wq, wk, wv, wo; SwiGLU w1, w2, w3; models::Llama tok_embeddings
// and output. dense_weights stores every one as a plain Tensor; a model's formats derive from it
// and name the weights they store otherwise:
//
//   struct my_weights : nn::dense_weights { using w1 = shaped::q8_0; using w3 = shaped::q8_0; };
struct dense_weights {
    using tok_embeddings = shaped::f32;
    using wq = shaped::f32;
    using wk = shaped::f32;
    using wv = shaped::f32;
    using wo = shaped::f32;
    using w1 = shaped::f32;
    using w2 = shaped::f32;
    using w3 = shaped::f32;
    using output = shaped::f32;
};

namespace detail {
// A weight of Rows x Cols in its format: a Tensor for f32, else a QuantizedMatrix.
template <class Format, class T, Dim Rows, Dim Cols>
struct stored_weight {
    static_assert(std::is_same_v<T, float>, "shaped::nn: a quantized weight's elements are float");
    using type = QuantizedMatrix<Format, Rows, Cols>;
};
template <class T, Dim Rows, Dim Cols>
struct stored_weight<shaped::f32, T, Rows, Cols> {
    using type = Tensor<T, Rows, Cols>;
};
}  // namespace detail

template <StaticDim In, StaticDim Out, bool Bias = true, class T = float, StorageFormat Format = shaped::f32>
class Linear {
public:
    using value_type = T;
    using in_dim = In;
    using out_dim = Out;
    using weight_format = Format;
    static constexpr bool has_bias = Bias;
    static constexpr bool quantized = !std::is_same_v<Format, shaped::f32>;
    // QuantizedMatrix's own rule, checked here so that it reads at the user's line, one frame
    // nearer; a misfit stores floats instead, so that the class raises no second error.
    static constexpr bool whole_blocks = rows_divide_into_blocks<Format, In>;
    static_assert(shaped::detail::block_width_divides_row<Format, diag::block_width<Format::block_width>, In>,
                  "shaped::QuantizedMatrix: " SHAPED_RULE_ROW_BLOCKS);
    using weight_type =
        typename detail::stored_weight<std::conditional_t<whole_blocks, Format, shaped::f32>, T, Out, In>::type;

    // Parameters zero-filled, to be loaded.
    Linear() = default;

    // A quantized weight is drawn in floats, then quantized.
    explicit Linear(Generator& gen) {
        const double bound = 1.0 / std::sqrt(static_cast<double>(In::extent));
        if constexpr (quantized) {
            Tensor<float, Out, In> drawn;
            gen.fill_uniform(drawn.elements(), -bound, bound);
            weight = quantize<Format>(drawn);
        } else {
            gen.fill_uniform(weight.elements(), -bound, bound);
        }
        if constexpr (Bias) gen.fill_uniform(bias.elements(), -bound, bound);
    }

    // x (..., In) -> (..., Out), lazy.
    // A misfit picks the overload only declared, whose return type is the failed check: the compiler
    // instantiates it at the caller's line, with no frame of ours around it.
    template <Expression X>
        requires detail::last_dim_fits<In, X>
    auto operator()(X&& x) const {
        if constexpr (Bias) return product(std::forward<X>(x)) + bias;
        else return product(std::forward<X>(x));
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
        (weight_type, weight),
        (bias_type, bias));

private:
    template <class X>
    auto product(X&& x) const {
        if constexpr (quantized) return linear(std::forward<X>(x), weight);
        else return matmul(std::forward<X>(x), weight.mT());
    }
};

}  // namespace shaped::nn
