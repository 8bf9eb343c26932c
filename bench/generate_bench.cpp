// Generation with a GPT-2-124M-shaped model (nanoGPT's random initialisation, fp32): a prompt of
// 16 ids prefilled through the KV caches, then 128 new ids, greedy. PyTorch's side is the same
// model decoding with a torch.cat cache, as Hugging Face's GPT-2 does (bench/torch_reference.py).
//
// Batch-1 decoding reads every weight once per token and does two flops per weight, so it is
// bound by memory bandwidth: the case counts the bytes its forward passes read (the weights, the
// tied lm_head among them, and the caches' keys and values so far), which report.py compares
// with the STREAM-like cases of stream_bench.cpp.
#include "bench_support.hpp"
#include "generation.hpp"

#include <shaped/shaped.hpp>

#include <benchmark/benchmark.h>

#include <cstddef>
#include <memory>
#include <string>

namespace {

using Config = shaped::models::gpt2_124m;
using Model = shaped::models::GPT<Config, float>;

constexpr std::size_t prompt_length = 16;
constexpr std::size_t new_tokens = 128;

const Model& model() {
    static const auto built = [] {
        shaped::Generator gen(2024);
        return std::make_unique<Model>(gen);
    }();
    return *built;
}

// Every parameter is read once a pass but the position table, of which one row is; each layer's
// keys and values over the positions a pass attends to.
double bytes_read() {
    constexpr double weights = shaped::nn::parameter_bytes<Model> -
                               static_cast<double>(Config::block_size - 1) * Config::n_embd * sizeof(float);
    constexpr double per_position = 2.0 * Config::n_layer * Config::n_embd * sizeof(float);
    return bench::generation_bytes(weights, per_position, prompt_length, new_tokens);
}

void generation(benchmark::State& state) {
    const auto prompt = bench::spread_prompt(prompt_length, Config::vocab_size);
    if (!bench::same_as_recompute(state, model(), prompt)) return;
    for (auto _ : state) {
        auto ids = bench::generate_greedy(model(), prompt, new_tokens);
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
