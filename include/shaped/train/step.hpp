#pragma once
// train::trainer<Model, B, T>: a model's training passes over batches of B rows of T positions,
// as llm.c writes them — a forward that keeps every activation its backward needs, then the
// backward, block by block in reverse, adding each parameter's gradient into the model's
// train::gradients. The activations are allocated once and reused by every step; their bytes
// are a constant of the config, B and T (trainer::activation_bytes).
//
//   auto trainer = std::make_unique<train::trainer<Model, B, T>>();
//   double loss = trainer->forward_backward(model, grads, idx, targets, loss_scale);
//   double loss = trainer->loss(model, idx, targets);           the forward alone
//
// loss is F.cross_entropy's mean over the targets that are not -1 (a target outside the
// vocabulary is a shape_error, before any work); the gradients added are those of
// loss * loss_scale (1 / the micro-batches of an accumulated step, as nanoGPT divides each
// micro-batch's loss). Each model's passes are a specialisation of trainer (train/gpt.hpp,
// train/llama.hpp) deriving from trainer_base, which gives it these two calls from its
//
//   forward(model, idx)             the logits, into logits
//   backward(model, grads, idx)     from the logits' gradient, in logits' place, to the grads

#include <shaped/kernels/rows_backward.hpp>
#include <shaped/models/gpt.hpp>
#include <shaped/train/gradients.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numbers>
#include <string_view>

namespace shaped::train {

template <class Model, StaticDim B, StaticDim Time>
class trainer;

// The ids and targets of a training batch: (B, T) integers.
template <StaticDim B, StaticDim Time>
using batch_ids = Tensor<std::int64_t, B, Time>;

namespace detail {
// Asserted by each model's trainer in its own body, not here: the diagnostic is then one
// instantiation away from the user's line.
template <StaticDim Time, StaticDim P>
inline constexpr bool batch_fits_context = Time::extent <= P::extent;
}  // namespace detail

template <class Derived, class Model, StaticDim B, StaticDim Time>
class trainer_base {
public:
    using model_type = Model;
    using value_type = typename Model::value_type;
    using vocab_dim = typename Model::vocab_dim;
    static constexpr std::size_t rows = B::extent * Time::extent;

    // The logits, overwritten in place by their gradient.
    Tensor<value_type, B, Time, vocab_dim> logits;

    double loss(const Model& model, const batch_ids<B, Time>& idx, const batch_ids<B, Time>& targets) {
        const std::size_t counted = counted_targets(targets);
        self().forward(model, idx);
        const auto sum = kernels::cross_entropy_rows(logits.data(), targets.data(), rows, vocab_dim::extent, nullptr, 0.0);
        return sum.loss / static_cast<double>(counted);
    }

    template <class G>
        requires detail::gradients_fit<Model, G>
    double forward_backward(const Model& model, const G& grads, const batch_ids<B, Time>& idx,
                            const batch_ids<B, Time>& targets, double loss_scale = 1.0) {
        const std::size_t counted = counted_targets(targets);
        self().forward(model, idx);
        const auto sum = kernels::cross_entropy_rows(logits.data(), targets.data(), rows, vocab_dim::extent,
                                                     logits.data(), loss_scale / static_cast<double>(counted));
        self().backward(model, gradient_ref<Model>(grads.storage()), idx);
        return sum.loss / static_cast<double>(counted);
    }
    template <class G>
        requires(!detail::gradients_fit<Model, G>)
    detail::gradients_misfit<Model, G> forward_backward(const Model&, const G&, const batch_ids<B, Time>&,
                                                        const batch_ids<B, Time>&, double = 1.0);

private:
    Derived& self() { return static_cast<Derived&>(*this); }
    // The targets that count, every one checked before any work.
    static std::size_t counted_targets(const batch_ids<B, Time>& targets) {
        return models::detail::counted_targets(targets.elements(), vocab_dim::name.view(), vocab_dim::extent);
    }
};

namespace detail {

// f(x) as the forward computes it, the activation whose backward is kernels::activation_backward.
template <class T>
T activation_of(kernels::activation_kind f, T x) {
    switch (f) {
    case kernels::activation_kind::gelu:
        return T(0.5) * x * (T(1) + std::erf(x * static_cast<T>(std::numbers::sqrt2 / 2)));
    case kernels::activation_kind::gelu_tanh: {
        const T k = static_cast<T>(std::sqrt(2.0 / std::numbers::pi));
        return T(0.5) * x * (T(1) + std::tanh(k * (x + T(0.044715) * x * x * x)));
    }
    case kernels::activation_kind::silu:
        return x / (T(1) + std::exp(-x));
    }
    return x;
}

template <class T>
void add_rows(T* y, const T* x, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) y[i] += x[i];
}

template <class Tensor>
auto* zeroed(Tensor& t) {
    std::fill(t.elements().begin(), t.elements().end(), 0);
    return t.data();
}

// A norm layer's forward keeping each row's mean and 1/std (LayerNorm) or 1/rms (RMSNorm, whose
// mean is null).
template <class Norm, class T>
void norm_forward(const Norm& norm, const T* x, T* y, T* mean, T* rstd, std::size_t rows) {
    const T* bias = nullptr;
    if constexpr (requires { norm.bias.data(); }) bias = norm.bias.data();
    kernels::layer_norm_rows_saving(x, y, rows, Norm::channel_dim::extent, norm.weight.data(), bias, norm.eps,
                                    mean != nullptr, mean, rstd);
}

template <class Norm, class T>
void norm_backward(const Norm& norm, gradient_ref<Norm> grads, const T* dy, const T* x, const T* mean, const T* rstd,
                   T* dx, std::size_t rows) {
    T* dbias = nullptr;
    if constexpr (requires { norm.bias.data(); }) dbias = grads.of(&Norm::bias).data();
    kernels::layer_norm_rows_backward(dy, x, rows, Norm::channel_dim::extent, norm.weight.data(), mean, rstd,
                                      mean != nullptr, dx, grads.of(&Norm::weight).data(), dbias);
}

}  // namespace detail

}  // namespace shaped::train
