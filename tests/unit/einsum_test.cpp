// einsum against a naive loop over every index (the sum of the operands' products, as
// torch.einsum defines it): contractions, batch dims, transposes, outer products and reductions;
// which node each pattern lowers to, and that its operands are read in place.
#include <shaped/shaped.hpp>

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace {
using namespace shaped;

using B = dim<"B", 2>;
using NH = dim<"NH", 3>;
using T = dim<"T", 4>;
using S = dim<"S", 5>;
using HS = dim<"HS", 6>;
using C = dim<"C", 7>;
using N = dim<"N", 3>;
using I = dim<"I", 3>;
using J = dim<"J", 4>;
using K = dim<"K", 5>;
using L = dim<"L", 2>;
using Td = dim<"T">;
using HSd = dim<"HS">;

// An operand as the reference reads it: its dims' names and extents, its elements row-major.
struct reference_operand {
    std::vector<std::string> names;
    std::vector<std::size_t> extents;
    std::vector<double> values;
};

template <class E>
reference_operand reference_of(const E& e) {
    const auto t = eval(e);
    reference_operand r;
    for (const auto name : detail::names_of<E>()) r.names.emplace_back(name);
    for (const auto x : t.extents()) r.extents.push_back(x);
    r.values.assign(t.data(), t.data() + t.size());
    return r;
}

std::size_t position(const std::vector<std::string>& names, const std::string& name) {
    for (std::size_t i = 0; i < names.size(); ++i)
        if (names[i] == name) return i;
    return names.size();
}

// out[o] = the sum over every index of every name of the operands' elements' product.
std::vector<double> reference(const std::vector<std::string>& out, const std::vector<reference_operand>& operands) {
    std::vector<std::string> names;
    std::vector<std::size_t> extents;
    for (const auto& o : operands)
        for (std::size_t i = 0; i < o.names.size(); ++i)
            if (position(names, o.names[i]) == names.size()) {
                names.push_back(o.names[i]);
                extents.push_back(o.extents[i]);
            }
    const auto offset = [&](const std::vector<std::string>& of, const std::vector<std::size_t>& index) {
        std::size_t at = 0;
        for (const auto& name : of) at = at * extents[position(names, name)] + index[position(names, name)];
        return at;
    };
    std::size_t out_size = 1, count = 1;
    for (const auto& name : out) out_size *= extents[position(names, name)];
    for (const auto x : extents) count *= x;
    std::vector<double> result(out_size, 0.0);
    std::vector<std::size_t> index(names.size(), 0);
    for (std::size_t n = 0; n < count; ++n) {
        double product = 1;
        for (const auto& o : operands) product *= o.values[offset(o.names, index)];
        result[offset(out, index)] += product;
        for (std::size_t d = names.size(); d-- > 0;) {
            if (++index[d] < extents[d]) break;
            index[d] = 0;
        }
    }
    return result;
}

// The einsum's value against the reference's, element by element.
template <class E>
void check_against_reference(const E& e, const std::vector<std::string>& out, const std::vector<reference_operand>& operands) {
    const auto value = eval(e);
    const auto expected = reference(out, operands);
    REQUIRE(value.size() == expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
        INFO("element " << i);
        REQUIRE(value.data()[i] == Approx(expected[i]).margin(1e-9));
    }
}

template <class... Ds>
Tensor<double, Ds...> random(std::uint64_t seed) {
    Generator gen(seed);
    return randn<double, Ds...>(gen);
}
}  // namespace

TEST_CASE("einsum of attention's scores is matmul(q, k.mT()): the same node, the same values", "[einsum]") {
    const auto q = random<B, NH, T, HS>(1);
    const auto k = random<B, NH, S, HS>(2);
    auto scores = einsum<"B NH T HS, B NH S HS -> B NH T S">(q, k);
    STATIC_REQUIRE(std::is_same_v<decltype(scores), decltype(matmul(q, k.mT()))>);
    check_against_reference(scores, {"B", "NH", "T", "S"}, {reference_of(q), reference_of(k)});
    // Its operands are q and k themselves, read in place.
    REQUIRE(&scores.lhs() == &q);
    REQUIRE(&scores.rhs().operand() == &k);
}

