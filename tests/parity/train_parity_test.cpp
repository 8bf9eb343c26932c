// Training against PyTorch: nanoGPT's GPT, and a user's QK-norm variant of it, trained 50 steps
// by torch 1.13 (tests/parity/make_fixtures.py's train_gpt, train_gpt_f64 and train_qknorm_f64:
// AdamW with nanoGPT's weight-decay groups, its warmup and cosine schedule, clipping at norm 1,
// two micro-batches a step) and by shaped from the same initial weights on the same batches.
// Every step's loss, learning rate and gradient norm, step 0's gradients and the final
// parameters must agree.
#include "../user_programs/qk_norm_gpt.hpp"

#include <shaped/shaped.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace {

using Config = shaped::models::gpt_config<67, 16, 2, 3, 24>;
// nanoGPT's GPT as it is, and with each block recomputed in the backward instead of kept.
template <class C, class Real>
using GPT = shaped::models::GPT<C, Real>;
template <class C, class Real>
using RecomputedGPT = shaped::models::GPT<C, Real, shaped::train::recomputed>;
using B = shaped::dim<"B", 4>;
using T = shaped::dim<"T", 16>;
using Steps = shaped::dim<"S", 50>;
using Micro = shaped::dim<"M", 2>;
using Batches = shaped::Tensor<std::int64_t, Steps, Micro, B, T>;
using Values = shaped::Tensor<double, Steps>;

std::string fixture(const std::string& name) { return std::string(SHAPED_FIXTURE_DIR) + "/" + name; }

// Step s's micro-batch m.
shaped::train::batch_ids<B, T> micro_batch(const Batches& all, std::size_t s, std::size_t m) {
    shaped::train::batch_ids<B, T> ids;
    const std::size_t n = ids.size();
    std::copy_n(all.data() + (s * Micro::extent + m) * n, n, ids.data());
    return ids;
}

// A model's parameters from a fixture file, named as PyTorch's named_parameters() names them.
template <class Model>
std::unique_ptr<Model> loaded(const std::string& file) {
    auto model = std::make_unique<Model>();
    shaped::io::load_parameters(*model, fixture(file));
    return model;
}

// The float32 initial weights of `folder`, as Real.
template <template <class, class> class Model, class Real>
std::unique_ptr<Model<Config, Real>> initial_model(const std::string& folder) {
    const auto stored = loaded<Model<Config, float>>(folder + "/initial.safetensors");
    std::vector<double> values;
    shaped::nn::for_each_parameter(*stored, [&](std::string_view, auto& p) { values.insert(values.end(), p.data(), p.data() + p.size()); });
    auto model = std::make_unique<Model<Config, Real>>();
    std::size_t next = 0;
    shaped::nn::for_each_parameter(*model, [&](std::string_view, auto& p) {
        for (Real& v : p.elements()) v = static_cast<Real>(values[next++]);
    });
    return model;
}

// Every element of every tensor of `actual` within tolerance_of(its name) of `expected`'s, named
// on failure.
template <class M, class G, class Tolerance>
void require_close(M& expected, const G& actual, const Tolerance& tolerance_of) {
    shaped::train::for_each_gradient(expected, actual, [&](std::string_view name, auto& e, auto& a) {
        const double tolerance = tolerance_of(name);
        for (std::size_t i = 0; i < e.size(); ++i) {
            INFO(name << "[" << i << "]");
            REQUIRE(static_cast<double>(a.data()[i]) == Approx(static_cast<double>(e.data()[i])).margin(tolerance));
        }
    });
}

