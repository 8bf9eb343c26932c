// Held nodes of every kind reshaped (split then merge), concatenated and assigned: a new
// Tensor from it, an existing Tensor, a View into a larger Tensor, and eval.

#include "held_expression.hpp"

namespace {
namespace consume {

using namespace held;

HELD_CONSUMER(split_merge, using D = first_dim<E>; using P = shaped::dim<"P", D::extent / 2>;
              using Q = shaped::dim<"Q", 2>;
              return shaped::eval(shaped::merge<P, Q, D>(shaped::split<D, P, Q>(std::forward<E>(e))));)
HELD_CONSUMER(concat, const auto other = partner<E>(18); return shaped::concat<0>(std::forward<E>(e), other);)
HELD_CONSUMER(construct, shaped::tensor_for<value_t<E>, dims_t<E>> t = std::forward<E>(e); return t;)
HELD_CONSUMER(assign_existing, auto t = partner<E>(19); t = std::forward<E>(e); return t;)
// Into the second half of a Tensor twice as long along the first dim; the first half keeps its values.
HELD_CONSUMER(assign_into_slice, using D = first_dim<E>;
              auto whole = partner<E, shaped::replace_at<0, shaped::dim<D::name, 2 * D::extent>, dims_t<E>>>(20);
              auto window = shaped::slice<D, D::extent, 2 * D::extent>(whole);
              window = std::forward<E>(e);
              return whole;)
HELD_CONSUMER(eval, return shaped::eval(std::forward<E>(e));)

using all = std::tuple<split_merge, concat, construct, assign_existing, assign_into_slice, eval>;

}  // namespace consume
}  // namespace

TEMPLATE_LIST_TEST_CASE("a held node of each kind is reshaped, concatenated and assigned as inline",
                        "[held]", held::producers) {
    held::run_sweep<TestType, consume::all>();
}
