// Held nodes of every kind as operands of the selecting elementwise nodes: a comparison as
// where's condition, where's value, and masked_fill.

#include "held_expression.hpp"

namespace {
namespace consume {

using namespace held;

HELD_CONSUMER(where_condition, const auto other = partner<E>(3);
              return shaped::eval(shaped::where(std::forward<E>(e) > other, other, -2.0f));)
HELD_CONSUMER(where_value, const auto other = partner<E>(4);
              return shaped::eval(shaped::where(other >= 0.0f, std::forward<E>(e), other));)
HELD_CONSUMER(masked_fill, const auto other = partner<E>(5);
              return shaped::eval(shaped::masked_fill(std::forward<E>(e), other < 0.0f, 0.25f));)

using all = std::tuple<where_condition, where_value, masked_fill>;

}  // namespace consume
}  // namespace

TEMPLATE_LIST_TEST_CASE("a held node of each kind is an operand of where and masked_fill, as inline", "[held]",
                        held::producers) {
    held::run_sweep<TestType, consume::all>();
}
