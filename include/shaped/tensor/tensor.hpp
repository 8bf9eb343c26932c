#pragma once
// Tensor<T, Dims...>: owns its elements, row-major. Its type carries the dims; its extents are
// known at run time (the static ones also at compile time). Assigning an expression checks the
// dims, then runs the expression into this storage.

#include <shaped/expr.hpp>
#include <shaped/tensor/diagnostics.hpp>
#include <shaped/tensor/view.hpp>

#include <shaped/tensor/storage.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <initializer_list>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

namespace shaped {

template <class T, Dim... Ds>
class Tensor;

namespace detail {

// Static tensors up to this size keep their elements inline (no allocation); larger ones live on
// the heap, so that a Tensor on the stack cannot overflow it.
inline constexpr std::size_t max_inline_bytes = 16 * 1024;

// Whether static extents fit in memory at all (core/extents.hpp); dynamic ones are checked
// when the tensor is made.
template <class T, Dim... Ds>
constexpr bool static_dims_fit = [] {
    if constexpr ((Ds::is_static && ...)) return static_extents_fit<sizeof(T), Ds::extent...>;
    else return true;
}();

template <class T, Dim... Ds>
constexpr bool stores_inline = [] {
    if constexpr ((Ds::is_static && ...) && static_dims_fit<T, Ds...>)
        return (Ds::extent * ... * std::size_t{1}) * sizeof(T) <= max_inline_bytes;
    else return false;
}();

template <class T, Dim... Ds>
consteval auto storage_of() {
    if constexpr (stores_inline<T, Ds...>)
        return std::type_identity<inline_storage<T, (Ds::extent * ... * std::size_t{1})>>{};
    else
        return std::type_identity<heap_storage<T>>{};
}
template <class T, Dim... Ds>
using storage_for = typename decltype(storage_of<T, Ds...>())::type;

// Marks a target allocated just now, which nothing an expression reads can share: its
// assignment skips the test of memory shared (kernels/overlap.hpp) and the evaluation aside.
struct fresh_target {};

}  // namespace detail

template <class T, Dim... Ds>
class Tensor : public expression_base {
public:
    using value_type = T;
    using dims_type = dims<Ds...>;
    using shape_type = Shape<Ds...>;
    using storage_type = detail::storage_for<T, Ds...>;
    static constexpr bool owns_storage = true;
    static constexpr std::size_t rank = sizeof...(Ds);
    using extents_type = std::array<std::size_t, rank>;

    // All extents static: zero-filled.
    Tensor()
        requires dims_type::all_static
    {
        // A constructor has no return type to carry a check, so static extents that cannot fit
        // are asserted here, in the function the user calls: one frame from them. (An expression
        // of such extents has a leaf made here; allocate checks dynamic ones.)
        static_assert(detail::static_dims_fit<T, Ds...>, "shaped::Tensor: " SHAPED_RULE_EXTENTS_OVERFLOW);
        if constexpr (detail::static_dims_fit<T, Ds...>) allocate(extents_type{Ds::extent...});
    }

    // Dynamic extents given as dim values, one per dynamic dim, in order: Tensor<float, B, T>(T{5}).
    template <DynamicDim... Dynamic>
        requires(sizeof...(Dynamic) > 0 && std::is_same_v<dims<Dynamic...>, dynamic_dims<dims_type>>)
    explicit Tensor(Dynamic... extents) {
        allocate(detail::make_extents(dims_type{}, extents...));
    }

    // Zero-filled with the given extents, checked against the static ones.
    explicit Tensor(const shape_type& shape) {
        static_assert(detail::static_dims_fit<T, Ds...>, "shaped::Tensor: " SHAPED_RULE_EXTENTS_OVERFLOW);
        detail::check_extents_fit("Tensor", dims_type{}, shape.extents());
        allocate(shape.extents());
    }

    // Storage of the given extents left unfilled, for a kernel that writes every element before
    // anything reads one (the test suite fills it with NaN, so that one that does not is caught).
    static Tensor for_overwrite(const extents_type& extents) {
        detail::check_extents_fit("Tensor", dims_type{}, extents);
        return Tensor(extents, detail::for_overwrite);
    }

    Tensor(const Tensor&) = default;
    Tensor(Tensor&&) noexcept = default;
    Tensor& operator=(const Tensor&) = default;
    Tensor& operator=(Tensor&&) noexcept = default;

    // From any expression whose dims meet these: evaluates it. The dims are asserted here, as the
    // default constructor's extents are.
    template <Expression E>
        requires(!std::is_same_v<std::remove_cvref_t<E>, Tensor>)
    Tensor(E&& source) {
        static_assert(detail::assignable<dims_type, dims_of<E>>, "shaped::Tensor: " SHAPED_RULE_DECLARED_DIMS);
        if constexpr (detail::assignable<dims_type, dims_of<E>>) {
            const auto extents = source.extents();
            detail::check_extents_fit("Tensor", dims_type{}, extents);
            allocate(extents, detail::for_overwrite);
            // Evaluated by the kernels layer, through assign_expression (see View's operator=).
            assign_expression(*this, source, detail::fresh_target{});
        }
    }

