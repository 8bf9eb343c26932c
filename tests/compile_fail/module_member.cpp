// Rule: a module's members are parameters (Tensors of static dims), absent, Stacks or modules:
// a std::vector of floats declared as a sub-module cannot be visited, counted or summarised.
// expect-error: shaped::nn::Module: every member is a parameter \(a Tensor of static dims\), absent, a Stack or a module
// expect-error: module_member<boost::hana::string<'p', ?'r', ?'o', ?'j'>, std::vector<float
#include <shaped/shaped.hpp>

#include <vector>

using C = shaped::dim<"C", 8>;

struct Model {
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    BOOST_HANA_DEFINE_STRUCT(Model, (shaped::nn::LayerNorm<C>, ln), (shaped::nn::Linear<C, C>, proj));
#else
    BOOST_HANA_DEFINE_STRUCT(Model, (shaped::nn::LayerNorm<C>, ln), (std::vector<float>, proj));
#endif
};

int main() {
    Model model;
    shaped::nn::for_each_parameter(model, [](auto, auto&) {});
}
