#pragma once
// train::trainer<Model, B, T>: a language model's training step over batches of B rows of T
// positions — F.cross_entropy of the model's logits, and its gradients derived from the forward
// (train::value_and_grad's derivation), added into the model's train::gradients. Any module whose
// call takes (B, T) ids to (B, T, V) logits trains here: the GPT, the Llama, a model of yours.
//
//   auto trainer = std::make_unique<train::trainer<Model, B, T>>();
//   double loss = trainer->forward_backward(model, grads, idx, targets, loss_scale);
//   double loss = trainer->loss(model, idx, targets);           the forward alone
//   trainer->last_step()                                        what the last step held
//
// loss is F.cross_entropy's mean over the targets that are not -1 (a target outside the
// vocabulary is a shape_error, before any work); the gradients added are those of
// loss * loss_scale (1 / the micro-batches of an accumulated step, as nanoGPT divides each
// micro-batch's loss). The trainer holds a storage_plan: from the second step on, each step's
// tensors lie where the first step's lifetimes laid them out, and the step holds its live peak
// (a storage_pool, which it holds too, serves the forward alone).

#include <shaped/models/gpt.hpp>
#include <shaped/train/diagnostics.hpp>
#include <shaped/train/gradients.hpp>
#include <shaped/train/value_and_grad.hpp>

#include <cstddef>
#include <cstdint>

namespace shaped::train {

// The ids and targets of a training batch: (B, T) integers.
template <StaticDim B, StaticDim Time>
using batch_ids = Tensor<std::int64_t, B, Time>;

// The bytes of tensor storage a step held beyond what was held before it: at the end of its
// forward (what the backward reads: the activations), and at its peak.
struct step_bytes {
    std::size_t activations = 0;
    std::size_t peak = 0;
};

namespace detail {
// Asserted in the trainer's body: the diagnostic names both dims, one instantiation from the
// user's line. A model without a context_dim takes any T.
template <StaticDim Time, StaticDim P>
inline constexpr bool batch_fits_context = Time::extent <= P::extent;
template <class Model>
struct context_of {
    using type = dim<"P", std::size_t(-1)>;
};
template <class Model>
    requires requires { typename Model::context_dim; }
struct context_of<Model> {
    using type = typename Model::context_dim;
};
}  // namespace detail

template <class Model, StaticDim B, StaticDim Time>
class trainer {
    static_assert(detail::batch_fits_context<Time, typename detail::context_of<Model>::type>, "shaped::train::trainer: " SHAPED_RULE_BATCH_FITS_CONTEXT);

public:
    using model_type = Model;

    double loss(const Model& model, const batch_ids<B, Time>& idx, const batch_ids<B, Time>& targets) const {
        plan_.give_back_pages();  // the forward's tensors are not the step's: not beside its arena
        return models::cross_entropy(model(idx), targets);
    }

    template <class G>
        requires detail::gradients_fit<Model, G>
    double forward_backward(const Model& model, const G& grads, const batch_ids<B, Time>& idx,
                            const batch_ids<B, Time>& targets, double loss_scale = 1.0) {
        using vocab = dim_at<rank_of<decltype(model(idx))> - 1, dims_of<decltype(model(idx))>>;
        models::detail::counted_targets(targets.elements(), vocab::name.view(), vocab::extent);
        const auto planned = plan_.run();
        const storage_meter meter;
        tape t;
        detail::watch_parameters(t, model, grads);
        const auto value = cross_entropy(model(t.input(batch_ids<B, Time>(idx))), t.input(batch_ids<B, Time>(targets)));
        last_.activations = meter.held();
        const double result = detail::backward_from(t, value, loss_scale);
        last_.peak = meter.peak();
        return result;
    }
    template <class G>
        requires(!detail::gradients_fit<Model, G>)
    detail::gradients_misfit<Model, G> forward_backward(const Model&, const G&, const batch_ids<B, Time>&,
                                                        const batch_ids<B, Time>&, double = 1.0);

    // What the last forward_backward held: the same every step of a model, B and T.
    step_bytes last_step() const { return last_; }

private:
    storage_pool pool_;
    mutable storage_plan plan_;  // its arena's pages, not the trainer's state
    step_bytes last_;
};

}  // namespace shaped::train
