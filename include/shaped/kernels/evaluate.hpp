#pragma once
// assign(target, source): runs an expression into a Tensor or View. The expression's root picks
// the kernel: a matmul (scaled or not) is one BLAS call straight into the target, a softmax is
// the row kernel, tril its own loop, a reduction its own, and everything elementwise one run
// of the elementwise machine (kernels/lower.hpp), vectorised, with no temporary. A matmul of a causal softmax with
// v, as the chapter writes attention, is the fused attention kernel (kernels/attention.hpp).
// What each root is comes from kernels/recognise.hpp; whether the target shares memory with
// what the source reads, from kernels/overlap.hpp.

#include <shaped/core/read_watch.hpp>
#include <shaped/kernels/attention.hpp>
#include <shaped/kernels/lower.hpp>
#include <shaped/kernels/matmul.hpp>
#include <shaped/kernels/overlap.hpp>
#include <shaped/kernels/quantized_matmul.hpp>
#include <shaped/kernels/recognise.hpp>
#include <shaped/kernels/rows.hpp>
#include <shaped/kernels/strided.hpp>

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

namespace shaped::kernels {

// The node kernels assign() hands a root to, defined below it.
namespace detail {
template <class Target>
bool rows_are_contiguous(const Target& t);
template <class Target, class Source>
bool biased_matmul_into(Target& target, const Source& source);
template <class Target, std::size_t Axis, class E, bool Log>
void softmax_into(Target& target, const softmax_node<Axis, E, Log>& s);
template <class Target, class E, class W, class Bi, bool Centered>
void layer_norm_into(Target& target, const layer_norm_node<E, W, Bi, Centered>& node);
template <class Target, class Op, std::size_t Axis, class E>
void reduce_into(Target& target, const reduce_node<Op, Axis, E>& r);
template <class Target, class E, bool Upper>
void triangle_into(Target& target, const triangle_node<E, Upper>& t);
template <class Target, class Table, class Ids>
void gather_into(Target& target, const gather_node<Table, Ids>& g);
template <class Target, class X, class F, class Rows, class Cols>
void quantized_linear_into(Target& target, const quantized_linear_node<X, F, Rows, Cols>& node);
}  // namespace detail

template <class Target, class Source>
void assign_apart(Target& target, const Source& source);

template <class Target, class Source>
void assign(Target& target, const Source& source) {
    if (detail::must_evaluate_aside(target, source)) {
        const auto aside = tensor_for<value_type_of<Source>, dims_of<Source>>(source);
        if constexpr (std::is_same_v<value_type_of<Source>, value_type_of<Target>>) detail::copy_into(target, aside);
        else run_elementwise(target, aside);
        return;
    }
    assign_apart(target, source);
}

// assign() where nothing the source reads can be written before it is read: the target shares
// no memory with it, or only element for element where the root's kernel allows that.
template <class Target, class Source>
void assign_apart(Target& target, const Source& source) {
    using T = value_type_of<Target>;
    if constexpr (detail::scaled_matmul<Source>::value) {
        if constexpr (detail::recognised_attention<Source>::value)
            if (assign_recognised_attention(target, source)) return;
        using recognised = detail::scaled_matmul<Source>;
        const auto& product = recognised::product(source);
        const T scale = static_cast<T>(recognised::scale(source));
        if (detail::rows_are_contiguous(target)) return matmul_into(target, product.lhs(), product.rhs(), scale);
        // Rows BLAS cannot write (a transposed view): the product aside, then copied in.
        auto aside = tensor_for<T, dims_of<Target>>(typename tensor_for<T, dims_of<Target>>::shape_type(target.extents()));
        matmul_into(aside, product.lhs(), product.rhs(), scale);
        return detail::copy_into(target, aside);
    } else if constexpr (detail::biased_matmul<Source>::value) {
        if (detail::biased_matmul_into(target, source)) return;
    } else if constexpr (detail::is_attention<Source>) {
        return assign_attention(target, source);
    } else if constexpr (detail::is_softmax<Source>) {
        return detail::softmax_into(target, source);
    } else if constexpr (detail::is_layer_norm<Source>) {
        return detail::layer_norm_into(target, source);
    } else if constexpr (detail::is_reduce<Source>) {
        return detail::reduce_into(target, source);
    } else if constexpr (detail::is_unit_dim<Source> && !Viewable<Source>) {
        // A dim of extent 1 more or fewer moves no element: the operand is written straight into
        // the target seen with the operand's dims (a keepdim reduction by the reduction's kernel).
        auto seen = shaped::detail::unit_dim_view<Source::unit_axis, dims_of<decltype(source.operand())>>(target);
        return assign_apart(seen, source.operand());
    } else if constexpr (detail::is_triangle<Source>) {
        return detail::triangle_into(target, source);
    } else if constexpr (detail::is_gather<Source>) {
        return detail::gather_into(target, source);
    } else if constexpr (detail::is_quantized_linear<Source>) {
        return detail::quantized_linear_into(target, source);
    }
    if constexpr (Viewable<Source> && std::is_same_v<value_type_of<Source>, T>) {
        return detail::copy_into(target, source);
    }
    run_elementwise(target, source);
}

}  // namespace shaped::kernels

