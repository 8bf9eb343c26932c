// Held nodes of every kind as the queries of attention: fused, and as the chapter writes it,
// whole and in pieces.

#include "held_expression.hpp"

namespace {
namespace consume {

using namespace held;

HELD_CONSUMER(causal_attention, const auto k = partner<E>(12); const auto v = partner<E>(13);
              return shaped::eval(shaped::causal_attention(std::forward<E>(e), k, v, 0.5f));)
HELD_CONSUMER(attention_pattern, const auto k = partner<E>(14); const auto v = partner<E>(15);
              const auto ones = causal_ones<E>(); using V = value_t<E>;
              return shaped::eval(shaped::matmul(
                  shaped::softmax<-1>(shaped::masked_fill(shaped::matmul(std::forward<E>(e), k.mT()) * V{0.5},
                                                          shaped::tril(ones) == V{0},
                                                          -std::numeric_limits<V>::infinity())),
                  v));)
// The weights and the output both held in variables before evaluation.
HELD_CONSUMER(attention_in_pieces, const auto k = partner<E>(16); const auto v = partner<E>(17);
              const auto ones = causal_ones<E>(); using V = value_t<E>;
              auto wei = shaped::softmax<-1>(shaped::masked_fill(shaped::matmul(std::forward<E>(e), k.mT()) * V{0.5},
                                                                 shaped::tril(ones) == V{0},
                                                                 -std::numeric_limits<V>::infinity()));
              auto out = shaped::matmul(wei, v);
              return shaped::eval(out);)

using all = std::tuple<causal_attention, attention_pattern, attention_in_pieces>;

}  // namespace consume
}  // namespace

TEMPLATE_LIST_TEST_CASE("a held node of each kind is attention's query, as inline", "[held]", held::producers) {
    held::run_sweep<TestType, consume::all>();
}
