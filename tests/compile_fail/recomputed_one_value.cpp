// Rule: train::recomputed<Layer> recomputes a layer whose differentiated forward returns one
// value; a layer that returns several (here a pair) does not compile, and says so.
// expect-error: shaped::train::recomputed: the layer's forward returns one value
#include <shaped/shaped.hpp>

#include <utility>

using C = shaped::dim<"C", 8>;
using N = shaped::dim<"N", 16>;

struct Twice {
    BOOST_HANA_DEFINE_STRUCT(Twice, (shaped::nn::Linear<C, C, true, double>, fc));
    template <class X>
    auto operator()(const X& x) const {
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
        return eval(fc(x) * 2.0);
#else
        return std::pair{eval(fc(x)), eval(fc(x) * 2.0)};  // two values
#endif
    }
};
using Model = shaped::train::recomputed<Twice>;

int main() {
    Model model;
    const auto x = shaped::zeros<double, N, C>();
    const auto loss = [](const Model& m, const shaped::train::traced<double, N, C>& x) {
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
        return eval(mean(m(x)));
#else
        return eval(mean(m(x).first));
#endif
    };
    const auto [value, grads] = shaped::train::value_and_grad(loss, model, x);
    (void)value;
}