namespace shaped {

namespace detail {
// Calls f on each Tensor and View an expression reads, through every node.
template <class E, class F>
void for_each_leaf(const E& e, const F& f) {
    if constexpr (Strided<E>) f(e);
    else for_each_child(e, [&](const auto& child) { for_each_leaf(child, f); });
}

// Shows a recording tape's watch what a plain evaluation reads (core/read_watch.hpp).
template <class Source>
void show_reads(const Source& source) {
    if (const read_watch* watch = active_read_watch) {
        for_each_leaf(source, [watch](const auto& leaf) {
            const auto bytes = kernels::detail::footprint_of(kernels::elements_of(leaf));
            watch->check(bytes.begin, bytes.end);
        });
    }
}
}  // namespace detail

// The tensor layer's extension point: Tensor's and View's assignments call assign_expression
// unqualified, and find this by argument-dependent lookup (tensor/view.hpp).
template <class Target, class Source>
void assign_expression(Target& target, const Source& source) {
    detail::show_reads(source);
    kernels::assign(target, source);
}
// Into a Tensor just allocated, which shares no memory with anything.
template <class Target, class Source>
void assign_expression(Target& target, const Source& source, detail::fresh_target) {
    detail::show_reads(source);
    kernels::assign_apart(target, source);
}

}  // namespace shaped

// ---- the node kernels --------------------------------------------------------------------------

