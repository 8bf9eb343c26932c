#pragma once
// Recording an expression that reads a traced value, and its derivative, derived from the
// expression's type: each node hands the gradient of its value to its operands (a vector-
// Jacobian product, as JAX's vjp), as an expression of shaped's own ops, so that an elementwise
// chain's backward is again one elementwise chain and a matmul's is two matmuls.
//
//   eval(e)          e reads a traced value: the value, recorded (traced<T, dims of e>)
//   back(e, g)       adds to the gradients of e's operands, from g, the gradient of e's value
//   with_derivative(value, derivative, inputs...)   a function of yours, its derivative yours
//   value_of(x)      a traced value's elements as a plain View, for a kernel of yours to read
//
// Gradients broadcast as values do: an operand that broadcast in the forward receives the sum
// of its gradient over the dims it was broadcast along.

#include <shaped/kernels.hpp>
#include <shaped/kernels/attention_backward.hpp>
#include <shaped/kernels/blas.hpp>
#include <shaped/kernels/rows_backward.hpp>
#include <shaped/train/traced.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <memory>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace shaped::train {

namespace detail {

// ---- what a record keeps of its expression's leaves ---------------------------------------------

// A tensor a record read: a model's parameter, where it lies, with the gradient it adds to; or
// any other tensor, as a copy kept with the record (it may be gone when the backward runs).
template <class T, Dim... Ds>
class saved_leaf : public reads_tensor<saved_leaf<T, Ds...>, T, Ds...> {
public:
    saved_leaf(std::shared_ptr<const Tensor<T, Ds...>> owned, const Tensor<T, Ds...>* value,
               Tensor<T, Ds...>* gradient)
        : owned_(std::move(owned)), value_(value), gradient_(gradient) {}

    const Tensor<T, Ds...>& stored() const { return *value_; }
    Tensor<T, Ds...>* gradient() const { return gradient_; }

private:
    std::shared_ptr<const Tensor<T, Ds...>> owned_;
    const Tensor<T, Ds...>* value_;
    Tensor<T, Ds...>* gradient_;
};

// A traced value a record read, by its handle: the gradient goes to its record. Not a traced
// value itself, so that the derivative's expressions are evaluated as any others, never recorded.
template <class T, Dim... Ds>
class saved_traced : public reads_tensor<saved_traced<T, Ds...>, T, Ds...> {
public:
    explicit saved_traced(std::shared_ptr<recorded_value<T, Ds...>> record) : record_(std::move(record)) {}

    const Tensor<T, Ds...>& stored() const { return record_->value; }
    recorded_value<T, Ds...>& record() const { return *record_; }

private:
    std::shared_ptr<recorded_value<T, Ds...>> record_;
};

// A View a record read: of a traced value (its gradient adds into that value's, at the view's
// places), of a model's parameter (into the parameter's gradient, likewise), or of anything
// else (its elements copied, as a tensor's are, with no gradient).
template <class T, Dim... Ds>
class saved_view : public reads_view<T, Ds...> {
public:
    saved_view(View<const T, Ds...> view, std::shared_ptr<const void> kept, std::shared_ptr<recorded_elements<T>> record,
               std::ptrdiff_t offset, T* parameter_gradient)
        : reads_view<T, Ds...>(view), kept_(std::move(kept)), record_(std::move(record)), offset_(offset),
          parameter_gradient_(parameter_gradient) {}

