#pragma once
// View<T, Dims...>: a non-owning, strided window on elements owned elsewhere (a Tensor, a
// cache's filled prefix, a slice). T is const for read-only views. A view is valid only while
// its owner lives and is not reallocated.

#include <shaped/expr.hpp>
#include <shaped/tensor/diagnostics.hpp>
#include <shaped/tensor/layout.hpp>

#include <array>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace shaped {

namespace detail {

// The offset of an index, each coordinate checked against its dim (negative counts from the end
// is not supported: shaped indices are positions).
template <std::size_t R, Dim... Ds>
std::ptrdiff_t checked_offset(const std::array<long long, R>& index, const std::array<std::size_t, R>& extents,
                              const std::array<std::ptrdiff_t, R>& strides, dims<Ds...>) {
    constexpr std::array<std::string_view, R> names{Ds::name.view()...};
    std::ptrdiff_t offset = 0;
    for (std::size_t i = 0; i < R; ++i) {
        if (index[i] < 0 || static_cast<std::size_t>(index[i]) >= extents[i])
            throw std::out_of_range(message({"shaped: index ", index[i], " is out of range for dim ",
                                             message_part::dim_extent{names[i], extents[i]}}));
        offset += static_cast<std::ptrdiff_t>(index[i]) * strides[i];
    }
    return offset;
}

// Whether the dims a target declares meet the dims of what is assigned to it; where not, the
// assignment instantiates assign_diag, which shows both lists.
template <class Target, class Source>
inline constexpr bool assignable = [] {
    if constexpr (Target::rank != Source::rank) return false;
    else
        return []<std::size_t... I>(std::index_sequence<I...>) {
            return (can_meet<dim_at<I, Target>, dim_at<I, Source>> && ...);
        }(std::make_index_sequence<Target::rank>{});
}();

template <class Target, class Source>
using assign_diag = diag::assign_dims<Target, Source>;

// Makes the Views view_of returns (tensor/view_of.hpp).
struct stored_layout;

}  // namespace detail

template <class T, Dim... Ds>
class View : public expression_base {
public:
    using value_type = std::remove_const_t<T>;
    using element_type = T;
    using dims_type = dims<Ds...>;
    using shape_type = Shape<Ds...>;
    static constexpr bool owns_storage = false;
    static constexpr std::size_t rank = sizeof...(Ds);
    using extents_type = std::array<std::size_t, rank>;
    using strides_type = std::array<std::ptrdiff_t, rank>;

    View(T* data, const extents_type& extents, const strides_type& strides) : data_(data), layout_{extents, strides} {
        detail::check_extents_fit("View", dims_type{}, extents);
        detail::checked_element_count("View", dims_type{}, extents, sizeof(T));
    }

    // A read-only view of a writable one.
    operator View<const value_type, Ds...>() const
        requires(!std::is_const_v<T>)
    {
        return {data_, layout_.extents, layout_.strides};
    }

    // Writes an expression's values through the view (only into a writable view).
    // Dims that do not meet pick the overload only declared, whose return type is the failed check.
    template <Expression E>
        requires(!std::is_const_v<T> && detail::assignable<dims_type, dims_of<E>>)
    const View& operator=(const E& source) const {
        detail::check_extents_equal("assign", dims_type{}, layout_.extents, source.extents());
        // Evaluating is the kernels layer's work: this unqualified call finds, by argument-
        // dependent lookup where it is instantiated, the shaped::assign_expression(target,
        // source) that kernels/evaluate.hpp defines. This layer declares nothing of kernels.
        assign_expression(*this, source);
        return *this;
    }
    template <Expression E>
        requires(!std::is_const_v<T> && !detail::assignable<dims_type, dims_of<E>>)
    detail::assign_diag<dims_type, dims_of<E>> operator=(const E&) const;

    // One view assigned to another of the same type writes elements too (PyTorch's x[0] = x[1]);
    // the implicit assignment would rebind this view and copy nothing.
    View(const View&) = default;
    const View& operator=(const View& source) const
        requires(!std::is_const_v<T>)
    {
        return operator= <View>(source);
    }

    const extents_type& extents() const { return layout_.extents; }
    const strides_type& strides() const { return layout_.strides; }
    shape_type shape() const { return shape_type(layout_.extents); }
    T* data() const { return data_; }
    std::size_t size() const { return shape().numel(); }

    bool is_contiguous() const {
        std::ptrdiff_t stride = 1;
        for (std::size_t i = rank; i-- > 0;) {
            if (layout_.extents[i] != 1 && layout_.strides[i] != stride) return false;
            stride *= static_cast<std::ptrdiff_t>(layout_.extents[i]);
        }
        return true;
    }

    template <std::integral... I>
    T& operator()(I... index) const {
        static_assert(sizeof...(I) == rank, "shaped::View: " SHAPED_RULE_INDEX_COUNT);
        const std::array<long long, rank> idx{static_cast<long long>(index)...};
        return data_[detail::checked_offset(idx, layout_.extents, layout_.strides, dims_type{})];
    }

