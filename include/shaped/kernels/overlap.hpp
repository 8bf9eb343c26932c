#pragma once
// Aliasing: whether writing a target while reading an expression could read an element already
// written, so that the expression must be evaluated aside first. must_evaluate_aside is what
// assign() asks; a footprint (the bytes a strided array's elements lie in) is the one test of
// memory shared that every kernel makes, the fused attention kernel's of q, k and v included.

#include <shaped/kernels/recognise.hpp>
#include <shaped/kernels/strided.hpp>

#include <algorithm>
#include <cstddef>
#include <tuple>

namespace shaped::kernels::detail {

// Whether writing the target while reading the source could read an element already written.
// Always inlined, as footprint_of: on a static Tensor the whole test folds to a few compares.
template <class Target, class Source>
[[gnu::always_inline]] inline bool must_evaluate_aside(const Target& target, const Source& source);

// The bytes [begin, end) a strided array's elements lie in; begin == end where it has none.
struct footprint {
    const std::byte* begin;
    const std::byte* end;

    bool meets(const footprint& other) const {
        return begin != end && other.begin != other.end && begin < other.end && other.begin < end;
    }
};

template <class T, std::size_t R>
[[gnu::always_inline]] inline footprint footprint_of(const strided<T, R>& s);

// How an expression's reads overlap the target's elements: not at all, element for element
// (safe for elementwise work), or otherwise (the source must be evaluated aside first).
enum class overlap { none, aligned, unsafe };

template <class Target>
struct alias_probe {
    const Target& target;
    footprint span;
};

// Declared together first: the overloads recurse through node types in any order.
template <Strided S, class Target>
overlap overlap_of(const S& s, const alias_probe<Target>& probe);
template <class T, class Target>
overlap overlap_of(const scalar<T>&, const alias_probe<Target>&);
template <class Op, class... Es, class Target>
overlap overlap_of(const elementwise<Op, Es...>& e, const alias_probe<Target>& probe);
template <class E, class NewDims, class Target>
overlap overlap_of(const rename_node<E, NewDims>& r, const alias_probe<Target>& probe);
template <class E, std::array<std::size_t, rank_of<E>> Perm, class Target>
overlap overlap_of(const permute_node<E, Perm>& p, const alias_probe<Target>& probe);
template <class E, bool Upper, class Target>
overlap overlap_of(const triangle_node<E, Upper>& t, const alias_probe<Target>& probe);
template <class E, std::size_t Axis, class NewDims, class Target>
overlap overlap_of(const unit_dim_node<E, Axis, NewDims>& u, const alias_probe<Target>& probe);
template <Expression E, class Target>
    requires(!Strided<E>)
overlap overlap_of(const E&, const alias_probe<Target>&);

// ---- implementation ----------------------------------------------------------------------------

template <class Target, class Source>
[[gnu::always_inline]] inline bool must_evaluate_aside(const Target& target, const Source& source) {
    const alias_probe<Target> probe{target, footprint_of(elements_of(target))};
    const auto apart = [&](const auto& operand) { return overlap_of(operand, probe) == overlap::none; };
    if constexpr (scaled_matmul<Source>::value) {  // matmul writes while it reads
        const auto& product = scaled_matmul<Source>::product(source);
        return !apart(product.lhs()) || !apart(product.rhs());
    } else if constexpr (is_layer_norm<Source>) {  // rows may run in place; weight and bias are read throughout
        bool weights_apart = apart(source.weight());
        if constexpr (Source::has_bias) weights_apart = weights_apart && apart(source.bias());
        return !weights_apart || overlap_of(source.operand(), probe) == overlap::unsafe;
    } else if constexpr (is_softmax<Source>) {  // rows may run in place
        return overlap_of(source.operand(), probe) == overlap::unsafe;
    } else if constexpr (is_reduce<Source>) {  // a reduction may not
        return !apart(source.operand());
    } else if constexpr (is_unit_dim<Source> && !Viewable<Source>) {  // the operand is written into the target
        return must_evaluate_aside(target, source.operand());
    } else {
        return overlap_of(source, probe) == overlap::unsafe;
    }
}

// From the element with the lowest address to the one with the highest: a negative stride
// reaches below data. Always inlined: a static Tensor's extents and strides are then constants,
// and its footprint is folded at compile time, as it was when each Tensor type had its own.
template <class T, std::size_t R>
[[gnu::always_inline]] inline footprint footprint_of(const strided<T, R>& s) {
    std::ptrdiff_t low = 0, high = 0;
    for (std::size_t i = 0; i < R; ++i) {
        if (s.extents[i] == 0) return {nullptr, nullptr};
        const std::ptrdiff_t reach = static_cast<std::ptrdiff_t>(s.extents[i] - 1) * s.strides[i];
        (reach < 0 ? low : high) += reach;
    }
    const auto* base = reinterpret_cast<const std::byte*>(s.data);
    constexpr auto size = static_cast<std::ptrdiff_t>(sizeof(T));
    return {base + low * size, base + (high + 1) * size};
}

template <Strided S, class Target>
overlap overlap_of(const S& s, const alias_probe<Target>& probe) {
    if (!footprint_of(elements_of(s)).meets(probe.span)) return overlap::none;
    // Held by value: a Tensor returns its extents and strides as new arrays on every call.
    // One declaration each: operand and target may differ in rank, so in type.
    const auto extents = s.extents();
    const auto target_extents = probe.target.extents();
    const auto strides = s.strides();
    const auto target_strides = probe.target.strides();
    const bool same = static_cast<const void*>(s.data()) == static_cast<const void*>(probe.target.data()) &&
                      std::equal(extents.begin(), extents.end(), target_extents.begin(), target_extents.end()) &&
                      std::equal(strides.begin(), strides.end(), target_strides.begin(), target_strides.end());
    return same ? overlap::aligned : overlap::unsafe;
}
template <class T, class Target>
overlap overlap_of(const scalar<T>&, const alias_probe<Target>&) {
    return overlap::none;
}
template <class Op, class... Es, class Target>
overlap overlap_of(const elementwise<Op, Es...>& e, const alias_probe<Target>& probe) {
    return std::apply([&](const auto&... o) { return std::max({overlap::none, overlap_of(o, probe)...}); },
                      e.operands());
}
template <class E, class NewDims, class Target>
overlap overlap_of(const rename_node<E, NewDims>& r, const alias_probe<Target>& probe) {
    return overlap_of(r.operand(), probe);
}
template <class E, std::array<std::size_t, rank_of<E>> Perm, class Target>
overlap overlap_of(const permute_node<E, Perm>& p, const alias_probe<Target>& probe) {
    return overlap_of(p.operand(), probe) == overlap::none ? overlap::none : overlap::unsafe;
}
template <class E, bool Upper, class Target>
overlap overlap_of(const triangle_node<E, Upper>& t, const alias_probe<Target>& probe) {
    return overlap_of(t.operand(), probe);
}
// A dim of extent 1 more or fewer: the operand's reads, laid out otherwise than the target.
template <class E, std::size_t Axis, class NewDims, class Target>
overlap overlap_of(const unit_dim_node<E, Axis, NewDims>& u, const alias_probe<Target>& probe) {
    return overlap_of(u.operand(), probe) == overlap::none ? overlap::none : overlap::unsafe;
}
// matmul, softmax and reductions nested in a larger expression run into a temporary first.
template <Expression E, class Target>
    requires(!Strided<E>)
overlap overlap_of(const E&, const alias_probe<Target>&) {
    return overlap::none;
}

}  // namespace shaped::kernels::detail