    bool wants_gradient() const { return record_ || parameter_gradient_; }
    // The gradient's elements at the view's places (the viewed value's gradient is laid out as
    // the value is), or none.
    std::optional<View<T, Ds...>> gradient() const {
        if (record_) return View<T, Ds...>(record_->gradient_data() + offset_, this->extents(), this->strides());
        if (parameter_gradient_) return View<T, Ds...>(parameter_gradient_, this->extents(), this->strides());
        return std::nullopt;
    }

private:
    std::shared_ptr<const void> kept_;
    std::shared_ptr<recorded_elements<T>> record_;
    std::ptrdiff_t offset_;
    T* parameter_gradient_;
};

template <class E>
inline constexpr bool is_saved_view = false;
template <class T, Dim... Ds>
inline constexpr bool is_saved_view<saved_view<T, Ds...>> = true;

template <class T, class List>
struct saved_view_for_impl;
template <class T, Dim... Ds>
struct saved_view_for_impl<T, dims<Ds...>> {
    using type = saved_view<T, Ds...>;
};

template <class E>
inline constexpr bool is_saved_traced = false;
template <class T, Dim... Ds>
inline constexpr bool is_saved_traced<saved_traced<T, Ds...>> = true;

template <class E>
inline constexpr bool is_saved_leaf = false;
template <class T, Dim... Ds>
inline constexpr bool is_saved_leaf<saved_leaf<T, Ds...>> = true;

template <class T>
inline constexpr bool is_scalar_node = false;
template <class T>
inline constexpr bool is_scalar_node<scalar<T>> = true;


// ---- whether an expression reads a traced value (at compile time) ---------------------------------

// The walk of shaped::detail::for_each_child (expr/expression.hpp), over types.
template <class E>
consteval bool reads_traced() {
    using N = std::remove_cvref_t<E>;
    if constexpr (is_traced<N> || is_traced_view<N>) {
        return true;
    } else if constexpr (requires(const N& n) { n.operands(); }) {
        return []<class... Es>(std::type_identity<std::tuple<Es...>>) {
            return (reads_traced<Es>() || ...);
        }(std::type_identity<std::remove_cvref_t<decltype(std::declval<const N&>().operands())>>{});
    } else {
        bool reads = false;
        if constexpr (requires(const N& n) { n.operand(); }) reads = reads || reads_traced<decltype(std::declval<const N&>().operand())>();
        if constexpr (requires(const N& n) { n.lhs(); }) reads = reads || reads_traced<decltype(std::declval<const N&>().lhs())>();
        if constexpr (requires(const N& n) { n.rhs(); }) reads = reads || reads_traced<decltype(std::declval<const N&>().rhs())>();
        if constexpr (requires(const N& n) { n.weight(); }) reads = reads || reads_traced<decltype(std::declval<const N&>().weight())>();
        if constexpr (requires(const N& n) { n.bias(); }) reads = reads || reads_traced<decltype(std::declval<const N&>().bias())>();
        if constexpr (requires(const N& n) { n.table(); }) reads = reads || reads_traced<decltype(std::declval<const N&>().table())>();
        if constexpr (requires(const N& n) { n.ids(); }) reads = reads || reads_traced<decltype(std::declval<const N&>().ids())>();
        if constexpr (requires(const N& n) { n.query(); })
            reads = reads || reads_traced<decltype(std::declval<const N&>().query())>() ||
                    reads_traced<decltype(std::declval<const N&>().key())>() ||
                    reads_traced<decltype(std::declval<const N&>().value())>();
        return reads;
    }
}

// The diagnostic of an operation no derivative is written for, naming its node.
template <class Node>
struct no_derivative {
    static_assert(sizeof(Node) == 0, "shaped::train: this operation has no derivative (its node is named below)");
};

// ---- an expression with its leaves saved ----------------------------------------------------------

template <class E>
auto saved(const E& e, const tape* t);

template <class Op, class... Es>
auto saved_node(const elementwise<Op, Es...>& e, const tape* t) {
    return std::apply(
        [&](const auto&... o) { return elementwise<Op, decltype(saved(o, t))...>("derivative", saved(o, t)...); },
        e.operands());
}
template <class E, class NewDims>
auto saved_node(const rename_node<E, NewDims>& e, const tape* t) {
    return rename_node<decltype(saved(e.operand(), t)), NewDims>(saved(e.operand(), t));
}
template <class E, std::array<std::size_t, rank_of<E>> Perm>
auto saved_node(const permute_node<E, Perm>& e, const tape* t) {
    return permute_node<decltype(saved(e.operand(), t)), Perm>(saved(e.operand(), t));
}
template <class E, std::size_t Axis, class NewDims>
auto saved_node(const unit_dim_node<E, Axis, NewDims>& e, const tape* t) {
    return unit_dim_node<decltype(saved(e.operand(), t)), Axis, NewDims>(saved(e.operand(), t));
}
template <class E, bool Upper>
auto saved_node(const triangle_node<E, Upper>& e, const tape* t) {
    return triangle_node<decltype(saved(e.operand(), t)), Upper>(saved(e.operand(), t), e.diagonal());
}
template <class L, class R>
auto saved_node(const matmul_node<L, R>& e, const tape* t) {
    return matmul_node<decltype(saved(e.lhs(), t)), decltype(saved(e.rhs(), t))>(saved(e.lhs(), t), saved(e.rhs(), t));
}
template <class Op, std::size_t Axis, class E>
auto saved_node(const reduce_node<Op, Axis, E>& e, const tape* t) {
    return reduce_node<Op, Axis, decltype(saved(e.operand(), t))>(saved(e.operand(), t));
}
template <std::size_t Axis, class E, bool Log>
auto saved_node(const softmax_node<Axis, E, Log>& e, const tape* t) {
    return softmax_node<Axis, decltype(saved(e.operand(), t)), Log>(saved(e.operand(), t));
}
template <class E, class W, class Bi, bool Centered>
auto saved_node(const layer_norm_node<E, W, Bi, Centered>& e, const tape* t) {
    auto bias = [&] {
        if constexpr (std::is_null_pointer_v<Bi>) return nullptr;
        else return saved(e.bias(), t);
    }();
    return layer_norm_node<decltype(saved(e.operand(), t)), decltype(saved(e.weight(), t)), decltype(bias), Centered>(
        saved(e.operand(), t), saved(e.weight(), t), std::move(bias), e.eps());
}
template <class Table, class Ids>
auto saved_node(const gather_node<Table, Ids>& e, const tape* t) {
    return gather_node<decltype(saved(e.table(), t)), decltype(saved(e.ids(), t))>(saved(e.table(), t), saved(e.ids(), t),
                                                                                  e.who());
}
template <class Q, class K, class V, class Mods>
auto saved_node(const attention_node<Q, K, V, Mods>& e, const tape* t) {
    using node =
        attention_node<decltype(saved(e.query(), t)), decltype(saved(e.key(), t)), decltype(saved(e.value(), t)), Mods>;
    return node(saved(e.query(), t), saved(e.key(), t), saved(e.value(), t), e.scale(), e.window(), e.modifiers());
}
template <class Node>
auto saved_node(const Node&, const tape*) {
    return no_derivative<Node>{};
}

template <class E>
auto saved(const E& e, const tape* t) {
    if constexpr (is_scalar_node<E> || is_saved_leaf<E> || is_saved_traced<E> || is_saved_view<E>) {
        return e;
    } else if constexpr (is_traced<E>) {
        return [&]<class T, Dim... Ds>(const traced<T, Ds...>& v) { return saved_traced<T, Ds...>(v.handle()); }(e);
    } else if constexpr (is_traced_view<E>) {
        return [&]<class T, Dim... Ds>(const traced_view<T, Ds...>& v) {
            return saved_view<T, Ds...>(v.view(), nullptr, v.base(), v.offset(), nullptr);
        }(e);
    } else if constexpr (E::owns_storage) {  // a Tensor: a parameter, or a copy
        return [&]<class T, Dim... Ds>(const Tensor<T, Ds...>& tensor) {
            if (auto* gradient = t ? t->gradient_of(tensor) : nullptr) return saved_leaf<T, Ds...>(nullptr, &tensor, gradient);
            auto copy = std::make_shared<const Tensor<T, Ds...>>(tensor);
            const auto* value = copy.get();
            return saved_leaf<T, Ds...>(std::move(copy), value, nullptr);
        }(e);
    } else if constexpr (Strided<E>) {  // a View: of a parameter, or its elements copied
        using T = std::remove_const_t<value_type_of<E>>;
        using result = typename saved_view_for_impl<T, dims_of<E>>::type;
        const view_for<const T, dims_of<E>> view(e.data(), e.extents(), e.strides());
        if (T* gradient = t ? t->gradient_at(view.data()) : nullptr) return result(view, nullptr, nullptr, 0, gradient);
        auto copy = std::make_shared<const tensor_for<T, dims_of<E>>>(e);
        return result(view_for<const T, dims_of<E>>(copy->data(), copy->extents(), copy->strides()), copy, nullptr, 0,
                      nullptr);
    } else {
        return saved_node(e, t);
    }
}

// ---- gradients into leaves ------------------------------------------------------------------------

// acc += g, where g's extents broadcast with acc's: dims g has and acc lacks, or where acc has
// extent 1, are summed; dims acc has and g lacks, or where g has extent 1, are broadcast. acc is
// a Tensor or a writable View.
template <class Acc, class G>
void add_elements(const Acc& acc, const G& g) {
    using T = value_type_of<Acc>;
    // g read in place where it is stored (a gradient is, mostly), else evaluated once.
    std::optional<tensor_for<T, dims_of<G>>> evaluated;
    const auto& gv = [&]() -> decltype(auto) {
        if constexpr (Strided<G> && std::is_same_v<std::remove_const_t<value_type_of<G>>, T>) return (g);
        else return (evaluated.emplace(g));
    }();
    constexpr std::size_t ra = rank_of<Acc>, rg = rank_of<G>;
    constexpr std::size_t r = ra > rg ? ra : rg;
    std::array<std::size_t, r> extents{};
    std::array<std::ptrdiff_t, r> acc_strides{}, g_strides{};
    const auto ae = acc.extents();
    const auto as = acc.strides();
    const auto ge = gv.extents();
    const auto gs = gv.strides();
    for (std::size_t i = 0; i < r; ++i) {
        const std::size_t a_extent = i + ra >= r ? ae[i + ra - r] : 1;
        const std::size_t g_extent = i + rg >= r ? ge[i + rg - r] : 1;
        if (a_extent != g_extent && a_extent != 1 && g_extent != 1)
            throw shape_error("shaped::train: a gradient does not broadcast to its value's extents");
        extents[i] = std::max(a_extent, g_extent);
        acc_strides[i] = a_extent == 1 ? 0 : as[i + ra - r];
        g_strides[i] = g_extent == 1 ? 0 : gs[i + rg - r];
    }
    static_assert(r <= kernels::max_add_rank, "shaped::train: a gradient of more dims than the kernels add");
    kernels::add_broadcast(const_cast<T*>(acc.data()), gv.data(), extents, acc_strides, g_strides);
}
template <class T, Dim... Ds, class G>
void add_gradient(Tensor<T, Ds...>& acc, const G& g) {
    add_elements(acc, g);
}
template <class T, Dim... Ds, class G>
void add_gradient(const View<T, Ds...>& acc, const G& g) {
    add_elements(acc, g);
}

template <class T, Dim... Ds, class G>
void add_gradient(recorded_value<T, Ds...>& record, const G& g) {
    if constexpr (std::is_same_v<dims_of<G>, dims<Ds...>> && std::is_same_v<value_type_of<G>, T>) {
        // The first gradient of a value, of its own extents: evaluated into it, not zeros and a sum.
        const auto extents = record.value.extents();
        if (!record.gradient && std::equal(extents.begin(), extents.end(), g.extents().begin())) {
            record.gradient.emplace(g);
            return;
        }
    }
    add_gradient(record.zeroed_gradient(), g);
}

// Where a saved leaf's gradient goes, as a writable View of the leaf's dims: a parameter's
// gradient, a recorded value's (allocated now), a view's places in either; none for a constant.
template <class Leaf>
auto gradient_view(const Leaf& leaf) {
    using T = value_type_of<Leaf>;
    using result = std::optional<view_for<T, dims_of<Leaf>>>;
    if constexpr (is_saved_view<Leaf>) {
        return leaf.gradient();
    } else if constexpr (is_saved_traced<Leaf>) {
        auto& g = leaf.record().zeroed_gradient();
        return result(std::in_place, g.data(), g.extents(), g.strides());
    } else {
        static_assert(is_saved_leaf<Leaf>);
        auto* g = leaf.gradient();
        return g ? result(std::in_place, g->data(), g->extents(), g->strides()) : result();
    }
}

// g as a Tensor of e's own dims and extents (broadcast or summed to them).
template <class E, class G>
auto fitted(const E& e, const G& g) {
    using T = value_type_of<E>;
    tensor_for<T, dims_of<E>> out{typename tensor_for<T, dims_of<E>>::shape_type(e.extents())};  // zeros
    add_gradient(out, g);
    return out;
}

// Whether anything under e takes a gradient (at run time: a tensor may or may not be a parameter).
template <class E>
bool wants_gradient(const E& e) {
    if constexpr (is_saved_traced<E>) return std::is_floating_point_v<value_type_of<E>>;
    else if constexpr (is_saved_leaf<E>) return e.gradient() != nullptr;
    else if constexpr (is_saved_view<E>) return e.wants_gradient();
    else {
        bool wants = false;
        shaped::detail::for_each_child(e, [&](const auto& child) { wants = wants || wants_gradient(child); });
        return wants;
    }
}

template <class E>
std::size_t element_count(const E& e) {
    std::size_t count = 1;
    for (const auto extent : e.extents()) count *= extent;
    return count;
}

// A matrix held as the transpose of another (w.mT(), as a Linear reads its weight).
template <class R>
concept transposed_matrix = requires { R::permutation; } && rank_of<R> == 2 && R::permutation[0] == 1;

// A leaf whose gradient is a row-major block of its own extents (a parameter's, a recorded
// value's): where a product's gradient can be written by BLAS (with beta = 1, or 0 into a
// recorded value's unfilled first gradient); no data where there is none such.
template <class E>
gradient_target<value_type_of<E>> contiguous_gradient(const E& e) {
    if constexpr (is_saved_traced<E>) {
        return e.record().gradient_to_cover();
    } else if constexpr (is_saved_leaf<E> || is_saved_view<E>) {
        auto view = gradient_view(e);
        if (view && view->is_contiguous()) return {view->data(), false};
        return {};
    } else {
        return {};
    }
}
// BLAS's beta for a product written into a gradient: add to it, or write its first value.
template <class T>
T beta_for(const gradient_target<T>& target) {
    return target.unfilled ? T(0) : T(1);
}
// The row kernels' mode for a gradient written into it, likewise.
template <class T>
kernels::gradient_write write_for(const gradient_target<T>& target) {
    return target.unfilled ? kernels::gradient_write::overwrite : kernels::gradient_write::add;
}

// The elements of e, row-major: in place where e is stored so, else evaluated into `kept`.
template <class E, class Kept>
const value_type_of<E>* rows_of(const E& e, Kept& kept) {
    if constexpr (Strided<E>)
        if (e.is_contiguous()) return e.data();
    kept.emplace(e);
    return kept->data();
}

// A (…, reduced …) value seen with the dim at Axis put back, each element repeated along it.
template <std::size_t Axis, class Full, class R>
auto expanded(const R& reduced, const std::array<std::size_t, Full::rank>& extents) {
    using T = value_type_of<R>;
    std::array<std::ptrdiff_t, Full::rank> strides{};
    const auto rs = reduced.strides();
    for (std::size_t i = 0, j = 0; i < Full::rank; ++i) strides[i] = i == Axis ? 0 : rs[j++];
    return view_for<const T, Full>(reduced.data(), extents, strides);
}

// ---- what a forward keeps for its derivative ----------------------------------------------------

// A layer norm's rows: its input's and parameters' elements as the row kernels read them.
template <class E, class W, class Bi, bool Centered>
struct layer_norm_rows_of {
    using T = value_type_of<E>;
    explicit layer_norm_rows_of(const layer_norm_node<E, W, Bi, Centered>& e) {
        x = rows_of(e.operand(), kept_x);
        w = rows_of(e.weight(), kept_w);
        if constexpr (!std::is_null_pointer_v<Bi>) b = rows_of(e.bias(), kept_b);
        d = e.operand().extents()[rank_of<E> - 1];
        rows = d == 0 ? 0 : element_count(e.operand()) / d;
    }
    std::optional<tensor_for<T, dims_of<E>>> kept_x;
    std::optional<tensor_for<T, dims_of<W>>> kept_w, kept_b;
    const T* x = nullptr;
    const T* w = nullptr;
    const T* b = nullptr;
    std::size_t d = 0, rows = 0;
};

// What a layer norm's forward keeps for its backward: each row's mean and 1/std.
template <class T>
struct row_statistics {
    std::vector<T> mean, rstd;
};

// A recorded layer norm's value, by the row kernel that keeps each row's statistics (the same
// values, bit for bit, as the kernel every other forward evaluates it with).
template <class E, class W, class Bi, bool Centered>
auto layer_norm_keeping(const layer_norm_node<E, W, Bi, Centered>& e, row_statistics<value_type_of<E>>& kept) {
    const layer_norm_rows_of<E, W, Bi, Centered> in(e);
    auto value = tensor_for<value_type_of<E>, dims_of<E>>::for_overwrite(e.operand().extents());
    kept.mean.resize(in.rows);
    kept.rstd.resize(in.rows);
    kernels::layer_norm_rows_saving(in.x, value.data(), in.rows, in.d, in.w, in.b, e.eps(), Centered, kept.mean.data(),
                                    kept.rstd.data());
    return value;
}

// What the forward of a recorded expression keeps for its backward, besides the expression:
// nothing, but for a layer norm (each row's statistics).
template <class Saved>
struct kept_by_forward {};
template <class E, class W, class Bi, bool Centered>
struct kept_by_forward<layer_norm_node<E, W, Bi, Centered>> : row_statistics<value_type_of<E>> {};

// The value of a saved expression, and what its backward keeps of the forward.
template <class T, class List, class Saved>
auto evaluate_keeping(const Saved& expression, kept_by_forward<Saved>& kept) {
    if constexpr (std::is_empty_v<kept_by_forward<Saved>>) return tensor_for<T, List>(expression);
    else return layer_norm_keeping(expression, kept);
}

// The elements of e, row-major, as rows_of finds them; but a layer norm's evaluated keeping its
// statistics in `statistics`, for its derivative to read rather than find again.
template <class E, class Kept>
const value_type_of<E>* rows_keeping(const E& e, Kept& kept, kept_by_forward<E>& statistics) {
    if constexpr (std::is_empty_v<kept_by_forward<E>>) {
        return rows_of(e, kept);
    } else {
        kept.emplace(layer_norm_keeping(e, statistics));
        return kept->data();
    }
}

// ---- each node's derivative ----------------------------------------------------------------------

template <class E, class G>
void back(const E& e, const G& g);
template <class E, class NewDims, class G>
void back_node(const rename_node<E, NewDims>& e, const G& g);
template <class E, std::array<std::size_t, rank_of<E>> Perm, class G>
void back_node(const permute_node<E, Perm>& e, const G& g);
template <class E, std::size_t Axis, class NewDims, class G>
void back_node(const unit_dim_node<E, Axis, NewDims>& e, const G& g);
template <class E, bool Upper, class G>
void back_node(const triangle_node<E, Upper>& e, const G& g);
template <class L, class R, class G>
void back_node(const matmul_node<L, R>& e, const G& g);
template <class Op, std::size_t Axis, class E, class G>
void back_node(const reduce_node<Op, Axis, E>& e, const G& g);
template <std::size_t Axis, class E, bool Log, class G>
void back_node(const softmax_node<Axis, E, Log>& e, const G& g);
template <class Q, class K, class V, class Mods, class G>
void back_node(const attention_node<Q, K, V, Mods>& e, const G& g);
template <class E, class W, class Bi, bool Centered, class G>
void back_node(const layer_norm_node<E, W, Bi, Centered>& e, const G& g);
template <class Table, class Ids, class G>
void back_node(const gather_node<Table, Ids>& e, const G& g);
template <class E, class W, class Bi, bool Centered, class G>
void back_layer_norm(const layer_norm_node<E, W, Bi, Centered>& e, const G& g, const row_statistics<value_type_of<E>>& kept);
template <class Node, class G>
void back_node(const Node&, const G&);

template <class Op>
inline constexpr bool is_cast = false;
template <class To>
inline constexpr bool is_cast<op::cast<To>> = true;

// Hands a's gradient g * f'(a) on, for an activation f, by the library's one definition of f'
// (the row kernels' activation_backward): written straight into a recorded operand's gradient,
// else into a Tensor of a's dims handed on.
template <class Op, class A, class G>
void back_activation(const A& a, const G& g) {
    using T = value_type_of<A>;
    using X = tensor_for<T, dims_of<A>>;
    constexpr auto kind = std::is_same_v<Op, op::gelu>        ? kernels::activation_kind::gelu
                          : std::is_same_v<Op, op::gelu_tanh> ? kernels::activation_kind::gelu_tanh
                                                              : kernels::activation_kind::silu;
    std::optional<X> kept_x, kept_dy;
    const T* x = rows_of(a, kept_x);
    const auto extents = a.extents();
    const T* dy = [&]() -> const T* {
        if constexpr (std::is_same_v<G, X>)
            if (std::equal(extents.begin(), extents.end(), g.extents().begin())) return g.data();
        kept_dy.emplace(fitted(a, g));
        return kept_dy->data();
    }();
    if constexpr (is_saved_traced<A>) {
        const auto dx = a.record().gradient_to_cover();
        kernels::activation_backward(kind, x, dy, dx.data, element_count(a), write_for(dx));
    } else {
        auto dx = X::for_overwrite(extents);
        kernels::activation_backward(kind, x, dy, dx.data(), dx.size(), kernels::gradient_write::overwrite);
        back(a, dx);
    }
}

template <class Op, class... Es, class G>
void back_elementwise(const elementwise<Op, Es...>& e, const G& g) {
    using T = value_type_of<elementwise<Op, Es...>>;
    const auto& a = e.template operand<0>();
    if constexpr (std::is_same_v<Op, op::add>) {
        back(a, g);
        back(e.template operand<1>(), g);
    } else if constexpr (std::is_same_v<Op, op::subtract>) {
        back(a, g);
        back(e.template operand<1>(), -g);
    } else if constexpr (std::is_same_v<Op, op::multiply>) {
        const auto& b = e.template operand<1>();
        if (wants_gradient(a)) back(a, g * b);
        if (wants_gradient(b)) back(b, g * a);
    } else if constexpr (std::is_same_v<Op, op::divide>) {
        const auto& b = e.template operand<1>();
        if (wants_gradient(a)) back(a, g / b);
        if (wants_gradient(b)) back(b, -(g * a) / (b * b));
    } else if constexpr (std::is_same_v<Op, op::maximum> || std::is_same_v<Op, op::minimum>) {
        // As torch: the larger (smaller) operand takes the gradient; a tie halves it.
        const auto& b = e.template operand<1>();
        constexpr bool larger = std::is_same_v<Op, op::maximum>;
        const auto a_wins = [&] { if constexpr (larger) return a > b; else return a < b; }();
        const auto b_wins = [&] { if constexpr (larger) return b > a; else return b < a; }();
        if (wants_gradient(a)) back(a, where(a_wins, g, where(a == b, g * T(0.5), T(0))));
        if (wants_gradient(b)) back(b, where(b_wins, g, where(a == b, g * T(0.5), T(0))));
    } else if constexpr (std::is_same_v<Op, op::negate>) {
        back(a, -g);
    } else if constexpr (std::is_same_v<Op, op::exp>) {
        back(a, g * exp(a));
    } else if constexpr (std::is_same_v<Op, op::log>) {
        back(a, g / a);
    } else if constexpr (std::is_same_v<Op, op::sqrt>) {
        back(a, g / (sqrt(a) * T(2)));
    } else if constexpr (std::is_same_v<Op, op::rsqrt>) {
        back(a, g * rsqrt(a) / a * T(-0.5));
    } else if constexpr (std::is_same_v<Op, op::tanh>) {
        back(a, g * (T(1) - square(tanh(a))));
    } else if constexpr (std::is_same_v<Op, op::sigmoid>) {
        back(a, g * sigmoid(a) * (T(1) - sigmoid(a)));
    } else if constexpr (std::is_same_v<Op, op::relu>) {
        back(a, where(a > T(0), g, T(0)));
    } else if constexpr (std::is_same_v<Op, op::square>) {
        back(a, g * a * T(2));
    } else if constexpr (std::is_same_v<Op, op::abs>) {
        back(a, where(a > T(0), g, where(a < T(0), -g, T(0))));
    } else if constexpr (std::is_same_v<Op, op::gelu> || std::is_same_v<Op, op::gelu_tanh> ||
                         std::is_same_v<Op, op::silu>) {
        back_activation<Op>(a, g);
    } else if constexpr (std::is_same_v<Op, op::where>) {  // where(condition, a, b)
        const auto& condition = a;
        const auto& if_true = e.template operand<1>();
        const auto& if_false = e.template operand<2>();
        if (wants_gradient(if_true)) back(if_true, where(condition, g, T(0)));
        if (wants_gradient(if_false)) back(if_false, where(condition, T(0), g));
    } else if constexpr (std::is_same_v<Op, op::masked_fill>) {  // masked_fill(a, mask, value)
        back(a, masked_fill(g, e.template operand<1>(), T(0)));
    } else if constexpr (is_cast<Op>) {  // the gradient cast back to the operand's type
        using From = value_type_of<std::remove_cvref_t<decltype(a)>>;
        if constexpr (std::is_floating_point_v<From>) back(a, cast<From>(g));
    } else {
        (void)no_derivative<elementwise<Op, Es...>>{};
    }
}

template <class E, class G>
void back(const E& e, const G& g) {
    if constexpr (is_scalar_node<E>) {
        (void)g;
    } else if constexpr (is_saved_traced<E>) {
        add_gradient(e.record(), g);
    } else if constexpr (is_saved_leaf<E>) {
        if (auto* gradient = e.gradient()) add_gradient(*gradient, g);
    } else if constexpr (is_saved_view<E>) {
        if (auto gradient = e.gradient()) add_gradient(*gradient, g);
    } else if constexpr (requires { e.operands(); }) {
        if (wants_gradient(e)) back_elementwise(e, g);
    } else if (!wants_gradient(e)) {
        return;
    } else {
        // Every other node takes its gradient at its own dims, as a Tensor: g itself where it
        // is one already.
        if constexpr (std::is_same_v<G, tensor_for<value_type_of<E>, dims_of<E>>>) {
            const auto extents = e.extents();
            if (std::equal(extents.begin(), extents.end(), g.extents().begin())) return back_node(e, g);
        }
        back_node(e, fitted(e, g));
    }
}

template <class E, class NewDims, class G>
void back_node(const rename_node<E, NewDims>& e, const G& g) {
    back(e.operand(), rename_node<const G&, dims_of<E>>(g));
}
template <class E, std::array<std::size_t, rank_of<E>> Perm, class G>
void back_node(const permute_node<E, Perm>& e, const G& g) {
    constexpr auto inverse = [] {
        std::array<std::size_t, rank_of<E>> inv{};
        for (std::size_t i = 0; i < Perm.size(); ++i) inv[Perm[i]] = i;
        return inv;
    }();
    back(e.operand(), permute_node<const G&, inverse>(g));
}
// A dim of extent 1 inserted (unsqueeze, a keepdim reduction) or dropped (squeeze): the gradient,
// seen without that dim or with it, is the operand's (a keepdim reduction's derivative is then
// the plain reduction's).
template <class E, std::size_t Axis, class NewDims, class G>
void back_node(const unit_dim_node<E, Axis, NewDims>& e, const G& g) {
    back(e.operand(), shaped::detail::unit_dim_view<Axis, dims_of<E>>(g));
}
template <class E, bool Upper, class G>
void back_node(const triangle_node<E, Upper>& e, const G& g) {
    back(e.operand(), triangle_node<const G&, Upper>(g, e.diagonal()));
}
template <class L, class R, class G>
void back_node(const matmul_node<L, R>& e, const G& g) {
    // y = l @ r: dl = g @ r^T, dr = l^T @ g (summed over the batch dims an operand lacks).
    using T = value_type_of<G>;
    const auto& l = e.lhs();
    const auto& r = e.rhs();
    if constexpr (rank_of<R> == 2 && rank_of<L> >= 2) {
        // A shared matrix (a Linear's weight): l's batch dims are rows, so each gradient is one
        // GEMM over all of them, transposes as BLAS flags, written straight into a leaf's gradient.
        const auto le = l.extents();
        const std::size_t k = le[rank_of<L> - 1], n = r.extents()[1];
        const std::size_t rows = k == 0 ? 0 : element_count(l) / k;
        // l's rows, which dr reads: l itself where it is stored so, else evaluated once (a layer
        // norm's keeping its statistics, which its derivative below then reads).
        std::optional<tensor_for<T, dims_of<L>>> kept_l;
        kept_by_forward<L> l_statistics;
        const T* ld = wants_gradient(r) ? rows_keeping(l, kept_l, l_statistics) : nullptr;
        if (wants_gradient(l)) {
            if (const auto dl = contiguous_gradient(l); dl.data) {
                if constexpr (transposed_matrix<R>) {
                    // r = w^T: dl += g @ w, w (n, k) read as it lies.
                    std::optional<tensor_for<T, dims_of<decltype(r.operand())>>> kept;
                    const T* wd = rows_of(r.operand(), kept);
                    kernels::blas::gemm(false, false, rows, k, n, T(1), g.data(), n, wd, k, beta_for(dl), dl.data, k);
                } else {
                    std::optional<tensor_for<T, dims_of<R>>> kept;
                    const T* rd = rows_of(r, kept);
                    kernels::blas::gemm(false, true, rows, k, n, T(1), g.data(), n, rd, n, beta_for(dl), dl.data, k);
                }
            } else if constexpr (!std::is_empty_v<kept_by_forward<L>>) {
                if (ld) back_layer_norm(l, tensor_for<T, dims_of<L>>(matmul(g, mT(r))), l_statistics);
                else back(l, matmul(g, mT(r)));
            } else {
                back(l, matmul(g, mT(r)));
            }
        }
        if (wants_gradient(r)) {
            if constexpr (transposed_matrix<R>) {
                // r = w^T (x @ w.mT(), a Linear): dw += g^T @ l, (n, k).
                if (const auto dw = contiguous_gradient(r.operand()); dw.data) {
                    kernels::blas::gemm(true, false, n, k, rows, T(1), g.data(), n, ld, k, beta_for(dw), dw.data, k);
                    return;
                }
            } else if (const auto dr = contiguous_gradient(r); dr.data) {
                kernels::blas::gemm(true, false, k, n, rows, T(1), ld, k, g.data(), n, beta_for(dr), dr.data, n);
                return;
            }
            tensor_for<T, dims_of<R>> dr{typename tensor_for<T, dims_of<R>>::shape_type(r.extents())};
            kernels::blas::gemm(true, false, k, n, rows, T(1), ld, k, g.data(), n, T(0), dr.data(), n);
            back(r, dr);
        }
    } else {
        if (wants_gradient(l)) back(l, matmul(g, mT(r)));
        if (wants_gradient(r)) back(r, matmul(mT(l), g));
    }
}
template <class Op, std::size_t Axis, class E, class G>
void back_node(const reduce_node<Op, Axis, E>& e, const G& g) {
    using T = value_type_of<E>;
    const auto& x = e.operand();
    const auto extents = x.extents();
    const auto spread = expanded<Axis, dims_of<E>>(g, extents);
    const auto n = static_cast<T>(extents[Axis]);
    if constexpr (std::is_same_v<Op, op::sum>) {
        back(x, spread);
    } else if constexpr (std::is_same_v<Op, op::mean>) {
        back(x, spread / n);
    } else if constexpr (std::is_same_v<Op, op::var>) {
        const auto m = tensor_for<T, dims_of<reduce_node<op::mean, Axis, E>>>(reduce_node<op::mean, Axis, const E&>(x));
        back(x, spread * (x - expanded<Axis, dims_of<E>>(m, extents)) * (T(2) / (n - T(1))));
    } else if constexpr (std::is_same_v<Op, op::max> || std::is_same_v<Op, op::min>) {
        // As torch.amax / amin: the gradient shared evenly among the elements that attain it.
        const auto y = tensor_for<T, dims_of<reduce_node<Op, Axis, E>>>(e);
        const auto attains = tensor_for<bool, dims_of<E>>(x == expanded<Axis, dims_of<E>>(y, extents));
        auto indicator = tensor_for<T, dims_of<E>>(typename tensor_for<T, dims_of<E>>::shape_type(extents));
        for (std::size_t i = 0; i < indicator.size(); ++i) indicator.data()[i] = attains.data()[i] ? T(1) : T(0);
        const auto count = tensor_for<T, dims_of<reduce_node<Op, Axis, E>>>(
            reduce_node<op::sum, Axis, const decltype(indicator)&>(indicator));
        back(x, spread * indicator / expanded<Axis, dims_of<E>>(count, extents));
    } else {
        (void)no_derivative<reduce_node<Op, Axis, E>>{};
    }
}
// causal_attention(q, k, v, scale[, window]): the one kernel's flash backward where it covers the
// problem (T queries over their own T keys, k and v broadcast alike), after the forward is run
// again keeping each query's log-sum-exp (the record keeps the expression, not that); else the
// derivative of what the node stands for, the chapter's expression, scores and all.
template <class Q, class K, class V, class Mods, class G>
void back_node(const attention_node<Q, K, V, Mods>& e, const G& g) {
    using T = value_type_of<G>;
    using Node = attention_node<Q, K, V, Mods>;
    constexpr bool modified = !std::is_same_v<Mods, no_modifiers>;
    const auto& q = e.query();
    const auto& k = e.key();
    const auto& v = e.value();
    const std::size_t tq = q.extents()[rank_of<Q> - 2], tk = k.extents()[rank_of<K> - 2];
    const long diagonal = static_cast<long>(tk) - static_cast<long>(tq);
    if (element_count(e) == 0) return;
    // Whether the fused backward covers the problem depends on extents and the window only (q, k
    // and v are copied contiguous): asked before anything is copied, the operands' pointers unset.
    const auto contiguous = [](const auto& x) {
        constexpr std::size_t r = rank_of<std::remove_cvref_t<decltype(x)>>;
        const auto extents = x.extents();
        return kernels::strided<T, r>{{extents, row_major_strides(extents)}, nullptr};
    };
    const auto out_extents = e.extents();
    auto p = kernels::problem_over<T>(contiguous(q), contiguous(k), contiguous(v), nullptr,
                                      strided_layout<rank_of<Node>>{out_extents, row_major_strides(out_extents)},
                                      e.scale(), {true, diagonal, e.window()}, false);
    std::vector<T> lse(element_count(e) / out_extents[rank_of<Node> - 1]);  // each query's, kept by the forward
    p.lse = lse.data();
    // Modifiers run in both passes; a learned one's table is a layer's (train/attention.hpp),
    // where the tape reads it.
    [[maybe_unused]] const auto frame = [&] {
        if constexpr (modified) {
            static_assert(!learned_score_modifier<decltype(Mods::score)>,
                          "shaped::train: a learned score modifier is differentiated as a layer's score_mod(), "
                          "whose table the derivation reads");
            return kernels::modifier_frame_of(e);
        } else {
            return nullptr;
        }
    }();
    if constexpr (modified) {
        p.sees.causal = Mods::causal;
        p.modifiers = kernels::differentiated_modifiers_over<T>(frame);
        if (!kernels::attention_backward_covers(p))
            throw std::invalid_argument(
                "shaped::train: causal_attention with modifiers is differentiated by the fused backward only: "
                "T queries over their own T keys, causal or masked, k and v broadcast alike");
    }
    if (kernels::attention_backward_covers(p)) {
        const auto qt = tensor_for<T, dims_of<Q>>(q);
        const auto kt = tensor_for<T, dims_of<K>>(k);
        const auto vt = tensor_for<T, dims_of<V>>(v);
        auto out = tensor_for<T, dims_of<Node>>::for_overwrite(out_extents);
        p.q.data = qt.data();
        p.k.data = kt.data();
        p.v.data = vt.data();
        p.out.data = out.data();
        kernels::attention(p);
        const auto zeros = [](const auto& like) {
            using X = std::remove_cvref_t<decltype(like)>;
            return X{typename X::shape_type(like.extents())};
        };
        auto dq = zeros(qt);
        auto dk = zeros(kt);
        auto dv = zeros(vt);
        kernels::attention_backward(p, g.data(),
                                    {{dq.data(), p.q.matrix, p.q.batch},
                                     {dk.data(), p.k.matrix, p.k.batch},
                                     {dv.data(), p.v.matrix, p.v.batch}});
        if (wants_gradient(q)) back(q, dq);
        if (wants_gradient(k)) back(k, dk);
        if (wants_gradient(v)) back(v, dv);
        return;
    }
    // Which keys each query does not see: those after it, and those before its window.
    using Hidden = tensor_for<bool, dims<dim_at<rank_of<Q> - 2, dims_of<Q>>, dim_at<rank_of<K> - 2, dims_of<K>>>>;
    Hidden hidden{typename Hidden::shape_type({tq, tk})};
    for (std::size_t i = 0; i < tq; ++i)
        for (std::size_t j = 0; j < tk; ++j) {
            const long last = static_cast<long>(i) + diagonal, at = static_cast<long>(j);
            const bool before_window = e.window() && at <= last - static_cast<long>(*e.window());
            hidden.data()[i * tk + j] = at > last || before_window;
        }
    const auto scores = matmul(q, mT(k)) * e.scale();
    const auto mask = saved(hidden, nullptr);  // a constant: takes no gradient
    const auto unfused = matmul(softmax<-1>(masked_fill(scores, mask, -std::numeric_limits<T>::infinity())), v);
    back(unfused, g);
}

template <std::size_t Axis, class E, bool Log, class G>
void back_node(const softmax_node<Axis, E, Log>& e, const G& g) {
    using T = value_type_of<E>;
    using Reduced = dims_of<reduce_node<op::sum, Axis, E>>;
    const auto y = tensor_for<T, dims_of<E>>(e);
    const auto extents = y.extents();
    if constexpr (Log) {
        // y = log_softmax(x): dx = g - softmax(x) * sum(g)
        const auto total = tensor_for<T, Reduced>(reduce_node<op::sum, Axis, const G&>(g));
        back(e.operand(), g - exp(y) * expanded<Axis, dims_of<E>>(total, extents));
    } else {
        // y = softmax(x): dx = y * (g - sum(g * y))
        const auto gy = g * y;
        const auto total = tensor_for<T, Reduced>(reduce_node<op::sum, Axis, decltype(gy)>(gy));
        back(e.operand(), y * (g - expanded<Axis, dims_of<E>>(total, extents)));
    }
}
template <class E, class W, class Bi, bool Centered, class G>
void back_layer_norm(const layer_norm_node<E, W, Bi, Centered>& e, const G& g, const row_statistics<value_type_of<E>>& kept) {
    // The row kernels' own backward (kernels::layer_norm_rows_backward, as the forward is theirs).
    // The input's gradient is written straight into a leaf's where it lies as a row-major block
    // (its first: written, not added), the parameters' likewise (added: they sum over rows);
    // else aside and handed on.
    using T = value_type_of<E>;
    const layer_norm_rows_of<E, W, Bi, Centered> in(e);
    const auto target = [](const auto& operand, auto& aside, bool may_write) -> gradient_target<T> {
        if (wants_gradient(operand))
            if (const auto direct = contiguous_gradient(operand); direct.data) {
                if (direct.unfilled && !may_write) std::fill_n(direct.data, element_count(operand), T(0));
                return {direct.data, direct.unfilled && may_write};
            }
        aside.emplace(std::remove_cvref_t<decltype(*aside)>::for_overwrite(operand.extents()));
        if (!may_write) aside->fill(T(0));
        return {aside->data(), may_write};
    };
    std::optional<tensor_for<T, dims_of<E>>> dx_aside;
    std::optional<tensor_for<T, dims_of<W>>> dw_aside, db_aside;
    const auto dx = target(e.operand(), dx_aside, true);
    const auto dw = target(e.weight(), dw_aside, false);
    T* db = nullptr;
    if constexpr (!std::is_null_pointer_v<Bi>) db = target(e.bias(), db_aside, false).data;
    kernels::layer_norm_rows_backward(g.data(), in.x, in.rows, in.d, in.w, kept.mean.data(), kept.rstd.data(), Centered,
                                      dx.data, dw.data, db, write_for(dx));
    if (dx_aside && wants_gradient(e.operand())) back(e.operand(), *dx_aside);
    if (dw_aside && wants_gradient(e.weight())) back(e.weight(), *dw_aside);
    if constexpr (!std::is_null_pointer_v<Bi>)
        if (db_aside && wants_gradient(e.bias())) back(e.bias(), *db_aside);
}
template <class E, class W, class Bi, bool Centered, class G>
void back_node(const layer_norm_node<E, W, Bi, Centered>& e, const G& g) {
    // A layer norm inside a larger recorded expression: its statistics found again.
    row_statistics<value_type_of<E>> kept;
    [[maybe_unused]] const auto value = layer_norm_keeping(e, kept);
    back_layer_norm(e, g, kept);
}
template <class Table, class Ids, class G>
void back_node(const gather_node<Table, Ids>& e, const G& g) {
    // Each id's row of g adds into the table's gradient at that row: straight into a leaf's
    // gradient, or into a table of zeros handed on to a computed table.
    using T = value_type_of<Table>;
    const auto scatter = [&](const auto& target) {
        const auto ids = tensor_for<value_type_of<Ids>, dims_of<Ids>>(e.ids());
        const std::size_t width = target.extents()[1];
        const auto strides = target.strides();
        for (std::size_t i = 0; i < ids.size(); ++i) {
            T* row = target.data() + static_cast<std::ptrdiff_t>(ids.data()[i]) * strides[0];
            const T* from = g.data() + i * width;
            for (std::size_t c = 0; c < width; ++c) row[static_cast<std::ptrdiff_t>(c) * strides[1]] += from[c];
        }
    };
    const auto& table = e.table();
    if constexpr (is_saved_leaf<Table> || is_saved_traced<Table> || is_saved_view<Table>) {
        if (const auto target = gradient_view(table)) scatter(*target);
    } else {
        auto dense = tensor_for<T, dims_of<Table>>(typename tensor_for<T, dims_of<Table>>::shape_type(table.extents()));
        dense.fill(T(0));
        scatter(dense);
        back(table, dense);
    }
}
template <class Node, class G>
void back_node(const Node&, const G&) {
    (void)no_derivative<Node>{};
}

// ---- recording -------------------------------------------------------------------------------------

// A value computed from a saved expression: its backward is the expression's derivative.
template <class Saved, class T, Dim... Ds>
class recorded final : public recorded_value<T, Ds...> {
public:
    recorded(Tensor<T, Ds...> value, Saved expression, kept_by_forward<Saved> kept)
        : recorded_value<T, Ds...>(std::move(value)), expression_(std::move(expression)), kept_(std::move(kept)) {}

