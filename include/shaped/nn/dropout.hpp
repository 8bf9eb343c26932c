#pragma once
// Dropout (Srivastava et al.), as torch.nn.Dropout:
//
//   shaped::dropout(x, p, gen)   x with each element zeroed with probability p and the others
//                                scaled by 1 / (1 - p), the mask drawn from gen now: x times a
//                                mask tensor, an expression differentiated as any product
//   nn::Dropout<T> drop(p, seed) a layer that drops only while a loss is differentiated
//                                (training), each call with a new mask from its own generator,
//                                so a run repeats from its seed; in evaluation and decoding,
//                                drop(x) is x as it is
//
// A Dropout has no parameters: keep it as a member outside BOOST_HANA_DEFINE_STRUCT, where the
// model's reflection does not see it.

#include <shaped/nn/differentiated.hpp>
#include <shaped/tensor.hpp>

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <type_traits>
#include <utility>

namespace shaped {

namespace detail {
// std::invalid_argument naming who, unless p is a probability.
inline void check_dropout_probability(std::string_view who, double p) {
    if (p >= 0.0 && p <= 1.0) return;
    std::ostringstream message;
    message << who << ": p must be a probability in [0, 1], got " << p;
    throw std::invalid_argument(message.str());
}
}  // namespace detail

template <Expression X>
auto dropout(const X& x, double p, Generator& gen) {
    using T = value_type_of<X>;
    detail::check_dropout_probability("shaped::dropout", p);
    tensor_for<T, dims_of<X>> mask{typename tensor_for<T, dims_of<X>>::shape_type(x.extents())};
    gen.fill_uniform(mask.elements());
    // p = 1 drops everything: no element is kept to scale.
    const T kept = p < 1.0 ? static_cast<T>(1.0 / (1.0 - p)) : T{0};
    const T drop_below = static_cast<T>(p);
    for (T& m : mask.elements()) m = m < drop_below ? T{0} : kept;
    return x * std::move(mask);
}

}  // namespace shaped

namespace shaped::nn {

template <class T = float>
class Dropout {
public:
    // p the probability of dropping an element; the masks are drawn from a generator of seed.
    explicit Dropout(double p, std::uint64_t seed = 0) : p_(p), gen_(seed) {
        shaped::detail::check_dropout_probability("shaped::nn::Dropout", p);
    }

    double p() const { return p_; }

    // While x is differentiated, x times a new mask; otherwise x as it is (a view where x is stored).
    template <Expression X>
    auto operator()(const X& x) const {
        static_assert(std::is_same_v<value_type_of<X>, T>, "shaped::nn::Dropout: the input must have the layer's element type");
        if constexpr (differentiated<X>) return dropout(x, p_, gen_);
        else if constexpr (Viewable<X>) return view_of(x);
        else return X(x);
    }

private:
    double p_;
    // Drawn from by a const call: a mask is not the layer's state, only its sequence is.
    mutable Generator gen_;
};

}  // namespace shaped::nn
