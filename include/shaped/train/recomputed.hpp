#pragma once
// train::recomputed<Layer>: a layer whose activations a differentiated forward does not keep
// (activation checkpointing). Its forward, while a loss is differentiated, keeps only its input
// and its output; its backward runs Layer's forward again from that input, recording it on a tape
// of its own, and differentiates that. A step then keeps one tensor per recomputed layer instead
// of every value inside it, for one more forward of the layer in the backward.
//
// Chosen by type, where the model declares its layers:
//
//   nn::Stack<train::recomputed<nn::Block<C, NH, HS>>, 12>      each block recomputed
//
// Everything else is Layer's own: its parameters (the same names, loaded and saved the same),
// its construction, inference and decoding.

#include <shaped/train/derivatives.hpp>

#include <memory>
#include <type_traits>
#include <utility>

namespace shaped::train {

namespace detail {

// A recomputed layer's output: what its backward reads is the layer (a model's, which outlives
// the step), its input (on the outer tape) and the tape whose parameters it watches.
template <class Layer, class Input, class T, Dim... Ds>
class recorded_recomputation final : public recorded_value<T, Ds...> {
public:
    recorded_recomputation(Tensor<T, Ds...> value, const Layer& layer, Input input, const tape& outer)
        : recorded_value<T, Ds...>(std::move(value)), layer_(&layer), input_(std::move(input)), outer_(&outer) {}

    void backward() override {
        if (!this->gradient) return;
        // The input as a value of no tape (its gradient is read after the tape's backward, which
        // releases what is on it), the forward recorded again, and differentiated.
        using X = std::remove_cvref_t<decltype(input_.stored())>;
        auto x = traced_for<value_type_of<X>, dims_of<X>>(
            std::make_shared<typename traced_for_impl<value_type_of<X>, dims_of<X>>::record>(X(input_.stored())));
        {
            tape again{tape::watching_as{*outer_}};
            const auto y = (*layer_)(x);
            // This value's gradient is the recomputed output's (a fresh value's, which has none
            // yet): handed over, not copied.
            y.record().gradient = std::exchange(this->gradient, std::nullopt);
            again.backward();
        }
        if (x.record().gradient) back(input_, *x.record().gradient);
    }

private:
    const Layer* layer_;
    Input input_;
    const tape* outer_;
};

}  // namespace detail

template <class Layer>
class recomputed : public Layer {
public:
    using Layer::Layer;
    recomputed() = default;

    // Layer's own calls (inference, decoding, a forward no loss differentiates) ...
    using Layer::operator();

    // ... but its differentiated full forward: the output recorded as one value, whose
    // derivative recomputes the layer's.
    template <class T, Dim... Ds>
    auto operator()(const traced<T, Ds...>& x) const {
        const Layer& layer = *this;
        tape* t = tape::active();
        if (!t || !t->recording()) return layer(x);
        auto y = [&] {
            const tape::pause unrecorded(*t);
            return layer(x);
        }();
        using Y = std::remove_cvref_t<decltype(y)>;
        static_assert(is_traced<Y>, "shaped::train::recomputed: the layer's forward returns one value");
        if constexpr (!is_traced<Y>) {
            return y;  // the assertion above is the one error
        } else {
            auto input = detail::saved(x, t);
            return [&]<Dim... Es>(dims<Es...>) {
                using record_type = detail::recorded_recomputation<Layer, decltype(input), T, Es...>;
                // y's value is y's alone (recorded nowhere): moved into the record.
                return detail::on_tape<T, Es...>(
                    std::make_shared<record_type>(std::move(y.record().value), layer, std::move(input), *t));
            }(dims_of<Y>{});
        }
    }
};

}  // namespace shaped::train