    void backward() override {
        if (!this->gradient) return;
        if constexpr (std::is_empty_v<kept_by_forward<Saved>>) back(expression_, *this->gradient);
        else if (wants_gradient(expression_)) back_layer_norm(expression_, *this->gradient, kept_);
    }

private:
    Saved expression_;
    [[no_unique_address]] kept_by_forward<Saved> kept_;
};

// A record made by hand (attention's, cross-entropy's, with_derivative's) on the active tape,
// as a traced value: pushed while the tape records (not while it evaluates or runs backward).
template <class T, Dim... Ds, class Record>
traced<T, Ds...> on_tape(std::shared_ptr<Record> record) {
    tape* t = tape::active();
    if (t && t->recording()) t->push(record);
    return traced<T, Ds...>(std::move(record));
}

// The gradients a with_derivative function returns: one tensor for one input, else a tuple.
template <class G>
inline constexpr bool is_tuple = false;
template <class... Gs>
inline constexpr bool is_tuple<std::tuple<Gs...>> = true;

template <class G, std::size_t I>
decltype(auto) gradient_of_input(G&& grads) {
    if constexpr (is_tuple<std::remove_cvref_t<G>>) return std::get<I>(std::forward<G>(grads));
    else return std::forward<G>(grads);
}

// A value whose derivative its author wrote (with_derivative): the inputs it was computed from,
// saved, and the function that turns the value's gradient into theirs.
template <class Inputs, class Derivative, class T, Dim... Ds>
class recorded_with final : public recorded_value<T, Ds...> {
public:
    recorded_with(Tensor<T, Ds...> value, Inputs inputs, Derivative derivative)
        : recorded_value<T, Ds...>(std::move(value)), inputs_(std::move(inputs)), derivative_(std::move(derivative)) {}
    void backward() override {
        if (!this->gradient) return;
        constexpr std::size_t n = std::tuple_size_v<Inputs>;
        [&]<std::size_t... I>(std::index_sequence<I...>) {
            if (!(wants_gradient(std::get<I>(inputs_)) || ...)) return;
            const auto grads = derivative_(std::as_const(*this->gradient));
            ((wants_gradient(std::get<I>(inputs_)) ? back(std::get<I>(inputs_), gradient_of_input<const decltype(grads)&, I>(grads))
                                                   : void()),
             ...);
        }(std::make_index_sequence<n>{});
    }

private:
    Inputs inputs_;
    Derivative derivative_;
};

// Whether derivative, given the value's gradient, returns one gradient of each input's dims (a
// variable, so that the diagnostic names the types).
template <class Grads, class... Xs>
consteval bool gradients_fit_inputs() {
    if constexpr (is_tuple<Grads>) {
        if constexpr (std::tuple_size_v<Grads> != sizeof...(Xs)) return false;
        else
            return []<std::size_t... I>(std::index_sequence<I...>) {
                return (std::is_same_v<dims_of<std::tuple_element_t<I, Grads>>, dims_of<Xs>> && ...);
            }(std::index_sequence_for<Xs...>{});
    } else if constexpr (sizeof...(Xs) == 1 && Expression<Grads>) {
        return (std::is_same_v<dims_of<Grads>, dims_of<Xs>> && ...);
    } else {
        return false;
    }
}
template <class Grads, class... Xs>
inline constexpr bool gradients_of_inputs = gradients_fit_inputs<Grads, Xs...>();

template <class Saved, class T, class List>
struct recorded_for_impl;
template <class Saved, class T, Dim... Ds>
struct recorded_for_impl<Saved, T, dims<Ds...>> {
    using type = recorded<Saved, T, Ds...>;
};

template <class E>
auto record(const E& e, tape& t) {
    using T = value_type_of<E>;
    using result = traced_for<T, dims_of<E>>;
    // Evaluated from the saved expression, which reads the same elements and is no traced value:
    // the kernels evaluate it as any other, recording nothing.
    auto expression = saved(e, &t);
    kept_by_forward<decltype(expression)> kept;
    auto value = [&] {
        const tape::pause evaluating(t);
        return evaluate_keeping<T, dims_of<E>>(expression, kept);
    }();
    if constexpr (!std::is_floating_point_v<T>) {
        // A mask or a count: no gradient flows through it, so nothing is recorded.
        using record_type = typename traced_for_impl<T, dims_of<E>>::record;
        return result(std::make_shared<record_type>(std::move(value)));
    } else {
        using record_type = typename recorded_for_impl<decltype(expression), T, dims_of<E>>::type;
        auto rec = std::make_shared<record_type>(std::move(value), std::move(expression), std::move(kept));
        t.push(rec);
        return result(std::move(rec));
    }
}

}  // namespace detail

