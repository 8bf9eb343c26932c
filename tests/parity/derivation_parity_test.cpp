// Derived gradients against PyTorch's autograd: each loss of tests/parity/make_fixtures.py's
// derivation/ folder, written here with shaped's ops as torch writes it there, run through
// train::value_and_grad on the same float64 parameters and inputs. The loss and every element of
// every parameter's gradient must agree with torch's to 1e-10 (absolute, or relative where
// larger). derivation_test.cpp checks the same derivatives against central differences, which
// agree only to about 1e-6; here they are held to the rounding of two float64 computations.
#include <shaped/shaped.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <iomanip>
#include <limits>
#include <sstream>
#include <string>
#include <string_view>

namespace {

using namespace shaped;

using B = dim<"B", 2>;
using T = dim<"T", 3>;
using C = dim<"C", 4>;
using H = dim<"H", 5>;
using C1 = dim<"C", 1>;  // a (T, 1) parameter broadcasts along C

// The parameters every case reads from, named as make_fixtures.py's derivation_draws names them.
struct Parameters {
    BOOST_HANA_DEFINE_STRUCT(Parameters,
        (Tensor<double, C>, w),
        (Tensor<double, T, C1>, gate),
        (Tensor<double, T, C>, pos),
        (Tensor<double, T, T>, s),
        (Tensor<double, C, H>, m),
        (nn::Linear<C, H, true, double>, fc),
        (nn::Linear<H, C, false, double>, proj),
        (nn::LayerNorm<C, true, double>, ln),
        (nn::RMSNorm<C, double>, rms));
};

std::string fixture(const std::string& name) { return std::string(SHAPED_FIXTURE_DIR) + "/derivation/" + name; }

Parameters torch_parameters() {
    Parameters p;
    io::load_parameters(p, io::safetensors_file(fixture("parameters.safetensors")));
    return p;
}

// The loss and gradients must agree to 1e-10, absolute or relative, whichever is larger.
bool agrees(double actual, double expected) {
    return std::abs(actual - expected) <= 1e-10 * std::max(1.0, std::abs(expected));
}

// Element i of a tensor of these extents, as an index: "[1, 0, 3]".
template <class Extents>
std::string index_of(const Extents& extents, std::size_t i) {
    std::string index = "]";
    for (std::size_t d = extents.size(); d-- > 0;) {
        index.insert(0, (d == 0 ? "[" : ", ") + std::to_string(i % extents[d]));
        i /= extents[d];
    }
    return extents.empty() ? "[]" : index;
}

// train::value_and_grad(loss, parameters, args...) against torch's loss and gradients in
// derivation/<name>.safetensors ("loss", and every parameter's gradient by its name).
template <class Loss, class... Args>
void require_torch_gradients(const std::string& name, const Loss& loss, const Args&... args) {
    const Parameters model = torch_parameters();
    const io::safetensors_file torch(fixture(name + ".safetensors"));
    const auto [value, derived] = train::value_and_grad(loss, model, args...);
    const double torch_loss = torch.load<double>("loss").item();
    {
        std::ostringstream said;
        said << std::setprecision(17) << name << ": loss " << value << ", torch's " << torch_loss;
        INFO(said.str());
        REQUIRE(agrees(value, torch_loss));
    }
    Parameters expected;
    io::load_parameters(expected, torch);
    std::size_t compared = 0;
    double largest = 0;
    train::for_each_gradient(expected, derived, [&](std::string_view parameter, const auto& e, const auto& g) {
        for (std::size_t i = 0; i < e.size(); ++i) {
            std::ostringstream said;
            said << std::setprecision(17) << name << ": the gradient of " << parameter << index_of(e.extents(), i)
                 << " is " << g.data()[i] << ", torch's " << e.data()[i];
            INFO(said.str());
            REQUIRE(agrees(g.data()[i], e.data()[i]));
            largest = std::max(largest, std::abs(e.data()[i]));
            ++compared;
        }
    });
    REQUIRE(compared == nn::parameter_count<Parameters>);
    REQUIRE(largest > 1e-2);  // the loss reaches its parameters
}

// An input, (B, T, C).
Tensor<double, B, T, C> input(const char* name) { return io::load_npy<double, B, T, C>(fixture(name)); }

// One causal attention head written out (make_fixtures.py's causal_head): its scores masked with
// tril, softmax, then @ v.
template <class P, class X>
auto causal_head(const P& m, const X& x) {
    const auto q = eval(m.fc(x));                                   // (B, T, H)
    const auto k = eval(matmul(x, m.m));                            // (B, T, H)
    const auto scores = eval(matmul(q, k.mT()) * (1.0 / std::sqrt(static_cast<double>(H::extent))));
    const auto future = tril(ones<bool, T, T>()) == false;
    const auto wei = eval(softmax<-1>(masked_fill(scores, future, -std::numeric_limits<double>::infinity())));
    return eval(matmul(wei, x * m.w));
}

}  // namespace

TEST_CASE("derivation parity: broadcasting, division and the unary ops", "[parity][derivation]") {
    require_torch_gradients(
        "broadcast_unary",
        [](const auto& m, const auto& x, const auto& y) {
            const auto h = eval(x * m.w + m.gate * m.pos);  // (B,T,C) * (C) + (T,1) * (T,C)
            return mean(tanh(h) * exp(m.w * 0.5) + sigmoid(h) / sqrt(square(m.w) + 1.0) - log(square(h) + 1.0) +
                        rsqrt(abs(m.pos) + 1.0) * relu(h) - abs(h - y) * 0.25 + y / (square(h) + 1.0) -
                        (-h) * m.gate);
        },
        input("x.npy"), input("y.npy"));
}

