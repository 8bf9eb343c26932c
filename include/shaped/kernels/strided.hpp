#pragma once
// Stored elements as the kernels read them: strided elements are a layout (tensor/layout.hpp)
// and the pointer it is read from; a batch iterator steps a multi-index over leading dims, for
// the loops over a batch of matrices or of rows.
//
//   const auto q = as_strided<T>(q_expr).elements;               // in place, or a temporary's
//   for (batch_iterator<batch> at(q.extents); at; ++at) run(q.data + at.offset(q.strides));

#include <shaped/tensor/layout.hpp>
#include <shaped/tensor/tensor.hpp>
#include <shaped/tensor/view_of.hpp>

#include <array>
#include <cstddef>
#include <cstring>
#include <memory>
#include <variant>

namespace shaped::kernels {

// Read-only elements of T, laid out from data.
template <class T, std::size_t R>
struct strided : strided_layout<R> {
    const T* data;
};

// The operand as strided elements, and whatever owns them if a temporary had to be made.
template <class T, std::size_t R, class Owner>
struct strided_operand {
    Owner owner;
    strided<T, R> elements;
};

// The elements of a Tensor or View, where they are stored.
template <Strided S>
auto elements_of(const S& s) {
    using element = std::remove_const_t<std::remove_pointer_t<decltype(s.data())>>;
    return strided<element, rank_of<S>>{{s.extents(), s.strides()}, s.data()};
}

// An operand's elements as T: read in place where they are stored (a Tensor or View, maybe
// transposed or renamed), else evaluated into a temporary.
template <class T, class E>
auto as_strided(const E& e) {
    constexpr std::size_t R = rank_of<E>;
    if constexpr (Viewable<E>) {
        return strided_operand<T, R, std::monostate>{{}, elements_of(view_of(e))};
    } else {
        // The temporary lives on the heap so that elements stays valid wherever the result is
        // moved: a small Tensor keeps its elements inline and would take them along.
        auto owner = std::make_unique<const tensor_for<T, dims_of<E>>>(e);
        const strided<T, R> elements{{owner->extents(), owner->strides()}, owner->data()};
        return strided_operand<T, R, decltype(owner)>{std::move(owner), elements};
    }
}

// Steps a multi-index over the first N of some extents, the last of them fastest, from all
// zeros through every index once (once with N = 0):
//
//   for (batch_iterator<N> at(extents); at; ++at) element = data + at.offset(strides);
template <std::size_t N>
class batch_iterator {
public:
    template <std::size_t R>
        requires(N <= R)
    explicit batch_iterator(const std::array<std::size_t, R>& extents) {
        for (std::size_t i = 0; i < N; ++i) {
            extents_[i] = extents[i];
            count_ *= extents[i];
        }
    }

    // How many indices there are in all.
    std::size_t count() const { return count_; }
    explicit operator bool() const { return step_ < count_; }

    batch_iterator& operator++() {
        ++step_;
        for (std::size_t i = N; i-- > 0;) {
            if (++index_[i] < extents_[i]) break;
            index_[i] = 0;
        }
        return *this;
    }

    // The current index.
    const std::array<std::size_t, N>& index() const { return index_; }

    // The offset of the current index along the first N of some strides.
    template <std::size_t R>
        requires(N <= R)
    std::ptrdiff_t offset(const std::array<std::ptrdiff_t, R>& strides) const {
        std::ptrdiff_t offset = 0;
        for (std::size_t i = 0; i < N; ++i) offset += static_cast<std::ptrdiff_t>(index_[i]) * strides[i];
        return offset;
    }

private:
    std::array<std::size_t, N> extents_{};
    std::array<std::size_t, N> index_{};
    std::size_t count_ = 1;
    std::size_t step_ = 0;
};

namespace detail {

// The strides of a batch of matrices' batch dims, aligned from the right to a result's Batch
// batch dims: 0 along a dim it does not have or has once (it broadcasts there).
template <std::size_t Batch, std::size_t R>
std::array<std::ptrdiff_t, Batch> batch_strides(const strided_layout<R>& operand) {
    std::array<std::ptrdiff_t, Batch> out{};
    constexpr std::size_t own = R - 2;
    for (std::size_t i = 0; i < own; ++i) out[Batch - own + i] = operand.extents[i] == 1 ? 0 : operand.strides[i];
    return out;
}

// Copies strided elements to `to`, laid out by to_strides: a loop over rows, each moved whole
// where its elements are adjacent on both sides, rather than xtensor's element-by-element
// stepper (which costs microseconds even for a KV cache's one new row, and is compiled again for
// every pair of shapes).
template <class T, std::size_t R>
void copy_elements(const strided<T, R>& from, T* to, const std::array<std::ptrdiff_t, R>& to_strides) {
    if constexpr (R == 0) {
        to[0] = from.data[0];
    } else {
        const std::size_t n = from.extents[R - 1];
        batch_iterator<R - 1> row(from.extents);
        if (!row || n == 0) return;
        const bool adjacent = (to_strides[R - 1] == 1 && from.strides[R - 1] == 1) || n == 1;
        for (; row; ++row) {
            T* dst = to + row.offset(to_strides);
            const T* src = from.data + row.offset(from.strides);
            if (adjacent) std::memmove(dst, src, n * sizeof(T));
            else
                for (std::size_t j = 0; j < n; ++j)
                    dst[static_cast<std::ptrdiff_t>(j) * to_strides[R - 1]] = src[static_cast<std::ptrdiff_t>(j) * from.strides[R - 1]];
        }
    }
}

// A copy from stored elements (a Tensor or View, maybe transposed or renamed) of the target's
// element type, into the target.
template <class Target, class Source>
void copy_into(Target& target, const Source& source) {
    const auto from = as_strided<value_type_of<Target>>(source);
    copy_elements(from.elements, target.data(), target.strides());
}

}  // namespace detail

}  // namespace shaped::kernels
