#pragma once
// The checks of training's rules, in the vocabulary of core/diagnostics.hpp.

#include <shaped/nn/diagnostics.hpp>

namespace shaped::diag {

// Gradients pair with parameters by type: the gradients given (train::gradients<M> or a
// gradient_ref<M>) must be of the very module type they update or are visited with.
#define SHAPED_RULE_GRADIENTS_OF_MODULE "the gradients are of another module's type than the parameters'"
template <class... Shown>
struct gradients_of_module : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::train: " SHAPED_RULE_GRADIENTS_OF_MODULE);
};

// What a loss given to train::value_and_grad returns: a 0-d traced value, asserted where the
// loss is called (value_and_grad.hpp), with the returned type in the condition.
#define SHAPED_RULE_LOSS_VALUE "the loss must be a 0-d value computed from its arguments"

// A training batch's T positions fit the positions the model can see, its context P (the
// position embedding's rows, the rotary angles' length): asserted on the trainer's T and P.
#define SHAPED_RULE_BATCH_FITS_CONTEXT "a batch's positions T must be at most the model's context P"

}  // namespace shaped::diag