template <class E>
inline constexpr bool reads_traced = Expression<E> && detail::reads_traced<E>();

// eval() of an expression that reads a traced value: recorded, where a tape records; otherwise
// (the kernels evaluating a part of a recorded expression) a traced value of no record.
template <Expression E>
    requires reads_traced<E>
auto eval(E&& e) {
    using T = value_type_of<E>;
    tape* t = tape::active();
    if (t && t->recording()) return detail::record(e, *t);
    using result = detail::traced_for<T, dims_of<E>>;
    using record_type = typename detail::traced_for_impl<T, dims_of<E>>::record;
    return result(std::make_shared<record_type>(tensor_for<T, dims_of<E>>(detail::saved(e, t))));
}

// The sum and the mean of every element of an expression that reads a traced value: 0-d traced
// values, recorded (dim by dim, from the last).
template <Expression E>
    requires reads_traced<E>
auto sum(const E& e) {
    if constexpr (rank_of<E> == 0) return eval(e);
    else return sum(eval(reduce_node<op::sum, rank_of<E> - 1, operand_t<const E&>>(e)));
}
template <Expression E>
    requires reads_traced<E>
auto mean(const E& e) {
    using T = value_type_of<E>;
    std::size_t count = 1;
    for (const auto extent : e.extents()) count *= extent;
    return eval(sum(e) / static_cast<T>(count));
}

