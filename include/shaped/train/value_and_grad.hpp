#pragma once
// train::value_and_grad: a loss and the gradients of a model's parameters, derived from the loss
// as the user writes it — no backward written by hand (JAX's value_and_grad, typed: the
// gradients are a train::gradients<Model>, one tensor per parameter, of that parameter's type).
//
//   auto loss = [](const auto& model, const auto& x, const auto& y) {
//       return mean(square(model(x) - y));          // any shaped ops and layers; eval() as usual
//   };
//   auto [value, grads] = train::value_and_grad(loss, model, x, y);
//   train::value_and_grad(loss, model, grads, x, y);   adds into grads, returns the value
//
// A training loop holds a shaped::storage_pool around its steps: each step's tensors then take
// the blocks the step before freed, instead of fresh pages from the system.
//
// The loss is called once, with each tensor argument as a traced value (train/traced.hpp): what
// it computes from them is recorded as it runs, and the model's parameters it reads are found
// by address. It must return a 0-d traced value (a scalar that depends on the arguments).

#include <shaped/train/attention.hpp>
#include <shaped/train/cross_entropy.hpp>
#include <shaped/train/derivatives.hpp>
#include <shaped/train/gradients.hpp>

#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

namespace shaped::train {

namespace detail {
// A tensor argument of the loss as a traced value on the tape (integer ids and targets too: what
// is computed from them is recorded, though nothing flows back into them); anything else as it is.
template <class A>
decltype(auto) traced_argument(tape& t, A&& a) {
    using N = std::remove_cvref_t<A>;
    if constexpr (Expression<N> && N::owns_storage) return t.input(N(a));
    else return std::forward<A>(a);
}

template <class M, class G>
void watch_parameters(tape& t, const M& model, const G& grads) {
    const auto parameters = nn::parameter_list(model);
    const auto gradients = nn::parameter_list(grads.storage());
    for (std::size_t i = 0; i < parameters.size(); ++i) t.watch(parameters[i], gradients[i]);
}

// What a loss returns: a 0-d traced value; or failed, after a check inside the loss failed (that
// check's diagnostic is the one error: the loss's value adds none).
template <class V>
inline constexpr bool scalar_traced = false;
template <class T>
inline constexpr bool scalar_traced<traced<T>> = true;
template <class V>
inline constexpr bool loss_is_0d = Failed<V> || scalar_traced<V>;

// Runs the tape back from the loss's value, whose gradient is seed (1, or a loss's scale);
// returns the value.
template <class V>
double backward_from(tape& t, const V& value, double seed = 1) {
    if constexpr (scalar_traced<V>) {
        using T = value_type_of<V>;
        const double result = static_cast<double>(value.item());  // before the backward releases it
        Tensor<T> gradient;
        gradient.fill(static_cast<T>(seed));
        add_gradient(value.record(), gradient);
        t.backward();
        return result;
    } else {
        return 0;
    }
}
}  // namespace detail

// Adds the gradients of loss(model, args...) into grads; returns the loss. Each form calls the
// loss in its own body and checks what it returns there, so that a check failing inside the loss
// is reported under one frame of ours.
template <class F, class M, class G, class... Args>
    requires detail::gradients_fit<M, G>
double value_and_grad(F&& loss, const M& model, const G& grads, Args&&... args) {
    storage_pool pool;  // the step's temporaries reuse each other's blocks
    tape t;
    detail::watch_parameters(t, model, grads);
    const auto value = std::forward<F>(loss)(model, detail::traced_argument(t, std::forward<Args>(args))...);
    static_assert(detail::loss_is_0d<std::remove_cvref_t<decltype(value)>>,
                  "shaped::train::value_and_grad: " SHAPED_RULE_LOSS_VALUE);
    return detail::backward_from(t, value);
}
// Gradients of another module: the check, at the caller's line. Defined, not only declared: gcc
// makes a function used but never defined an error where its type names a local type (a lambda).
template <class F, class M, class G, class... Args>
    requires(!detail::gradients_fit<M, G> && !std::is_void_v<detail::gradients_module_t<G>>)
detail::gradients_misfit<M, G> value_and_grad(F&&, const M&, const G&, Args&&...) {
    return {};
}

// The loss and fresh gradients.
template <class F, class M, class... Args>
    requires std::is_void_v<detail::gradients_module_t<std::tuple_element_t<0, std::tuple<Args..., void>>>>
std::pair<double, gradients<M>> value_and_grad(F&& loss, const M& model, Args&&... args) {
    std::pair<double, gradients<M>> result;
    storage_pool pool;
    tape t;
    detail::watch_parameters(t, model, result.second);
    const auto value = std::forward<F>(loss)(model, detail::traced_argument(t, std::forward<Args>(args))...);
    static_assert(detail::loss_is_0d<std::remove_cvref_t<decltype(value)>>,
                  "shaped::train::value_and_grad: " SHAPED_RULE_LOSS_VALUE);
    result.first = detail::backward_from(t, value);
    return result;
}

}  // namespace shaped::train
