#pragma once
// Modules. A layer or a whole model is a plain struct whose members — parameters (Tensors),
// sub-modules and stacks of modules — are declared with Boost.Hana's BOOST_HANA_DEFINE_STRUCT:
//
//   struct TinyModel {
//       BOOST_HANA_DEFINE_STRUCT(TinyModel,
//           (nn::LayerNorm<C>, ln),
//           (nn::Stack<nn::Block<C, NH, HS>, 2>, h),
//           (nn::Linear<C, V>, head));
//   };
//
// From that alone, with no visitor written by hand:
//
//   for_each_parameter(model, f)   f(name, tensor) for every parameter, in declaration order, named
//                                  as PyTorch's state_dict names it: "ln.weight", "h.0.attn.c_attn.weight"
//   parameter_list(model)          the same parameters as untyped slots, for a plain loop
//   parameter_count<M>             the number of parameters, a constant
//   parameter_bytes<M>             their bytes, a constant
//   summary(model)                 the module tree as PyTorch prints a module, with each parameter's
//                                  shape and each module's parameter count
//
// io::load_parameters and io::save_safetensors read and write a module through the same visit.
// A member that is none of these kinds is a compile error naming it; `absent` stands for a
// parameter a configuration leaves out (a Linear without bias).
//
// Why Hana: its struct reflection gives each member's name, as a compile-time string, and its
// type, which is all that names, counts and a visit need, from the one declaration the user
// writes anyway; C++20 has no reflection of its own.

#include <shaped/nn/diagnostics.hpp>
#include <shaped/tensor/quantized.hpp>
#include <shaped/tensor/random.hpp>
#include <shaped/tensor/tensor.hpp>

#include <boost/hana/accessors.hpp>
#include <boost/hana/concept/struct.hpp>
#include <boost/hana/define_struct.hpp>
#include <boost/hana/first.hpp>
#include <boost/hana/for_each.hpp>
#include <boost/hana/second.hpp>
#include <boost/hana/string.hpp>
#include <boost/hana/unpack.hpp>

#include <array>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeindex>
#include <typeinfo>
#include <utility>
#include <vector>

namespace shaped::nn {

// Stands for a parameter a layer's configuration leaves out; visited as nothing.
struct absent {};

// N modules of one type, named "0", "1", ... as torch.nn.ModuleList names them (nanoGPT's `h`).
template <class M, std::size_t N>
class Stack;

template <class M>
concept Module = boost::hana::Struct<M>::value;

// f(std::string_view name, parameter) for every parameter of `module` (a module or a stack), in
// declaration order; the parameters are const when the module is.
template <class M, class F>
void for_each_parameter(M& module, F&& f);

namespace detail {
[[noreturn]] void throw_element_type(std::string_view parameter, std::type_index holds, std::type_index asked);
template <class M>
consteval std::size_t checked_count();
template <class M>
consteval std::size_t checked_bytes();
}  // namespace detail

// The number of parameters of a module or a stack, and their bytes.
template <class M>
inline constexpr std::size_t parameter_count = detail::checked_count<M>();
template <class M>
inline constexpr std::size_t parameter_bytes = detail::checked_bytes<M>();

// Every parameter of a module (or of gradients' storage), seen without its type: its name, rank,
// extents and elements, in declaration order. What does the same to every parameter whatever its
// dims — an optimizer's update, zeroing or clipping gradients, a sum across processes — is a
// plain loop over this list; what depends on the type (loading a tensor by its dims) is a visit.
//
//   for (const nn::parameter_slot& p : nn::parameter_list(model))
//       for (float& x : p.elements<float>()) ...       a std::logic_error if p holds no floats
template <bool Const>
struct basic_parameter_slot {
    using pointer = std::conditional_t<Const, const void*, void*>;
    std::string_view name;
    std::type_index tensor_type;   // Tensor<T, Ds...>
    std::type_index element_type;  // T
    std::size_t element_bytes;
    std::size_t rank;
    std::span<const std::size_t> extents;  // rank of them
    pointer tensor;    // the Tensor<T, Ds...> itself
    pointer data;
    std::size_t size;  // elements

