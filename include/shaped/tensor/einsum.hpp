#pragma once
// einsum<"pattern">(a, b) and einsum<"pattern">(a): torch.einsum over named dims. Each input of
// the pattern names its operand's dims, in order; the output names the result's dims, each a
// dim of an input:
//
//   einsum<"B NH T HS, B NH S HS -> B NH T S">(q, k)    q @ k^T, the same node as matmul(q, k.mT())
//   einsum<"B T C, C N -> B T N">(x, w)                 matmul(x, w)
//   einsum<"I, J -> I J">(u, v)                          an outer product, elementwise
//   einsum<"B T C -> C T B">(x), einsum<"B T C -> B">(x)  a permute, a sum
//
// A name in both operands must have one extent (a compile error where both are static, a
// shape_error otherwise); a name in one operand only and not in the output is summed first. The
// rest is lowered to the library's own differentiable ops, so that the result is a lazy node the
// kernels recognise as what it is (a scaled matmul stays one) and its derivative comes from
// theirs:
//   - no name contracted, or no free name on either side: lhs as it is and rhs permuted to its
//     order, each with dims of extent 1 for the other side's free names, multiplied elementwise
//     (broadcast), then the contracted names summed and the result permuted to the output's;
//   - else one matmul: lhs (lhs-free but its last, [rhs-free as extent 1], batch, M, K) and rhs
//     (rhs-free but its last, batch, K, N), M and N the last free name of each side or a dim of
//     extent 1 squeezed after; then the product permuted to the output's order. A permute of a
//     Tensor or View is read in place, as a BLAS transpose flag or strides: no copy.
//   - several names contracted are merged into one K first, by reshape: a View, no copy, of an
//     operand that reads a Tensor (itself, or a permute or rename of it) in which they lie side
//     by side; in place where an expression or a traced value holds them together in lhs's
//     order (evaluated once, viewed where recorded); else, and for a View (its strides known
//     only at run time), the operand copied once with them together, as torch.einsum copies.
// Not taken (each a compile error that says so): a name twice in one term (traces, diagonals),
// three operands or more, broadcasting a dim of extent 1 against another extent.

#include <shaped/expr/elementwise.hpp>
#include <shaped/expr/matmul.hpp>
#include <shaped/expr/reduce.hpp>
#include <shaped/expr/structure.hpp>
#include <shaped/tensor/diagnostics.hpp>
#include <shaped/tensor/reshape.hpp>

#include <array>
#include <cstddef>
#include <initializer_list>
#include <string_view>
#include <type_traits>
#include <utility>

