// Training: one whole step of nanoGPT's GPT, as nanoGPT's train.py takes it — the forward with the
// loss, the backward, the gradients clipped to norm 1, one AdamW update (weight decay 0.1 on the
// matrices and embeddings, betas 0.9 and 0.95), the gradients zeroed for the next — over a batch
// of B rows of T random ids, fp32. PyTorch's side is nanoGPT's GPT with loss.backward(),
// clip_grad_norm_ and torch.optim.AdamW (single-tensor, foreach=False), same configs, batches
// and settings (bench/torch_reference.py). shaped's gradients are derived from the model's forward
// (train::trainer over the derivation of train/value_and_grad.hpp): no backward written by hand.
//
//   train/char_gpt_B16_T64            a character-level GPT: vocab 256 (bytes), context 64, 4
//                                     layers, 4 heads, 128 channels, exact GELU, biases
//   train/char_gpt_B1_T64             the same at one row: a step of small ops, where what each
//                                     op costs beside its arithmetic shows
//   train/qk_norm_char_gpt_B16_T64    the same GPT with a user's attention variant, QK-norm (each
//                                     head's q and k RMS-normalised before their scores; tests/
//                                     user_programs/qk_norm_gpt.hpp, written as the guide writes
//                                     it): what a variant written outside the library costs
//   train/char_gpt_B16_T64_recomputed the first, each block recomputed in the backward instead of
//                                     kept (train::recomputed): what activation checkpointing
//                                     costs in time, and saves in activations (counted)
//   train/gpt2_2layers_B1_T256_C768   two GPT-2 layers (768 channels, 12 heads, tanh GELU) under
//                                     GPT-2's vocabulary (50257) and tied classifier, T 256. One
//                                     row a batch: a step is already about a second on one
//                                     thread (three quarters of its flops the classifier's)
//
// Each counts the tokens of its batch (report.py gives training's tokens/s and ms a step) and the
// flops of its products, which the sgemm ceiling bounds. Before timing, the loss of a step must
// equal the model's own forward's, models::cross_entropy(model(idx), targets), and a second step
// on the same batch must lower it.
#include "bench_support.hpp"
#include "../tests/user_programs/qk_norm_gpt.hpp"

#include <shaped/shaped.hpp>

#include <benchmark/benchmark.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace {

template <template <class, class> class Family, class Config, std::size_t Batch, std::size_t Time>
struct training {
    using Model = Family<Config, float>;
    using B = shaped::dim<"B", Batch>;
    using T = shaped::dim<"T", Time>;
    using Ids = shaped::train::batch_ids<B, T>;
    static constexpr double lr = 6e-4;

    std::unique_ptr<Model> model;
    shaped::train::gradients<Model> grads;
    shaped::train::AdamW<Model> opt{{.beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1}};
    std::unique_ptr<shaped::train::trainer<Model, B, T>> trainer = std::make_unique<shaped::train::trainer<Model, B, T>>();
    Ids idx, targets;

    training() {
        shaped::Generator gen(1337);
        model = std::make_unique<Model>(gen);
        for (std::size_t i = 0; i < idx.size(); ++i) {
            idx.data()[i] = static_cast<std::int64_t>(gen.uniform() * Config::vocab_size);
            targets.data()[i] = static_cast<std::int64_t>(gen.uniform() * Config::vocab_size);
        }
    }

    // The flops of a step's products: every linear layer's and the tied classifier's forward
    // product, and its backward's two (the input's gradient and the weight's), 2 flops a
    // multiply-add; the attention's two products forward and five backward over the causal half
    // (attention_backward_bench.cpp). The rest (norms, GELU, softmax, AdamW) is not counted.
    static double step_flops() {
        constexpr double rows = Batch * Time, c = Config::n_embd, hs = c / Config::n_head;
        constexpr double layer_weights = 3 * c * c + c * c + 4 * c * c + 4 * c * c;
        constexpr double products = Config::n_layer * layer_weights + Config::vocab_size * c;
        constexpr double attention = Config::n_layer * Batch * Config::n_head * 7 * 2 * hs * Time * (Time + 1) / 2;
        return 3 * 2 * rows * products + attention;
    }

    // One step; the loss before it.
    double step() {
        shaped::train::zero(grads);
        const double loss = trainer->forward_backward(*model, grads, idx, targets);
        shaped::train::clip_grad_norm(grads, 1.0);
        opt.step(*model, grads, lr);
        return loss;
    }
};

// The loss of a step is the forward's, and the step lowers it.
template <class Case>
bool step_checks(benchmark::State& state, Case& c) {
    const double forward = shaped::models::cross_entropy((*c.model)(c.idx), c.targets);
    const double first = c.step();
    if (!(std::abs(first - forward) <= 1e-4 * std::abs(forward))) {
        state.SkipWithError(("the step's loss " + std::to_string(first) + " is not the forward's " +
                             std::to_string(forward)).c_str());
        return false;
    }
    const double second = c.step();
    if (!(second < first)) {
        state.SkipWithError(("a second step on the same batch did not lower the loss: " + std::to_string(first) +
                             " then " + std::to_string(second)).c_str());
        return false;
    }
    return true;
}

template <class Case>
void train_step(benchmark::State& state) {
    auto c = std::make_unique<Case>();
    if (!step_checks(state, *c)) return;
    for (auto _ : state) {
        const double loss = c->step();
        benchmark::DoNotOptimize(loss);
    }
    bench::count_tokens(state, static_cast<double>(Case::B::extent * Case::T::extent));
    bench::count_flops(state, Case::step_flops());
    // What a step keeps for its backward, and holds at its peak (tensor storage, MiB).
    state.counters["activations_MiB"] = static_cast<double>(c->trainer->last_step().activations) / (1 << 20);
    state.counters["step_peak_MiB"] = static_cast<double>(c->trainer->last_step().peak) / (1 << 20);
}

template <class Config, class T>
using GPT = shaped::models::GPT<Config, T>;
template <class Config, class T>
using RecomputedGPT = shaped::models::GPT<Config, T, shaped::train::recomputed>;

using char_config = shaped::models::gpt_config<256, 64, 4, 4, 128>;
using char_gpt = training<GPT, char_config, 16, 64>;
using char_gpt_one_row = training<GPT, char_config, 1, 64>;
using qk_norm_char_gpt = training<QKNormGPT, char_config, 16, 64>;
using recomputed_char_gpt = training<RecomputedGPT, char_config, 16, 64>;
using gpt2_layers =
    training<GPT, shaped::models::gpt_config<50257, 256, 2, 12, 768, shaped::nn::activation::gelu_tanh>, 1, 256>;

}  // namespace

BENCHMARK(train_step<char_gpt>)->Name("train/char_gpt_B16_T64/shaped")->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK(train_step<char_gpt_one_row>)
    ->Name("train/char_gpt_B1_T64/shaped")
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime();
BENCHMARK(train_step<qk_norm_char_gpt>)
    ->Name("train/qk_norm_char_gpt_B16_T64/shaped")
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime();
BENCHMARK(train_step<recomputed_char_gpt>)
    ->Name("train/char_gpt_B16_T64_recomputed/shaped")
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime();
// About a second a step: three repetitions of two steps are enough to take the fastest.
BENCHMARK(train_step<gpt2_layers>)
    ->Name("train/gpt2_2layers_B1_T256_C768/shaped")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(2)
    ->Repetitions(3)
    ->MeasureProcessCPUTime();
