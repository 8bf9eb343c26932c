// split and merge against index arithmetic: which element lands where, when the result shares
// the operand's elements, and the product check at compile time and at run time.
#include <shaped/shaped.hpp>

#include <catch2/catch.hpp>

#include <type_traits>

namespace {
using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 3>;
using C = shaped::dim<"C", 12>;
using NH = shaped::dim<"NH", 3>;
using HS = shaped::dim<"HS", 4>;
using Td = shaped::dim<"T">;
using NHd = shaped::dim<"NH">;
using Cd = shaped::dim<"C">;

shaped::Tensor<float, B, T, C> numbered() {
    shaped::Tensor<float, B, T, C> x;
    for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = static_cast<float>(i);
    return x;
}
}  // namespace

TEST_CASE("split of a tensor is a view: element (b, t, c) is (b, t, c / HS, c % HS)", "[reshape]") {
    auto x = numbered();
    auto heads = shaped::split<C, NH, HS>(x);
    static_assert(std::is_same_v<decltype(heads), shaped::View<float, B, T, NH, HS>>);
    REQUIRE(heads.extents() == std::array<std::size_t, 4>{2, 3, 3, 4});
    for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t t = 0; t < 3; ++t)
            for (std::size_t c = 0; c < 12; ++c) REQUIRE(heads(b, t, c / 4, c % 4) == x(b, t, c));

    // The same elements, not a copy.
    heads(1, 2, 2, 3) = -1.0f;
    REQUIRE(x(1, 2, 11) == -1.0f);
}

TEST_CASE("split of a const tensor is a read-only view", "[reshape]") {
    const auto x = numbered();
    auto heads = shaped::split<C, NH, HS>(x);
    static_assert(std::is_same_v<decltype(heads), shaped::View<const float, B, T, NH, HS>>);
    REQUIRE(heads.data() == x.data());
}

TEST_CASE("split of a strided view keeps its strides", "[reshape]") {
    auto x = numbered();
    // Time steps 1..2 of every row: not contiguous across the batch.
    auto later = shaped::slice<T>(x, 1, 3);
    auto heads = shaped::split<C, NH, HS>(later);
    static_assert(std::is_same_v<decltype(heads), shaped::View<float, B, Td, NH, HS>>);
    for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t t = 0; t < 2; ++t)
            for (std::size_t c = 0; c < 12; ++c) REQUIRE(heads(b, t, c / 4, c % 4) == x(b, t + 1, c));
}

TEST_CASE("split of an expression is evaluated into a tensor with the new dims", "[reshape]") {
    const auto x = numbered();
    auto heads = shaped::split<C, NH, HS>(x * 2.0f);
    static_assert(std::is_same_v<decltype(heads), shaped::Tensor<float, B, T, NH, HS>>);
    for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t t = 0; t < 3; ++t)
            for (std::size_t c = 0; c < 12; ++c) REQUIRE(heads(b, t, c / 4, c % 4) == 2.0f * x(b, t, c));

    // A temporary tensor is not viewed (it would not outlive the view): it is evaluated too.
    auto owned = shaped::split<C, NH, HS>(numbered());
    static_assert(std::is_same_v<decltype(owned), shaped::Tensor<float, B, T, NH, HS>>);
    REQUIRE(owned(1, 2, 2, 3) == x(1, 2, 11));
}

TEST_CASE("split into a dynamic dim takes its extent and checks the product at run time", "[reshape]") {
    auto x = numbered();
    auto heads = shaped::split<C, NHd, HS>(x, NHd{3});
    static_assert(std::is_same_v<decltype(heads), shaped::View<float, B, T, NHd, HS>>);
    REQUIRE(heads.extents()[2] == 3);
    REQUIRE(heads(0, 1, 2, 1) == x(0, 1, 9));

    REQUIRE_THROWS_AS((shaped::split<C, NHd, HS>(x, NHd{2})), shaped::shape_error);
    REQUIRE_THROWS_WITH((shaped::split<C, NHd, HS>(x, NHd{2})),
                        "shaped::split: the product of the new extents differs from the old extent: "
                        "C(12) is not NH(2) x HS(4)");
}

TEST_CASE("split of a dynamic dim into static ones checks the product at run time", "[reshape]") {
    shaped::Tensor<float, B, Cd> x(Cd{12});
    for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = static_cast<float>(i);
    auto heads = shaped::split<C, NH, HS>(x);
    static_assert(std::is_same_v<decltype(heads), shaped::View<float, B, NH, HS>>);
    REQUIRE(heads(1, 2, 3) == 23.0f);

    shaped::Tensor<float, B, Cd> wrong(Cd{10});
    REQUIRE_THROWS_WITH((shaped::split<C, NH, HS>(wrong)), Catch::Contains("C(10) is not NH(3) x HS(4)"));
}