TEST_CASE("einsum contracts one name: a Linear layer's product, a transposed result, a matrix and a vector", "[einsum]") {
    const auto x = random<B, T, C>(3);
    const auto w = random<C, N>(4);
    auto linear = einsum<"B T C, C N -> B T N">(x, w);
    STATIC_REQUIRE(std::is_same_v<decltype(linear), decltype(matmul(x, w))>);
    check_against_reference(linear, {"B", "T", "N"}, {reference_of(x), reference_of(w)});

    const auto a = random<I, K>(5);
    const auto b = random<K, J>(6);
    check_against_reference(einsum<"I K, K J -> J I">(a, b), {"J", "I"}, {reference_of(a), reference_of(b)});
    STATIC_REQUIRE(std::is_same_v<dims_of<decltype(einsum<"I K, K J -> J I">(a, b))>, dims<J, I>>);

    const auto v = random<K>(7);
    check_against_reference(einsum<"I K, K -> I">(a, v), {"I"}, {reference_of(a), reference_of(v)});
    check_against_reference(einsum<"K, I K -> I">(v, a), {"I"}, {reference_of(v), reference_of(a)});
    const auto u = random<K>(8);
    const auto dot = eval(einsum<"K, K ->">(v, u));
    STATIC_REQUIRE(rank_of<decltype(dot)> == 0);
    check_against_reference(einsum<"K, K ->">(v, u), {}, {reference_of(v), reference_of(u)});
}

TEST_CASE("einsum with batch dims and free dims on both sides, in any output order", "[einsum]") {
    const auto a = random<B, I, L, K>(9);
    const auto b = random<K, B, J, T>(10);
    check_against_reference(einsum<"B I L K, K B J T -> T B L J I">(a, b), {"T", "B", "L", "J", "I"},
                            {reference_of(a), reference_of(b)});
    check_against_reference(einsum<"B I L K, K B J T -> I J L T B">(a, b), {"I", "J", "L", "T", "B"},
                            {reference_of(a), reference_of(b)});
    STATIC_REQUIRE(std::is_same_v<dims_of<decltype(einsum<"B I L K, K B J T -> I J L T B">(a, b))>, dims<I, J, L, T, B>>);
}

TEST_CASE("einsum contracts several names: a View where they lie together, else one copy", "[einsum]") {
    using NHs = dim<"NH", 2>;
    using HSs = dim<"HS", 3>;
    const auto y = random<B, T, NHs, HSs>(11);
    const auto w = random<NHs, HSs, C>(12);
    auto together = einsum<"B T NH HS, NH HS C -> B T C">(y, w);
    // Both operands are read as Views of their own elements, (NH, HS) as one dim.
    REQUIRE(together.lhs().data() == y.data());
    REQUIRE(together.rhs().data() == w.data());
    check_against_reference(together, {"B", "T", "C"}, {reference_of(y), reference_of(w)});

    // A permute of a Tensor whose contracted dims still lie side by side: Views as well, merged in
    // the order they lie in, whatever order the pattern names them in.
    const auto y_moved = permute<B, T, HSs, NHs>(y);
    auto moved = einsum<"B T HS NH, NH HS C -> B T C">(y_moved, w);
    REQUIRE(moved.lhs().data() == y.data());
    REQUIRE(moved.rhs().data() == w.data());
    check_against_reference(moved, {"B", "T", "C"}, {reference_of(y_moved), reference_of(w)});
    // An expression is evaluated once, as any matmul operand that is not stored; a View, whose
    // strides are known only at run time, is copied once.
    check_against_reference(einsum<"B T NH HS, NH HS C -> B T C">(y * 2.0, w), {"B", "T", "C"}, {reference_of(y * 2.0), reference_of(w)});
    const auto rows = slice<T>(y, 1, 3);
    check_against_reference(einsum<"B T NH HS, NH HS C -> B T C">(rows, w), {"B", "T", "C"}, {reference_of(rows), reference_of(w)});

    const auto apart = random<HSs, B, NHs, T>(13);
    check_against_reference(einsum<"HS B NH T, NH HS C -> T C B">(apart, w), {"T", "C", "B"},
                            {reference_of(apart), reference_of(w)});
    const auto w_swapped = random<C, HSs, NHs>(14);
    check_against_reference(einsum<"B T NH HS, C HS NH -> B C T">(y, w_swapped), {"B", "C", "T"},
                            {reference_of(y), reference_of(w_swapped)});
    // Every name contracted: a 0-d value.
    const auto z = random<NHs, HSs>(15);
    check_against_reference(einsum<"NH HS, HS NH ->">(z, random<HSs, NHs>(16)), {}, {reference_of(z), reference_of(random<HSs, NHs>(16))});
}