namespace shaped::kernels::detail {

template <class Target>
bool rows_are_contiguous(const Target& t) {
    return t.strides()[rank_of<Target> - 1] == 1;
}

// target = product + bias, or false (nothing written) where the target shares memory with the
// product's operands or its rows are not contiguous, or the bias does not span a whole row, or
// a whole-array addend is not the target itself.
template <class Target, class Source>
bool biased_matmul_into(Target& target, const Source& source) {
    using recognised = biased_matmul<Source>;
    using T = value_type_of<Target>;
    const auto& product = recognised::product(source);
    const auto& bias = recognised::bias(source);
    const alias_probe<Target> probe{target, footprint_of(elements_of(target))};
    if (!rows_are_contiguous(target) || overlap_of(product.lhs(), probe) != overlap::none ||
        overlap_of(product.rhs(), probe) != overlap::none)
        return false;
    if constexpr (rank_of<decltype(bias)> != 1) {
        if (bias.data() != target.data() || bias.extents() != target.extents() || bias.strides() != target.strides())
            return false;
        matmul_into(target, product.lhs(), product.rhs(), T{1}, T{1});
        return true;
    }
    if (overlap_of(bias, probe) != overlap::none) return false;
    constexpr std::size_t r = rank_of<Target>;
    const auto extents = target.extents();
    const auto strides = target.strides();
    const std::size_t n = extents[r - 1];
    if (bias.extents()[0] != n) return false;
    for (batch_iterator<r - 1> row(extents); row; ++row) {
        T* out = target.data() + row.offset(strides);
        for (std::size_t j = 0; j < n; ++j) out[j] = bias.data()[static_cast<std::ptrdiff_t>(j) * bias.strides()[0]];
    }
    matmul_into(target, product.lhs(), product.rhs(), T{1}, T{1});
    return true;
}

template <class Target, std::size_t Axis, class E, bool Log>
void softmax_into(Target& target, const softmax_node<Axis, E, Log>& s) {
    using T = value_type_of<Target>;
    constexpr std::size_t last = rank_of<E> - 1;
    const std::size_t n = target.extents()[Axis];
    if (target.size() == 0) return;
    const std::size_t rows = target.size() / n;
    const auto normalise = [&](const T* in, T* out) {
        softmax_rows(in, static_cast<std::ptrdiff_t>(n), out, static_cast<std::ptrdiff_t>(n), rows, n, Log);
    };
    if constexpr (Axis == last) {
        if constexpr (Strided<E>) {
            const auto& src = s.operand();
            if (src.is_contiguous() && target.is_contiguous()) return normalise(src.data(), target.data());
        }
        // The operand evaluated into the target (or aside, where the target's rows lie apart),
        // its rows normalised in place.
        if (target.is_contiguous()) {
            assign(target, s.operand());
            return normalise(target.data(), target.data());
        }
        auto aside = tensor_for<T, dims_of<Target>>(s.operand());
        normalise(aside.data(), aside.data());
        copy_into(target, aside);
    } else {
        // Any other axis: swapped with the last, evaluated so, normalised by rows, and written
        // back through the same swap.
        constexpr int axis = static_cast<int>(Axis), end = static_cast<int>(last);
        auto swapped = tensor_for<T, dims_of<decltype(transpose<axis, end>(s.operand()))>>(transpose<axis, end>(s.operand()));
        normalise(swapped.data(), swapped.data());
        copy_into(target, transpose<axis, end>(swapped));
    }
}

// A layer norm's weight or bias as n contiguous elements of T: read in place where they are
// stored so, else copied once.
template <class T, class P>
struct contiguous_row {
    explicit contiguous_row(const P& p) {
        if constexpr (Strided<P> && std::is_same_v<std::remove_const_t<value_type_of<P>>, T>) {
            if (p.strides()[0] == 1) {
                data = p.data();
                return;
            }
        }
        copy.emplace(p);
        data = copy->data();
    }
    // data may point into copy, which a move would take along.
    contiguous_row(const contiguous_row&) = delete;
    contiguous_row& operator=(const contiguous_row&) = delete;
    std::optional<tensor_for<T, dims_of<P>>> copy;
    const T* data = nullptr;
};

// The row kernel over the target's rows: straight from the operand where it is stored
// contiguously, else the operand is evaluated into the target (or aside, for a strided target)
// and normalised there in place.
template <class Target, class E, class W, class Bi, bool Centered>
void layer_norm_into(Target& target, const layer_norm_node<E, W, Bi, Centered>& node) {
    using Node = layer_norm_node<E, W, Bi, Centered>;
    using T = value_type_of<Target>;
    const std::size_t n = target.extents()[rank_of<Target> - 1];
    const std::size_t rows = n ? target.size() / n : 0;
    const contiguous_row<T, std::remove_cvref_t<W>> weight(node.weight());
    const auto bias_row = [&] {
        if constexpr (Node::has_bias) return contiguous_row<T, std::remove_cvref_t<Bi>>(node.bias());
        else return nullptr;
    }();
    const T* bias = nullptr;
    if constexpr (Node::has_bias) bias = bias_row.data;
    const auto run = [&](const T* in, T* out) {
        layer_norm_rows(in, static_cast<std::ptrdiff_t>(n), out, static_cast<std::ptrdiff_t>(n), rows, n, weight.data,
                        bias, node.eps(), Centered);
    };
    if constexpr (Strided<std::remove_cvref_t<E>> && std::is_same_v<std::remove_const_t<value_type_of<E>>, T>) {
        const auto& src = node.operand();
        if (src.is_contiguous() && target.is_contiguous()) return run(src.data(), target.data());
    }
    if (target.is_contiguous()) {
        assign(target, node.operand());
        return run(target.data(), target.data());
    }
    auto aside = tensor_for<T, dims_of<Target>>(node.operand());
    run(aside.data(), aside.data());
    assign(target, aside);
}

// One reduction along the middle dim of a row-major (outer, n, inner) array, into the
// row-major (outer, inner) array `out`. Floating sums accumulate in double; an empty dim sums to
// 0 and has no mean or variance (NaN), as in torch; max and min (n > 0) propagate NaN, as
// torch's do.
template <class Op, class T>
void reduce_lines(const T* in, std::size_t outer, std::size_t n, std::size_t inner, T* out) {
    using acc_t = std::conditional_t<std::is_floating_point_v<T>, double, T>;
    std::vector<acc_t> acc(inner);
    for (std::size_t o = 0; o < outer; ++o) {
        const T* block = in + o * n * inner;
        T* result = out + o * inner;
        if constexpr (std::is_same_v<Op, op::max> || std::is_same_v<Op, op::min>) {
            std::copy(block, block + inner, result);
            for (std::size_t i = 1; i < n; ++i)
                for (std::size_t j = 0; j < inner; ++j) {
                    const T x = block[i * inner + j];
                    const bool is_nan = std::is_floating_point_v<T> && x != x;
                    if (is_nan || (std::is_same_v<Op, op::max> ? x > result[j] : x < result[j])) result[j] = x;
                }
        } else {
            std::fill(acc.begin(), acc.end(), acc_t{});
            for (std::size_t i = 0; i < n; ++i)
                for (std::size_t j = 0; j < inner; ++j) acc[j] += static_cast<acc_t>(block[i * inner + j]);
            const acc_t count = static_cast<acc_t>(n);
            for (std::size_t j = 0; j < inner; ++j) {
                if constexpr (std::is_same_v<Op, op::sum>) {
                    result[j] = static_cast<T>(acc[j]);
                } else if constexpr (std::is_same_v<Op, op::mean>) {
                    result[j] = static_cast<T>(acc[j] / count);
                } else {
                    static_assert(std::is_same_v<Op, op::var>);
                    // Unbiased, about the mean (two passes); fewer than two elements have none.
                    if (n < 2) {
                        result[j] = std::numeric_limits<T>::quiet_NaN();
                        continue;
                    }
                    const acc_t mean = acc[j] / count;
                    acc_t squares{};
                    for (std::size_t i = 0; i < n; ++i) {
                        const acc_t d = static_cast<acc_t>(block[i * inner + j]) - mean;
                        squares += d * d;
                    }
                    result[j] = static_cast<T>(squares / (count - 1));
                }
            }
        }
    }
}

template <class Target, class Op, std::size_t Axis, class E>
void reduce_into(Target& target, const reduce_node<Op, Axis, E>& r) {
    using T = value_type_of<Target>;
    const auto extents = r.operand().extents();
    const std::size_t n = extents[Axis];
    if constexpr (std::is_same_v<Op, op::max> || std::is_same_v<Op, op::min>) {
        if (n == 0) {
            using D = dim_at<Axis, dims_of<E>>;
            constexpr bool is_max = std::is_same_v<Op, op::max>;
            throw shape_error(shaped::detail::message({"shaped::", is_max ? "max" : "min", ": the reduced dim ",
                                                       shaped::detail::message_part::dim_extent{D::name.view(), n},
                                                       " is empty, and has no ", is_max ? "maximum" : "minimum"}));
        }
    }
    std::size_t outer = 1, inner = 1;
    for (std::size_t i = 0; i < Axis; ++i) outer *= extents[i];
    for (std::size_t i = Axis + 1; i < extents.size(); ++i) inner *= extents[i];
    if (outer == 0 || inner == 0) return;  // nothing to write
    const auto x = eval(r.operand());
    if (target.is_contiguous()) return reduce_lines<Op>(x.data(), outer, n, inner, target.data());
    auto aside = tensor_for<T, dims_of<Target>>(typename tensor_for<T, dims_of<Target>>::shape_type(target.extents()));
    reduce_lines<Op>(x.data(), outer, n, inner, aside.data());
    assign(target, aside);
}

template <class Target, class E, bool Upper>
void triangle_into(Target& target, const triangle_node<E, Upper>& t) {
    assign(target, t.operand());
    const auto extents = target.extents();
    const auto strides = target.strides();
    constexpr std::size_t r = rank_of<Target>;
    const std::size_t rows = extents[r - 2], cols = extents[r - 1];
    for (batch_iterator<r - 2> matrix(extents); matrix; ++matrix) {
        const std::ptrdiff_t base = matrix.offset(strides);
        for (std::size_t i = 0; i < rows; ++i)
            for (std::size_t j = 0; j < cols; ++j) {
                const long offset = static_cast<long>(j) - static_cast<long>(i);
                const bool keep = Upper ? offset >= t.diagonal() : offset <= t.diagonal();
                if (!keep)
                    target.data()[base + static_cast<std::ptrdiff_t>(i) * strides[r - 2] +
                                  static_cast<std::ptrdiff_t>(j) * strides[r - 1]] = value_type_of<Target>{};
            }
    }
}

// x's rows contiguous (evaluated, or copied from a strided view), then the quantized kernel
// straight into a Tensor target; into a view's elements through a Tensor aside.
template <class Target, class X, class F, class Rows, class Cols>
void quantized_linear_into(Target& target, const quantized_linear_node<X, F, Rows, Cols>& node) {
    const auto x = tensor_for<float, dims_of<X>>(node.operand());
    const auto extents = x.extents();
    std::size_t n = 1;
    for (std::size_t i = 0; i + 1 < extents.size(); ++i) n *= extents[i];
    if constexpr (Target::owns_storage && std::is_same_v<value_type_of<Target>, float>) {
        quantized_matmul(weight_of(node.matrix()), x.data(), n, target.data());
    } else {
        auto aside = tensor_for<float, dims_of<Target>>(typename tensor_for<float, dims_of<Target>>::shape_type(target.extents()));
        quantized_matmul(weight_of(node.matrix()), x.data(), n, aside.data());
        if constexpr (std::is_same_v<value_type_of<Target>, float>) copy_into(target, aside);
        else run_elementwise(target, aside);
    }
}

// Each id checked, then its row copied: target (..., C) from table (V, C). A target that shares
// memory with the table is filled aside first.
template <class Target, class Table, class Ids>
void gather_into(Target& target, const gather_node<Table, Ids>& g) {
    using T = value_type_of<Target>;
    using Id = value_type_of<Ids>;
    using V = dim_at<0, dims_of<Table>>;
    const auto table_op = as_strided<T>(g.table());
    const auto& table = table_op.elements;
    const alias_probe<Target> probe{target, footprint_of(elements_of(target))};
    if (footprint_of(table).meets(probe.span)) {
        auto aside = tensor_for<T, dims_of<Target>>(typename tensor_for<T, dims_of<Target>>::shape_type(target.extents()));
        gather_into(aside, g);
        return copy_into(target, aside);
    }
    const auto ids = tensor_for<Id, dims_of<Ids>>(g.ids());
    const std::size_t rows = table.extents[0], width = table.extents[1];
    for (std::size_t i = 0; i < ids.size(); ++i) {
        const Id id = ids.data()[i];
        if (std::cmp_less(id, 0) || std::cmp_greater_equal(id, rows))
            throw shape_error(shaped::detail::message(
                {g.who(), ": id ",
                 std::is_signed_v<Id> ? shaped::detail::message_part(static_cast<long long>(id))
                                      : shaped::detail::message_part(static_cast<unsigned long long>(id)),
                 " (element ", i, " of the ids) is outside the table's ",
                 shaped::detail::message_part::dim_extent{V::name.view(), rows}, " rows"}));
    }
    constexpr std::size_t r = rank_of<Target>;
    const auto extents = target.extents();
    const auto strides = target.strides();
    std::size_t i = 0;
    for (batch_iterator<r - 1> row(extents); row; ++row, ++i) {
        T* out = target.data() + row.offset(strides);
        const T* in = table.data + static_cast<std::ptrdiff_t>(ids.data()[i]) * table.strides[0];
        for (std::size_t c = 0; c < width; ++c) out[static_cast<std::ptrdiff_t>(c) * strides[r - 1]] = in[static_cast<std::ptrdiff_t>(c) * table.strides[1]];
    }
}

}  // namespace shaped::kernels::detail