TEST_CASE("merge of a tensor is a view: element (b, t, h, s) is (b, t, h * HS + s)", "[reshape]") {
    shaped::Tensor<float, B, T, NH, HS> x;
    for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = static_cast<float>(i);
    auto merged = shaped::merge<NH, HS, C>(x);
    static_assert(std::is_same_v<decltype(merged), shaped::View<float, B, T, C>>);
    REQUIRE(merged.data() == x.data());
    for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t t = 0; t < 3; ++t)
            for (std::size_t h = 0; h < 3; ++h)
                for (std::size_t s = 0; s < 4; ++s) REQUIRE(merged(b, t, h * 4 + s) == x(b, t, h, s));
}

TEST_CASE("merge of a transposed tensor is evaluated, as .transpose().contiguous().view()", "[reshape]") {
    // (B, NH, T, HS), as attention leaves its heads, back to (B, T, C).
    shaped::Tensor<float, B, NH, T, HS> y;
    for (std::size_t i = 0; i < y.size(); ++i) y.data()[i] = static_cast<float>(i);
    auto merged = shaped::merge<NH, HS, C>(shaped::transpose<1, 2>(y));
    static_assert(std::is_same_v<decltype(merged), shaped::Tensor<float, B, T, C>>);
    for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t t = 0; t < 3; ++t)
            for (std::size_t c = 0; c < 12; ++c) REQUIRE(merged(b, t, c) == y(b, c / 4, t, c % 4));
}

TEST_CASE("merge of a view whose dims lie as one is a view, and otherwise it names them", "[reshape]") {
    shaped::Tensor<float, B, T, NH, HS> x;
    for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = static_cast<float>(i);
    auto first_steps = shaped::slice<T>(x, 0, 2);
    auto merged = shaped::merge<NH, HS, C>(first_steps);
    static_assert(std::is_same_v<decltype(merged), shaped::View<float, B, Td, C>>);
    REQUIRE(merged(1, 1, 7) == x(1, 1, 1, 3));

    // Merging B with T across the sliced-off step: B's stride is not T's run.
    using BT = shaped::dim<"BT">;
    REQUIRE_THROWS_WITH((shaped::merge<B, T, BT>(first_steps)),
                        Catch::Contains("shaped::merge: dims B(2) and T(2)") &&
                            Catch::Contains("do not lie in memory as one dim"));
    // A dim of extent 1 is never stepped, whatever its stride.
    auto one_step = shaped::slice<T>(x, 1, 2);
    auto joined = shaped::merge<B, T, BT>(one_step);
    static_assert(std::is_same_v<decltype(joined), shaped::View<float, BT, NH, HS>>);
    REQUIRE(joined.extents() == std::array<std::size_t, 3>{2, 3, 4});
    REQUIRE(joined(1, 2, 3) == x(1, 1, 2, 3));
}

TEST_CASE("merge into a dynamic dim takes the product, and into a static one checks it", "[reshape]") {
    shaped::Tensor<float, B, T, NH, HS> x;
    auto flat = shaped::merge<NH, HS, Cd>(x);
    static_assert(std::is_same_v<decltype(flat), shaped::View<float, B, T, Cd>>);
    REQUIRE(flat.extents()[2] == 12);

    shaped::Tensor<float, B, T, NHd, HS> dynamic_heads(NHd{2});
    REQUIRE_THROWS_WITH((shaped::merge<NHd, HS, C>(dynamic_heads)),
                        "shaped::merge: the product of the new extents differs from the old extent: "
                        "C(12) is not NH(2) x HS(4)");
}

TEST_CASE("split then merge is the identity on values, in any layout", "[reshape]") {
    shaped::Generator gen(3);
    const auto x = shaped::randn<float, B, T, C>(gen);
    // The head split of multi-head attention and back: (B,T,C) -> (B,NH,T,HS) -> (B,T,C).
    const shaped::Tensor<float, B, NH, T, HS> heads = shaped::transpose<1, 2>(shaped::split<C, NH, HS>(x));
    const shaped::Tensor<float, B, T, C> back = shaped::merge<NH, HS, C>(shaped::transpose<1, 2>(heads));
    for (std::size_t i = 0; i < x.size(); ++i) REQUIRE(back.data()[i] == x.data()[i]);
}

// ---- reshape: several adjacent dims as several --------------------------------------------------

namespace {
using H = shaped::dim<"H", 3>;
using W = shaped::dim<"W", 4>;
using Ch = shaped::dim<"C", 5>;
using P = shaped::dim<"P", 6>;
using Q = shaped::dim<"Q", 2>;
using Rd = shaped::dim<"R">;

// x(b, h, w, c) = its row-major index, (B, H, W, C).
shaped::Tensor<float, B, H, W, Ch> numbered_image() {
    shaped::Tensor<float, B, H, W, Ch> x;
    for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = static_cast<float>(i);
    return x;
}
}  // namespace

