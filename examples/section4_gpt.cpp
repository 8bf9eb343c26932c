// Section 4, a whole model: the chapter's attention inside nanoGPT's GPT, declared as a plain
// struct of layers (its names, counts and summary come from that declaration), generating token
// by token through every block's KV cache: the ids sampled with the caches are those of running
// the whole sequence again at every step, from the same seed.
#include <shaped/shaped.hpp>

#include <algorithm>
#include <iostream>
#include <span>
#include <memory>
#include <vector>

// vocab 65 (the chapter's characters), context 64, 2 layers, 4 heads, 32 channels.
using Tiny = shaped::models::GPT<shaped::models::gpt_config<65, 64, 2, 4, 32>>;

void print_ids(const char* label, const std::vector<shaped::models::token_id>& ids) {
    std::cout << label;
    for (const auto id : ids) std::cout << ' ' << id;
    std::cout << '\n';
}

int main() {
    std::cout << "4. A whole model\n\n";
    shaped::Generator gen(1337);
    auto model = std::make_unique<Tiny>(gen);  // nanoGPT's initialisation
    std::cout << shaped::nn::summary(*model) << '\n';

    const std::vector<std::vector<shaped::models::token_id>> prompt{{1, 20, 43, 1}};
    const shaped::models::sampling how{.temperature = 1.0, .top_k = 20};
    shaped::Generator seeded(7);
    const auto cached = shaped::models::generate(*model, prompt, {.max_new_tokens = 16, .how = how}, seeded);
    print_ids("sampled (seed 7, top-k 20), with the caches:", cached[0].ids);

    // The same by full recompute, from the same seed: every step runs the whole sequence again.
    shaped::Generator again(7);
    std::vector<shaped::models::token_id> sequence = prompt[0];
    std::vector<shaped::models::token_id> recomputed;
    using B = shaped::dim<"B", 1>;
    using T = shaped::dim<"T">;
    for (int step = 0; step < 16; ++step) {
        shaped::Tensor<shaped::models::token_id, B, T> ids(T{sequence.size()});
        std::copy(sequence.begin(), sequence.end(), ids.data());
        const auto logits = (*model)(ids);
        std::vector<float> last(Tiny::vocab_dim::extent);
        for (std::size_t v = 0; v < last.size(); ++v) last[v] = logits(0, sequence.size() - 1, v);
        recomputed.push_back(static_cast<shaped::models::token_id>(shaped::models::sample(std::span<const float>(last), how, again)));
        sequence.push_back(recomputed.back());
    }
    print_ids("sampled (seed 7, top-k 20), by recompute:   ", recomputed);
    const bool same = recomputed == cached[0].ids;
    std::cout << (same ? "the same ids\n" : "DIFFERENT ids\n");
    return same ? 0 : 1;
}
