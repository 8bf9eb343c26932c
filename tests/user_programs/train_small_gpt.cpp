// A user's training program, as the guide's "Training" section writes it: a two-layer GPT learns
// a counting pattern with AdamW on a warmup-cosine schedule, and its loss must fall.
// `make compile-times` times this program as a user's edit-compile loop would.
#include <shaped/shaped.hpp>

#include <cstdint>
#include <iostream>
#include <memory>

using Char = shaped::models::GPT<shaped::models::gpt_config<16, 8, 2, 2, 16>>;
using B = shaped::dim<"B", 4>;
using T = shaped::dim<"T", 8>;

int main() {
    shaped::Generator init(7);
    auto net = std::make_unique<Char>(init);
    shaped::train::gradients<Char> grads;
    auto trainer = std::make_unique<shaped::train::trainer<Char, B, T>>();
    shaped::train::AdamW<Char> opt({.beta2 = 0.95, .weight_decay = 0.1});
    const shaped::train::warmup_cosine schedule{.lr = 1e-2, .min_lr = 1e-3, .warmup_steps = 5, .decay_steps = 60};

    // Each row counts up from its own start, modulo 16.
    shaped::train::batch_ids<B, T> idx, targets;
    for (std::size_t b = 0; b < B::extent; ++b)
        for (std::size_t t = 0; t < T::extent; ++t) {
            idx(b, t) = static_cast<std::int64_t>((3 * b + t) % 16);
            targets(b, t) = static_cast<std::int64_t>((3 * b + t + 1) % 16);
        }
    double first = 0, last = 0;
    for (std::size_t step = 0; step < 60; ++step) {
        shaped::train::zero(grads);
        last = trainer->forward_backward(*net, grads, idx, targets);
        if (step == 0) first = last;
        shaped::train::clip_grad_norm(grads, 1.0);
        opt.step(*net, grads, schedule(step));
    }
    std::cout << "training a two-layer GPT: loss " << first << " -> " << last << "\n";
    return last < first / 4 ? 0 : 1;
}
