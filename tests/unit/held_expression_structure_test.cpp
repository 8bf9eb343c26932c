// Held nodes of every kind as operands of the structural nodes: triu, mT, transpose by name,
// permute by position and rename.

#include "held_expression.hpp"

namespace {
namespace consume {

using namespace held;

HELD_CONSUMER(triu_shifted, return shaped::eval(shaped::triu(std::forward<E>(e), -1));)
HELD_CONSUMER(mT, return shaped::eval(shaped::mT(std::forward<E>(e)));)
HELD_CONSUMER(transpose_by_name,
              return shaped::eval(shaped::transpose<first_dim<E>, last_dim<E>>(std::forward<E>(e)));)
// Every dim in reverse order, whatever the rank.
HELD_CONSUMER(permute_reversed, return [&]<std::size_t... I>(std::index_sequence<I...>) {
    return shaped::eval(shaped::permute<static_cast<int>(rank_v<E> - 1 - I)...>(std::forward<E>(e)));
}(std::make_index_sequence<rank_v<E>>{});)
HELD_CONSUMER(rename, using Z = shaped::dim<"Z", first_dim<E>::extent>;
              return shaped::eval(shaped::rename<first_dim<E>, Z>(std::forward<E>(e)));)

using all = std::tuple<triu_shifted, mT, transpose_by_name, permute_reversed, rename>;

}  // namespace consume
}  // namespace

TEMPLATE_LIST_TEST_CASE("a held node of each kind is masked, permuted and renamed as inline",
                        "[held]", held::producers) {
    held::run_sweep<TestType, consume::all>();
}