namespace shaped {

namespace detail {

// ---- the pattern ---------------------------------------------------------------------------------

// The most names a term of the pattern may spell.
inline constexpr std::size_t einsum_term_names = 16;

// A term: where each of its names starts in the pattern, and how long it is.
struct einsum_term {
    std::array<std::size_t, einsum_term_names> start{}, length{};
    std::size_t count = 0;
};

enum class einsum_syntax { ok, character, arrow, operands, names };

struct einsum_parsed {
    einsum_syntax error = einsum_syntax::ok;
    std::size_t column = 0;  // where reading stopped, for an error
    std::array<einsum_term, 3> terms{};  // the inputs, then (at 2) the output
    std::size_t inputs = 0;
};

constexpr bool einsum_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

consteval einsum_parsed parse_einsum(std::string_view p) {
    einsum_parsed r;
    einsum_term term;
    bool in_output = false;
    const auto stop = [&](einsum_syntax error, std::size_t column) {
        r.error = error;
        r.column = column;
        return r;
    };
    for (std::size_t i = 0; i < p.size();) {
        const char c = p[i];
        const bool arrow = c == '-' && i + 1 < p.size() && p[i + 1] == '>';
        if (c == ' ') {
            ++i;
        } else if (einsum_name_char(c)) {
            if (term.count == einsum_term_names) return stop(einsum_syntax::names, i);
            term.start[term.count] = i;
            while (i < p.size() && einsum_name_char(p[i])) ++i;
            term.length[term.count] = i - term.start[term.count];
            ++term.count;
        } else if (c == ',' || arrow) {
            if (in_output) return stop(einsum_syntax::arrow, i);
            if (r.inputs == 2) return stop(einsum_syntax::operands, i);
            r.terms[r.inputs++] = term;
            term = {};
            in_output = arrow;
            i += arrow ? 2 : 1;
        } else {
            return stop(einsum_syntax::character, i);
        }
    }
    if (!in_output) return stop(einsum_syntax::arrow, p.size());
    r.terms[2] = term;
    return r;
}

template <fixed_string P>
inline constexpr einsum_parsed einsum_of = parse_einsum(P.view());

// The output's term.
inline constexpr std::size_t einsum_output = 2;

// The K-th name of term Term, as a string and as the type a diagnostic shows.
template <fixed_string P, std::size_t Term, std::size_t K>
inline constexpr std::string_view einsum_name_view =
    P.view().substr(einsum_of<P>.terms[Term].start[K], einsum_of<P>.terms[Term].length[K]);

template <fixed_string P, std::size_t Start, std::size_t... I>
auto einsum_name_of(std::index_sequence<I...>) -> dim_name<P.chars[Start + I]...>;
template <fixed_string P, std::size_t Term, std::size_t K>
using einsum_name = decltype(einsum_name_of<P, einsum_of<P>.terms[Term].start[K]>(
    std::make_index_sequence<einsum_of<P>.terms[Term].length[K]>{}));

template <fixed_string P, std::size_t Term, std::size_t... K>
auto einsum_names_shown(std::index_sequence<K...>) -> diag::names<einsum_name<P, Term, K>...>;
template <fixed_string P, std::size_t Term>
using einsum_term_shown = decltype(einsum_names_shown<P, Term>(std::make_index_sequence<einsum_of<P>.terms[Term].count>{}));

template <fixed_string P, std::size_t... I>
auto einsum_pattern_of(std::index_sequence<I...>) -> diag::pattern<P.chars[I]...>;
template <fixed_string P>
using einsum_pattern_shown = decltype(einsum_pattern_of<P>(std::make_index_sequence<P.length>{}));

// ---- names, as the lowering finds them -------------------------------------------------------------

// A list of names (a term's, a dims list's), and the lookups the lowering makes in it.
struct einsum_names {
    std::array<std::string_view, 2 * einsum_term_names + 2> name{};
    std::size_t count = 0;

