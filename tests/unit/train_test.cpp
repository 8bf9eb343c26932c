// Training: gradients typed as their module, AdamW against its definition, nanoGPT's schedule,
// gradient clipping, and the GPT's, the Llama's and a user's QK-norm GPT's backward against
// central finite differences in double.
#include "../user_programs/qk_norm_gpt.hpp"

#include <shaped/shaped.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <numbers>
#include <span>
#include <string>
#include <vector>

namespace {

using C = shaped::dim<"C", 4>;
using H = shaped::dim<"H", 3>;

struct TwoLayers {
    BOOST_HANA_DEFINE_STRUCT(TwoLayers,
        (shaped::nn::Linear<C, H>, first),
        (shaped::nn::Stack<shaped::nn::LayerNorm<H>, 2>, norms));
};

template <class M>
std::vector<std::string> names_of(M& module) {
    std::vector<std::string> names;
    shaped::nn::for_each_parameter(module, [&](std::string_view name, auto&) { names.emplace_back(name); });
    return names;
}

}  // namespace

TEST_CASE("gradients hold one zero tensor per parameter, of its type and name", "[train]") {
    TwoLayers model;
    shaped::train::gradients<TwoLayers> grads;
    std::vector<std::string> seen;
    shaped::train::for_each_gradient(model, grads, [&](std::string_view name, auto& p, auto& g) {
        STATIC_REQUIRE(std::is_same_v<decltype(p), decltype(g)>);
        for (auto v : g.elements()) REQUIRE(v == 0);
        seen.emplace_back(name);
    });
    REQUIRE(seen == names_of(model));
    REQUIRE(seen == std::vector<std::string>{"first.weight", "first.bias", "norms.0.weight", "norms.0.bias",
                                             "norms.1.weight", "norms.1.bias"});

    // A member's gradients: a sub-module's as a reference into the whole, a parameter's its tensor.
    using Linear = shaped::nn::Linear<C, H>;
    using Norm = shaped::nn::LayerNorm<H>;
    grads.of(&TwoLayers::first).of(&Linear::weight)(1, 2) = 5.0f;
    grads.of(&TwoLayers::norms)[1].of(&Norm::bias)(0) = -2.0f;
    REQUIRE(grads.storage().first.weight(1, 2) == 5.0f);
    REQUIRE(grads.storage().norms[1].bias(0) == -2.0f);
    REQUIRE(shaped::train::global_norm(grads) == Approx(std::sqrt(29.0)));

    // A copy is its own; zero clears every tensor.
    const shaped::train::gradients<TwoLayers> copy = grads;
    shaped::train::zero(grads);
    REQUIRE(shaped::train::global_norm(grads) == 0.0);
    REQUIRE(shaped::train::global_norm(copy) == Approx(std::sqrt(29.0)));
}

TEST_CASE("clip_grad_norm scales to max_norm / (norm + 1e-6) only above max_norm", "[train]") {
    shaped::train::gradients<TwoLayers> grads;
    grads.storage().first.weight(0, 0) = 3.0f;
    grads.storage().norms[0].weight(2) = 4.0f;
    REQUIRE(shaped::train::clip_grad_norm(grads, 10.0) == Approx(5.0));
    REQUIRE(grads.storage().first.weight(0, 0) == 3.0f);
    REQUIRE(shaped::train::clip_grad_norm(grads, 1.0) == Approx(5.0));
    REQUIRE(grads.storage().first.weight(0, 0) == Approx(3.0 / (5.0 + 1e-6)));
    REQUIRE(grads.storage().norms[0].weight(2) == Approx(4.0 / (5.0 + 1e-6)));
    REQUIRE(shaped::train::global_norm(grads) == Approx(1.0).epsilon(1e-6));
}

