// Generation with a GPT-2-124M-shaped model (nanoGPT's random initialisation, fp32): a prompt of
// 16 ids prefilled through the KV caches, then 128 new ids, greedy. PyTorch's side is the same
// model decoding with a torch.cat cache, as Hugging Face's GPT-2 does (bench/torch_reference.py).
//
// Batch-1 decoding reads every weight once per token and does two flops per weight, so it is
// bound by memory bandwidth: the case counts the bytes its forward passes read (the weights, the
// tied lm_head among them, and the caches' keys and values so far), which report.py compares
// with the STREAM-like cases of stream_bench.cpp.
#include "bench_support.hpp"

#include <shaped/shaped.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace {

using Config = shaped::models::gpt2_124m;
using Model = shaped::models::GPT<Config, float>;
using shaped::models::token_id;

constexpr std::size_t prompt_length = 16;
constexpr std::size_t new_tokens = 128;

const Model& model() {
    static const auto built = [] {
        shaped::Generator gen(2024);
        return std::make_unique<Model>(gen);
    }();
    return *built;
}

std::vector<token_id> prompt() {
    std::vector<token_id> ids(prompt_length);
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<token_id>((i * 7919) % Config::vocab_size);
    return ids;
}

std::vector<token_id> generate_greedy(std::size_t count) {
    shaped::Generator gen(1);
    const shaped::models::generation how{.max_new_tokens = count, .how = {.temperature = 0}};
    return shaped::models::generate(model(), {prompt()}, how, gen)[0].ids;
}

// The first ids generated through the caches are the argmax of a full forward over the prefix,
// recomputed from scratch for each.
bool same_as_recompute(benchmark::State& state) {
    constexpr std::size_t checked = 4;
    const std::vector<token_id> cached = generate_greedy(checked);
    std::vector<token_id> sequence = prompt();
    using B = shaped::dim<"B", 1>;
    using Time = shaped::dim<"T">;
    for (std::size_t step = 0; step < checked; ++step) {
        shaped::Tensor<token_id, B, Time> ids{shaped::Shape<B, Time>({1, sequence.size()})};
        std::copy(sequence.begin(), sequence.end(), ids.data());
        const auto logits = model()(ids);
        const float* last = logits.data() + (sequence.size() - 1) * Config::vocab_size;
        const auto best = static_cast<token_id>(std::max_element(last, last + Config::vocab_size) - last);
        if (best != cached[step]) {
            state.SkipWithError(("id " + std::to_string(step) + " generated through the caches is " +
                                 std::to_string(cached[step]) + ", the full recompute's " + std::to_string(best))
                                    .c_str());
            return false;
        }
        sequence.push_back(best);
    }
    return true;
}

// What the forward passes of one generation read: every parameter but the position table once
// a pass (of which one row is read), and each layer's keys and values over the positions the
// pass attends to. The prompt is one pass over prompt_length positions, then each new id but
// the last is fed in its own pass.
double bytes_read() {
    constexpr double weights = shaped::nn::parameter_bytes<Model> -
                               static_cast<double>(Config::block_size - 1) * Config::n_embd * sizeof(float);
    constexpr double per_position = 2.0 * Config::n_layer * Config::n_embd * sizeof(float);
    double bytes = weights + per_position * prompt_length;
    for (std::size_t fed = prompt_length + 1; fed < prompt_length + new_tokens; ++fed) bytes += weights + per_position * fed;
    return bytes;
}

void generation(benchmark::State& state) {
    if (!same_as_recompute(state)) return;
    for (auto _ : state) {
        auto ids = generate_greedy(new_tokens);
        benchmark::DoNotOptimize(ids.data());
    }
    bench::count_bytes(state, bytes_read());
    bench::count_tokens(state, new_tokens);
}

const bool registered = [] {
    const std::string name = "generate/gpt2_124m_P" + std::to_string(prompt_length) + "_N" + std::to_string(new_tokens);
    // Seconds a call: three repetitions of one call are enough to take the fastest.
    benchmark::RegisterBenchmark((name + "/shaped").c_str(), generation)
        ->Unit(benchmark::kMillisecond)
        ->Iterations(1)
        ->Repetitions(3)
        ->MeasureProcessCPUTime();
    return true;
}();

}  // namespace
