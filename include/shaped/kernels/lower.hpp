#pragma once
// Lowering an elementwise chain: its stored operands are read in place, each node that is not
// elementwise (a matmul, softmax, a reduction, tril) is first run by its own kernel into a
// temporary, and every operation becomes one instruction of the elementwise machine
// (kernels/elementwise_machine.hpp), which runs them compiled once in src/. All that is compiled
// per chain in a user's program is the walk over its node types below. A chain the machine does
// not run (integer elements, or a rank above machine::max_rank) runs on the reference evaluator,
// element by element, from the same definitions (kernels/elementwise_ops.hpp).
//
//   run_elementwise(target, x * w + b);    // one pass over x, w and b, no temporary

#include <shaped/kernels/elementwise_machine.hpp>
#include <shaped/kernels/elementwise_ops.hpp>
#include <shaped/kernels/strided.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

namespace shaped::kernels {

namespace lowering {
template <class H>
auto hold(const H& e);
template <class H>
constexpr bool machine_runs();
}  // namespace lowering

template <class Target, class H>
void run_reference(Target& target, const H& held);

// target = source, for a source whose root is elementwise or stored, whose reads do not overlap
// the target's elements but element for element (kernels/overlap.hpp).
template <class Target, class Source>
void run_elementwise(Target& target, const Source& source);

namespace lowering {

// An elementwise node with its operands held: stored ones as Views, scalars as they are, other
// nodes evaluated into Tensors that live as long as the node held.
template <class Node, class... Held>
struct held_node {
    using node_type = Node;
    using value_type = value_type_of<Node>;
    using op_type = typename Node::op_type;
    std::tuple<Held...> operands;
};

template <class E>
inline constexpr bool is_scalar = false;
template <class T>
inline constexpr bool is_scalar<scalar<T>> = true;
template <class E>
inline constexpr bool is_elementwise = false;
template <class Op, class... Es>
inline constexpr bool is_elementwise<elementwise<Op, Es...>> = true;
template <class E>
inline constexpr bool is_rename = false;
template <class E, class NewDims>
inline constexpr bool is_rename<rename_node<E, NewDims>> = true;
template <class E>
inline constexpr bool is_permute = false;
template <class E, std::array<std::size_t, rank_of<E>> Perm>
inline constexpr bool is_permute<permute_node<E, Perm>> = true;
template <class E>
inline constexpr bool is_held_node = false;

// A permuted node whose operand is not stored (transpose<1, 2>(x * 3)): the operand evaluated,
// read through the permutation's strides.
template <class Stored, class Dims>
struct held_permuted {
    using value_type = value_type_of<Stored>;
    using dims_type = Dims;
    Stored stored;
    std::array<std::size_t, Dims::rank> extents_;
    std::array<std::ptrdiff_t, Dims::rank> strides_;