namespace detail {
template <bool Largest, class E>
auto extreme_of(const E& e);
}  // namespace detail

// The unbiased variance, the largest and the smallest of every element of an expression that
// reads a traced value: 0-d traced values, each recorded with its derivative (max and min share
// the gradient evenly among the elements that attain them, as torch's do).
template <Expression E>
    requires reads_traced<E>
auto var(const E& e) {
    using T = value_type_of<E>;
    const auto x = eval(e);
    const auto stored = tensor_for<T, dims_of<E>>(detail::saved(x, nullptr));
    auto value = shaped::var(stored);
    const auto centre = shaped::mean(stored).item();
    const auto n = static_cast<T>(stored.size());
    return with_derivative(
        std::move(value),
        [stored, centre, n](const auto& g) { return tensor_for<T, dims_of<E>>((stored - centre) * (g.item() * T(2) / (n - T(1)))); },
        x);
}
template <Expression E>
    requires reads_traced<E>
auto max(const E& e) {
    return detail::extreme_of<true>(e);
}
template <Expression E>
    requires reads_traced<E>
auto min(const E& e) {
    return detail::extreme_of<false>(e);
}

namespace detail {
template <bool Largest, class E>
auto extreme_of(const E& e) {
    using T = value_type_of<E>;
    const auto x = eval(e);
    const auto stored = tensor_for<T, dims_of<E>>(saved(x, nullptr));
    auto value = Largest ? shaped::max(stored) : shaped::min(stored);
    const T extreme = value.item();
    std::size_t ties = 0;
    for (const T v : stored.elements()) ties += v == extreme ? 1 : 0;
    return with_derivative(
        std::move(value),
        [stored, extreme, ties](const auto& g) {
            return tensor_for<T, dims_of<E>>(cast<T>(stored == extreme) * (g.item() / static_cast<T>(ties)));
        },
        x);
}
}  // namespace detail