    // A slot of mutable elements reads as one of const elements.
    operator basic_parameter_slot<true>() const
        requires(!Const)
    {
        return {name, tensor_type, element_type, element_bytes, rank, extents, tensor, data, size};
    }

    template <class T>
    std::span<std::conditional_t<Const, const T, T>> elements() const {
        if (element_type != typeid(T)) detail::throw_element_type(name, element_type, typeid(T));
        return {static_cast<std::conditional_t<Const, const T*, T*>>(data), size};
    }
};
using parameter_slot = basic_parameter_slot<false>;
using const_parameter_slot = basic_parameter_slot<true>;

// f(elements) for a slot of floating-point elements, as a span of float or of double.
template <bool Const, class F>
void on_floating_elements(const basic_parameter_slot<Const>& slot, F&& f) {
    if (slot.element_type == typeid(double)) f(slot.template elements<double>());
    else f(slot.template elements<float>());  // anything else: elements' error names it
}

// The slots of a module's parameters; holds their names.
template <bool Const>
class basic_parameter_list {
public:
    using slot_type = basic_parameter_slot<Const>;
    auto begin() const { return slots_.begin(); }
    auto end() const { return slots_.end(); }
    std::size_t size() const { return slots_.size(); }
    const slot_type& operator[](std::size_t i) const { return slots_[i]; }

private:
    template <class M>
    friend basic_parameter_list<std::is_const_v<M>> parameter_list(M& module);
    std::string names_;
    std::vector<slot_type> slots_;
};

template <class M>
basic_parameter_list<std::is_const_v<M>> parameter_list(M& module);

// The module tree, as PyTorch prints a module, with each parameter's shape and each module's
// count; a module of parameters only takes one line, and a stack prints its first module once:
//
//   Block(                                                          28,272 parameters
//     (ln_1): LayerNorm(weight (C=48), bias (C=48))
//     (attn): MultiHeadAttention(                                      9,408 parameters
//       (c_attn): Linear(weight (QKV=144, C=48), bias (QKV=144))
//   ...
//   )
//   28,272 parameters, 113,088 bytes
template <class M>
std::string summary(const M& module);

// ---- implementation ------------------------------------------------------------------------

namespace detail {

template <class P>
inline constexpr bool is_parameter = false;
// Static dims only: a module's size is a constant.
template <class T, Dim... Ds>
inline constexpr bool is_parameter<Tensor<T, Ds...>> = (Ds::is_static && ...);

// A quantized weight (tensor/quantized.hpp) is a parameter too: its slot's elements are its
// blocks, its count the weights they hold.
template <StorageFormat F, Dim Rows, Dim Cols>
inline constexpr bool is_parameter<QuantizedMatrix<F, Rows, Cols>> = Rows::is_static && Cols::is_static;

// The weights one stored element holds: a block's width, or 1.
template <class P>
inline constexpr std::size_t weights_per_element = 1;
template <StorageFormat F, Dim Rows, Dim Cols>
inline constexpr std::size_t weights_per_element<QuantizedMatrix<F, Rows, Cols>> = F::block_width;

template <class P>
inline constexpr bool is_stack = false;
template <class M, std::size_t N>
inline constexpr bool is_stack<Stack<M, N>> = true;

template <class P>
inline constexpr bool is_leaf = is_parameter<P> || std::is_same_v<P, absent>;

// The type of the member a Hana accessor pair reads.
template <class M, class Pair>
using member_type = std::remove_cvref_t<decltype(boost::hana::second(std::declval<Pair>())(std::declval<M&>()))>;

// A member that is none of the kinds, as the check shows it: its name (a hana::string, so a pack
// of chars on both compilers) and its type.
template <class Name, class Type>
struct module_member {};
template <class Misfit>
inline constexpr bool is_module_member = std::is_void_v<Misfit>;

consteval auto first_of() { return std::type_identity<void>{}; }
template <class Found, class... Rest>
consteval auto first_of(Found found, Rest... rest) {
    if constexpr (!std::is_void_v<typename Found::type>) return found;
    else return first_of(rest...);
}

// The first member, at any depth, that is none of the kinds; void when every one is a kind.
template <class P>
consteval auto first_misfit();

template <class M, class Pair>
consteval auto misfit_of_member() {
    using P = member_type<M, Pair>;
    if constexpr (is_leaf<P>) return std::type_identity<void>{};
    else if constexpr (is_stack<P> || Module<P>) return first_misfit<P>();
    else return std::type_identity<module_member<std::remove_cvref_t<decltype(boost::hana::first(std::declval<Pair>()))>, P>>{};
}

template <class P>
consteval auto first_misfit() {
    if constexpr (is_stack<P>) return first_misfit<typename P::module_type>();
    else if constexpr (!Module<P>) return std::type_identity<module_member<boost::hana::string<>, P>>{};
    else return boost::hana::unpack(boost::hana::accessors<P>(), [](auto... pairs) { return first_of(misfit_of_member<P, decltype(pairs)>()...); });
}
template <class P>
using first_misfit_t = typename decltype(first_misfit<P>())::type;

// Reduce(type_identity<member type>...) over a module's members.
template <class M, class Reduce>
consteval auto over_members(Reduce reduce) {
    return boost::hana::unpack(boost::hana::accessors<M>(), [&](auto... pairs) { return reduce(std::type_identity<member_type<M, decltype(pairs)>>{}...); });
}

template <class P>
consteval std::size_t count_of() {
    if constexpr (is_parameter<P>) return [] <Dim... Ds>(dims<Ds...>) { return (Ds::extent * ... * std::size_t{1}); }(dims_of<P>{});
    else if constexpr (std::is_same_v<P, absent>) return 0;
    else if constexpr (is_stack<P>) return P::size() * count_of<typename P::module_type>();
    else return over_members<P>([](auto... members) { return (count_of<typename decltype(members)::type>() + ... + std::size_t{0}); });
}

template <class P>
consteval std::size_t bytes_of() {
    if constexpr (is_parameter<P>) return count_of<P>() / weights_per_element<P> * sizeof(value_type_of<P>);
    else if constexpr (std::is_same_v<P, absent>) return 0;
    else if constexpr (is_stack<P>) return P::size() * bytes_of<typename P::module_type>();
    else return over_members<P>([](auto... members) { return (bytes_of<typename decltype(members)::type>() + ... + std::size_t{0}); });
}

template <class M>
consteval std::size_t checked_count() {
    static_assert(is_module_member<first_misfit_t<M>>, "shaped::nn::Module: " SHAPED_RULE_MODULE_MEMBER);
    return count_of<M>();
}
template <class M>
consteval std::size_t checked_bytes() {
    static_assert(is_module_member<first_misfit_t<M>>, "shaped::nn::Module: " SHAPED_RULE_MODULE_MEMBER);
    return bytes_of<M>();
}

// A parameter's extents, kept where a parameter's slot can point at them.
template <class P>
inline constexpr auto static_extents =
    []<Dim... Ds>(dims<Ds...>) { return std::array<std::size_t, sizeof...(Ds)>{Ds::extent...}; }(dims_of<P>{});

// path, then "." unless it is empty, then part: a parameter's or sub-module's full name.
inline void extend(std::string& path, std::string_view part) {
    if (!path.empty()) path += '.';
    path += part;
}

// Visits x, named `path`, and alongside it each of `others`, modules of x's type (a model and
// its gradients): a parameter is f's, f(name, parameter, the others' same parameter...); a
// stack's modules and a module's members are visited in order, each named path.<index> or
// path.<member>.
template <class P, class F, class... Others>
void visit(std::string& path, F& f, P& x, Others&... others) {
    using Plain = std::remove_const_t<P>;
    const std::size_t mark = path.size();
    if constexpr (is_parameter<Plain>) {
        f(std::string_view(path), x, others...);
    } else if constexpr (is_stack<Plain>) {
        for (std::size_t i = 0; i < Plain::size(); ++i) {
            extend(path, std::to_string(i));
            visit(path, f, x[i], others[i]...);
            path.resize(mark);
        }
    } else if constexpr (Module<Plain>) {
        boost::hana::for_each(boost::hana::accessors<Plain>(), [&](auto pair) {
            extend(path, boost::hana::to<const char*>(boost::hana::first(pair)));
            visit(path, f, boost::hana::second(pair)(x), boost::hana::second(pair)(others)...);
            path.resize(mark);
        });
    }
}

// A module's name as the summary prints it: its type's, without namespace or template arguments
// ("Linear", "GPT").
template <class M>
constexpr std::string_view type_name() {
    constexpr std::string_view signature = __PRETTY_FUNCTION__;
#if defined(__clang__)
    constexpr std::string_view marker = "[M = ";
#else
    constexpr std::string_view marker = "[with M = ";
#endif
    std::string_view name = signature.substr(signature.find(marker) + marker.size());
    name = name.substr(0, name.find_first_of("<;]"));
    const std::size_t scope = name.rfind("::");
    return scope == std::string_view::npos ? name : name.substr(scope + 2);
}

// "28,224 parameters" placed after line, at a fixed column.
std::string with_count(std::string line, std::size_t count);

// "c_attn.weight (QKV=144, C=48)"
template <class P>
std::string describe_parameter(std::string_view name) {
    return [&]<Dim... Ds>(dims<Ds...>) {
        using shaped::detail::named_dim;
        const std::array<named_dim, sizeof...(Ds)> shape{named_dim{Ds::name.view(), Ds::extent}...};
        std::string format;
        if constexpr (requires { P::format::name; }) format = std::string(P::format::name) + " ";
        return std::string(name) + " " + format + shaped::detail::describe_shape(shape);
    }(dims_of<P>{});
}

// Whether every member is a parameter or absent: such a module takes one line.
template <class M>
consteval bool holds_only_leaves() {
    return over_members<M>([](auto... members) { return (is_leaf<typename decltype(members)::type> && ...); });
}

template <class M>
void summarise(std::string& out, const std::string& indent, const std::string& label, const M& module) {
    if constexpr (is_stack<M>) {
        // Its modules are alike: printed once, as PyTorch prints repeated modules, "(0-11): 12 x Block(".
        out += with_count(indent + label + "Stack(", count_of<M>()) + "\n";
        const std::string index = M::size() == 1 ? "(0): " : "(0-" + std::to_string(M::size() - 1) + "): " + std::to_string(M::size()) + " x ";
        summarise(out, indent + "  ", index, module[0]);
    } else if constexpr (holds_only_leaves<M>()) {
        std::string line = indent + label + std::string(type_name<M>()) + "(";
        bool first = true;
        boost::hana::for_each(boost::hana::accessors<M>(), [&](auto pair) {
            using P = member_type<M, decltype(pair)>;
            if constexpr (is_parameter<P>) {
                line += first ? "" : ", ";
                line += describe_parameter<P>(boost::hana::to<const char*>(boost::hana::first(pair)));
                first = false;
            }
        });
        out += line + ")\n";
        return;
    } else {
        out += with_count(indent + label + std::string(type_name<M>()) + "(", count_of<M>()) + "\n";
        boost::hana::for_each(boost::hana::accessors<M>(), [&](auto pair) {
            using P = member_type<M, decltype(pair)>;
            const std::string name = std::string("(") + boost::hana::to<const char*>(boost::hana::first(pair)) + "): ";
            if constexpr (is_parameter<P>) out += indent + "  " + describe_parameter<P>(name) + "\n";
            else if constexpr (!std::is_same_v<P, absent>) summarise(out, indent + "  ", name, boost::hana::second(pair)(module));
        });
    }
    out += indent + ")\n";
}

std::string summary_total(std::size_t count, std::size_t bytes);

}  // namespace detail

template <class M, class F>
void for_each_parameter(M& module, F&& f) {
    static_assert(detail::is_module_member<detail::first_misfit_t<std::remove_const_t<M>>>,
                  "shaped::nn::Module: " SHAPED_RULE_MODULE_MEMBER);
    std::string path;
    detail::visit(path, f, module);
}

template <class M>
basic_parameter_list<std::is_const_v<M>> parameter_list(M& module) {
    static_assert(detail::is_module_member<detail::first_misfit_t<std::remove_const_t<M>>>,
                  "shaped::nn::Module: " SHAPED_RULE_MODULE_MEMBER);
    constexpr bool is_const = std::is_const_v<M>;
    basic_parameter_list<is_const> list;
    std::vector<std::pair<std::size_t, std::size_t>> names;  // where each name lies in names_
    auto add = [&](std::string_view name, auto& p) {
        using P = std::remove_cvref_t<decltype(p)>;
        using T = value_type_of<P>;
        names.emplace_back(list.names_.size(), name.size());
        list.names_ += name;
        list.slots_.push_back({{}, typeid(P), typeid(T), sizeof(T), rank_of<P>, detail::static_extents<P>, &p, p.data(), p.size()});
    };
    std::string path;
    detail::visit(path, add, module);
    // Named only now: names_ no longer moves.
    for (std::size_t i = 0; i < names.size(); ++i)
        list.slots_[i].name = std::string_view(list.names_).substr(names[i].first, names[i].second);
    return list;
}

template <class M>
std::string summary(const M& module) {
    std::string out;
    detail::summarise(out, "", "", module);
    return out + detail::summary_total(parameter_count<M>, parameter_bytes<M>);
}

// ---- Stack ---------------------------------------------------------------------------------

namespace detail {
// Looked up only when a stack's cache_type is named: a stack of layers that do not decode has none.
template <class M, std::size_t N, class B, class S>
struct stack_caches {
    using type = std::array<typename M::template cache_type<B, S>, N>;
};
}  // namespace detail

template <class M, std::size_t N>
class Stack {
    static_assert(N > 0, "shaped::nn::Stack: a stack holds at least one module");

public:
    using module_type = M;
    static constexpr std::size_t size() { return N; }