    auto mT() const { return shaped::mT(*this); }
    template <int I, int J>
    auto transpose() const { return shaped::transpose<I, J>(*this); }
    template <Dim A, Dim B>
    auto transpose() const { return shaped::transpose<A, B>(*this); }

private:
    // view_of's path (tensor/view_of.hpp): the layout of elements already stored, which fits by
    // construction, so that reading an operand in place costs no checks.
    friend struct detail::stored_layout;
    struct unchecked {};
    View(unchecked, T* data, const extents_type& extents, const strides_type& strides)
        : data_(data), layout_{extents, strides} {}

    T* data_;
    strided_layout<rank> layout_;
};


template <class T, class List>
struct view_for_impl;
template <class T, Dim... Ds>
struct view_for_impl<T, dims<Ds...>> {
    using type = View<T, Ds...>;
};
// The View of elements T with the dims of List.
template <class T, class List>
using view_for = typename view_for_impl<T, List>::type;

template <class S>
concept Strided = Expression<S> && requires(const S& s) {
    s.data();
    s.strides();
};

namespace op {
struct slice {};
struct select {};
}  // namespace op

namespace detail {
template <class S>
using view_element_t = std::remove_pointer_t<decltype(std::declval<S&>().data())>;

// A View taken of a stored expression x (a slice, a select, a split, view_of): the View itself,
// or what x makes of it where x is more than its elements (a value being differentiated keeps
// its place on the tape in its views: train/traced.hpp).
template <class S, class V>
auto rebased(const S& x, V view) {
    if constexpr (requires { x.rebased(view); }) return x.rebased(view);
    else return view;
}

}  // namespace detail

// slice<D>(t, begin, end): elements begin..end-1 along dim D (by name, or by position), as a
// View whose D is dynamic. Out-of-range bounds throw, naming the dim.
template <Dim D, Strided S>
    requires detail::names_one<D, dims_of<S>>
auto slice(S& s, std::size_t begin, std::size_t end) {
    using List = dims_of<S>;
    constexpr std::size_t axis = index_named<D, List>;
    auto extents = s.extents();
    auto strides = s.strides();
    if (begin > end || end > extents[axis])
        throw shape_error(detail::message({"shaped::slice: range [", begin, ", ", end, ") does not fit dim ",
                                           detail::message_part::dim_extent{D::name.view(), extents[axis]}}));
    extents[axis] = end - begin;
    using result = view_for<detail::view_element_t<S>, replace_at<axis, dynamic_of<dim_at<axis, List>>, List>>;
    return detail::rebased(s, result(s.data() + static_cast<std::ptrdiff_t>(begin) * strides[axis], extents, strides));
}
template <Dim D, Strided S>
    requires(!detail::names_one<D, dims_of<S>>)
detail::named_diag<op::slice, D, dims_of<S>> slice(S&, std::size_t, std::size_t);
template <Dim D, Failed S>
failed slice(S&&, std::size_t, std::size_t);

// slice<D, Begin, End>(t): the same with bounds known to the compiler; D's extent in the View is
// static, End - Begin.
template <Dim D, std::size_t Begin, std::size_t End, Strided S>
    requires detail::names_one<D, dims_of<S>>
auto slice(S& s) {
    using List = dims_of<S>;
    constexpr std::size_t axis = index_named<D, List>;
    using Old = dim_at<axis, List>;
    static_assert(Begin <= End, "shaped::slice: the range's end comes before its begin");
    if constexpr (Old::is_static) static_assert(End <= Old::extent, "shaped::slice: the range does not fit the dim");
    auto window = slice<D>(s, Begin, End);
    using result = view_for<detail::view_element_t<S>, replace_at<axis, dim<Old::name, End - Begin>, List>>;
    return detail::rebased(s, result(window.data(), window.extents(), window.strides()));
}
template <Dim D, std::size_t Begin, std::size_t End, Strided S>
    requires(!detail::names_one<D, dims_of<S>>)
detail::named_diag<op::slice, D, dims_of<S>> slice(S&);
template <Dim D, std::size_t Begin, std::size_t End, Failed S>
failed slice(S&&);

// select<D>(t, i): the slice at index i along dim D, without that dim (t[i] for the first).
template <Dim D, Strided S>
    requires detail::names_one<D, dims_of<S>>
auto select(S& s, std::size_t index) {
    using List = dims_of<S>;
    constexpr std::size_t axis = index_named<D, List>;
    const auto extents = s.extents();
    const auto strides = s.strides();
    if (index >= extents[axis])
        throw std::out_of_range(detail::message({"shaped::select: index ", index, " is out of range for dim ",
                                                 detail::message_part::dim_extent{D::name.view(), extents[axis]}}));
    constexpr std::size_t r = List::rank;
    std::array<std::size_t, r - 1> e{};
    std::array<std::ptrdiff_t, r - 1> st{};
    for (std::size_t i = 0, j = 0; i < r; ++i)
        if (i != axis) {
            e[j] = extents[i];
            st[j++] = strides[i];
        }
    using result = view_for<detail::view_element_t<S>, drop_at<axis, List>>;
    return detail::rebased(s, result(s.data() + static_cast<std::ptrdiff_t>(index) * strides[axis], e, st));
}
template <Dim D, Strided S>
    requires(!detail::names_one<D, dims_of<S>>)
detail::named_diag<op::select, D, dims_of<S>> select(S&, std::size_t);
template <Dim D, Failed S>
failed select(S&&, std::size_t);

}  // namespace shaped
