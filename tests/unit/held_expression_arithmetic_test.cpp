// Held nodes of every kind as operands of arithmetic: with a tensor, with a scalar on either
// side, and maximum.

#include "held_expression.hpp"

namespace {
namespace consume {

using namespace held;

HELD_CONSUMER(plus_tensor, const auto other = partner<E>(1); return shaped::eval(std::forward<E>(e) + other);)
HELD_CONSUMER(scalar_minus, return shaped::eval(1.5f - std::forward<E>(e));)
HELD_CONSUMER(times_scalar, return shaped::eval(std::forward<E>(e) * 0.5f);)
HELD_CONSUMER(maximum, const auto other = partner<E>(2);
              return shaped::eval(shaped::maximum(other, std::forward<E>(e)));)

using all = std::tuple<plus_tensor, scalar_minus, times_scalar, maximum>;

}  // namespace consume
}  // namespace

TEMPLATE_LIST_TEST_CASE("a held node of each kind is an arithmetic operand, as inline", "[held]", held::producers) {
    held::run_sweep<TestType, consume::all>();
}

TEST_CASE("a held transpose that converts to its operand's Tensor type is copied, not wrapped", "[held]") {
    held::run_sweep<held::square_mT, consume::all>();
}
