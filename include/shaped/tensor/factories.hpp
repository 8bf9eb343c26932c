#pragma once
// Factories, as torch's: zeros, ones, full, arange, tensor({...}), randn, rand. Dynamic extents
// follow the generator (if any) as dim values, one per dynamic dim, in order:
//   auto x = shaped::randn<float, B, T, C>(gen, T{5});

#include <shaped/tensor/random.hpp>
#include <shaped/tensor/tensor.hpp>

#include <array>
#include <initializer_list>
#include <string>
#include <string_view>

namespace shaped {

// The factories, as a failed check names them.
namespace op {
struct full {};
struct zeros {};
struct ones {};
struct arange {};
struct tensor {};
struct randn {};
struct rand {};
}  // namespace op

namespace detail {
// The shape a factory makes, checked to fit in memory under the factory's own name.
template <class T, Dim... Ds>
Shape<Ds...> factory_shape(std::string_view factory, const std::array<std::size_t, sizeof...(Ds)>& extents) {
    checked_element_count(factory, dims<Ds...>{}, extents, sizeof(T));
    return Shape<Ds...>(extents);
}
}  // namespace detail

template <class T, Dim... Ds, DynamicDim... Dynamic>
    requires detail::gives_dynamic_extents<dims<Ds...>, Dynamic...>
Tensor<T, Ds...> full(T value, Dynamic... extents) {
    Tensor<T, Ds...> t{detail::factory_shape<T, Ds...>("full", detail::make_extents(dims<Ds...>{}, extents...))};
    t.fill(value);
    return t;
}

template <class T, Dim... Ds, DynamicDim... Dynamic>
    requires detail::gives_dynamic_extents<dims<Ds...>, Dynamic...>
Tensor<T, Ds...> zeros(Dynamic... extents) {
    return Tensor<T, Ds...>{detail::factory_shape<T, Ds...>("zeros", detail::make_extents(dims<Ds...>{}, extents...))};
}

template <class T, Dim... Ds, DynamicDim... Dynamic>
    requires detail::gives_dynamic_extents<dims<Ds...>, Dynamic...>
Tensor<T, Ds...> ones(Dynamic... extents) {
    Tensor<T, Ds...> t{detail::factory_shape<T, Ds...>("ones", detail::make_extents(dims<Ds...>{}, extents...))};
    t.fill(T{1});
    return t;
}

// 0, 1, ..., n-1 along the one dim D.
template <class T, Dim D, DynamicDim... Dynamic>
    requires detail::gives_dynamic_extents<dims<D>, Dynamic...>
Tensor<T, D> arange(Dynamic... extents) {
    Tensor<T, D> t{detail::factory_shape<T, D>("arange", detail::make_extents(dims<D>{}, extents...))};
    for (std::size_t i = 0; i < t.size(); ++i) t.data()[i] = static_cast<T>(i);
    return t;
}

// From values in row-major order; their count must be the product of the extents.
template <class T, Dim... Ds, DynamicDim... Dynamic>
    requires detail::gives_dynamic_extents<dims<Ds...>, Dynamic...>
Tensor<T, Ds...> tensor(std::initializer_list<T> values, Dynamic... extents) {
    Tensor<T, Ds...> t{detail::factory_shape<T, Ds...>("tensor", detail::make_extents(dims<Ds...>{}, extents...))};
    if (values.size() != t.size())
        throw shape_error(detail::message({"shaped::tensor: ", values.size(), " values do not fill ", t.size(), " elements"}));
    std::copy(values.begin(), values.end(), t.data());
    return t;
}

template <class T, Dim... Ds, DynamicDim... Dynamic>
    requires detail::gives_dynamic_extents<dims<Ds...>, Dynamic...>
Tensor<T, Ds...> randn(Generator& gen, Dynamic... extents) {
    Tensor<T, Ds...> t{detail::factory_shape<T, Ds...>("randn", detail::make_extents(dims<Ds...>{}, extents...))};
    gen.fill_normal(t.elements());
    return t;
}

// Uniform in [low, high), [0, 1) by default.
template <class T, Dim... Ds, DynamicDim... Dynamic>
    requires detail::gives_dynamic_extents<dims<Ds...>, Dynamic...>
Tensor<T, Ds...> rand(Generator& gen, Dynamic... extents) {
    Tensor<T, Ds...> t{detail::factory_shape<T, Ds...>("rand", detail::make_extents(dims<Ds...>{}, extents...))};
    gen.fill_uniform(t.elements());
    return t;
}

// Arguments that are not the dynamic dims' extents pick the overload only declared, whose return
// type is the failed check, shown with the dims wanted and the arguments given.
template <class T, Dim... Ds, class... Given>
    requires(!detail::gives_dynamic_extents<dims<Ds...>, Given...>)
detail::dynamic_extents_diag<op::full, dims<Ds...>, Given...> full(T value, Given...);
template <class T, Dim... Ds, class... Given>
    requires(!detail::gives_dynamic_extents<dims<Ds...>, Given...>)
detail::dynamic_extents_diag<op::zeros, dims<Ds...>, Given...> zeros(Given...);
template <class T, Dim... Ds, class... Given>
    requires(!detail::gives_dynamic_extents<dims<Ds...>, Given...>)
detail::dynamic_extents_diag<op::ones, dims<Ds...>, Given...> ones(Given...);
template <class T, Dim D, class... Given>
    requires(!detail::gives_dynamic_extents<dims<D>, Given...>)
detail::dynamic_extents_diag<op::arange, dims<D>, Given...> arange(Given...);
template <class T, Dim... Ds, class... Given>
    requires(!detail::gives_dynamic_extents<dims<Ds...>, Given...>)
detail::dynamic_extents_diag<op::tensor, dims<Ds...>, Given...> tensor(std::initializer_list<T> values, Given...);
template <class T, Dim... Ds, class... Given>
    requires(!detail::gives_dynamic_extents<dims<Ds...>, Given...>)
detail::dynamic_extents_diag<op::randn, dims<Ds...>, Given...> randn(Generator& gen, Given...);
template <class T, Dim... Ds, class... Given>
    requires(!detail::gives_dynamic_extents<dims<Ds...>, Given...>)
detail::dynamic_extents_diag<op::rand, dims<Ds...>, Given...> rand(Generator& gen, Given...);

}  // namespace shaped