    const value_type* data() const { return stored.data(); }
    const auto& extents() const { return extents_; }
    const auto& strides() const { return strides_; }
};
template <class Node, class... Held>
inline constexpr bool is_held_node<held_node<Node, Held...>> = true;

template <class E>
auto hold(const E& e) {
    if constexpr (is_scalar<E>) return e;
    else if constexpr (Viewable<E>) return view_of(e);
    else if constexpr (is_rename<E>) return hold(e.operand());
    else if constexpr (is_permute<E>) {
        auto stored = eval(e.operand());
        held_permuted<decltype(stored), dims_of<E>> held{std::move(stored), {}, {}};
        const auto extents = held.stored.extents();
        const auto strides = held.stored.strides();
        for (std::size_t i = 0; i < rank_of<E>; ++i) {
            held.extents_[i] = extents[E::permutation[i]];
            held.strides_[i] = strides[E::permutation[i]];
        }
        return held;
    } else if constexpr (is_elementwise<E>)
        return std::apply([](const auto&... o) { return held_node<E, decltype(hold(o))...>{{hold(o)...}}; }, e.operands());
    else return eval(e);
}

// The type each operand of an operation is read as: the node's own value type, but bool for a
// condition or mask, the operands' common type for a comparison, and a cast's own.
template <class Op, class Node, std::size_t I>
struct operand_type {
    using type = value_type_of<Node>;
};
template <class Node, std::size_t I>
struct operand_type<op::where, Node, I> {
    using type = std::conditional_t<I == 0, bool, value_type_of<Node>>;
};
template <class Node, std::size_t I>
struct operand_type<op::masked_fill, Node, I> {
    using type = std::conditional_t<I == 1, bool, value_type_of<Node>>;
};
template <class To, class Node, std::size_t I>
struct operand_type<op::cast<To>, Node, I> {
    using type = value_type_of<std::tuple_element_t<I, std::remove_cvref_t<decltype(std::declval<Node>().operands())>>>;
};
// (A lambda in decltype here crashes clang 14 reading it back from a precompiled header.)
template <class Operands>
struct common_value;
template <class... Es>
struct common_value<std::tuple<Es...>> {
    using type = std::common_type_t<value_type_of<Es>...>;
};
template <class Node>
using common_operand_type = typename common_value<std::remove_cvref_t<decltype(std::declval<Node>().operands())>>::type;
template <class Op, class Node, std::size_t I>
    requires(is_comparison<Op>)
struct operand_type<Op, Node, I> {
    static constexpr bool logical =
        std::is_same_v<Op, op::logical_and> || std::is_same_v<Op, op::logical_or> || std::is_same_v<Op, op::logical_not>;
    using type = std::conditional_t<logical, bool, common_operand_type<Node>>;
};
template <class Node, std::size_t I>
using operand_type_t = typename operand_type<typename Node::op_type, Node, I>::type;

template <class Op>
inline constexpr bool is_cast = false;
template <class To>
inline constexpr bool is_cast<op::cast<To>> = true;

// One element of the node, of its operands' values (each already read as its operand type).
template <class Op, class Value, class... A>
Value apply_scalar(const A&... a) {
    if constexpr (std::is_same_v<Op, op::masked_fill>)
        return [](const Value& e, bool mask, const Value& v) { return mask ? v : e; }(a...);
    else if constexpr (is_cast<Op>) return Value(a...);
    else return static_cast<Value>(elementwise_ops::scalar<Op>::apply(a...));
}

// ---- the machine's program --------------------------------------------------------------------

template <class T>
inline constexpr bool machine_type = std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, bool>;
template <class T>
constexpr machine::dtype dtype_of() {
    if constexpr (std::is_same_v<T, float>) return machine::dtype::f32;
    else if constexpr (std::is_same_v<T, double>) return machine::dtype::f64;
    else return machine::dtype::boolean;
}

template <class Op>
constexpr machine::opcode opcode_of() {
    using machine::opcode;
#define SHAPED_OPCODE(tag) \
    if constexpr (std::is_same_v<Op, op::tag>) return opcode::tag;
    SHAPED_OPCODE(negate) SHAPED_OPCODE(exp) SHAPED_OPCODE(log) SHAPED_OPCODE(sqrt) SHAPED_OPCODE(rsqrt)
    SHAPED_OPCODE(tanh) SHAPED_OPCODE(abs) SHAPED_OPCODE(sigmoid) SHAPED_OPCODE(relu) SHAPED_OPCODE(square)
    SHAPED_OPCODE(gelu) SHAPED_OPCODE(gelu_tanh) SHAPED_OPCODE(silu) SHAPED_OPCODE(logical_not)
    SHAPED_OPCODE(add) SHAPED_OPCODE(subtract) SHAPED_OPCODE(multiply) SHAPED_OPCODE(divide)
    SHAPED_OPCODE(maximum) SHAPED_OPCODE(minimum) SHAPED_OPCODE(equal) SHAPED_OPCODE(not_equal)
    SHAPED_OPCODE(less) SHAPED_OPCODE(less_equal) SHAPED_OPCODE(greater) SHAPED_OPCODE(greater_equal)
    SHAPED_OPCODE(logical_and) SHAPED_OPCODE(logical_or) SHAPED_OPCODE(where)
#undef SHAPED_OPCODE
    else if constexpr (std::is_same_v<Op, op::masked_fill>) return opcode::where;
    else return opcode::cast;
}

// Whether the machine runs a held chain: every value float, double or bool, and arithmetic only
// on floating values.
template <class H>
constexpr bool machine_runs() {
    if constexpr (!is_held_node<H>) {
        return machine_type<value_type_of<H>>;
    } else {
        using Op = typename H::op_type;
        using Node = typename H::node_type;
        constexpr bool operands_run = []<std::size_t... I>(std::index_sequence<I...>) {
            return ((machine_runs<std::tuple_element_t<I, decltype(H::operands)>>() &&
                     machine_type<operand_type_t<Node, I>>) && ...);
        }(std::make_index_sequence<std::tuple_size_v<decltype(H::operands)>>{});
        constexpr machine::opcode code = opcode_of<Op>();
        constexpr bool floating = code == machine::opcode::cast || code == machine::opcode::where ||
                                  code >= machine::opcode::equal || code == machine::opcode::logical_not ||
                                  std::is_floating_point_v<value_type_of<H>>;
        return operands_run && floating && machine_type<value_type_of<H>>;
    }
}

// How many instructions and arrays a held chain takes at most (each value may need a cast),
// each node's counted once, as a variable.
template <class H>
struct program_size {
    static constexpr std::size_t steps = 1, arrays = is_scalar<H> ? 0 : 1;
};
template <class Node, class... Held>
struct program_size<held_node<Node, Held...>> {
    static constexpr std::size_t steps = 1 + ((program_size<Held>::steps + 1) + ...);
    static constexpr std::size_t arrays = (program_size<Held>::arrays + ...);
};

template <std::size_t Steps, std::size_t Arrays>
struct program_builder {
    std::array<machine::instruction, Steps> code{};
    std::size_t steps = 0;
    std::array<machine::array_operand, Arrays> arrays{};
    std::size_t array_count = 0;
    std::size_t rank = 0;
    std::array<std::size_t, machine::max_rank> extents{};

