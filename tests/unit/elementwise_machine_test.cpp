// The elementwise machine (src/elementwise.cpp) against the reference evaluator (kernels/lower.hpp),
// which runs the same chain element by element: every operation, rows that cross blocks and end
// in a tail, targets and operands read through any strides or broadcast, mixed element types,
// a chain long enough to leave the stack, and a chain in place.

#include "reference.hpp"

#include <cmath>
#include <limits>

namespace {

using B = shaped::dim<"B", 2>;
using H = shaped::dim<"H", 3>;
using Td = shaped::dim<"T">;
using Cd = shaped::dim<"C">;
using One = shaped::dim<"C", 1>;

namespace kernels = shaped::kernels;

// The chain run by the machine into `target`, and by the reference evaluator into a tensor of
// the target's dims; every element within `tolerance` of the other, relative to its size (NaN
// matches NaN). A chain of a product and a sum may differ by a rounding: the compiler may fuse
// them into one multiply-add on either side.
template <class Target, class E>
void check_against_reference(Target& target, const E& expr, double tolerance) {
    using V = shaped::value_type_of<Target>;
    shaped::tensor_for<V, shaped::dims_of<Target>> want{typename shaped::tensor_for<V, shaped::dims_of<Target>>::shape_type(target.extents())};
    kernels::run_reference(want, kernels::lowering::hold(expr));
    kernels::run_elementwise(target, expr);
    const auto got = ref::values(target), expected = ref::values(want);
    REQUIRE(got.size() == expected.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
        INFO("element " << i << ": " << got[i] << " vs " << expected[i]);
        if (std::isnan(expected[i])) REQUIRE(std::isnan(got[i]));
        else if (got[i] != expected[i]) REQUIRE(std::abs(got[i] - expected[i]) <= tolerance * std::max(1.0, std::abs(expected[i])));
    }
}

template <class V>
double ulps() {
    return std::is_same_v<V, float> ? 4e-7 : 1e-15;
}

}  // namespace

TEMPLATE_TEST_CASE("the machine's unary operations match the reference over rows that cross blocks",
                   "[elementwise][machine]", float, double) {
    using V = TestType;
    // 1000 elements: three whole blocks of 256, and a tail that is not a whole SIMD batch.
    shaped::Tensor<V, Td> x(Td{1000}), out(Td{1000});
    ref::fill(x, 11);
    const auto positive = shaped::abs(x) + V(0.25);
    check_against_reference(out, -x, 0.0);
    check_against_reference(out, shaped::exp(x), 2 * ulps<V>());
    check_against_reference(out, shaped::log(positive), 2 * ulps<V>());
    check_against_reference(out, shaped::sqrt(positive), ulps<V>());
    check_against_reference(out, shaped::rsqrt(positive), 2 * ulps<V>());
    check_against_reference(out, shaped::tanh(x), 2 * ulps<V>());
    check_against_reference(out, shaped::abs(x), 0.0);
    check_against_reference(out, shaped::sigmoid(x), 2 * ulps<V>());
    check_against_reference(out, shaped::relu(x), 0.0);
    check_against_reference(out, shaped::square(x), 0.0);
    check_against_reference(out, shaped::gelu(x), 4 * ulps<V>());
    check_against_reference(out, shaped::gelu_tanh(x), 4 * ulps<V>());
    check_against_reference(out, shaped::silu(x), 4 * ulps<V>());
}

TEMPLATE_TEST_CASE("the machine's binary operations match the reference, NaN included", "[elementwise][machine]", float,
                   double) {
    using V = TestType;
    shaped::Tensor<V, B, Td> a(Td{301}), b(Td{301}), out(Td{301});
    ref::fill(a, 12);
    ref::fill(b, 13);
    const V nan = std::numeric_limits<V>::quiet_NaN();
    a(0, 5) = nan;
    b(1, 7) = nan;
    a(1, 200) = nan;
    b(1, 200) = nan;
    check_against_reference(out, a + b, 0.0);
    check_against_reference(out, a - b, 0.0);
    check_against_reference(out, a * b, 0.0);
    check_against_reference(out, a / b, 0.0);
    check_against_reference(out, shaped::maximum(a, b), 0.0);
    check_against_reference(out, shaped::minimum(a, b), 0.0);
    // NaN wins either way, as torch.maximum.
    shaped::Tensor<V, B, Td> m = shaped::maximum(a, b);
    CHECK(std::isnan(m(0, 5)));
    CHECK(std::isnan(m(1, 7)));
    CHECK(std::isnan(shaped::Tensor<V, B, Td>(shaped::minimum(a, b))(1, 7)));
    CHECK(std::isnan(shaped::Tensor<V, B, Td>(shaped::relu(a))(0, 5)));
}

TEMPLATE_TEST_CASE("comparisons, logic, where and masked_fill on the machine", "[elementwise][machine]", float, double) {
    using V = TestType;
    shaped::Tensor<V, B, H, Td, Td> scores(Td{37}, Td{37}), out(Td{37}, Td{37});
    shaped::Tensor<V, B, H, Td, Td> other(Td{37}, Td{37});
    ref::fill(scores, 14);
    ref::fill(other, 15);
    shaped::Tensor<bool, B, H, Td, Td> mask(Td{37}, Td{37});
    check_against_reference(mask, scores < other, 0.0);
    check_against_reference(mask, scores <= V(0), 0.0);
    check_against_reference(mask, scores > other, 0.0);
    check_against_reference(mask, scores >= V(0.5), 0.0);
    check_against_reference(mask, scores == scores, 0.0);
    check_against_reference(mask, scores != other, 0.0);
    check_against_reference(mask, (scores > V(0)) && (other < V(0)), 0.0);
    check_against_reference(mask, (scores > V(0)) || !(other < V(0)), 0.0);
    check_against_reference(out, shaped::where(scores > other, scores, other * V(2)), 0.0);

    // A stored mask of (B, 1, T, S) broadcast over the heads, as xtensor once read a row off.
    shaped::Tensor<bool, B, shaped::dim<"H", 1>, Td, Td> causal(Td{37}, Td{37});
    for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t i = 0; i < 37; ++i)
            for (std::size_t j = 0; j < 37; ++j) causal(b, 0, i, j) = j > i + b;
    check_against_reference(out, shaped::masked_fill(scores, causal, -std::numeric_limits<V>::infinity()), 0.0);
    shaped::Tensor<V, B, H, Td, Td> filled = shaped::masked_fill(scores, causal, V(-1));
    CHECK(filled(1, 2, 3, 5) == V(-1));
    CHECK(filled(1, 2, 3, 4) == scores(1, 2, 3, 4));
}

