// Held nodes of every kind as operands of matmul: either side, scaled, and with a bias as Linear
// does.

#include "held_expression.hpp"

namespace {
namespace consume {

using namespace held;

// Partners of the operand's dims, transposed where a matmul needs (..., Y, X) against (..., X, Y).
HELD_CONSUMER(matmul_lhs, const auto other = partner<E>(8);
              return shaped::eval(shaped::matmul(std::forward<E>(e), other.mT()));)
HELD_CONSUMER(matmul_rhs_scaled, const auto other = partner<E>(9);
              return shaped::eval(shaped::matmul(other.mT(), std::forward<E>(e)) * 0.25f);)
HELD_CONSUMER(linear, using O = shaped::dim<"O", 3>;
              const auto weight = partner<E, shaped::dims<O, last_dim<E>>>(10);
              const auto bias = partner<E, shaped::dims<O>>(11);
              return shaped::eval(shaped::matmul(std::forward<E>(e), weight.mT()) + bias);)
using all = std::tuple<matmul_lhs, matmul_rhs_scaled, linear>;

}  // namespace consume
}  // namespace

TEMPLATE_LIST_TEST_CASE("a held node of each kind is a matmul operand, as inline", "[held]", held::producers) {
    held::run_sweep<TestType, consume::all>();
}