    // Dims that do not meet pick the overload only declared, whose return type is the failed check.
    template <Expression E>
        requires(!std::is_same_v<std::remove_cvref_t<E>, Tensor> && detail::assignable<dims_type, dims_of<E>>)
    Tensor& operator=(E&& source) {
        const auto extents = source.extents();
        detail::check_extents_fit("assign", dims_type{}, extents);
        if (extents == this->extents()) {
            assign_expression(*this, source);
        } else {
            // The new storage is filled before the old is released: the source may read it.
            Tensor resized(extents, detail::for_overwrite);
            assign_expression(resized, source, detail::fresh_target{});
            *this = std::move(resized);
        }
        return *this;
    }
    template <Expression E>
        requires(!detail::assignable<dims_type, dims_of<E>>)
    detail::assign_diag<dims_type, dims_of<E>> operator=(E&&);

    // From an xtensor container or expression (any with dimension(), shape() and row-major
    // begin()/end(), read without including xtensor here); its shape is checked at run time.
    template <class X>
        requires requires(const X& e) { e.dimension(), e.shape(), e.begin(); }
    static Tensor from_xtensor(const X& e) {
        if (e.dimension() != rank)
            throw shape_error(detail::message(
                {"shaped::Tensor::from_xtensor: rank ", e.dimension(), " does not meet the declared rank ", rank}));
        extents_type extents{};
        std::copy(e.shape().begin(), e.shape().end(), extents.begin());
        Tensor t{shape_type(extents)};
        std::copy(e.begin(), e.end(), t.data());
        return t;
    }

    extents_type extents() const { return extents_; }
    shape_type shape() const { return shape_type(extents()); }
    std::size_t size() const { return storage_.size(); }
    // Every element set to value.
    void fill(const T& value) { std::fill_n(data(), size(), value); }
    static constexpr bool is_contiguous() { return true; }
    T* data() { return storage_.data(); }
    const T* data() const { return storage_.data(); }
    std::span<T> elements() { return {data(), size()}; }
    std::span<const T> elements() const { return {data(), size()}; }

    // Row-major strides in elements.
    std::array<std::ptrdiff_t, rank> strides() const { return row_major_strides(extents()); }

    // Element access, bounds-checked: t(b, t, c). Another count of indices picks the overload only
    // declared, whose return type is the failed check.
    template <std::integral... I>
        requires(sizeof...(I) == rank)
    T& operator()(I... index) {
        return data()[offset_of(index...)];
    }
    template <std::integral... I>
        requires(sizeof...(I) == rank)
    const T& operator()(I... index) const {
        return data()[offset_of(index...)];
    }
    template <std::integral... I>
        requires(sizeof...(I) != rank)
    diag::index_count<dims_type> operator()(I...) const;

    // The value of a tensor with one element, as torch's item().
    T item() const {
        if (size() != 1)
            throw shape_error(detail::message({"shaped::Tensor::item: the tensor has ", size(), " elements, not one"}));
        return data()[0];
    }

    View<const T, Ds...> view() const { return {data(), extents(), strides()}; }
    View<T, Ds...> view() { return {data(), extents(), strides()}; }

    // Positional and named forms of the structural operations, as methods for the seed's style.
    auto mT() const& { return shaped::mT(*this); }
    auto mT() && { return shaped::mT(std::move(*this)); }
    template <int I, int J>
    auto transpose() const& { return shaped::transpose<I, J>(*this); }
    template <int I, int J>
    auto transpose() && { return shaped::transpose<I, J>(std::move(*this)); }
    template <Dim A, Dim B>
    auto transpose() const& { return shaped::transpose<A, B>(*this); }

private:
    // Storage the caller fills whole before anything reads it.
    Tensor(const extents_type& extents, detail::for_overwrite_t) { allocate(extents, detail::for_overwrite); }

    // Every constructor allocates here, after checking that the extents fit in memory: zero-filled,
    // or left to be overwritten.
    template <class... Fill>
    void allocate(const extents_type& extents, Fill... fill) {
        const std::size_t count = detail::checked_element_count("Tensor", dims_type{}, extents, sizeof(T));
        if constexpr (!detail::stores_inline<T, Ds...>) storage_ = storage_type(count, fill...);
        extents_ = extents;
    }

    template <class... I>
    std::size_t offset_of(I... index) const {
        if constexpr (sizeof...(I) != rank) {
            return 0;
        } else {
            const std::array<long long, rank> idx{static_cast<long long>(index)...};
            return detail::checked_offset(idx, extents(), strides(), dims_type{});
        }
    }

    storage_type storage_;
    extents_type extents_{};
};

template <class T, Dim... Ds>
Tensor(const Tensor<T, Ds...>&) -> Tensor<T, Ds...>;

template <class T, class List>
struct tensor_for_impl;
template <class T, Dim... Ds>
struct tensor_for_impl<T, dims<Ds...>> {
    using type = Tensor<T, Ds...>;
};
// The Tensor of elements T with the dims of List.
template <class T, class List>
using tensor_for = typename tensor_for_impl<T, List>::type;

// A Tensor of E's element type and dims, holding E's values.
template <Expression E>
auto eval(E&& e) {
    return tensor_for<value_type_of<E>, dims_of<E>>(std::forward<E>(e));
}
template <Failed E>
failed eval(E&&);

}  // namespace shaped