    constexpr std::size_t find(std::string_view n) const {
        for (std::size_t i = 0; i < count; ++i)
            if (name[i] == n) return i;
        return count;
    }
    constexpr bool has(std::string_view n) const { return find(n) < count; }
    constexpr void add(std::string_view n) { name[count++] = n; }
    // The position of each of `order`'s names in this list.
    template <std::size_t N>
    constexpr std::array<std::size_t, N> positions_of(const einsum_names& order) const {
        std::array<std::size_t, N> p{};
        for (std::size_t i = 0; i < N; ++i) p[i] = find(order.name[i]);
        return p;
    }
};

constexpr einsum_names einsum_join(std::initializer_list<einsum_names> lists) {
    einsum_names r;
    for (const auto& l : lists)
        for (std::size_t i = 0; i < l.count; ++i) r.add(l.name[i]);
    return r;
}
// The first `count` names of a list (its free names but the last).
constexpr einsum_names einsum_first(const einsum_names& l, std::size_t count) {
    einsum_names r;
    for (std::size_t i = 0; i < count && i < l.count; ++i) r.add(l.name[i]);
    return r;
}

// Its last name, if any.
constexpr einsum_names einsum_last(const einsum_names& l) {
    einsum_names r;
    if (l.count) r.add(l.name[l.count - 1]);
    return r;
}

template <class List>
inline constexpr einsum_names einsum_names_of = []<Dim... Ds>(dims<Ds...>) {
    einsum_names r;
    (r.add(Ds::name.view()), ...);
    return r;
}(List{});

// Which of List's dims are static, and their extents (0 where dynamic).
template <class List>
inline constexpr auto einsum_static = []<Dim... Ds>(dims<Ds...>) { return std::array<bool, sizeof...(Ds)>{Ds::is_static...}; }(List{});
template <class List>
inline constexpr auto einsum_extents = []<Dim... Ds>(dims<Ds...>) {
    return std::array<std::size_t, sizeof...(Ds)>{known_extent<Ds>...};
}(List{});

template <fixed_string P, std::size_t Term>
inline constexpr einsum_names einsum_term_names_of = []<std::size_t... K>(std::index_sequence<K...>) {
    einsum_names r;
    (r.add(einsum_name_view<P, Term, K>), ...);
    return r;
}(std::make_index_sequence<einsum_of<P>.terms[Term].count>{});

template <fixed_string P>
inline constexpr einsum_names einsum_output_names = einsum_term_names_of<P, einsum_output>;

// What each name of two operands is, against the output: in both and in the output (batch), in
// one only (free, in the output's order), in both and not in the output (contracted, in lhs's
// order). A name of one operand only that the output lacks is summed before.
struct einsum_plan {
    einsum_names batch, lhs_free, rhs_free, contracted;
};
constexpr einsum_plan einsum_plan_of(const einsum_names& a, const einsum_names& b, const einsum_names& out) {
    einsum_plan p;
    for (std::size_t i = 0; i < out.count; ++i) {
        const auto n = out.name[i];
        if (a.has(n) && b.has(n)) p.batch.add(n);
        else if (a.has(n)) p.lhs_free.add(n);
        else p.rhs_free.add(n);
    }
    for (std::size_t i = 0; i < a.count; ++i)
        if (b.has(a.name[i]) && !out.has(a.name[i])) p.contracted.add(a.name[i]);
    return p;
}
template <fixed_string P, class LA, class LB>
inline constexpr einsum_plan einsum_plan_for = einsum_plan_of(einsum_names_of<LA>, einsum_names_of<LB>, einsum_output_names<P>);

// ---- the checks ----------------------------------------------------------------------------------

// The first name of a term that an earlier one repeats, or the term's count.
template <fixed_string P, std::size_t Term>
consteval std::size_t einsum_repeat() {
    const auto names = einsum_term_names_of<P, Term>;
    for (std::size_t i = 0; i < names.count; ++i)
        if (names.find(names.name[i]) < i) return i;
    return names.count;
}

template <fixed_string P, std::size_t Term, class List>
consteval bool einsum_spells() {
    const auto term = einsum_term_names_of<P, Term>;
    const auto have = einsum_names_of<List>;
    if (term.count != have.count) return false;
    for (std::size_t i = 0; i < term.count; ++i)
        if (term.name[i] != have.name[i]) return false;
    return true;
}

// Input Term's check against its operand's dims, or void.
template <fixed_string P, std::size_t Term, class List>
consteval auto einsum_input_misfit() {
    constexpr std::size_t repeat = einsum_repeat<P, Term>();
    if constexpr (repeat < einsum_of<P>.terms[Term].count)
        return std::type_identity<diag::einsum_repeated<diag::operand<Term>, einsum_name<P, Term, repeat>>>{};
    else if constexpr (!einsum_spells<P, Term, List>())
        return std::type_identity<diag::einsum_operand_dims<diag::operand<Term>, einsum_term_shown<P, Term>, List>>{};
    else
        return std::type_identity<void>{};
}

// The first pair of positions (in lhs, in rhs) where a name's static extents differ, or
// (LA::rank, 0).
template <class LA, class LB>
consteval std::pair<std::size_t, std::size_t> einsum_extent_clash() {
    const auto a = einsum_names_of<LA>, b = einsum_names_of<LB>;
    for (std::size_t i = 0; i < a.count; ++i) {
        const std::size_t j = b.find(a.name[i]);
        if (j < b.count && einsum_static<LA>[i] && einsum_static<LB>[j] && einsum_extents<LA>[i] != einsum_extents<LB>[j])
            return {i, j};
    }
    return {a.count, 0};
}

// The first output name no input has, or the output's count.
template <fixed_string P, class LA, class LB>
consteval std::size_t einsum_unknown() {
    const auto out = einsum_output_names<P>;
    for (std::size_t i = 0; i < out.count; ++i)
        if (!einsum_names_of<LA>.has(out.name[i]) && !einsum_names_of<LB>.has(out.name[i])) return i;
    return out.count;
}

// The check of einsum<P>(operands with dims Ls...) that fails, or void.
template <fixed_string P, class... Ls>
consteval auto einsum_misfit() {
    constexpr auto& parsed = einsum_of<P>;
    if constexpr (parsed.error != einsum_syntax::ok) {
        return std::type_identity<diag::einsum_pattern<einsum_pattern_shown<P>, diag::column<parsed.column>>>{};
    } else if constexpr (parsed.inputs != sizeof...(Ls)) {
        return std::type_identity<diag::einsum_operands<einsum_pattern_shown<P>, diag::operand<sizeof...(Ls)>>>{};
    } else {
        using LA = std::tuple_element_t<0, std::tuple<Ls..., dims<>>>;
        using LB = std::tuple_element_t<1, std::tuple<Ls..., dims<>, dims<>>>;
        using lhs = decltype(einsum_input_misfit<P, 0, LA>());
        using rhs = decltype(einsum_input_misfit<P, 1, LB>());
        constexpr std::size_t repeat = einsum_repeat<P, einsum_output>();
        constexpr std::size_t unknown = einsum_unknown<P, LA, LB>();
        constexpr auto clash = einsum_extent_clash<LA, LB>();
        if constexpr (!std::is_void_v<typename lhs::type>) return lhs{};
        else if constexpr (sizeof...(Ls) == 2 && !std::is_void_v<typename rhs::type>) return rhs{};
        else if constexpr (clash.first < LA::rank)
            return std::type_identity<diag::einsum_extent<dim_at<clash.first, LA>, dim_at<clash.second, LB>>>{};
        else if constexpr (repeat < parsed.terms[einsum_output].count)
            return std::type_identity<diag::einsum_repeated<diag::output, einsum_name<P, einsum_output, repeat>>>{};
        else if constexpr (unknown < parsed.terms[einsum_output].count)
            return std::type_identity<diag::einsum_unknown_output<einsum_name<P, einsum_output, unknown>, Ls...>>{};
        else
            return std::type_identity<void>{};
    }
}
template <fixed_string P, class... Es>
using einsum_misfit_t = typename decltype(einsum_misfit<P, dims_of<Es>...>())::type;

// A dynamic extent's check: a name in both operands has one extent.
template <class A, class B>
void check_einsum_extents(const A& a, const B& b) {
    constexpr auto an = einsum_names_of<dims_of<A>>, bn = einsum_names_of<dims_of<B>>;
    const auto ae = a.extents();
    const auto be = b.extents();
    for (std::size_t i = 0; i < an.count; ++i) {
        const std::size_t j = bn.find(an.name[i]);
        if (j < bn.count && ae[i] != be[j])
            throw_dims_do_not_meet("einsum", SHAPED_RULE_EINSUM_EXTENT, "lhs", an.name[i], ae[i], "rhs", bn.name[j], be[j]);
    }
}

// ---- the lowering, one step at a time -------------------------------------------------------------
// Each step hands what it made to the next, next(x), so that an lvalue Tensor stays an lvalue
// (held by reference, never copied) and a temporary stays an rvalue (held by value).

template <std::size_t N>
constexpr bool einsum_identity(const std::array<std::size_t, N>& perm) {
    for (std::size_t i = 0; i < N; ++i)
        if (perm[i] != i) return false;
    return true;
}

// x permuted by Perm, or x itself where Perm keeps every dim in place.
template <auto Perm, class E, class Next>
auto einsum_permuted(E&& x, Next&& next) {
    if constexpr (einsum_identity(Perm)) return next(std::forward<E>(x));
    else return next(permute_node<operand_t<E&&>, Perm>(std::forward<E>(x)));
}

// x with dims of extent 1 inserted: the J-th at Positions[J] of the result (increasing), named
// as Source's dim at Indices[J].
template <auto Positions, class Source, auto Indices, std::size_t J = 0, class E, class Next>
auto einsum_units(E&& x, Next&& next) {
    static_assert(Positions.size() == Indices.size());
    if constexpr (J == Indices.size()) {
        return next(std::forward<E>(x));
    } else {
        using D = dim_at<Indices[J], Source>;
        return einsum_units<Positions, Source, Indices, J + 1>(
            unsqueeze<static_cast<int>(Positions[J]), dim<D::name, 1>>(std::forward<E>(x)), next);
    }
}
// The positions Pos, Pos + 1, ..., N of them.
template <std::size_t Pos, std::size_t N>
inline constexpr auto einsum_run = [] {
    std::array<std::size_t, N> p{};
    for (std::size_t i = 0; i < N; ++i) p[i] = Pos + i;
    return p;
}();

// x with its dims summed that neither Other nor the output names.
template <fixed_string P, class Other, class E, class Next>
auto einsum_summed(E&& x, Next&& next) {
    constexpr std::size_t axis = [] {
        const auto own = einsum_names_of<dims_of<E>>;
        for (std::size_t i = 0; i < own.count; ++i)
            if (!einsum_names_of<Other>.has(own.name[i]) && !einsum_output_names<P>.has(own.name[i])) return i;
        return own.count;
    }();
    if constexpr (axis == rank_of<E>) return next(std::forward<E>(x));
    else return einsum_summed<P, Other>(make_along<op::sum, axis>(std::forward<E>(x)), next);
}

// The product's unit dims dropped, then its dims in the output's order.
using einsum_unit_m = dim<"~M", 1>;
using einsum_unit_n = dim<"~N", 1>;
template <fixed_string P, class E>
auto einsum_finish(E&& x) {
    using List = dims_of<E>;
    if constexpr (count_named<einsum_unit_m, List> > 0) {
        return einsum_finish<P>(squeeze<einsum_unit_m>(std::forward<E>(x)));
    } else if constexpr (count_named<einsum_unit_n, List> > 0) {
        return einsum_finish<P>(squeeze<einsum_unit_n>(std::forward<E>(x)));
    } else {
        constexpr auto perm = einsum_names_of<List>.template positions_of<List::rank>(einsum_output_names<P>);
        // x is a node or a View made here, an rvalue: it is moved into the result.
        return einsum_permuted<perm>(std::forward<E>(x), [](auto&& r) { return std::remove_cvref_t<decltype(r)>(std::move(r)); });
    }
}

// Whether two operands' product is elementwise: nothing contracted (an outer or elementwise
// product), or no free name on either side (a batched dot product, which as a matmul would be
// one 1 x 1 product per batch element), the contracted names then summed.
constexpr bool einsum_elementwise(const einsum_plan& plan) {
    return plan.contracted.count == 0 || (plan.lhs_free.count == 0 && plan.rhs_free.count == 0);
}

// Two operands with no name left to sum alone, and one name contracted or an elementwise
// product: their product.
template <fixed_string P, class A, class B>
auto einsum_product(A&& a, B&& b) {
    using LA = dims_of<A>;
    using LB = dims_of<B>;
    static constexpr auto an = einsum_names_of<LA>;
    static constexpr auto bn = einsum_names_of<LB>;
    static constexpr auto plan = einsum_plan_for<P, LA, LB>;
    if constexpr (einsum_elementwise(plan)) {
        // lhs as it is, then dims of extent 1 for the rhs-free names; rhs in lhs's order, with
        // dims of extent 1 where lhs has its free names, then the rhs-free names. Their product
        // (broadcast), the contracted names summed.
        static constexpr auto rhs_order = [] {
            einsum_names r;
            for (std::size_t i = 0; i < an.count; ++i)
                if (bn.has(an.name[i])) r.add(an.name[i]);
            return einsum_join({r, plan.rhs_free});
        }();
        static constexpr auto rhs_perm = bn.template positions_of<LB::rank>(rhs_order);
        static constexpr auto rhs_free = bn.template positions_of<plan.rhs_free.count>(plan.rhs_free);
        static constexpr auto lhs_free = an.template positions_of<plan.lhs_free.count>(plan.lhs_free);
        // Where lhs's free names stand, increasing: the rhs's units go there.
        static constexpr auto lhs_free_sorted = [] {
            auto p = lhs_free;
            for (std::size_t i = 0; i < p.size(); ++i)
                for (std::size_t j = i + 1; j < p.size(); ++j)
                    if (p[j] < p[i]) std::swap(p[i], p[j]);
            return p;
        }();
        return einsum_units<einsum_run<LA::rank, plan.rhs_free.count>, LB, rhs_free>(std::forward<A>(a), [&](auto&& a1) {
            return einsum_permuted<rhs_perm>(std::forward<B>(b), [&](auto&& b1) {
                return einsum_units<lhs_free_sorted, LA, lhs_free_sorted>(std::forward<decltype(b1)>(b1), [&](auto&& b2) {
                    return einsum_summed<P, dims<>>(std::forward<decltype(a1)>(a1) * std::forward<decltype(b2)>(b2),
                                                    [](auto&& r) { return einsum_finish<P>(std::forward<decltype(r)>(r)); });
                });
            });
        });
    } else {
        static_assert(plan.contracted.count == 1);
        // M and N: the last free name of each side, or a dim of extent 1; the other free names
        // are batch dims of the product, lhs's first, rhs's as extent 1 in lhs.
        static constexpr std::size_t lx = plan.lhs_free.count ? plan.lhs_free.count - 1 : 0;
        static constexpr std::size_t rx = plan.rhs_free.count ? plan.rhs_free.count - 1 : 0;
        static constexpr auto rhs_extra = einsum_first(plan.rhs_free, rx);
        static constexpr auto lhs_perm = an.template positions_of<LA::rank>(
            einsum_join({einsum_first(plan.lhs_free, lx), plan.batch, einsum_last(plan.lhs_free), plan.contracted}));
        static constexpr auto rhs_perm = bn.template positions_of<LB::rank>(
            einsum_join({rhs_extra, plan.batch, plan.contracted, einsum_last(plan.rhs_free)}));
        static constexpr auto rhs_extra_at = bn.template positions_of<rx>(rhs_extra);
        static constexpr std::array<std::size_t, plan.lhs_free.count ? 0 : 1> m_unit{};
        static constexpr std::array<std::size_t, plan.rhs_free.count ? 0 : 1> n_unit{};
        return einsum_permuted<lhs_perm>(std::forward<A>(a), [&](auto&& a1) {
            return einsum_units<einsum_run<lx, rx>, LB, rhs_extra_at>(std::forward<decltype(a1)>(a1), [&](auto&& a2) {
                constexpr std::size_t k_at = rank_of<decltype(a2)> - 1;
                return einsum_units<einsum_run<k_at, m_unit.size()>, dims<einsum_unit_m>, m_unit>(std::forward<decltype(a2)>(a2), [&](auto&& a3) {
                    return einsum_permuted<rhs_perm>(std::forward<B>(b), [&](auto&& b1) {
                        constexpr std::size_t end = rank_of<decltype(b1)>;
                        return einsum_units<einsum_run<end, n_unit.size()>, dims<einsum_unit_n>, n_unit>(std::forward<decltype(b1)>(b1), [&](auto&& b2) {
                            return einsum_finish<P>(matmul(std::forward<decltype(a3)>(a3), std::forward<decltype(b2)>(b2)));
                        });
                    });
                });
            });
        });
    }
}

// The contracted names' one dim, where there are several: static where each extent is known to
// either operand.
template <class LA, class LB, const einsum_names& Contracted>
consteval std::pair<bool, std::size_t> einsum_merged_extent() {
    std::size_t product = 1;
    for (std::size_t k = 0; k < Contracted.count; ++k) {
        const std::size_t i = einsum_names_of<LA>.find(Contracted.name[k]);
        const std::size_t j = einsum_names_of<LB>.find(Contracted.name[k]);
        if (einsum_static<LA>[i]) product *= einsum_extents<LA>[i];
        else if (einsum_static<LB>[j]) product *= einsum_extents<LB>[j];
        else return {false, 0};
    }
    return {true, product};
}
template <class LA, class LB, const einsum_names& Contracted>
consteval auto einsum_merged_dim() {
    constexpr auto extent = einsum_merged_extent<LA, LB, Contracted>();
    if constexpr (extent.first) return std::type_identity<dim<"~K", extent.second>>{};
    else return std::type_identity<dim<"~K">>{};
}

// Where each dim of x lies in the row-major Tensor x reads, when that is known at compile time:
// x is a Tensor lvalue, or a permute or rename of one it holds by reference.
template <class E, class Node = std::remove_cvref_t<E>>
struct einsum_layout {
    static constexpr bool known = std::is_lvalue_reference_v<E> && Strided<Node> && Node::owns_storage;
    static constexpr auto axes = iota_array<rank_of<Node>>();
};
template <class E, class Inner, std::array<std::size_t, rank_of<Inner>> Perm>
struct einsum_layout<E, permute_node<Inner, Perm>> {
    static constexpr bool known = einsum_layout<Inner>::known;
    static constexpr auto axes = [] {
        std::array<std::size_t, Perm.size()> a{};
        for (std::size_t i = 0; i < a.size(); ++i) a[i] = einsum_layout<Inner>::axes[Perm[i]];
        return a;
    }();
};
template <class E, class Inner, class NewDims>
struct einsum_layout<E, rename_node<Inner, NewDims>> : einsum_layout<Inner> {};

// Whether positions follow each other, increasing.
template <std::size_t N>
constexpr bool einsum_consecutive(const std::array<std::size_t, N>& positions) {
    for (std::size_t k = 1; k < N; ++k)
        if (positions[k] != positions[k - 1] + 1) return false;
    return true;
}

// x's contracted dims as the one dim K, by reshape:
//   - a View of x's elements, no copy, where x reads a Tensor (einsum_layout) in which they lie
//     side by side, in Contracted's order;
//   - x itself reshaped where x holds them side by side in Contracted's order and is not a View
//     (whose strides are known only at run time, where reshape would throw rather than copy): an
//     expression is evaluated once, as a matmul evaluates any operand it cannot read in place; a
//     traced value is viewed where it is recorded;
//   - else x copied once, with them together at its end.
template <class K, const einsum_names& Contracted, class E, class Next>
auto einsum_merge(E&& x, Next&& next) {
    using List = dims_of<E>;
    static constexpr auto own = einsum_names_of<List>;
    static constexpr auto at = own.template positions_of<Contracted.count>(Contracted);
    using From = pick<List, at>;
    using layout = einsum_layout<E&&>;
    static constexpr bool in_memory = [] {
        if constexpr (!layout::known) {
            return false;
        } else {
            std::array<std::size_t, at.size()> stored{};
            for (std::size_t k = 0; k < at.size(); ++k) stored[k] = layout::axes[at[k]];
            return einsum_consecutive(stored);
        }
    }();
    // x's dims as they are where the contracted ones follow each other in Contracted's order,
    // else with those last, in that order.
    static constexpr auto perm = [] {
        std::array<std::size_t, List::rank> p{};
        if (einsum_consecutive(at)) return iota_array<List::rank>();
        std::size_t n = 0;
        for (std::size_t i = 0; i < List::rank; ++i)
            if (!Contracted.has(own.name[i])) p[n++] = i;
        for (std::size_t k = 0; k < at.size(); ++k) p[n++] = at[k];
        return p;
    }();
    if constexpr (in_memory)
        return next(reshape<From, dims<K>>(view_of(permute_node<operand_t<E&&>, perm>(std::forward<E>(x)))));
    else if constexpr (einsum_consecutive(at) && !(Strided<E> && !std::remove_cvref_t<E>::owns_storage))
        return next(reshape<From, dims<K>>(std::forward<E>(x)));
    else
        return next(reshape<From, dims<K>>(permute_node<operand_t<E&&>, perm>(std::forward<E>(x))));
}

// The contracted names of operands A and B (as forwarded), in the order they lie in the memory
// of lhs where einsum_layout knows it, else of rhs, else in lhs's order: the order in which the
// most operands can be merged as Views.
template <fixed_string P, class A, class B>
inline constexpr einsum_names einsum_contracted = [] {
    using LA = dims_of<A>;
    using LB = dims_of<B>;
    auto c = einsum_plan_for<P, LA, LB>.contracted;
    const auto stored_at = [](std::string_view name) {
        if (einsum_layout<A>::known) return einsum_layout<A>::axes[einsum_names_of<LA>.find(name)];
        if (einsum_layout<B>::known) return einsum_layout<B>::axes[einsum_names_of<LB>.find(name)];
        return einsum_names_of<LA>.find(name);
    };
    for (std::size_t i = 0; i < c.count; ++i)
        for (std::size_t j = i + 1; j < c.count; ++j)
            if (stored_at(c.name[j]) < stored_at(c.name[i])) std::swap(c.name[i], c.name[j]);
    return c;
}();

// Two operands, nothing left to sum alone: several contracted names merged into one (but for an
// elementwise product), then the product.
template <fixed_string P, class A, class B>
auto einsum_contract(A&& a, B&& b) {
    using LA = dims_of<A>;
    using LB = dims_of<B>;
    if constexpr (einsum_plan_for<P, LA, LB>.contracted.count < 2 || einsum_elementwise(einsum_plan_for<P, LA, LB>)) {
        return einsum_product<P>(std::forward<A>(a), std::forward<B>(b));
    } else {
        using K = typename decltype(einsum_merged_dim<LA, LB, einsum_contracted<P, A&&, B&&>>())::type;
        return einsum_merge<K, einsum_contracted<P, A&&, B&&>>(std::forward<A>(a), [&](auto&& a1) {
            return einsum_merge<K, einsum_contracted<P, A&&, B&&>>(std::forward<B>(b), [&](auto&& b1) {
                return einsum_product<P>(std::forward<decltype(a1)>(a1), std::forward<decltype(b1)>(b1));
            });
        });
    }
}

}  // namespace detail

// Each has the overload that runs, the one a misfit picks (only declared: its return type is the
// failed check, instantiated at the caller's line) and the one a failed operand picks.
template <fixed_string P, Expression A, Expression B>
    requires std::is_void_v<detail::einsum_misfit_t<P, A, B>>
auto einsum(A&& a, B&& b) {
    detail::check_einsum_extents(a, b);
    return detail::einsum_summed<P, dims_of<B>>(std::forward<A>(a), [&](auto&& a1) {
        return detail::einsum_summed<P, dims_of<A>>(std::forward<B>(b), [&](auto&& b1) {
            return detail::einsum_contract<P>(std::forward<decltype(a1)>(a1), std::forward<decltype(b1)>(b1));
        });
    });
}
template <fixed_string P, Expression A, Expression B>
    requires(!std::is_void_v<detail::einsum_misfit_t<P, A, B>>)
detail::einsum_misfit_t<P, A, B> einsum(A&&, B&&);
template <fixed_string P, class A, class B>
    requires any_failed<A, B>
failed einsum(A&&, B&&);

// One operand: the names the output lacks summed, the rest in the output's order (a permute of
// the operand, read in place, even where the output keeps its order).
template <fixed_string P, Expression E>
    requires std::is_void_v<detail::einsum_misfit_t<P, E>>
auto einsum(E&& x) {
    return detail::einsum_summed<P, dims<>>(std::forward<E>(x), [](auto&& s) {
        using List = dims_of<decltype(s)>;
        constexpr auto perm = detail::einsum_names_of<List>.template positions_of<List::rank>(detail::einsum_output_names<P>);
        if constexpr (std::is_same_v<decltype(s), E&&>)
            return permute_node<operand_t<E&&>, perm>(std::forward<decltype(s)>(s));
        else
            return detail::einsum_finish<P>(std::forward<decltype(s)>(s));
    });
}
template <fixed_string P, Expression E>
    requires(!std::is_void_v<detail::einsum_misfit_t<P, E>>)
detail::einsum_misfit_t<P, E> einsum(E&&);
template <fixed_string P, Failed E>
failed einsum(E&&);

}  // namespace shaped