// How far float32 rounding alone moves each trained tensor: PyTorch's float32 parameters after
// the 50 steps against its float64 ones, the largest difference in each tensor.
std::map<std::string, double, std::less<>> float32_rounding_spread() {
    const auto exact = shaped::models::load_gpt<Config, double>(fixture("train_gpt_f64/final.safetensors"));
    std::map<std::string, std::vector<double>, std::less<>> exact_values;
    shaped::nn::for_each_parameter(*exact, [&](std::string_view name, auto& p) {
        exact_values[std::string(name)].assign(p.data(), p.data() + p.size());
    });
    const auto rounded = shaped::models::load_gpt<Config>(fixture("train_gpt/final.safetensors"));
    std::map<std::string, double, std::less<>> spread;
    shaped::nn::for_each_parameter(*rounded, [&](std::string_view name, auto& p) {
        const std::vector<double>& e = exact_values.at(std::string(name));
        double& largest = spread[std::string(name)];
        for (std::size_t i = 0; i < p.size(); ++i)
            largest = std::max(largest, std::abs(static_cast<double>(p.data()[i]) - e[i]));
    });
    return spread;
}

// Model<Config, Real> trained as PyTorch trained it, from the initial weights of `start` (a
// folder) on train_gpt's batches, against the run `folder` holds.
template <template <class, class> class Family, class Real, class Tolerance>
void train_as_torch(const std::string& start, const std::string& folder, double loss_tolerance,
                    double gradient_tolerance, const Tolerance& parameter_tolerance) {
    using Model = Family<Config, Real>;
    auto model = initial_model<Family, Real>(start);
    const auto idx = shaped::io::load_npy<std::int64_t, Steps, Micro, B, T>(fixture("train_gpt/batches_idx.npy"));
    const auto targets = shaped::io::load_npy<std::int64_t, Steps, Micro, B, T>(fixture("train_gpt/batches_targets.npy"));
    const auto losses = shaped::io::load_npy<double, Steps>(fixture(folder + "/losses.npy"));
    const auto norms = shaped::io::load_npy<double, Steps>(fixture(folder + "/grad_norms.npy"));
    const auto lrs = shaped::io::load_npy<double, Steps>(fixture("train_gpt/lrs.npy"));

    const shaped::train::warmup_cosine schedule{.lr = 1e-2, .min_lr = 1e-3, .warmup_steps = 5, .decay_steps = 40};
    shaped::train::AdamW<Model> opt({.beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1});
    shaped::train::gradients<Model> grads;
    auto trainer = std::make_unique<shaped::train::trainer<Model, B, T>>();
    for (std::size_t s = 0; s < Steps::extent; ++s) {
        shaped::train::zero(grads);
        double loss = 0;
        for (std::size_t m = 0; m < Micro::extent; ++m)
            loss += trainer->forward_backward(*model, grads, micro_batch(idx, s, m), micro_batch(targets, s, m),
                                              1.0 / Micro::extent) / Micro::extent;
        INFO("step " << s);
        REQUIRE(loss == Approx(losses(s)).epsilon(loss_tolerance));
        if (s == 0) {
            const auto expected = loaded<Model>(folder + "/gradients_step0.safetensors");
            require_close(*expected, grads, [&](std::string_view) { return gradient_tolerance; });
        }
        REQUIRE(shaped::train::clip_grad_norm(grads, 1.0) == Approx(norms(s)).epsilon(loss_tolerance));
        REQUIRE(schedule(s) == Approx(lrs(s)).epsilon(1e-15));
        opt.step(*model, grads, schedule(s));
    }
    const auto expected = loaded<Model>(folder + "/final.safetensors");
    // The trained parameters walked beside the expected ones, as gradients are.
    require_close(*expected, shaped::train::gradient_ref<Model>(*model), parameter_tolerance);
}

}  // namespace

// Where a gradient is no larger than the rounding of the sums it comes from, AdamW, which divides
// by the gradient's own scale, turns that rounding into steps of up to lr, and float32 runs drift
// apart by rounding alone, not by any difference in the computation. A key's bias is such a
// parameter (it adds the same q . b to a query's every score, which softmax takes away: its
// gradient is 0 but for rounding), and so, while the scores are near 0, are the queries' and keys'
// weights of the second block (step 0's gradients 1e-9, the values' 2e-4): PyTorch's own float32
// run ends 2.3e-5 from its float64 one there, and shaped built by g++ and by clang++ 1.5e-4 from
// each other. Each trained tensor may therefore differ from PyTorch's float32 one by 1e-4 plus 8
// times how far rounding moved PyTorch's (1e-7 for most tensors); float64's rounding is too small
// for AdamW's eps to let through.
TEST_CASE("50 training steps of nanoGPT's GPT match PyTorch's in float32", "[parity][train]") {
    const auto spread = float32_rounding_spread();
    train_as_torch<GPT, float>("train_gpt", "train_gpt", 1e-4, 1e-6, [&](std::string_view name) {
        const auto moved = spread.find(name);
        REQUIRE(moved != spread.end());
        return 1e-4 + 8 * moved->second;
    });
}

