#pragma once
// nn::differentiated<X>: whether a layer's input is being differentiated. Inside
// train::value_and_grad an input evaluates to a value on the tape (train/traced.hpp), not to a
// Tensor of its own; the layers that work otherwise while a loss is differentiated ask this
// (attention records its heads' attention as one operation; dropout drops only then).

#include <shaped/tensor.hpp>

#include <type_traits>
#include <utility>

namespace shaped::nn {

template <class X>
concept differentiated = !std::remove_cvref_t<decltype(eval(std::declval<const X&>()))>::owns_storage;

}  // namespace shaped::nn