// A differentiated value's elements as a plain const View (what a fused function of yours reads
// to compute its value: no traced type reaches your kernels); any other Tensor or View as it is.
template <Expression X>
    requires(is_traced<X> || is_traced_view<X>)
auto value_of(const X& x) {
    return view_for<const value_type_of<X>, dims_of<X>>(x.data(), x.extents(), x.strides());
}
template <Expression X>
    requires(!is_traced<X> && !is_traced_view<X>)
const X& value_of(const X& x) {
    // A parameter read so is read on purpose, for a function whose derivative is written beside
    // it: not the mistake a recording tape otherwise stops (core/read_watch.hpp).
    if constexpr (Strided<X>)
        if (tape* t = tape::active()) t->allow_plain_reads(x.data());
    return x;
}

// A parameter read as a differentiated value, for an expression that reads no other (a penalty
// on a weight, a table computed from parameters alone): its gradient adds into the parameter's.
// Outside a differentiated function, a value of no record holding the parameter's elements.
template <class T, Dim... Ds>
traced<T, Ds...> watched(const Tensor<T, Ds...>& parameter) {
    tape* t = tape::active();
    if (t && t->recording()) return detail::record(parameter, *t);
    return traced<T, Ds...>(std::make_shared<detail::recorded_value<T, Ds...>>(parameter));
}

