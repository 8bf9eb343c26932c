#pragma once
// assign(target, source): runs an expression into a Tensor or View. The expression's root picks
// the kernel: a matmul (scaled or not) is one BLAS call straight into the target, a softmax is
// the row kernel, tril its own loop, a reduction xtensor's reducer, and everything elementwise
// is one xtensor assignment, vectorised, with no temporary. A matmul of a causal softmax with
// v, as the chapter writes attention, is the fused attention kernel (kernels/attention.hpp).

#include <shaped/kernels/attention.hpp>
#include <shaped/kernels/lower.hpp>
#include <shaped/kernels/matmul.hpp>
#include <shaped/kernels/rows.hpp>
#include <shaped/kernels/strided.hpp>

#include <xtensor/xnoalias.hpp>
#include <xtensor/xreducer.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace shaped::kernels {

// The entry point, defined last: the node kernels before it run their operands through it.
template <class Target, class Source>
void assign(Target& target, const Source& source);

namespace detail {

// How an expression's reads overlap the target's elements: not at all, element for element
// (safe for elementwise work), or otherwise (the source must be evaluated aside first).
enum class overlap { none, aligned, unsafe };

struct footprint {
    const std::byte* begin;
    const std::byte* end;
};

template <class S>
footprint footprint_of(const S& s) {
    const auto* data = reinterpret_cast<const std::byte*>(s.data());
    std::ptrdiff_t last = 0;
    const auto e = s.extents();
    const auto st = s.strides();
    for (std::size_t i = 0; i < e.size(); ++i) {
        if (e[i] == 0) return {data, data};
        last += static_cast<std::ptrdiff_t>(e[i] - 1) * std::abs(st[i]);
    }
    return {data, data + (last + 1) * static_cast<std::ptrdiff_t>(sizeof(value_type_of<S>))};
}

template <class Target>
struct alias_probe {
    const Target& target;
    footprint span;
};

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
template <Expression E, class Target>
    requires(!Strided<E>)
overlap overlap_of(const E&, const alias_probe<Target>&);

template <Strided S, class Target>
overlap overlap_of(const S& s, const alias_probe<Target>& probe) {
    const footprint mine = footprint_of(s);
    if (mine.end <= probe.span.begin || mine.begin >= probe.span.end) return overlap::none;
    // Held by value: a Tensor returns its extents and strides as new arrays on every call.
    // One declaration each: operand and target may differ in rank, so in type.
    const auto extents = s.extents();
    const auto target_extents = probe.target.extents();
    const auto strides = s.strides();
    const auto target_strides = probe.target.strides();
    const bool same = reinterpret_cast<const std::byte*>(s.data()) == probe.span.begin &&
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
// matmul, softmax and reductions nested in a larger expression run into a temporary first.
template <Expression E, class Target>
    requires(!Strided<E>)
overlap overlap_of(const E&, const alias_probe<Target>&) {
    return overlap::none;
}

// The target as a writable xtensor expression.
template <class T, Dim... Ds>
auto& writable(Tensor<T, Ds...>& t) {
    return t.xtensor();
}
template <class T, Dim... Ds>
auto writable(const View<T, Ds...>& v) {
    return xt::adapt(v.data(), v.size(), xt::no_ownership(), v.extents(), v.strides());
}

template <class Target>
bool rows_are_contiguous(const Target& t) {
    return t.strides()[rank_of<Target> - 1] == 1;
}

// Recognised scalings of a matmul: matmul * s, s * matmul, matmul / s.
template <class E>
struct scaled_matmul : std::false_type {};
template <class L, class R, class T>
struct scaled_matmul<elementwise<op::multiply, matmul_node<L, R>, scalar<T>>> : std::true_type {
    static auto& product(const auto& e) { return e.template operand<0>(); }
    static T scale(const auto& e) { return e.template operand<1>().value; }
};
template <class L, class R, class T>
struct scaled_matmul<elementwise<op::multiply, scalar<T>, matmul_node<L, R>>> : std::true_type {
    static auto& product(const auto& e) { return e.template operand<1>(); }
    static T scale(const auto& e) { return e.template operand<0>().value; }
};
template <class L, class R, class T>
struct scaled_matmul<elementwise<op::divide, matmul_node<L, R>, scalar<T>>> : std::true_type {
    static auto& product(const auto& e) { return e.template operand<0>(); }
    static T scale(const auto& e) { return T{1} / e.template operand<1>().value; }
};

// A matmul plus a bias along its last dim, as a Linear layer with bias computes: the bias is
// written into the target and the product added to it by the same GEMM, with no temporary.
// The addend may also be the target itself (out = out + matmul(a, b), a residual connection):
// the GEMM then accumulates onto it.
template <class E>
struct biased_matmul : std::false_type {};
template <class Bias, class L, class R>
inline constexpr bool is_matmul_addend =
    Strided<std::remove_cvref_t<Bias>> && (rank_of<Bias> == 1 || rank_of<Bias> == rank_of<matmul_node<L, R>>);
template <class L, class R, class Bias>
    requires is_matmul_addend<Bias, L, R>
struct biased_matmul<elementwise<op::add, matmul_node<L, R>, Bias>> : std::true_type {
    static auto& product(const auto& e) { return e.template operand<0>(); }
    static auto& bias(const auto& e) { return e.template operand<1>(); }
};
template <class Bias, class L, class R>
    requires is_matmul_addend<Bias, L, R>
struct biased_matmul<elementwise<op::add, Bias, matmul_node<L, R>>> : std::true_type {
    static auto& product(const auto& e) { return e.template operand<1>(); }
    static auto& bias(const auto& e) { return e.template operand<0>(); }
};

// target = product + bias, or false (nothing written) where the target shares memory with the
// product's operands or its rows are not contiguous, or the bias does not span a whole row, or
// a whole-array addend is not the target itself.
template <class Target, class Source>
bool biased_matmul_into(Target& target, const Source& source) {
    using recognised = biased_matmul<Source>;
    using T = value_type_of<Target>;
    const auto& product = recognised::product(source);
    const auto& bias = recognised::bias(source);
    const alias_probe<Target> probe{target, footprint_of(target)};
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

template <class T>
inline constexpr bool is_matmul = false;
template <class L, class R>
inline constexpr bool is_matmul<matmul_node<L, R>> = true;

template <class T>
inline constexpr bool is_attention = false;
template <class Q, class K, class V>
inline constexpr bool is_attention<attention_node<Q, K, V>> = true;

template <class T>
inline constexpr bool is_softmax = false;
template <std::size_t Axis, class E, bool Log>
inline constexpr bool is_softmax<softmax_node<Axis, E, Log>> = true;

template <class T>
inline constexpr bool is_reduce = false;
template <class Op, std::size_t Axis, class E>
inline constexpr bool is_reduce<reduce_node<Op, Axis, E>> = true;

template <class T>
inline constexpr bool is_triangle = false;
template <class E, bool Upper>
inline constexpr bool is_triangle<triangle_node<E, Upper>> = true;

template <class T>
inline constexpr bool is_layer_norm = false;
template <class E, class W, class Bi>
inline constexpr bool is_layer_norm<layer_norm_node<E, W, Bi>> = true;

// Whether an expression reads bool elements from memory: a mask stored in a Tensor or View.
template <class E>
inline constexpr bool reads_bool_storage = Strided<E> && std::is_same_v<value_type_of<E>, bool>;
template <class Op, class... Es>
inline constexpr bool reads_bool_storage<elementwise<Op, Es...>> = (reads_bool_storage<std::remove_cvref_t<Es>> || ...);
template <class E, class NewDims>
inline constexpr bool reads_bool_storage<rename_node<E, NewDims>> = reads_bool_storage<std::remove_cvref_t<E>>;
template <class E, std::array<std::size_t, rank_of<E>> Perm>
inline constexpr bool reads_bool_storage<permute_node<E, Perm>> = reads_bool_storage<std::remove_cvref_t<E>>;

// Whether writing the target while reading the source could read an element already written.
template <class Target, class Source>
bool must_evaluate_aside(const Target& target, const Source& source) {
    const alias_probe<Target> probe{target, footprint_of(target)};
    if constexpr (scaled_matmul<Source>::value) {
        return must_evaluate_aside(target, scaled_matmul<Source>::product(source));
    } else if constexpr (requires { source.lhs(); }) {  // matmul writes while it reads
        return overlap_of(source.lhs(), probe) != overlap::none || overlap_of(source.rhs(), probe) != overlap::none;
    } else if constexpr (is_layer_norm<Source>) {  // rows may run in place; weight and bias are read throughout
        bool apart = overlap_of(source.weight(), probe) == overlap::none;
        if constexpr (Source::has_bias) apart = apart && overlap_of(source.bias(), probe) == overlap::none;
        return !apart || overlap_of(source.operand(), probe) == overlap::unsafe;
    } else if constexpr (requires { Source::axis; }) {  // softmax rows may run in place; reductions not
        const overlap o = overlap_of(source.operand(), probe);
        return requires { Source::log; } ? o == overlap::unsafe : o != overlap::none;
    } else {
        return overlap_of(source, probe) == overlap::unsafe;
    }
}

template <class Target, std::size_t Axis, class E, bool Log>
void softmax_into(Target& target, const softmax_node<Axis, E, Log>& s) {
    using T = value_type_of<Target>;
    constexpr std::size_t last = rank_of<E> - 1;
    const auto extents = target.extents();
    const std::size_t n = extents[Axis];
    if (target.size() == 0) return;
    if constexpr (Axis == last) {
        if constexpr (Strided<E>) {
            const auto& src = s.operand();
            if (src.is_contiguous() && target.is_contiguous()) {
                softmax_rows(src.data(), static_cast<std::ptrdiff_t>(n), target.data(), static_cast<std::ptrdiff_t>(n),
                             n ? src.size() / n : 0, n, Log);
                return;
            }
        }
        // Evaluate the operand into the target, then normalise its rows in place.
        assign(target, s.operand());
        if (target.is_contiguous()) {
            softmax_rows(target.data(), static_cast<std::ptrdiff_t>(n), target.data(), static_cast<std::ptrdiff_t>(n),
                         n ? target.size() / n : 0, n, Log);
            return;
        }
    }
    // Any other axis (or rows that lie apart): xtensor's reducers, numerically stabilised by the
    // max. Each reduction is evaluated before it broadcasts: xtensor 0.24 misreads a lazy
    // keep_dims reducer broadcast along a middle axis. The result is written with noalias, which
    // follows a strided target's strides (plain assignment copies a temporary in linearly).
    auto x = eval(s.operand());
    const auto& xs = x.xtensor();
    const auto largest = xt::eval(xt::amax(xs, {Axis}, xt::keep_dims));
    auto shifted = xt::eval(xs - largest);
    if constexpr (Log) {
        const auto log_sum = xt::eval(xt::log(xt::sum(xt::exp(shifted), {Axis}, xt::keep_dims)));
        xt::noalias(writable(target)) = shifted - log_sum;
    } else {
        auto e = xt::eval(xt::exp(shifted));
        const auto total = xt::eval(xt::sum(e, {Axis}, xt::keep_dims));
        xt::noalias(writable(target)) = e / total;
    }
    (void)sizeof(T);
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
template <class Target, class E, class W, class Bi>
void layer_norm_into(Target& target, const layer_norm_node<E, W, Bi>& node) {
    using T = value_type_of<Target>;
    const std::size_t n = target.extents()[rank_of<Target> - 1];
    const std::size_t rows = n ? target.size() / n : 0;
    const contiguous_row<T, std::remove_cvref_t<W>> weight(node.weight());
    const auto bias_row = [&] {
        if constexpr (layer_norm_node<E, W, Bi>::has_bias) return contiguous_row<T, std::remove_cvref_t<Bi>>(node.bias());
        else return nullptr;
    }();
    const T* bias = nullptr;
    if constexpr (layer_norm_node<E, W, Bi>::has_bias) bias = bias_row.data;
    const auto run = [&](const T* in, T* out) {
        layer_norm_rows(in, static_cast<std::ptrdiff_t>(n), out, static_cast<std::ptrdiff_t>(n), rows, n, weight.data,
                        bias, node.eps());
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
            throw shape_error(std::string("shaped::") + (std::is_same_v<Op, op::max> ? "max" : "min") +
                              ": the reduced dim " + shaped::detail::describe_dim(D::name.view(), n) +
                              " is empty, and has no " + (std::is_same_v<Op, op::max> ? "maximum" : "minimum"));
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

// A copy from stored elements (a Tensor or View, maybe transposed or renamed) of the target's
// element type: a loop over rows, each moved whole where its elements are adjacent on both
// sides, rather than xtensor's element-by-element stepper (which costs microseconds even for a
// KV cache's one new row).
template <class Target, class Source>
void copy_into(Target& target, const Source& source) {
    using T = value_type_of<Target>;
    constexpr std::size_t r = rank_of<Target>;
    const auto from = as_strided<T>(source).elements;
    if constexpr (r == 0) {
        target.data()[0] = from.data[0];
    } else {
        const auto extents = target.extents();
        const auto strides = target.strides();
        const std::size_t n = extents[r - 1];
        batch_iterator<r - 1> row(extents);
        if (!row || n == 0) return;
        const bool adjacent = (strides[r - 1] == 1 && from.strides[r - 1] == 1) || n == 1;
        for (; row; ++row) {
            T* dst = target.data() + row.offset(strides);
            const T* src = from.data + row.offset(from.strides);
            if (adjacent) std::memmove(dst, src, n * sizeof(T));
            else
                for (std::size_t j = 0; j < n; ++j)
                    dst[static_cast<std::ptrdiff_t>(j) * strides[r - 1]] = src[static_cast<std::ptrdiff_t>(j) * from.strides[r - 1]];
        }
    }
}

}  // namespace detail

template <class Target, class Source>
void assign(Target& target, const Source& source) {
    using T = value_type_of<Target>;
    if (detail::must_evaluate_aside(target, source)) {
        auto aside = tensor_for<value_type_of<Source>, dims_of<Source>>(source);
        xt::noalias(detail::writable(target)) = aside.xtensor();
        return;
    }
    if constexpr (detail::is_matmul<Source>) {
        if constexpr (detail::recognised_attention<Source>::value)
            if (assign_recognised_attention(target, source)) return;
        if (detail::rows_are_contiguous(target)) return matmul_into(target, source.lhs(), source.rhs(), T{1});
    } else if constexpr (detail::scaled_matmul<Source>::value) {
        using recognised = detail::scaled_matmul<Source>;
        const auto& product = recognised::product(source);
        if (detail::rows_are_contiguous(target))
            return matmul_into(target, product.lhs(), product.rhs(), static_cast<T>(recognised::scale(source)));
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
    } else if constexpr (detail::is_triangle<Source>) {
        return detail::triangle_into(target, source);
    }
    if constexpr (std::is_same_v<T, bool> || detail::reads_bool_storage<Source>) {
        // xtensor 0.24's SIMD strided assignment mishandles bool storage: into fixed-size bool
        // storage it skips elements (a comparison with a scalar, under AVX), and a stored mask
        // that broadcasts is read a row off ((B, 1, T, S) over (B, H, T, S)). Whatever writes
        // or reads a stored mask runs element by element.
        auto&& out = detail::writable(target);
        auto&& in = lower(source);
        std::copy(in.cbegin(), in.cend(), out.begin());
        return;
    }
    if constexpr (Viewable<Source> && std::is_same_v<value_type_of<Source>, T>) {
        return detail::copy_into(target, source);
    }
    xt::noalias(detail::writable(target)) = lower(source);
}

}  // namespace shaped::kernels

namespace shaped {

// The tensor layer's extension point: Tensor's and View's assignments call assign_expression
// unqualified, and find this by argument-dependent lookup (tensor/view.hpp).
template <class Target, class Source>
void assign_expression(Target& target, const Source& source) {
    kernels::assign(target, source);
}

}  // namespace shaped
