// Held nodes of every kind as operands of the unary elementwise nodes: math and cast.

#include "held_expression.hpp"

namespace {
namespace consume {

using namespace held;

HELD_CONSUMER(gelu, return shaped::eval(shaped::gelu(std::forward<E>(e)));)
HELD_CONSUMER(gelu_tanh, return shaped::eval(shaped::gelu_tanh(std::forward<E>(e)));)
HELD_CONSUMER(silu, return shaped::eval(shaped::silu(std::forward<E>(e)));)
HELD_CONSUMER(cast_double, return shaped::eval(shaped::cast<double>(std::forward<E>(e)));)

using all = std::tuple<gelu, gelu_tanh, silu, cast_double>;

}  // namespace consume
}  // namespace

TEMPLATE_LIST_TEST_CASE("a held node of each kind is an operand of unary math and cast, as inline", "[held]",
                        held::producers) {
    held::run_sweep<TestType, consume::all>();
}