TEST_CASE("50 training steps of nanoGPT's GPT match PyTorch's in float64", "[parity][train]") {
    train_as_torch<GPT, double>("train_gpt", "train_gpt_f64", 1e-10, 1e-12, [](std::string_view) { return 1e-10; });
}

// Activation checkpointing changes what the step keeps, not what it computes.
TEST_CASE("50 training steps of nanoGPT's GPT with its blocks recomputed match PyTorch's in float64",
          "[parity][train][recomputed]") {
    train_as_torch<RecomputedGPT, double>("train_gpt", "train_gpt_f64", 1e-10, 1e-12,
                                          [](std::string_view) { return 1e-10; });
}

// The variant is tests/user_programs/qk_norm_gpt.hpp's, the guide's: its gradients, the
// RMSNorms' of q and k among them, are derived from its forward as it is written.
TEST_CASE("50 training steps of a QK-norm GPT (a user's attention variant) match PyTorch's in float64",
          "[parity][train]") {
    train_as_torch<QKNormGPT, double>("train_qknorm_f64", "train_qknorm_f64", 1e-10, 1e-12,
                                      [](std::string_view) { return 1e-10; });
}

TEST_CASE("a Llama's loss, logits and gradients match PyTorch's autograd", "[parity][train]") {
    // llama2.c's architecture: 4 query heads over 2 key/value heads, adjacent-pair rotary, its
    // own classifier (train_llama).
    using Config = shaped::models::llama_config<67, 16, 2, 4, 2, 24, 40, false>;
    using Model = shaped::models::Llama<Config>;
    using Rows = shaped::dim<"B", 2>;
    const std::string folder = fixture("train_llama/");
    auto model = std::make_unique<Model>();
    shaped::io::load_parameters(*model, folder + "initial.safetensors");
    const auto idx = shaped::io::load_npy<std::int64_t, Rows, T>(folder + "idx.npy");
    const auto targets = shaped::io::load_npy<std::int64_t, Rows, T>(folder + "targets.npy");
    const auto logits = shaped::io::load_npy<float, Rows, T, shaped::dim<"V", 67>>(folder + "logits.npy");
    const double expected_loss = shaped::io::load_npy<double>(folder + "loss.npy").item();

    auto trainer = std::make_unique<shaped::train::trainer<Model, Rows, T>>();
    REQUIRE(trainer->loss(*model, idx, targets) == Approx(expected_loss).epsilon(1e-5));
    const auto ours = eval((*model)(idx));
    for (std::size_t i = 0; i < logits.size(); ++i) REQUIRE(ours.data()[i] == Approx(logits.data()[i]).margin(1e-5));

    shaped::train::gradients<Model> grads;
    REQUIRE(trainer->forward_backward(*model, grads, idx, targets) == Approx(expected_loss).epsilon(1e-5));
    auto expected = std::make_unique<Model>();
    shaped::io::load_parameters(*expected, folder + "gradients.safetensors");
    // Each tensor's gradients to 1e-4 of its largest: the queries' and keys' are a thousandth of the
    // embeddings'.
    shaped::train::for_each_gradient(*expected, grads, [&](std::string_view name, auto& e, auto& g) {
        double largest = 0;
        for (float v : e.elements()) largest = std::max(largest, static_cast<double>(std::abs(v)));
        REQUIRE(largest > 0);
        for (std::size_t i = 0; i < e.size(); ++i) {
            INFO(name << "[" << i << "]");
            REQUIRE(g.data()[i] == Approx(e.data()[i]).margin(1e-4 * largest));
        }
    });
}