TEST_CASE("einsum with nothing contracted: outer products and elementwise products, broadcast", "[einsum]") {
    const auto u = random<I>(17);
    const auto v = random<J>(18);
    auto outer = einsum<"I, J -> I J">(u, v);
    STATIC_REQUIRE(std::is_same_v<dims_of<decltype(outer)>, dims<I, J>>);
    check_against_reference(outer, {"I", "J"}, {reference_of(u), reference_of(v)});
    check_against_reference(einsum<"I, J -> J I">(u, v), {"J", "I"}, {reference_of(u), reference_of(v)});

    const auto a = random<B, I>(19);
    const auto b = random<J, B>(20);
    check_against_reference(einsum<"B I, J B -> J B I">(a, b), {"J", "B", "I"}, {reference_of(a), reference_of(b)});
    const auto c = random<I, B>(21);
    check_against_reference(einsum<"B I, I B -> I B">(a, c), {"I", "B"}, {reference_of(a), reference_of(c)});
}

TEST_CASE("einsum of one operand: transposes, sums, and sums before a product", "[einsum]") {
    const auto x = random<B, T, C>(22);
    auto moved = einsum<"B T C -> C B T">(x);
    STATIC_REQUIRE(std::is_same_v<decltype(moved), decltype(permute<C, B, T>(x))>);
    check_against_reference(moved, {"C", "B", "T"}, {reference_of(x)});
    auto same = einsum<"B T C -> B T C">(x);
    REQUIRE(view_of(same).data() == x.data());
    check_against_reference(same, {"B", "T", "C"}, {reference_of(x)});
    check_against_reference(einsum<"B T C -> C">(x), {"C"}, {reference_of(x)});
    check_against_reference(einsum<"B T C -> T B">(x), {"T", "B"}, {reference_of(x)});
    check_against_reference(einsum<"B T C ->">(x), {}, {reference_of(x)});

    // A name of one operand that the output lacks is summed before the product.
    const auto w = random<C, N>(23);
    check_against_reference(einsum<"B T C, C N -> N">(x, w), {"N"}, {reference_of(x), reference_of(w)});
    check_against_reference(einsum<"B T C, C N -> T">(x, w), {"T"}, {reference_of(x), reference_of(w)});
}

