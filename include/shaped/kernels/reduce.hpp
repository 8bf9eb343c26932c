#pragma once
// Reductions over all elements (sum, mean, max, min, var) give a 0-d Tensor, as torch's do.

#include <shaped/kernels/evaluate.hpp>
#include <shaped/kernels/rows.hpp>

#include <algorithm>

namespace shaped {

namespace detail {
// Calls f(data, size) on E's elements, contiguous: a Tensor's own, or a temporary's.
template <Expression E, class F>
auto with_elements(const E& e, F f) {
    if constexpr (std::remove_cvref_t<E>::owns_storage) {
        show_reads(e);
        return f(e.data(), e.size());
    } else {
        const auto x = eval(e);
        return f(x.data(), x.size());
    }
}

template <class T>
Tensor<T> scalar_tensor(double v) {
    Tensor<T> t;
    t.data()[0] = static_cast<T>(v);
    return t;
}

}  // namespace detail

// Each reduction of a failed check's result is declared only, returning that failure: the check
// stays the one error (expr/structure.hpp says why).
template <Failed E>
failed sum(const E&);
template <Failed E>
failed mean(const E&);
template <Failed E>
failed var(const E&);
template <Failed E>
failed max(const E&);
template <Failed E>
failed min(const E&);

template <Expression E>
auto sum(const E& e) {
    return detail::with_elements(e, [](const auto* data, std::size_t n) {
        return detail::scalar_tensor<value_type_of<E>>(kernels::moments_of(data, n).sum);
    });
}

template <Expression E>
auto mean(const E& e) {
    return detail::with_elements(e, [](const auto* data, std::size_t n) {
        return detail::scalar_tensor<value_type_of<E>>(kernels::moments_of(data, n).mean);
    });
}

// The unbiased variance of all elements, as torch.var(x).
template <Expression E>
auto var(const E& e) {
    return detail::with_elements(e, [](const auto* data, std::size_t n) {
        return detail::scalar_tensor<value_type_of<E>>(kernels::moments_of(data, n).unbiased_variance);
    });
}

template <Expression E>
auto max(const E& e) {
    return detail::with_elements(e, [](const auto* data, std::size_t n) {
        if (n == 0) throw shape_error("shaped::max: the tensor is empty");
        return detail::scalar_tensor<value_type_of<E>>(*std::max_element(data, data + n));
    });
}

template <Expression E>
auto min(const E& e) {
    return detail::with_elements(e, [](const auto* data, std::size_t n) {
        if (n == 0) throw shape_error("shaped::min: the tensor is empty");
        return detail::scalar_tensor<value_type_of<E>>(*std::min_element(data, data + n));
    });
}

}  // namespace shaped
