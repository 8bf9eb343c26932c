// Held nodes of every kind as operands of the row and reduction kernels: sum and max along a
// dim (by position and by name), softmax, log_softmax, layer_norm and rms_norm.

#include "held_expression.hpp"

namespace {
namespace consume {

using namespace held;

HELD_CONSUMER(sum_last, return shaped::eval(shaped::sum<-1>(std::forward<E>(e)));)
HELD_CONSUMER(max_by_name, return shaped::eval(shaped::max<first_dim<E>>(std::forward<E>(e)));)
HELD_CONSUMER(softmax_last, return shaped::eval(shaped::softmax<-1>(std::forward<E>(e)));)
HELD_CONSUMER(log_softmax_by_name, return shaped::eval(shaped::log_softmax<first_dim<E>>(std::forward<E>(e)));)
HELD_CONSUMER(layer_norm, const auto gamma = partner<E, shaped::dims<last_dim<E>>>(6);
              const auto beta = partner<E, shaped::dims<last_dim<E>>>(7);
              return shaped::eval(shaped::layer_norm(std::forward<E>(e), gamma, beta));)
HELD_CONSUMER(rms_norm, const auto weight = partner<E, shaped::dims<last_dim<E>>>(8);
              return shaped::eval(shaped::rms_norm(std::forward<E>(e), weight));)

using all = std::tuple<sum_last, max_by_name, softmax_last, log_softmax_by_name, layer_norm, rms_norm>;

}  // namespace consume
}  // namespace

TEMPLATE_LIST_TEST_CASE("a held node of each kind is reduced and normalised as inline", "[held]", held::producers) {
    held::run_sweep<TestType, consume::all>();
}
