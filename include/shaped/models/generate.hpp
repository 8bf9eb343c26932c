#pragma once
// Text generation with a model's KV caches, as nanoGPT's generate and llama2.c's run do it:
//
//   shaped::Generator gen(seed);
//   auto out = shaped::models::generate(model, {prompt}, {.max_new_tokens = 128, .how = {.temperature = 0.8}}, gen);
//
// The prompts (one per batch row, of any lengths) are prefilled in chunks through every block's
// cache; then each step feeds every unfinished row's last token through every layer and samples
// the next from its logits. A row stops at max_new_tokens, at the end token (kept in its
// output), or at the context's end, and says which. Sampling is greedy (temperature 0), or from
// softmax(logits / temperature), restricted to the top_k most likely ids and then to the
// smallest set whose probability reaches top_p (nucleus); the same seed gives the same ids.

#include <shaped/models/gpt.hpp>
#include <shaped/tensor/random.hpp>
#include <shaped/text/core.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace shaped::models {

// The tokenizers' id type (text/core.hpp); GPT's embedding takes any integer ids.
using text::token_id;

struct sampling {
    double temperature = 1.0;  // 0: greedy, the most likely id
    std::size_t top_k = 0;     // 0: no limit
    double top_p = 1.0;        // 1: no limit; 0: only the most likely id
};

// One id drawn from one row of logits. An empty row, a negative temperature or a top_p outside
// [0, 1] is an std::invalid_argument.
std::size_t sample(std::span<const float> logits, const sampling& how, Generator& gen);
std::size_t sample(std::span<const double> logits, const sampling& how, Generator& gen);

struct generation {
    std::size_t max_new_tokens = 256;
    std::optional<token_id> end_token{};  // stops a row when sampled (and is kept); {} so that -Wextra
                                          // lets a designated initializer leave it out
    sampling how{};
    std::size_t prefill_chunk = 64;     // prompt positions fed per prefill step
};

enum class stop_reason { max_new_tokens, end_token, context };

struct generated {
    std::vector<token_id> ids;  // the new ids, not the prompt
    stop_reason stopped = stop_reason::max_new_tokens;
};

// on_token(row, id), if given, is called for every id as it is sampled (to stream text).
using token_callback = std::function<void(std::size_t row, token_id id)>;

// One result per prompt. The number of prompts is the model's batch B (a static dim of its
// caches, Batch). A prompt is at least one id and at most the context, else shape_error.
template <std::size_t Batch = 1, class Model>
std::vector<generated> generate(const Model& model, const std::vector<std::vector<token_id>>& prompts,
                                const generation& options, Generator& gen, const token_callback& on_token = {});

// ---- implementation ------------------------------------------------------------------------

namespace detail {
void check_prompts(const std::vector<std::vector<token_id>>& prompts, std::size_t batch, std::size_t context);
}  // namespace detail

template <std::size_t Batch, class Model>
std::vector<generated> generate(const Model& model, const std::vector<std::vector<token_id>>& prompts,
                                const generation& options, Generator& gen, const token_callback& on_token) {
    using B = dim<"B", Batch>;
    using Time = dim<"T">;
    using V = typename Model::vocab_dim;
    constexpr std::size_t context = Model::context_dim::extent;
    detail::check_prompts(prompts, Batch, context);
    // The caches hold the whole context for every layer: on the heap, as a model's weights are.
    auto caches = std::make_unique<typename Model::template cache_type<B>>();
    std::vector<generated> out(Batch);
    std::array<std::size_t, Batch> fed{};      // prompt or generated ids each row has fed
    std::array<bool, Batch> done{};
    std::vector<token_id> next(Batch);         // the id each row feeds next
    std::vector<std::vector<typename Model::value_type>> last(Batch, std::vector<typename Model::value_type>(V::extent));

    // Prefill: chunks of every row's prompt; a row whose prompt is in keeps its last logits.
    const auto run = [&](std::size_t n, const std::array<std::size_t, Batch>& counts, auto&& id_at) {
        Tensor<token_id, B, Time> ids{Shape<B, Time>({Batch, n})};
        for (std::size_t b = 0; b < Batch; ++b)
            for (std::size_t t = 0; t < n; ++t) ids(b, t) = t < counts[b] ? id_at(b, t) : 0;
        const auto logits = model.next_logits(ids, *caches, counts);
        for (std::size_t b = 0; b < Batch; ++b)
            if (counts[b] > 0) std::copy_n(logits.data() + b * V::extent, V::extent, last[b].data());
    };
    const std::size_t chunk = std::max<std::size_t>(options.prefill_chunk, 1);
    for (;;) {
        std::array<std::size_t, Batch> counts{};
        std::size_t n = 0;
        for (std::size_t b = 0; b < Batch; ++b) {
            counts[b] = std::min(chunk, prompts[b].size() - fed[b]);
            n = std::max(n, counts[b]);
        }
        if (n == 0) break;
        run(n, counts, [&](std::size_t b, std::size_t t) { return prompts[b][fed[b] + t]; });
        for (std::size_t b = 0; b < Batch; ++b) fed[b] += counts[b];
    }

    // Decode: sample from each row's last logits, feed what was sampled.
    for (;;) {
        std::array<std::size_t, Batch> counts{};
        for (std::size_t b = 0; b < Batch; ++b) {
            if (done[b]) continue;
            if (out[b].ids.size() == options.max_new_tokens) {
                done[b] = true;
                out[b].stopped = stop_reason::max_new_tokens;
                continue;
            }
            const token_id id = static_cast<token_id>(sample(std::span<const typename Model::value_type>(last[b]), options.how, gen));
            out[b].ids.push_back(id);
            if (on_token) on_token(b, id);
            if (options.end_token && id == *options.end_token) {
                done[b] = true;
                out[b].stopped = stop_reason::end_token;
            } else if (fed[b] == context) {
                // The id sampled has no position left to be fed at.
                done[b] = true;
                out[b].stopped = stop_reason::context;
            } else if (out[b].ids.size() == options.max_new_tokens) {
                done[b] = true;
                out[b].stopped = stop_reason::max_new_tokens;
            } else {
                next[b] = id;
                counts[b] = 1;
            }
        }
        if (std::all_of(counts.begin(), counts.end(), [](std::size_t c) { return c == 0; })) break;
        run(1, counts, [&](std::size_t b, std::size_t) { return next[b]; });
        for (std::size_t b = 0; b < Batch; ++b) fed[b] += counts[b];
    }
    return out;
}

}  // namespace shaped::models