TEST_CASE("derivation parity: gelu, gelu_tanh, silu, maximum, minimum and where", "[parity][derivation]") {
    require_torch_gradients(
        "activations",
        [](const auto& m, const auto& x, const auto& y) {
            const auto h = eval(m.fc(x));  // (B, T, H)
            const auto a = eval(gelu(h) + gelu_tanh(h) * 0.5 - silu(h) * 0.25 + maximum(h, h * 0.1) -
                                minimum(h, m.fc.bias) * 0.5 + where(h > 0.0, h, exp(h) - 1.0));
            return mean(square(m.proj(a) - y));
        },
        input("x.npy"), input("y.npy"));
}

TEST_CASE("derivation parity: batched and broadcast matmul", "[parity][derivation]") {
    require_torch_gradients(
        "matmul",
        [](const auto& m, const auto& x, const auto& y) {
            const auto h = eval(x * m.w + m.pos);
            const auto up = eval(matmul(h, m.m));        // (B,T,C) @ (C,H)
            const auto gram = eval(matmul(h, h.mT()));   // (B,T,C) @ (B,C,T), one value on both sides
            const auto mixed = eval(matmul(m.s, h));     // (T,T) @ (B,T,C), broadcast over B
            return eval(mean(square(up)) * 0.1 + mean(gram * m.s) + mean(mixed * y));
        },
        input("x.npy"), input("y.npy"));
}

TEST_CASE("derivation parity: a causal head, masked_fill with tril and softmax", "[parity][derivation]") {
    require_torch_gradients(
        "attention",
        [](const auto& m, const auto& x, const auto& y) { return mean(square(causal_head(m, x) - y)); },
        input("x.npy"), input("y.npy"));
}

TEST_CASE("derivation parity: reductions along a dim, softmax and log_softmax", "[parity][derivation]") {
    require_torch_gradients(
        "reductions",
        [](const auto& m, const auto& x, const auto& y) {
            const auto h = eval(x * m.w + m.pos);
            const auto logp = eval(log_softmax<-1>(h));
            return eval(-mean(sum<-1>(logp * softmax<-1>(y))) + mean(var<-2>(h)) + mean(max<-1>(h)) -
                        mean(min<T>(h)) * 0.5 + mean(square(mean<-1>(h))) + mean(sum<B>(h) * m.pos));
        },
        input("x.npy"), input("y.npy"));
}

TEST_CASE("derivation parity: LayerNorm, and layer_norm without a bias", "[parity][derivation]") {
    require_torch_gradients(
        "layer_norm",
        [](const auto& m, const auto& x, const auto& y) {
            const auto h = eval(x * m.w + m.pos);
            const auto normed = eval(m.ln(h));
            return eval(mean(square(normed - y)) + mean(layer_norm(h * 2.0 + x, m.rms.weight, nullptr) * y));
        },
        input("x.npy"), input("y.npy"));
}

TEST_CASE("derivation parity: RMSNorm, and rms_norm with a larger eps", "[parity][derivation]") {
    require_torch_gradients(
        "rms_norm",
        [](const auto& m, const auto& x, const auto& y) {
            const auto h = eval(x * m.w + m.pos);
            return eval(mean(square(m.rms(h) - y)) + mean(rms_norm(h * 0.1, m.ln.weight, 1e-2) * y));
        },
        input("x.npy"), input("y.npy"));
}

TEST_CASE("derivation parity: a pre-norm residual MLP of Linear layers, inline", "[parity][derivation]") {
    require_torch_gradients(
        "mlp",
        [](const auto& m, const auto& x, const auto& y) {
            const auto h = eval(x + m.proj(gelu(m.fc(m.ln(x)))));
            return mean(square(m.rms(h) - y));
        },
        input("x.npy"), input("y.npy"));
}

TEST_CASE("derivation parity: permute and transpose", "[parity][derivation]") {
    require_torch_gradients(
        "permute",
        [](const auto& m, const auto& x, const auto& y) {
            const auto h = eval(x * m.w + m.pos);
            const auto q = eval(permute<2, 0, 1>(h) * 2.0);             // (C, B, T)
            const auto gram = eval(matmul(transpose<T, C>(h), h));      // (B, C, C)
            return eval(mean(permute<1, 2, 0>(q) * y) + mean(square(gram)) * 0.01 +
                        mean(transpose<-2, -1>(h) * transpose<T, C>(y)));
        },
        input("x.npy"), input("y.npy"));
}

TEST_CASE("derivation parity: a dynamic dim", "[parity][derivation]") {
    // make_fixtures.py's derivation/dynamic.safetensors: the causal head on x_dynamic.npy, whose T
    // (6) the Tensor takes from the file.
    using Td = dim<"T">;
    const auto x = io::load_npy<double, B, Td, C>(fixture("x_dynamic.npy"));
    REQUIRE(x.extents()[1] == 6);
    require_torch_gradients(
        "dynamic",
        [](const auto& m, const auto& x) {
            const Td t{x.extents()[1]};
            const auto q = eval(m.fc(x));
            const auto k = eval(matmul(x, m.m));
            const auto scores = eval(matmul(q, k.mT()) * (1.0 / std::sqrt(static_cast<double>(H::extent))));
            const auto future = tril(ones<bool, Td, Td>(t, t)) == false;
            const auto wei = eval(softmax<-1>(masked_fill(scores, future, -std::numeric_limits<double>::infinity())));
            const auto out = eval(m.ln(eval(matmul(wei, x * m.w)) + x));
            return eval(mean(square(out)) + mean(var<-2>(out)));
        },
        x);
}
