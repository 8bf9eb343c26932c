#pragma once
// train::AdamW<M>: torch.optim.AdamW over a module's parameters, step for step as PyTorch's
// single-tensor loop computes it (decoupled weight decay, bias-corrected moments):
//
//   p *= 1 - lr * weight_decay                  (only the parameters that decay)
//   m = beta1 m + (1 - beta1) g,   v = beta2 v + (1 - beta2) g^2
//   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
//
// Which parameters decay is nanoGPT's rule by default: every parameter of two or more dims (the
// matrices and embeddings), not the biases and norms' gains. Its moments are gradients<M>, named
// as the parameters, so that a checkpoint saves them by the same visit.
//
//   train::AdamW<Model> opt({.weight_decay = 0.1, .beta2 = 0.95});
//   opt.step(model, grads, lr);

#include <shaped/kernels/rows_backward.hpp>
#include <shaped/train/gradients.hpp>

#include <cmath>
#include <cstddef>
#include <string_view>

namespace shaped::train {

struct adamw_options {
    double beta1 = 0.9;
    double beta2 = 0.999;
    double eps = 1e-8;
    double weight_decay = 1e-2;
};

// nanoGPT's configure_optimizers: weight decay on the parameters of two or more dims. Another
// rule is any function of a parameter's slot (its name and rank: nn::parameter_list).
struct decay_matrices {
    bool operator()(const nn::const_parameter_slot& parameter) const { return parameter.rank >= 2; }
};

template <class M, class Decays = decay_matrices>
class AdamW {
public:
    explicit AdamW(adamw_options options = {}, Decays decays = {}) : options_(options), decays_(decays) {}

    // One update of model's parameters by grads at learning rate lr; grads must be the gradients
    // of model's very type.
    template <class G>
        requires detail::gradients_fit<M, G>
    void step(M& model, const G& grads, double lr);
    template <class G>
        requires(!detail::gradients_fit<M, G>)
    detail::gradients_misfit<M, G> step(M&, const G&, double);

    // The number of steps taken, t above.
    std::size_t steps() const { return steps_; }
    const adamw_options& options() const { return options_; }
    // The first and second moments, exp_avg and exp_avg_sq in PyTorch's state.
    const gradients<M>& exp_avg() const { return exp_avg_; }
    const gradients<M>& exp_avg_sq() const { return exp_avg_sq_; }
    gradients<M>& exp_avg() { return exp_avg_; }
    gradients<M>& exp_avg_sq() { return exp_avg_sq_; }
    // Resuming: the step count a checkpoint saved, with its moments loaded into the two above.
    void set_steps(std::size_t steps) { steps_ = steps; }

private:
    adamw_options options_;
    Decays decays_;
    std::size_t steps_ = 0;
    gradients<M> exp_avg_, exp_avg_sq_;
};

// ---- implementation ------------------------------------------------------------------------

template <class M, class Decays>
template <class G>
    requires detail::gradients_fit<M, G>
void AdamW<M, Decays>::step(M& model, const G& grads, double lr) {
    ++steps_;
    const double t = static_cast<double>(steps_);
    const double step_size = lr / (1 - std::pow(options_.beta1, t));
    const double correction2_sqrt = std::sqrt(1 - std::pow(options_.beta2, t));
    const auto parameters = nn::parameter_list(model);
    const auto gs = nn::parameter_list(grads.storage());
    const auto ms = nn::parameter_list(exp_avg_.storage());
    const auto vs = nn::parameter_list(exp_avg_sq_.storage());
    for (std::size_t i = 0; i < parameters.size(); ++i) {
        const kernels::adamw_constants constants{.decay = decays_(nn::const_parameter_slot(parameters[i])) ? 1 - lr * options_.weight_decay : 1.0,
                                                 .beta1 = options_.beta1,
                                                 .beta2 = options_.beta2,
                                                 .eps = options_.eps,
                                                 .step_size = step_size,
                                                 .correction = correction2_sqrt};
        nn::on_floating_elements(parameters[i], [&](auto elements) {
            using T = typename decltype(elements)::element_type;
            kernels::adamw_update(elements.data(), gs[i].template elements<const T>().data(), ms[i].template elements<T>().data(),
                                  vs[i].template elements<T>().data(), elements.size(), constants);
        });
    }
}

}  // namespace shaped::train