TEST_CASE("einsum over views, expressions, temporaries and dynamic extents", "[einsum]") {
    auto q = random<B, NH, T, HS>(24);
    const auto k = random<B, NH, S, HS>(25);
    // A slice: its strides read in place.
    auto later = slice<T>(q, 1, 4);
    check_against_reference(einsum<"B NH T HS, B NH S HS -> B NH T S">(later, k), {"B", "NH", "T", "S"},
                            {reference_of(later), reference_of(k)});
    // An expression, and a temporary tensor the result holds.
    auto scaled = einsum<"B NH T HS, B NH S HS -> B T S NH">(q * 2.0, random<B, NH, S, HS>(25));
    check_against_reference(scaled, {"B", "T", "S", "NH"}, {reference_of(q * 2.0), reference_of(k)});

    // Dynamic extents are checked when they are known.
    Tensor<double, B, Td, HSd> a(Td{3}, HSd{6});
    Tensor<double, B, Td, HSd> b(Td{2}, HSd{6});
    a.fill(1.0);
    b.fill(2.0);
    // No free name on either side: a batched dot product, elementwise then summed, not a matmul
    // of 1 x 1 products.
    auto dots = einsum<"B T HS, B T HS -> B HS">(a, a);
    STATIC_REQUIRE(std::is_same_v<decltype(dots), decltype(sum<Td>(a * a))>);
    check_against_reference(dots, {"B", "HS"}, {reference_of(a), reference_of(a)});
    REQUIRE_THROWS_WITH(einsum<"B T HS, B T HS -> B HS">(a, b),
                        Catch::Contains("shaped::einsum: " SHAPED_RULE_EINSUM_EXTENT) && Catch::Contains("T(3)") &&
                            Catch::Contains("T(2)"));
}

namespace {
// The check each misfit picks (the compile-fail cases show each one's diagnostic).
template <fixed_string P, class... Es>
using misfit = detail::einsum_misfit_t<P, Es...>;
template <class Check, template <class...> class Rule>
inline constexpr bool is_rule = false;
template <class... Shown, template <class...> class Rule>
inline constexpr bool is_rule<Rule<Shown...>, Rule> = true;
using X = Tensor<float, B, T, C>;
using W = Tensor<float, C, N>;
}  // namespace

TEST_CASE("einsum's checks: the pattern, the operands, extents and the output's names", "[einsum]") {
    STATIC_REQUIRE(std::is_void_v<misfit<"B T C, C N -> B T N", X, W>>);
    STATIC_REQUIRE(std::is_void_v<misfit<"  B  T C,C N->B T N ", X, W>>);
    STATIC_REQUIRE(is_rule<misfit<"B T C, C N", X, W>, diag::einsum_pattern>);          // no ->
    STATIC_REQUIRE(is_rule<misfit<"B T C -> B -> T", X>, diag::einsum_pattern>);        // two
    STATIC_REQUIRE(is_rule<misfit<"B T C, C N, N -> B", X, W>, diag::einsum_pattern>);  // three inputs
    STATIC_REQUIRE(is_rule<misfit<"B T.C -> B", X>, diag::einsum_pattern>);             // not a name
    STATIC_REQUIRE(is_rule<misfit<"B T C -> B, T", X>, diag::einsum_pattern>);          // a comma after ->
    STATIC_REQUIRE(std::is_same_v<misfit<"B T C - B", X>, diag::einsum_pattern<diag::pattern<'B', ' ', 'T', ' ', 'C', ' ', '-', ' ', 'B'>, diag::column<6>>>);
    STATIC_REQUIRE(is_rule<misfit<"B T C -> B", X, W>, diag::einsum_operands>);
    STATIC_REQUIRE(is_rule<misfit<"B T C, C N -> B", X>, diag::einsum_operands>);
    STATIC_REQUIRE(is_rule<misfit<"B C T, C N -> B", X, W>, diag::einsum_operand_dims>);
    STATIC_REQUIRE(is_rule<misfit<"B T, C N -> B", X, W>, diag::einsum_operand_dims>);
    STATIC_REQUIRE(is_rule<misfit<"B T C, C N -> B B", X, W>, diag::einsum_repeated>);
    STATIC_REQUIRE(is_rule<misfit<"B T C, C N -> Q", X, W>, diag::einsum_unknown_output>);
    STATIC_REQUIRE(is_rule<misfit<"B T C, C N -> B", X, Tensor<float, dim<"C", 8>, N>>, diag::einsum_extent>);
    // A dynamic extent meets any: it is checked when known.
    STATIC_REQUIRE(std::is_void_v<misfit<"B T C, C N -> B", X, Tensor<float, dim<"C">, N>>>);
}
