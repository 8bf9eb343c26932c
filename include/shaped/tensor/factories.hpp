#pragma once
// Factories, as torch's: zeros, ones, full, arange, tensor({...}), randn, rand. Dynamic extents
// follow the generator (if any) as dim values, one per dynamic dim, in order:
//   auto x = shaped::randn<float, B, T, C>(gen, T{5});

#include <shaped/tensor/random.hpp>
#include <shaped/tensor/tensor.hpp>

#include <initializer_list>
#include <string>

namespace shaped {

template <class T, Dim... Ds, DynamicDim... Dynamic>
Tensor<T, Ds...> full(T value, Dynamic... extents) {
    Tensor<T, Ds...> t{Shape<Ds...>(detail::make_extents(dims<Ds...>{}, extents...))};
    t.xtensor().fill(value);
    return t;
}

template <class T, Dim... Ds, DynamicDim... Dynamic>
Tensor<T, Ds...> zeros(Dynamic... extents) {
    return Tensor<T, Ds...>{Shape<Ds...>(detail::make_extents(dims<Ds...>{}, extents...))};
}

template <class T, Dim... Ds, DynamicDim... Dynamic>
Tensor<T, Ds...> ones(Dynamic... extents) {
    return full<T, Ds...>(T{1}, extents...);
}

// 0, 1, ..., n-1 along the one dim D.
template <class T, Dim D, DynamicDim... Dynamic>
Tensor<T, D> arange(Dynamic... extents) {
    Tensor<T, D> t{Shape<D>(detail::make_extents(dims<D>{}, extents...))};
    for (std::size_t i = 0; i < t.size(); ++i) t.data()[i] = static_cast<T>(i);
    return t;
}

// From values in row-major order; their count must be the product of the extents.
template <class T, Dim... Ds, DynamicDim... Dynamic>
Tensor<T, Ds...> tensor(std::initializer_list<T> values, Dynamic... extents) {
    Tensor<T, Ds...> t{Shape<Ds...>(detail::make_extents(dims<Ds...>{}, extents...))};
    if (values.size() != t.size())
        throw shape_error("shaped::tensor: " + std::to_string(values.size()) + " values do not fill " +
                          std::to_string(t.size()) + " elements");
    std::copy(values.begin(), values.end(), t.data());
    return t;
}

template <class T, Dim... Ds, DynamicDim... Dynamic>
Tensor<T, Ds...> randn(Generator& gen, Dynamic... extents) {
    Tensor<T, Ds...> t{Shape<Ds...>(detail::make_extents(dims<Ds...>{}, extents...))};
    gen.fill_normal(t.elements());
    return t;
}

// Uniform in [low, high), [0, 1) by default.
template <class T, Dim... Ds, DynamicDim... Dynamic>
Tensor<T, Ds...> rand(Generator& gen, Dynamic... extents) {
    Tensor<T, Ds...> t{Shape<Ds...>(detail::make_extents(dims<Ds...>{}, extents...))};
    gen.fill_uniform(t.elements());
    return t;
}

}  // namespace shaped
