// einsum against torch.einsum: the cases of tests/parity/make_fixtures.py's EINSUM_CASES
// (contractions, batch dims, transposes, outer products and reductions), each pattern written
// in shaped's names where torch's has letters, over the same float64 operands.
#include <shaped/shaped.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <string>

namespace {

using B = shaped::dim<"B", 2>;
using NH = shaped::dim<"NH", 3>;
using T = shaped::dim<"T", 4>;
using S = shaped::dim<"S", 5>;
using HS = shaped::dim<"HS", 6>;
using C = shaped::dim<"C", 7>;
using N = shaped::dim<"N", 3>;
using I = shaped::dim<"I", 3>;
using J = shaped::dim<"J", 4>;
using K = shaped::dim<"K", 5>;
using NH2 = shaped::dim<"NH", 2>;
using HS3 = shaped::dim<"HS", 3>;

template <shaped::Dim... Ds>
shaped::Tensor<double, Ds...> load(const char* name) {
    return shaped::io::load_npy<double, Ds...>(std::string(SHAPED_FIXTURE_DIR) + "/einsum/" + name + ".npy");
}

// The einsum's value has torch's dims and, element by element, torch's value.
template <shaped::Dim... Ds, class E>
void require_torch(const E& e, const char* name) {
    const shaped::Tensor<double, Ds...> actual = e;
    const auto expected = load<Ds...>(name);
    for (std::size_t i = 0; i < expected.size(); ++i) {
        INFO(name << " element " << i);
        REQUIRE(actual.data()[i] == Approx(expected.data()[i]).epsilon(1e-12).margin(1e-12));
    }
}

}  // namespace

TEST_CASE("einsum matches torch.einsum: contractions, batch dims and transposed results", "[parity][einsum]") {
    const auto q = load<B, NH, T, HS>("q");
    const auto k = load<B, NH, S, HS>("k");
    require_torch<B, NH, T, S>(shaped::einsum<"B NH T HS, B NH S HS -> B NH T S">(q, k), "scores");  // bhtd,bhsd->bhts
    const auto x = load<B, T, C>("x");
    const auto w = load<C, N>("w");
    require_torch<B, T, N>(shaped::einsum<"B T C, C N -> B T N">(x, w), "linear");  // btc,cn->btn
    require_torch<J, I>(shaped::einsum<"I K, K J -> J I">(load<I, K>("a"), load<K, J>("b")), "transposed");  // ik,kj->ji
    const auto wh = load<NH2, HS3, C>("wh");
    require_torch<B, T, C>(shaped::einsum<"B T NH HS, NH HS C -> B T C">(load<B, T, NH2, HS3>("y"), wh), "heads_merged");
    const auto apart = load<HS3, B, NH2, T>("apart");
    require_torch<T, C, B>(shaped::einsum<"HS B NH T, NH HS C -> T C B">(apart, wh), "heads_apart");  // dbht,hdc->tcb
}

TEST_CASE("einsum matches torch.einsum: outer products and reductions", "[parity][einsum]") {
    const auto u = load<I>("u");
    require_torch<I, J>(shaped::einsum<"I, J -> I J">(u, load<J>("v")), "outer");
    require_torch<J, B, I>(shaped::einsum<"B I, J B -> J B I">(load<B, I>("bi"), load<J, B>("jb")), "batch_outer");
    const auto x = load<B, T, C>("x");
    require_torch<N>(shaped::einsum<"B T C, C N -> N">(x, load<C, N>("w")), "summed_first");  // btc,cn->n
    require_torch<C>(shaped::einsum<"B T C -> C">(x), "column_sums");
    require_torch<>(shaped::einsum<"B T C ->">(x), "total");
    require_torch<C, B, T>(shaped::einsum<"B T C -> C B T">(x), "permuted");
    require_torch<>(shaped::einsum<"I, I ->">(u, u), "dot");
}
