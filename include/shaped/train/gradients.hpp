#pragma once
// train::gradients<M>: the gradients of a module M (a layer, a stack or a whole model), derived
// from M's declaration by the reflection that names its parameters (nn/module.hpp): one tensor
// for each parameter of M, of that very parameter's type, named as it is. A backward pass adds
// into them; an optimizer reads them beside the parameters.
//
//   train::gradients<Model> grads;        zeros, one tensor per parameter
//   grads.of(&Block::ln_1)                the gradients of a member: a gradient_ref of a
//                                         sub-module, the tensor of a parameter
//   grads[i]                              of a stack's module i
//   for_each_gradient(model, grads, f)    f(name, parameter, gradient) for every parameter, in
//                                         declaration order; gradients of another module's type
//                                         do not compile
//   zero(grads), global_norm(grads)       as optimizer.zero_grad() and the norm clipping measures
//   clip_grad_norm(grads, max_norm)       torch.nn.utils.clip_grad_norm_: scales every gradient
//                                         by max_norm / (norm + 1e-6) when that is below 1, and
//                                         returns the norm before clipping
//
// Gradients have a type of their own, not the module's, so that a gradient can never be passed
// where a parameter is expected, nor pair with a parameter of another module.

#include <shaped/kernels/rows_backward.hpp>
#include <shaped/nn/module.hpp>
#include <shaped/train/diagnostics.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>

namespace shaped::train {

// The gradients of a module held elsewhere (of a sub-module of a model's gradients): a
// reference, cheap to copy, never owning.
template <class M>
class gradient_ref {
public:
    using module_type = M;

    explicit gradient_ref(M& storage) : storage_(&storage) {}

    // The gradients of member `member` of M: a gradient_ref for a sub-module or stack, the
    // tensor itself for a parameter.
    template <class P>
    decltype(auto) of(P M::*member) const {
        if constexpr (nn::detail::is_parameter<P>) return (storage_->*member);
        else return gradient_ref<P>(storage_->*member);
    }

    // The gradients of a stack's module i.
    auto operator[](std::size_t i) const
        requires nn::detail::is_stack<M>
    {
        return gradient_ref<typename M::module_type>((*storage_)[i]);
    }

    // The gradients laid out as the module's parameters are (what the visits walk).
    M& storage() const { return *storage_; }

private:
    M* storage_;
};

// The gradients of a module, owned: zeros to start.
template <class M>
class gradients : public gradient_ref<M> {
public:
    gradients() : gradients(std::make_unique<M>()) {}
    gradients(const gradients& other) : gradients(std::make_unique<M>(other.storage())) {}
    gradients(gradients&&) noexcept = default;
    gradients& operator=(const gradients& other) {
        this->storage() = other.storage();
        return *this;
    }
    gradients& operator=(gradients&&) noexcept = default;

private:
    explicit gradients(std::unique_ptr<M> owned) : gradient_ref<M>(*owned), owned_(std::move(owned)) {}
    // On the heap: a model's gradients are as large as the model, and a move keeps the
    // references handed out valid.
    std::unique_ptr<M> owned_;
};

namespace detail {
template <class G>
struct gradients_module {
    using type = void;
};
template <class M>
struct gradients_module<gradient_ref<M>> {
    using type = M;
};
template <class M>
struct gradients_module<gradients<M>> {
    using type = M;
};
// The module type whose gradients G holds, void when G holds none.
template <class G>
using gradients_module_t = typename gradients_module<std::remove_cvref_t<G>>::type;

// Whether G holds the gradients of M.
template <class M, class G>
inline constexpr bool gradients_fit = std::is_same_v<gradients_module_t<G>, std::remove_const_t<M>>;

// The diagnostic of gradients that do not fit: both types. A call whose gradients do not fit
// picks an overload only declared, returning this, so that the compiler reports it at the
// caller's line with no frame of ours around it.
template <class M, class G>
using gradients_misfit = diag::gradients_of_module<std::remove_const_t<M>, std::remove_cvref_t<G>>;
}  // namespace detail

template <class M, class G, class F>
    requires detail::gradients_fit<M, G>
void for_each_gradient(M& module, const G& grads, F&& f) {
    std::string path;
    nn::detail::visit(path, f, module, grads.storage());
}
// Defined, not only declared: g++ makes a function used but never defined a second error where
// its type names a local type (a lambda).
template <class M, class G, class F>
    requires(!detail::gradients_fit<M, G>)
detail::gradients_misfit<M, G> for_each_gradient(M&, const G&, F&&) {
    return {};
}

// f(name, gradient) for every gradient.
template <class G, class F>
void for_each_gradient(const G& grads, F&& f) {
    nn::for_each_parameter(grads.storage(), f);
}

template <class G>
void zero(const G& grads) {
    for (const auto& g : nn::parameter_list(grads.storage()))
        nn::on_floating_elements(g, [](auto elements) { std::fill(elements.begin(), elements.end(), 0); });
}

// The 2-norm of all the gradients together, accumulated in double.
template <class G>
double global_norm(const G& grads) {
    double squares = 0;
    for (const auto& g : nn::parameter_list(grads.storage()))
        nn::on_floating_elements(g, [&](auto elements) { squares += kernels::sum_of_squares(elements.data(), elements.size()); });
    return std::sqrt(squares);
}

template <class G>
double clip_grad_norm(const G& grads, double max_norm) {
    const double norm = global_norm(grads);
    const double coefficient = max_norm / (norm + 1e-6);
    if (coefficient < 1.0)
        for (const auto& g : nn::parameter_list(grads.storage()))
            nn::on_floating_elements(g, [&](auto elements) {
                for (auto& value : elements) value *= static_cast<std::remove_reference_t<decltype(value)>>(coefficient);
            });
    return norm;
}

}  // namespace shaped::train