TEST_CASE("reshape of a tensor is a view: (H, W) as (P, Q), element by row-major index", "[reshape]") {
    auto x = numbered_image();
    auto y = shaped::reshape<shaped::dims<H, W>, shaped::dims<P, Q>>(x);
    static_assert(std::is_same_v<decltype(y), shaped::View<float, B, P, Q, Ch>>);
    for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t h = 0; h < 3; ++h)
            for (std::size_t w = 0; w < 4; ++w)
                for (std::size_t c = 0; c < 5; ++c) {
                    const std::size_t flat = h * 4 + w;   // the (H, W) run's index
                    REQUIRE(y(b, flat / 2, flat % 2, c) == x(b, h, w, c));
                }
    y(1, 5, 1, 4) = -1.0f;   // the same elements
    REQUIRE(x(1, 2, 3, 4) == -1.0f);
    // Three dims into one dynamic dim: its extent what the product leaves.
    const auto flat = shaped::reshape<shaped::dims<H, W, Ch>, shaped::dims<Rd>>(x);
    REQUIRE(flat.extents() == std::array<std::size_t, 2>{2, 60});
    for (std::size_t i = 0; i < 60; ++i) REQUIRE(flat(1, i) == x.data()[60 + i]);
}

TEST_CASE("reshape of an expression is evaluated, held or inline alike", "[reshape]") {
    const auto x = numbered_image();
    const auto doubled = x * 2.0f;
    const auto held = shaped::reshape<shaped::dims<W, Ch>, shaped::dims<Q, shaped::dim<"S", 10>>>(doubled);
    const shaped::Tensor<float, B, H, Q, shaped::dim<"S", 10>> inline_result =
        shaped::reshape<shaped::dims<W, Ch>, shaped::dims<Q, shaped::dim<"S", 10>>>(x * 2.0f);
    for (std::size_t i = 0; i < x.size(); ++i) {
        REQUIRE(held.data()[i] == 2.0f * x.data()[i]);
        REQUIRE(inline_result.data()[i] == held.data()[i]);
    }
}

TEST_CASE("reshape of a view keeps its strides where the dims lie as one, and otherwise names them", "[reshape]") {
    auto x = numbered_image();
    // Batch row 1 only: its (H, W) still lie as one run.
    auto row = shaped::slice<B>(x, 1, 2);
    auto y = shaped::reshape<shaped::dims<H, W>, shaped::dims<Q, P>>(row);
    for (std::size_t h = 0; h < 3; ++h)
        for (std::size_t w = 0; w < 4; ++w) REQUIRE(y(0, (h * 4 + w) / 6, (h * 4 + w) % 6, 2) == x(1, h, w, 2));
    // Half of W: H steps over the other half, so (H, W) is not one run.
    const auto half = shaped::slice<W>(x, 0, 2);
    REQUIRE_THROWS_WITH((shaped::reshape<shaped::dims<H, W>, shaped::dims<Rd>>(half)),
                        Catch::Contains("shaped::reshape: the view's dims H(3) .. W(2) do not lie in memory as one run"));
    // Evaluated first, it reshapes.
    const auto copy = shaped::reshape<shaped::dims<H, W>, shaped::dims<Rd>>(shaped::eval(half));
    REQUIRE(copy.extents()[1] == 6);
}

TEST_CASE("reshape checks the product at run time where an extent is dynamic", "[reshape]") {
    shaped::Generator gen(3);
    const auto x = shaped::randn<float, B, Td, Ch>(gen, Td{4});
    const auto ok = shaped::reshape<shaped::dims<Td, Ch>, shaped::dims<shaped::dim<"K", 10>, Q>>(x);
    REQUIRE(ok(1, 9, 1) == x(1, 3, 4));
    const auto x3 = shaped::randn<float, B, Td, Ch>(gen, Td{3});
    REQUIRE_THROWS_WITH((shaped::reshape<shaped::dims<Td, Ch>, shaped::dims<shaped::dim<"K", 10>, Q>>(x3)),
                        "shaped::reshape: the product of the new extents differs from the old extent: T(3) x C(5) is not K(10) x Q(2)");
    // A dynamic new dim that the rest cannot divide.
    REQUIRE_THROWS_WITH((shaped::reshape<shaped::dims<Td, Ch>, shaped::dims<shaped::dim<"K", 4>, Rd>>(x3)),
                        Catch::Contains("T(3) x C(5) is not K(4) x R("));
}