TEST_CASE("warmup_cosine is nanoGPT's get_lr", "[train]") {
    const shaped::train::warmup_cosine schedule{.lr = 6e-4, .min_lr = 6e-5, .warmup_steps = 10, .decay_steps = 110};
    REQUIRE(schedule(0) == Approx(6e-4 / 11));
    REQUIRE(schedule(9) == Approx(6e-4 * 10 / 11));
    REQUIRE(schedule(10) == Approx(6e-4));                       // the cosine's top
    REQUIRE(schedule(60) == Approx((6e-4 + 6e-5) / 2));          // its middle
    REQUIRE(schedule(110) == Approx(6e-5));                      // its bottom
    REQUIRE(schedule(111) == 6e-5);
    REQUIRE(schedule(5000) == 6e-5);
    for (std::size_t s = 10; s < 110; ++s) REQUIRE(schedule(s + 1) <= schedule(s));
}

TEST_CASE("AdamW follows torch.optim.AdamW's update, decaying only the matrices", "[train]") {
    using L = shaped::nn::Linear<C, H, true, double>;
    shaped::Generator gen(3);
    L layer(gen);
    L reference = layer;
    shaped::train::gradients<L> grads;
    const shaped::train::adamw_options options{.beta1 = 0.8, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
    shaped::train::AdamW<L> opt(options);
    // The update written out from its definition, for every element: exp_avg m, exp_avg_sq v.
    std::vector<double> m(C::extent * H::extent + H::extent, 0.0), v(m.size(), 0.0);
    for (int step = 1; step <= 4; ++step) {
        gen.fill_normal(grads.storage().weight.elements());
        gen.fill_normal(grads.storage().bias.elements());
        const double lr = 0.01 * step;
        opt.step(layer, grads, lr);
        std::size_t i = 0;
        auto expect = [&](double& p, double g, bool decays) {
            if (decays) p *= 1 - lr * options.weight_decay;
            m[i] = options.beta1 * m[i] + (1 - options.beta1) * g;
            v[i] = options.beta2 * v[i] + (1 - options.beta2) * g * g;
            const double mhat = m[i] / (1 - std::pow(options.beta1, step));
            const double vhat = v[i] / (1 - std::pow(options.beta2, step));
            p -= lr * mhat / (std::sqrt(vhat) + options.eps);
            ++i;
        };
        for (std::size_t k = 0; k < reference.weight.size(); ++k)
            expect(reference.weight.data()[k], grads.storage().weight.data()[k], true);
        for (std::size_t k = 0; k < reference.bias.size(); ++k)
            expect(reference.bias.data()[k], grads.storage().bias.data()[k], false);
        for (std::size_t k = 0; k < reference.weight.size(); ++k)
            REQUIRE(layer.weight.data()[k] == Approx(reference.weight.data()[k]).epsilon(1e-12));
        for (std::size_t k = 0; k < reference.bias.size(); ++k)
            REQUIRE(layer.bias.data()[k] == Approx(reference.bias.data()[k]).epsilon(1e-12));
    }
    REQUIRE(opt.steps() == 4);
}

namespace {

// vocab 11, context 8, 2 layers, 2 heads, 8 channels; B 2, T 5.
template <class Activation>
using TinyConfig = shaped::models::gpt_config<11, 8, 2, 2, 8, Activation>;
using Batch = shaped::dim<"B", 2>;
using Time = shaped::dim<"T", 5>;
using Ids = shaped::train::batch_ids<Batch, Time>;

// nanoGPT's initialisation, then every parameter moved off it (zero biases and unit gains would
// hide a gradient that forgets them), the weights made larger so that the loss is not flat.
template <class Model>
std::unique_ptr<Model> drawn_model(std::uint64_t seed) {
    shaped::Generator gen(seed);
    auto model = std::make_unique<Model>(gen);
    shaped::nn::for_each_parameter(*model, [&](std::string_view, auto& p) {
        using T = shaped::value_type_of<std::remove_cvref_t<decltype(p)>>;
        std::vector<double> noise(p.size());
        gen.fill_normal(std::span<double>(noise));
        for (std::size_t i = 0; i < p.size(); ++i) p.data()[i] = static_cast<T>(4 * p.data()[i] + 0.1 * noise[i]);
    });
    return model;
}

Ids drawn_ids(std::uint64_t seed, std::int64_t vocab) {
    shaped::Generator gen(seed);
    Ids ids;
    std::vector<double> u(ids.size());
    gen.fill_uniform(std::span<double>(u), 0.0, static_cast<double>(vocab));
    for (std::size_t i = 0; i < ids.size(); ++i) ids.data()[i] = static_cast<std::int64_t>(u[i]);
    return ids;
}

// Each parameter's gradient, at a few elements spread over it, against the central difference
// of the loss in double; the number of elements checked.
template <class Model, class Trainer>
std::size_t require_central_differences(Model& model, const shaped::train::gradients<Model>& grads, Trainer& trainer,
                                        const Ids& idx, const Ids& targets) {
    const double h = 1e-5;
    std::size_t checked = 0;
    shaped::train::for_each_gradient(model, grads, [&](std::string_view name, auto& p, auto& g) {
        for (std::size_t k = 0; k < p.size(); k += 1 + p.size() / 5) {
            const double kept = p.data()[k];
            p.data()[k] = kept + h;
            const double up = trainer.loss(model, idx, targets);
            p.data()[k] = kept - h;
            const double down = trainer.loss(model, idx, targets);
            p.data()[k] = kept;
            INFO(name << "[" << k << "]");
            REQUIRE(g.data()[k] == Approx((up - down) / (2 * h)).epsilon(1e-6).margin(1e-9));
            ++checked;
        }
    });
    return checked;
}


}  // namespace

TEMPLATE_TEST_CASE("the GPT's gradients are the loss's central differences, in double", "[train]",
                   shaped::nn::activation::gelu, shaped::nn::activation::gelu_tanh) {
    using Model = shaped::models::GPT<TinyConfig<TestType>, double>;
    auto model = drawn_model<Model>(11);
    const Ids idx = drawn_ids(12, 11);
    Ids targets = drawn_ids(13, 11);
    targets(1, 3) = -1;  // ignored, as F.cross_entropy's ignore_index
    auto trainer = std::make_unique<shaped::train::trainer<Model, Batch, Time>>();
    shaped::train::gradients<Model> grads;
    const double loss = trainer->forward_backward(*model, grads, idx, targets);

    // The training forward is the model's own.
    REQUIRE(loss == Approx(shaped::models::cross_entropy((*model)(idx), targets)).epsilon(1e-12));
    REQUIRE(trainer->loss(*model, idx, targets) == Approx(loss).epsilon(1e-14));

    REQUIRE(require_central_differences(*model, grads, *trainer, idx, targets) > 100);
}

TEST_CASE("accumulated micro-batches add their scaled gradients, and float tracks double", "[train]") {
    using Model = shaped::models::GPT<TinyConfig<shaped::nn::activation::gelu>, double>;
    using FloatModel = shaped::models::GPT<TinyConfig<shaped::nn::activation::gelu>, float>;
    auto model = drawn_model<Model>(21);
    const Ids idx = drawn_ids(22, 11), targets = drawn_ids(23, 11);
    auto trainer = std::make_unique<shaped::train::trainer<Model, Batch, Time>>();
    shaped::train::gradients<Model> once, twice;
    trainer->forward_backward(*model, once, idx, targets);
    trainer->forward_backward(*model, twice, idx, targets, 0.5);
    trainer->forward_backward(*model, twice, idx, targets, 0.5);

    // The same parameters, rounded to float.
    std::vector<double> values;
    shaped::nn::for_each_parameter(*model, [&](std::string_view, auto& p) { values.insert(values.end(), p.data(), p.data() + p.size()); });
    FloatModel narrow;
    std::size_t next = 0;
    shaped::nn::for_each_parameter(narrow, [&](std::string_view, auto& p) {
        for (float& v : p.elements()) v = static_cast<float>(values[next++]);
    });
    auto float_trainer = std::make_unique<shaped::train::trainer<FloatModel, Batch, Time>>();
    shaped::train::gradients<FloatModel> narrow_grads;
    float_trainer->forward_backward(narrow, narrow_grads, idx, targets);

    std::vector<double> float_grads;
    shaped::train::for_each_gradient(narrow_grads, [&](std::string_view, auto& g) {
        for (float v : g.elements()) float_grads.push_back(v);
    });
    const double scale = shaped::train::global_norm(once);
    std::size_t i = 0;
    shaped::train::for_each_gradient(*model, once, [&](std::string_view name, auto&, auto& g) {
        for (std::size_t k = 0; k < g.size(); ++k, ++i) {
            INFO(name << "[" << k << "]");
            REQUIRE(float_grads[i] == Approx(g.data()[k]).margin(1e-5 * scale));
        }
    });
    std::vector<double> a, b;
    shaped::train::for_each_gradient(once, [&](std::string_view, auto& g) { a.insert(a.end(), g.data(), g.data() + g.size()); });
    shaped::train::for_each_gradient(twice, [&](std::string_view, auto& g) { b.insert(b.end(), g.data(), g.data() + g.size()); });
    REQUIRE(a.size() == b.size());
    for (std::size_t k = 0; k < a.size(); ++k) REQUIRE(b[k] == Approx(a[k]).epsilon(1e-12).margin(1e-15));
}

namespace {
// vocab 13, context 8, 2 layers, 4 query heads over 2 key/value heads, 8 channels, hidden 12.
template <bool Tied, shaped::nn::rotary_pairing Pairing>
using TinyLlama = shaped::models::Llama<shaped::models::llama_config<13, 8, 2, 4, 2, 8, 12, Tied, Pairing>, double>;
}  // namespace

TEMPLATE_TEST_CASE("the Llama's gradients are the loss's central differences, in double", "[train]",
                   (TinyLlama<true, shaped::nn::rotary_pairing::adjacent>),
                   (TinyLlama<false, shaped::nn::rotary_pairing::halves>)) {
    using Model = TestType;
    auto model = drawn_model<Model>(31);
    const Ids idx = drawn_ids(32, 13);
    Ids targets = drawn_ids(33, 13);
    targets(0, 4) = -1;
    auto trainer = std::make_unique<shaped::train::trainer<Model, Batch, Time>>();
    shaped::train::gradients<Model> grads;
    const double loss = trainer->forward_backward(*model, grads, idx, targets);
    REQUIRE(loss == Approx(shaped::models::cross_entropy((*model)(idx), targets)).epsilon(1e-12));

    REQUIRE(require_central_differences(*model, grads, *trainer, idx, targets) > 80);
}

TEST_CASE("a user's QK-norm GPT's gradients are the loss's central differences, in double", "[train]") {
    // tests/user_programs/qk_norm_gpt.hpp's: its q and k returned by its encode_positions, as
    // values of their own, whose gradients flow back through the RMSNorms into the projection.
    using Model = QKNormGPT<TinyConfig<shaped::nn::activation::gelu>, double>;
    auto model = drawn_model<Model>(51);
    const Ids idx = drawn_ids(52, 11);
    const Ids targets = drawn_ids(53, 11);
    auto trainer = std::make_unique<shaped::train::trainer<Model, Batch, Time>>();
    shaped::train::gradients<Model> grads;
    const double loss = trainer->forward_backward(*model, grads, idx, targets);
    REQUIRE(loss == Approx(shaped::models::cross_entropy((*model)(idx), targets)).epsilon(1e-12));

    REQUIRE(require_central_differences(*model, grads, *trainer, idx, targets) > 100);
}

TEST_CASE("a target outside the vocabulary is refused before any gradient changes", "[train]") {
    using Model = shaped::models::GPT<TinyConfig<shaped::nn::activation::gelu>, double>;
    auto model = drawn_model<Model>(41);
    const Ids idx = drawn_ids(42, 11);
    Ids targets = drawn_ids(43, 11);
    targets(1, 2) = 11;
    auto trainer = std::make_unique<shaped::train::trainer<Model, Batch, Time>>();
    shaped::train::gradients<Model> grads;
    REQUIRE_THROWS_AS(trainer->forward_backward(*model, grads, idx, targets), shaped::shape_error);
    REQUIRE_THROWS_WITH(trainer->forward_backward(*model, grads, idx, targets), Catch::Contains("11") && Catch::Contains("V(11)"));
    REQUIRE(shaped::train::global_norm(grads) == 0.0);
    Ids bad_ids = idx;
    bad_ids(0, 0) = -3;
    targets(1, 2) = 0;
    REQUIRE_THROWS_AS(trainer->forward_backward(*model, grads, bad_ids, targets), shaped::shape_error);
}