// A function of yours with its derivative written beside it (JAX's custom_vjp): value, which you
// computed from inputs... (through value_of), and derivative, which turns the value's gradient
// (a Tensor of value's dims) into the inputs' — one tensor for one input, else a std::tuple, in
// order, each of its input's dims (checked by name here). What the derivative reads, it captures:
// what the backward keeps is what you name. Recorded when an input is being differentiated;
// otherwise value is returned as it is, so one function serves training and inference.
//
//   auto y = train::with_derivative(Tensor<T, B, C>(tanh(value_of(x))), [y = ...](const auto& g) { ... }, x);
template <class T, Dim... Ds, class Derivative, Expression... Xs>
auto with_derivative(Tensor<T, Ds...> value, Derivative derivative, const Xs&... inputs) {
    using Grads = std::remove_cvref_t<std::invoke_result_t<const Derivative&, const Tensor<T, Ds...>&>>;
    static_assert(detail::gradients_of_inputs<Grads, Xs...>,
                  "shaped::train::with_derivative: the derivative returns one gradient of each input's dims, in order");
    if constexpr (!(reads_traced<Xs> || ...)) {
        return value;
    } else {
        tape* t = tape::active();
        auto saved = std::tuple{detail::saved(inputs, t)...};
        using record_type = detail::recorded_with<decltype(saved), Derivative, T, Ds...>;
        return detail::on_tape<T, Ds...>(std::make_shared<record_type>(std::move(value), std::move(saved), std::move(derivative)));
    }
}

// Writing a traced value's expression into a Tensor or View would drop what it was computed
// from, so that no gradient could reach it: a compile error, in the user's terms.
template <class Target, class Source>
    requires reads_traced<Source>
void assign_expression(Target&, const Source&) {
    static_assert(!reads_traced<Source>,
                  "shaped::train: a value computed from differentiated values is held with auto or eval(...), "
                  "not written into a Tensor or View (its gradient would be lost)");
}
template <class Target, class Source>
    requires reads_traced<Source>
void assign_expression(Target&, const Source&, shaped::detail::fresh_target) {
    static_assert(!reads_traced<Source>,
                  "shaped::train: a value computed from differentiated values is held with auto or eval(...), "
                  "not written into a Tensor (its gradient would be lost)");
}

}  // namespace shaped::train