    std::uint16_t push(const machine::instruction& in) {
        code[steps] = in;
        return static_cast<std::uint16_t>(steps++);
    }
    std::uint16_t convert(std::uint16_t value, machine::dtype from, machine::dtype to) {
        if (from == to) return value;
        return push({machine::opcode::cast, to, from, {value, 0, 0}});
    }
};

// Emits the instructions of a held value; returns the one whose result is its value.
template <class Builder, class H>
std::uint16_t emit(Builder& b, const H& h) {
    using machine::opcode;
    constexpr machine::dtype type = dtype_of<value_type_of<H>>();
    if constexpr (is_scalar<H>) {
        return b.push({opcode::constant, type, type, {}, static_cast<double>(h.value)});
    } else if constexpr (!is_held_node<H>) {
        // A stored array: its strides aligned to the chain's extents from the right, 0 where it
        // broadcasts.
        constexpr std::size_t r = rank_of<H>;
        machine::array_operand array{h.data(), {}};
        const auto extents = h.extents();
        const auto strides = h.strides();
        for (std::size_t i = 0; i < r; ++i) array.strides[b.rank - r + i] = extents[i] == 1 ? 0 : strides[i];
        b.arrays[b.array_count] = array;
        const auto index = static_cast<std::uint16_t>(b.array_count++);
        return b.push({opcode::load, type, type, {index, 0, 0}});
    } else {
        using Node = typename H::node_type;
        using Op = typename H::op_type;
        constexpr std::size_t n = std::tuple_size_v<decltype(h.operands)>;
        const auto operands = [&]<std::size_t... I>(std::index_sequence<I...>) {
            return std::array<std::uint16_t, n>{b.convert(emit(b, std::get<I>(h.operands)),
                                                           dtype_of<value_type_of<std::tuple_element_t<I, decltype(h.operands)>>>(),
                                                           dtype_of<operand_type_t<Node, I>>())...};
        }(std::make_index_sequence<n>{});
        constexpr opcode code = opcode_of<Op>();
        if constexpr (std::is_same_v<Op, op::masked_fill>)  // where(mask, value, tensor)
            return b.push({code, type, type, {operands[1], operands[2], operands[0]}});
        else if constexpr (code == opcode::where)
            return b.push({code, type, type, {operands[0], operands[1], operands[2]}});
        else if constexpr (code == opcode::cast)
            return b.push({code, type, dtype_of<operand_type_t<Node, 0>>(), {operands[0], 0, 0}});
        else {
            std::array<std::uint16_t, 3> in{};
            for (std::size_t i = 0; i < n; ++i) in[i] = operands[i];
            return b.push({code, type, dtype_of<operand_type_t<Node, 0>>(), in});
        }
    }
}

// ---- the reference evaluator ------------------------------------------------------------------

template <class H, std::size_t R>
value_type_of<H> value_at(const H& h, const std::array<std::size_t, R>& index) {
    if constexpr (is_scalar<H>) {
        return h.value;
    } else if constexpr (!is_held_node<H>) {
        constexpr std::size_t r = rank_of<H>;
        const auto extents = h.extents();
        const auto strides = h.strides();
        std::ptrdiff_t offset = 0;
        for (std::size_t i = 0; i < r; ++i)
            if (extents[i] != 1) offset += static_cast<std::ptrdiff_t>(index[R - r + i]) * strides[i];
        return h.data()[offset];
    } else {
        using Node = typename H::node_type;
        return [&]<std::size_t... I>(std::index_sequence<I...>) {
            return apply_scalar<typename H::op_type, value_type_of<H>>(
                static_cast<operand_type_t<Node, I>>(value_at(std::get<I>(h.operands), index))...);
        }(std::make_index_sequence<std::tuple_size_v<decltype(h.operands)>>{});
    }
}

}  // namespace lowering

template <class Target, class H>
void run_reference(Target& target, const H& held) {
    using T = value_type_of<Target>;
    constexpr std::size_t R = rank_of<Target>;
    const auto extents = target.extents();
    const auto strides = target.strides();
    for (batch_iterator<R> at(extents); at; ++at)
        target.data()[at.offset(strides)] = static_cast<T>(lowering::value_at(held, at.index()));
}

template <class Target, class Source>
void run_elementwise(Target& target, const Source& source) {
    using T = value_type_of<Target>;
    constexpr std::size_t R = rank_of<Target>;
    const auto held = lowering::hold(source);
    using H = std::remove_cvref_t<decltype(held)>;
    if constexpr (lowering::machine_runs<H>() && lowering::machine_type<T> && R <= machine::max_rank) {
        using size = lowering::program_size<H>;
        lowering::program_builder<size::steps + 1, size::arrays> b;
        b.rank = R;
        const auto extents = target.extents();
        for (std::size_t i = 0; i < R; ++i) b.extents[i] = extents[i];
        b.convert(lowering::emit(b, held), lowering::dtype_of<value_type_of<H>>(), lowering::dtype_of<T>());
        machine::program p{{b.code.data(), b.steps}, {b.arrays.data(), b.array_count}, R, b.extents, target.data(),
                           lowering::dtype_of<T>(), {}};
        const auto strides = target.strides();
        for (std::size_t i = 0; i < R; ++i) p.target_strides[i] = strides[i];
        machine::run(p);
    } else {
        run_reference(target, held);
    }
}

}  // namespace shaped::kernels