TEST_CASE("mixed element types convert as their nodes say", "[elementwise][machine]") {
    shaped::Tensor<float, B, Td> f(Td{45});
    shaped::Tensor<double, B, Td> d(Td{45}), out_d(Td{45});
    shaped::Tensor<float, B, Td> out_f(Td{45});
    ref::fill(f, 16);
    ref::fill(d, 17);
    check_against_reference(out_d, shaped::cast<double>(f) * d, 0.0);
    check_against_reference(out_f, shaped::cast<float>(d) + f, 0.0);
    check_against_reference(out_f, d, 0.0);  // converted on the way into the target
    shaped::Tensor<bool, B, Td> mask(Td{45});
    check_against_reference(mask, shaped::cast<bool>(f > 0.0f), 0.0);
    check_against_reference(out_f, shaped::cast<float>(f > 0.0f) * f, 0.0);
    // A float target written from a bool chain.
    check_against_reference(out_f, shaped::cast<float>(d < 0.0), 0.0);
}

TEMPLATE_TEST_CASE("targets and operands through any strides, and broadcast along the row", "[elementwise][machine]",
                   float, double) {
    using V = TestType;
    shaped::Tensor<V, B, Td, Cd> x(Td{19}, Cd{300});
    shaped::Tensor<V, B, Td, One> mean(Td{19});
    shaped::Tensor<V, Cd> weight(Cd{300});
    ref::fill(x, 18);
    ref::fill(mean, 19);
    ref::fill(weight, 20);
    shaped::Tensor<V, B, Td, Cd> out(Td{19}, Cd{300});
    // The mean repeats along the row (stride 0 inside a block), the weight along B and T.
    check_against_reference(out, (x - mean) * weight, ulps<V>());

    // Into a transposed view: the target's rows are not adjacent.
    shaped::Tensor<V, B, Cd, Td> transposed(Cd{300}, Td{19});
    auto into = shaped::view_of(shaped::transpose<1, 2>(transposed.view()));
    check_against_reference(into, x * V(3) + weight, ulps<V>());
    // From a transposed operand into a contiguous target.
    shaped::Tensor<V, B, Cd, Td> back(Cd{300}, Td{19});
    check_against_reference(back, shaped::transpose<1, 2>(x) - V(1), 0.0);
    // A slice of rows: neither adjacent to the next nor to each other.
    auto rows = shaped::slice<Td>(x, 2, 9);
    shaped::Tensor<V, B, shaped::dim<"T">, Cd> some(Td{7}, Cd{300});
    check_against_reference(some, rows * rows, 0.0);
    // Nothing to do for no elements.
    shaped::Tensor<V, B, Td, Cd> empty(Td{0}, Cd{300}), none(Td{0}, Cd{300});
    check_against_reference(none, empty + V(1), 0.0);
}

TEST_CASE("a chain longer than the stack's blocks, and one that runs in place", "[elementwise][machine]") {
    shaped::Tensor<float, Td> x(Td{777}), out(Td{777});
    ref::fill(x, 21);
    // 31 additions and as many scalar constants: more instructions than the stack holds blocks.
    const auto chain = x + 1.0f + x + 2.0f + x + 3.0f + x + 4.0f + x + 5.0f + x + 6.0f + x + 7.0f + x + 8.0f + x +
                       9.0f + x + 10.0f + x + 11.0f + x + 12.0f + x + 13.0f + x + 14.0f + x + 15.0f + x;
    check_against_reference(out, chain, 1e-6);

    const auto before = ref::values(x);
    kernels::run_elementwise(x, x * 2.0f + 1.0f);
    for (std::size_t i = 0; i < before.size(); ++i)
        REQUIRE(x(i) == static_cast<float>(static_cast<float>(before[i] * 2) + 1));
}

TEST_CASE("integer chains run on the reference evaluator", "[elementwise][machine]") {
    STATIC_REQUIRE(kernels::lowering::machine_runs<decltype(kernels::lowering::hold(
                       std::declval<shaped::Tensor<float, Td>&>() * 2.0f))>());
    STATIC_REQUIRE_FALSE(kernels::lowering::machine_runs<decltype(kernels::lowering::hold(
                             std::declval<shaped::Tensor<int, Td>&>() * 2))>());
    shaped::Tensor<int, B, Td> ids(Td{5});
    for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t t = 0; t < 5; ++t) ids(b, t) = static_cast<int>(b * 10 + t) - 4;
    shaped::Tensor<int, B, Td> doubled = ids * 2 + 1;
    shaped::Tensor<bool, B, Td> negative = ids < 0;
    for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t t = 0; t < 5; ++t) {
            CHECK(doubled(b, t) == ids(b, t) * 2 + 1);
            CHECK(negative(b, t) == (ids(b, t) < 0));
        }
}
