// A layer's score and mask modifiers against PyTorch: make_fixtures.py's variant_attention (a
// learned relative bias, ALiBi and soft-capping on the scores, documents of three positions on
// top of causality or a prefix-LM of four in its place, written densely in torch) and
// tests/user_programs/variant_attention.hpp's layer, the same modifiers run in shaped's fused
// kernel, on the same float64 parameters and inputs: the output, the loss and every parameter's
// gradient (the bias table's among them, from the fused backward) agree to 1e-10.
#include "../user_programs/variant_attention.hpp"

#include <shaped/shaped.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <string_view>

namespace {

std::string fixture(const std::string& name) { return std::string(SHAPED_FIXTURE_DIR) + "/attention_variants/" + name; }

bool agrees(double actual, double expected) { return std::abs(actual - expected) <= 1e-10 * std::max(1.0, std::abs(expected)); }

// The layer on the fixture's parameters and inputs: its output against `<prefix>out.npy`, its loss
// and every parameter's gradient against `<prefix>gradients.safetensors`.
template <class Layer>
void require_torch_parity(const std::string& prefix) {
    Layer layer;
    shaped::io::load_parameters(layer, shaped::io::safetensors_file(fixture("parameters.safetensors")));
    const auto x = shaped::io::load_npy<double, variant::B2, variant::T7, variant::C8>(fixture("x.npy"));
    const auto y = shaped::io::load_npy<double, variant::B2, variant::T7, variant::C8>(fixture("y.npy"));
    const auto torch_out = shaped::io::load_npy<double, variant::B2, variant::T7, variant::C8>(fixture(prefix + "out.npy"));

    const auto out = layer(x);
    for (std::size_t i = 0; i < out.size(); ++i) {
        INFO("output element " << i << ": " << out.data()[i] << ", torch's " << torch_out.data()[i]);
        REQUIRE(agrees(out.data()[i], torch_out.data()[i]));
    }

    const auto loss = [&y](const auto& m, const auto& x) { return eval(mean(square(m(x) - y))); };
    const auto [value, grads] = shaped::train::value_and_grad(loss, layer, x);
    const shaped::io::safetensors_file torch(fixture(prefix + "gradients.safetensors"));
    REQUIRE(agrees(value, torch.load<double>("loss").item()));
    Layer expected;
    shaped::io::load_parameters(expected, torch);
    std::size_t compared = 0;
    shaped::train::for_each_gradient(expected, grads, [&](std::string_view name, const auto& e, const auto& g) {
        for (std::size_t i = 0; i < e.size(); ++i) {
            INFO("the gradient of " << name << "[" << i << "] is " << g.data()[i] << ", torch's " << e.data()[i]);
            REQUIRE(agrees(g.data()[i], e.data()[i]));
            ++compared;
        }
    });
    REQUIRE(compared == shaped::nn::parameter_count<Layer>);
}

}  // namespace

TEST_CASE("attention variants parity: a learned bias, ALiBi, soft-capping and documents, forward and gradients",
          "[parity][modifiers]") {
    require_torch_parity<variant::VariantAttention<true, true, variant::keys::documents>>("");
}

TEST_CASE("attention variants parity: the same scores under a prefix-LM, forward and gradients", "[parity][modifiers]") {
    require_torch_parity<variant::VariantAttention<true, true, variant::keys::prefix>>("prefix_");
}