    // Parameters zero-filled, to be loaded.
    Stack() = default;
    // Each module drawn from gen in turn, module 0 first, as PyTorch initialises a ModuleList.
    explicit Stack(Generator& gen) : modules_(draw(gen, std::make_index_sequence<N>{})) {}

    M& operator[](std::size_t i) { return modules_[i]; }
    const M& operator[](std::size_t i) const { return modules_[i]; }
    auto begin() { return modules_.begin(); }
    auto end() { return modules_.end(); }
    auto begin() const { return modules_.begin(); }
    auto end() const { return modules_.end(); }

    // x through module 0, then 1, ...: the full forward of a stack of blocks, (B, T, C) -> (B, T, C).
    template <class X>
    auto operator()(const X& x) const {
        auto h = modules_[0](x);
        for (std::size_t i = 1; i < N; ++i) h = modules_[i](h);
        return h;
    }

    // The caches a stack decodes with, one per module, kept in step.
    template <StaticDim B, StaticDim S>
    using cache_type = typename detail::stack_caches<M, N, B, S>::type;

    // The positions each batch row adds in a decoding step of n positions (counts[b] for row b,
    // else all n); cache_overflow unless every cache has room for them.
    template <class Cache>
    static typename Cache::lengths_type check_room(const std::array<Cache, N>& caches, std::size_t n,
                                                   const std::optional<typename Cache::lengths_type>& counts) {
        typename Cache::lengths_type taken;
        if (counts) taken = *counts;
        else taken.fill(n);
        for (const Cache& cache : caches) cache.check_room(taken);
        return taken;
    }

    // Decoding through every module, each with its own cache. A step that one cache cannot take
    // is refused before any cache changes: each is checked first, then all append.
    template <class X, class Cache>
    auto operator()(const X& x, std::array<Cache, N>& caches, std::optional<typename Cache::lengths_type> counts = std::nullopt) const {
        check_room(caches, x.extents()[1], counts);
        auto h = modules_[0](x, caches[0], counts);
        for (std::size_t i = 1; i < N; ++i) h = modules_[i](h, caches[i], counts);
        return h;
    }

private:
    template <std::size_t... I>
    static std::array<M, N> draw(Generator& gen, std::index_sequence<I...>) {
        // A braced list is evaluated left to right: module 0 draws first.
        return {((void)I, M(gen))...};
    }

    std::array<M, N> modules_;
};

}  // namespace shaped::nn
