#pragma once
// A Tensor or View read or written as an xtensor expression, in place: for the xtensor functions
// shaped does not have. Not part of shaped.hpp, so that a program that does not use xtensor does
// not read its headers.
//
//   #include <shaped/interop/xtensor.hpp>
//   auto x = shaped::to_xtensor(t);                 // an xtensor adaptor of t's elements
//   x = xt::cumsum(x, 1);                           // writes t
//   auto u = Tensor<float, B, C>::from_xtensor(xarray);   // a copy, its shape checked

#include <shaped/tensor/tensor.hpp>

#include <xtensor/xadapt.hpp>

namespace shaped {

template <class T, Dim... Ds>
auto to_xtensor(Tensor<T, Ds...>& t) {
    return xt::adapt(t.data(), t.size(), xt::no_ownership(), t.extents(), t.strides());
}
template <class T, Dim... Ds>
auto to_xtensor(const Tensor<T, Ds...>& t) {
    return xt::adapt(t.data(), t.size(), xt::no_ownership(), t.extents(), t.strides());
}
template <class T, Dim... Ds>
auto to_xtensor(const View<T, Ds...>& v) {
    return xt::adapt(v.data(), v.size(), xt::no_ownership(), v.extents(), v.strides());
}

}  // namespace shaped
