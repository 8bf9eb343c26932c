#pragma once
// Generation cases' shared parts (generate_bench.cpp, llama_bench.cpp): greedy ids through a
// model's KV caches, checked against a full recompute before any timing, and the bytes a
// generation's forward passes read, which report.py sets against the STREAM-like cases.

#include <shaped/shaped.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

namespace bench {

using shaped::models::token_id;

// `length` ids spread over the vocabulary: a prompt with no meaning and no repeats to speak of.
inline std::vector<token_id> spread_prompt(std::size_t length, std::size_t vocab) {
    std::vector<token_id> ids(length);
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<token_id>((i * 7919) % vocab);
    return ids;
}

template <class Model>
std::vector<token_id> generate_greedy(const Model& model, const std::vector<token_id>& prompt, std::size_t count) {
    shaped::Generator gen(1);
    const shaped::models::generation how{.max_new_tokens = count, .how = {.temperature = 0}};
    return shaped::models::generate(model, {prompt}, how, gen)[0].ids;
}

// The first `checked` ids generated through the caches are the argmax of a full forward over
// the prefix, recomputed from scratch for each; the benchmark is marked failed where one is not.
template <class Model>
bool same_as_recompute(benchmark::State& state, const Model& model, const std::vector<token_id>& prompt,
                       std::size_t checked = 4) {
    constexpr std::size_t vocab = Model::vocab_dim::extent;
    const std::vector<token_id> cached = generate_greedy(model, prompt, checked);
    std::vector<token_id> sequence = prompt;
    using B = shaped::dim<"B", 1>;
    using Time = shaped::dim<"T">;
    for (std::size_t step = 0; step < checked; ++step) {
        shaped::Tensor<token_id, B, Time> ids{shaped::Shape<B, Time>({1, sequence.size()})};
        std::copy(sequence.begin(), sequence.end(), ids.data());
        const auto logits = model(ids);
        const float* last = logits.data() + (sequence.size() - 1) * vocab;
        const auto best = static_cast<token_id>(std::max_element(last, last + vocab) - last);
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

// What the forward passes of one generation read: `weights` bytes a pass, and `per_position`
// bytes of keys and values for each position a pass attends to. The prompt is one pass over its
// positions, then each new id but the last is fed in its own pass.
inline double generation_bytes(double weights, double per_position, std::size_t prompt_length, std::size_t new_tokens) {
    double bytes = weights + per_position * static_cast<double>(prompt_length);
    for (std::size_t fed = prompt_length + 1; fed < prompt_length + new_tokens; ++fed)
        bytes += weights + per_position * static_cast<double>(fed);
    return bytes;
}

}  // namespace bench
