#pragma once
// Recording an expression that reads a traced value, and its derivative, derived from the
// expression's type: each node hands the gradient of its value to its operands (a vector-
// Jacobian product, as JAX's vjp), as an expression of shaped's own ops, so that an elementwise
// chain's backward is again one elementwise chain and a matmul's is two matmuls.
//
//   eval(e)          e reads a traced value: the value, recorded (traced<T, dims of e>)
//   back(e, g)       adds to the gradients of e's operands, from g, the gradient of e's value
//
// Gradients broadcast as values do: an operand that broadcast in the forward receives the sum
// of its gradient over the dims it was broadcast along.

#include <shaped/kernels.hpp>
#include <shaped/kernels/rows_backward.hpp>
#include <shaped/train/traced.hpp>

#include <cmath>
#include <cstddef>
#include <memory>
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

template <class T, class List>
struct traced_for_impl;
template <class T, Dim... Ds>
struct traced_for_impl<T, dims<Ds...>> {
    using type = traced<T, Ds...>;
    using record = recorded_value<T, Ds...>;
};
// The traced value of elements T with the dims of List.
template <class T, class List>
using traced_for = typename traced_for_impl<T, List>::type;

// ---- whether an expression reads a traced value (at compile time) ---------------------------------

template <class E>
consteval bool reads_traced() {
    using N = std::remove_cvref_t<E>;
    if constexpr (is_traced<N>) {
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
template <class Node>
auto saved_node(const Node&, const tape&) {
    return no_derivative<Node>{};
}

template <class E>
auto saved(const E& e, const tape* t) {
    if constexpr (is_scalar_node<E> || is_saved_leaf<E> || is_saved_traced<E>) {
        return e;
    } else if constexpr (is_traced<E>) {
        return [&]<class T, Dim... Ds>(const traced<T, Ds...>& v) { return saved_traced<T, Ds...>(v.handle()); }(e);
    } else if constexpr (E::owns_storage) {  // a Tensor: a parameter, or a copy
        return [&]<class T, Dim... Ds>(const Tensor<T, Ds...>& tensor) {
            if (auto* gradient = t ? t->gradient_of(tensor) : nullptr) return saved_leaf<T, Ds...>(nullptr, &tensor, gradient);
            auto copy = std::make_shared<const Tensor<T, Ds...>>(tensor);
            const auto* value = copy.get();
            return saved_leaf<T, Ds...>(std::move(copy), value, nullptr);
        }(e);
    } else if constexpr (Strided<E>) {  // a View: its elements copied
        return saved(tensor_for<std::remove_const_t<value_type_of<E>>, dims_of<E>>(e), t);
    } else {
        return saved_node(e, t);
    }
}

// ---- gradients into leaves ------------------------------------------------------------------------

// acc += g, where g's extents broadcast with acc's: dims g has and acc lacks, or where acc has
// extent 1, are summed; dims acc has and g lacks, or where g has extent 1, are broadcast.
template <class T, Dim... Ds, class G>
void add_gradient(Tensor<T, Ds...>& acc, const G& g) {
    const auto gv = tensor_for<T, dims_of<G>>(g);
    constexpr std::size_t ra = sizeof...(Ds), rg = rank_of<G>;
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
    std::size_t count = 1;
    for (const auto e : extents) count *= e;
    std::array<std::size_t, r> index{};
    std::ptrdiff_t a_at = 0, g_at = 0;
    T* a = acc.data();
    const T* gd = gv.data();
    for (std::size_t n = 0; n < count; ++n) {
        a[a_at] += gd[g_at];
        for (std::size_t i = r; i-- > 0;) {
            a_at += acc_strides[i];
            g_at += g_strides[i];
            if (++index[i] < extents[i]) break;
            a_at -= acc_strides[i] * static_cast<std::ptrdiff_t>(extents[i]);
            g_at -= g_strides[i] * static_cast<std::ptrdiff_t>(extents[i]);
            index[i] = 0;
        }
    }
}

template <class T, Dim... Ds, class G>
void add_gradient(recorded_value<T, Ds...>& record, const G& g) {
    if (!record.has_gradient) {
        record.gradient = Tensor<T, Ds...>(typename Tensor<T, Ds...>::shape_type(record.value.extents()));
        record.gradient.fill(T(0));
        record.has_gradient = true;
    }
    add_gradient(record.gradient, g);
}

// g as a Tensor of e's own dims and extents (broadcast or summed to them).
template <class E, class G>
auto fitted(const E& e, const G& g) {
    using T = value_type_of<E>;
    tensor_for<T, dims_of<E>> out{typename tensor_for<T, dims_of<E>>::shape_type(e.extents())};
    out.fill(T(0));
    add_gradient(out, g);
    return out;
}

// Whether anything under e takes a gradient (at run time: a tensor may or may not be a parameter).
template <class E>
bool wants_gradient(const E& e) {
    if constexpr (is_saved_traced<E>) return true;
    else if constexpr (is_saved_leaf<E>) return e.gradient() != nullptr;
    else if constexpr (is_scalar_node<E>) return false;
    else if constexpr (requires { e.operands(); })
        return std::apply([](const auto&... o) { return (wants_gradient(o) || ...); }, e.operands());
    else if constexpr (requires { e.lhs(); }) return wants_gradient(e.lhs()) || wants_gradient(e.rhs());
    else if constexpr (requires { e.weight(); }) {
        bool wants = wants_gradient(e.operand()) || wants_gradient(e.weight());
        if constexpr (E::has_bias) wants = wants || wants_gradient(e.bias());
        return wants;
    }
    else return wants_gradient(e.operand());
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

// ---- each node's derivative ----------------------------------------------------------------------

template <class E, class G>
void back(const E& e, const G& g);
template <class E, class NewDims, class G>
void back_node(const rename_node<E, NewDims>& e, const G& g);
template <class E, std::array<std::size_t, rank_of<E>> Perm, class G>
void back_node(const permute_node<E, Perm>& e, const G& g);
template <class E, bool Upper, class G>
void back_node(const triangle_node<E, Upper>& e, const G& g);
template <class L, class R, class G>
void back_node(const matmul_node<L, R>& e, const G& g);
template <class Op, std::size_t Axis, class E, class G>
void back_node(const reduce_node<Op, Axis, E>& e, const G& g);
template <std::size_t Axis, class E, bool Log, class G>
void back_node(const softmax_node<Axis, E, Log>& e, const G& g);
template <class E, class W, class Bi, bool Centered, class G>
void back_node(const layer_norm_node<E, W, Bi, Centered>& e, const G& g);
template <class Node, class G>
void back_node(const Node&, const G&);

// g * f'(a) for an activation f, elementwise, by the library's one definition of f' (the row
// kernels' activation_backward), as a Tensor of a's dims.
template <class Op, class A, class G>
auto activation_gradient(const A& a, const G& g) {
    using T = value_type_of<A>;
    constexpr auto kind = std::is_same_v<Op, op::gelu>        ? kernels::activation_kind::gelu
                          : std::is_same_v<Op, op::gelu_tanh> ? kernels::activation_kind::gelu_tanh
                                                              : kernels::activation_kind::silu;
    const auto x = tensor_for<T, dims_of<A>>(a);
    const auto dy = fitted(a, g);
    auto dx = tensor_for<T, dims_of<A>>(typename tensor_for<T, dims_of<A>>::shape_type(x.extents()));
    dx.fill(T(0));
    kernels::activation_backward(kind, x.data(), dy.data(), dx.data(), x.size());
    return dx;
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
        back(a, activation_gradient<Op>(a, g));
    } else if constexpr (std::is_same_v<Op, op::where>) {  // where(condition, a, b)
        const auto& condition = a;
        const auto& if_true = e.template operand<1>();
        const auto& if_false = e.template operand<2>();
        if (wants_gradient(if_true)) back(if_true, where(condition, g, T(0)));
        if (wants_gradient(if_false)) back(if_false, where(condition, T(0), g));
    } else if constexpr (std::is_same_v<Op, op::masked_fill>) {  // masked_fill(a, mask, value)
        back(a, masked_fill(g, e.template operand<1>(), T(0)));
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
    } else if constexpr (requires { e.operands(); }) {
        if (wants_gradient(e)) back_elementwise(e, g);
    } else if (!wants_gradient(e)) {
        return;
    } else {
        // Every other node takes its gradient at its own dims.
        const auto gn = fitted(e, g);
        back_node(e, gn);
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
template <class E, bool Upper, class G>
void back_node(const triangle_node<E, Upper>& e, const G& g) {
    back(e.operand(), triangle_node<const G&, Upper>(g, e.diagonal()));
}
template <class L, class R, class G>
void back_node(const matmul_node<L, R>& e, const G& g) {
    // y = l @ r: dl = g @ r^T, dr = l^T @ g (summed over the batch dims an operand lacks).
    if (wants_gradient(e.lhs())) back(e.lhs(), matmul(g, mT(e.rhs())));
    if (wants_gradient(e.rhs())) back(e.rhs(), matmul(mT(e.lhs()), g));
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
void back_node(const layer_norm_node<E, W, Bi, Centered>& e, const G& g) {
    // Per row of D elements: xhat = (x - mean) * rstd (rms_norm: x * rstd), y = xhat * w + b.
    // dw = sum over rows of g * xhat, db = sum of g, and with dxhat = g * w,
    // dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))   (rms_norm: no mean(dxhat)).
    using T = value_type_of<E>;
    const auto x = tensor_for<T, dims_of<E>>(e.operand());
    const std::size_t d = x.extents()[rank_of<E> - 1];
    const std::size_t rows = d == 0 ? 0 : x.size() / d;
    auto xhat = tensor_for<T, dims_of<E>>(typename tensor_for<T, dims_of<E>>::shape_type(x.extents()));
    std::vector<T> rstd(rows);
    for (std::size_t r = 0; r < rows; ++r) {
        const T* row = x.data() + r * d;
        double mean = 0, squares = 0;
        if constexpr (Centered) {
            for (std::size_t i = 0; i < d; ++i) mean += row[i];
            mean /= static_cast<double>(d);
        }
        for (std::size_t i = 0; i < d; ++i) squares += (row[i] - mean) * (row[i] - mean);
        rstd[r] = static_cast<T>(1.0 / std::sqrt(squares / static_cast<double>(d) + e.eps()));
        for (std::size_t i = 0; i < d; ++i) xhat.data()[r * d + i] = static_cast<T>((row[i] - mean) * rstd[r]);
    }
    if (wants_gradient(e.weight())) back(e.weight(), g * xhat);
    if constexpr (!std::is_null_pointer_v<Bi>)
        if (wants_gradient(e.bias())) back(e.bias(), g);
    if (!wants_gradient(e.operand())) return;
    const auto dxhat = tensor_for<T, dims_of<E>>(g * e.weight());
    auto dx = tensor_for<T, dims_of<E>>(typename tensor_for<T, dims_of<E>>::shape_type(x.extents()));
    for (std::size_t r = 0; r < rows; ++r) {
        const T* dh = dxhat.data() + r * d;
        const T* h = xhat.data() + r * d;
        double mean_dh = 0, mean_dh_h = 0;
        for (std::size_t i = 0; i < d; ++i) {
            mean_dh += dh[i];
            mean_dh_h += dh[i] * h[i];
        }
        mean_dh /= static_cast<double>(d);
        mean_dh_h /= static_cast<double>(d);
        if constexpr (!Centered) mean_dh = 0;
        for (std::size_t i = 0; i < d; ++i)
            dx.data()[r * d + i] = static_cast<T>(rstd[r] * (dh[i] - mean_dh - h[i] * mean_dh_h));
    }
    back(e.operand(), dx);
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
    recorded(Tensor<T, Ds...> value, Saved expression)
        : recorded_value<T, Ds...>(std::move(value)), expression_(std::move(expression)) {}

    void backward() override {
        if (this->has_gradient) back(expression_, this->gradient);
    }

private:
    Saved expression_;
};

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
    auto value = [&] {
        const tape::pause evaluating(t);
        return tensor_for<T, dims_of<E>>(expression);
    }();
    if constexpr (!std::is_floating_point_v<T>) {
        // A mask or a count: no gradient flows through it, so nothing is recorded.
        using record_type = typename traced_for_impl<T, dims_of<E>>::record;
        return result(std::make_shared<record_type>(std::move(value)));
    } else {
        using record_type = typename recorded_for_impl<decltype(expression), T, dims_of<E>>::type;
        auto rec = std::make_shared<record_type>(std::move(value), std::move(expression));
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
