#pragma once
// Printing as PyTorch prints: `std::cout << t` writes tensor([[...]]) with 4 decimals, and an
// expression prints its value.

#include <shaped/tensor/print_format.hpp>
#include <shaped/tensor/tensor.hpp>

#include <ostream>

namespace shaped {

template <class T, Dim... Ds>
std::ostream& operator<<(std::ostream& os, const Tensor<T, Ds...>& t) {
    const auto extents = t.extents();
    detail::print_torch(os, std::span<const std::size_t>(extents), t.elements());
    return os;
}

template <Expression E>
    requires(!std::remove_cvref_t<E>::owns_storage)
std::ostream& operator<<(std::ostream& os, const E& e) {
    return os << eval(e);
}

}  // namespace shaped
