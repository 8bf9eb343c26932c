#pragma once
// train::warmup_cosine: nanoGPT's learning-rate schedule (train.py's get_lr) — a linear warmup
// over the first warmup_steps steps, a cosine from lr down to min_lr until decay_steps, then
// min_lr:
//
//   step < warmup_steps        lr * (step + 1) / (warmup_steps + 1)
//   step > decay_steps         min_lr
//   otherwise                  min_lr + (1 + cos(pi * (step - warmup) / (decay - warmup))) / 2 * (lr - min_lr)

#include <cmath>
#include <cstddef>
#include <numbers>
#include <stdexcept>

namespace shaped::train {

struct warmup_cosine {
    double lr;
    double min_lr;
    std::size_t warmup_steps;
    std::size_t decay_steps;

    double operator()(std::size_t step) const {
        if (step < warmup_steps)
            return lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps + 1);
        if (step > decay_steps) return min_lr;
        if (decay_steps <= warmup_steps)
            throw std::invalid_argument("shaped::train::warmup_cosine: decay_steps must exceed warmup_steps");
        const double ratio = static_cast<double>(step - warmup_steps) / static_cast<double>(decay_steps - warmup_steps);
        return min_lr + 0.5 * (1.0 + std::cos(std::numbers::pi * ratio)) * (lr - min_lr);
    }
};

}  // namespace shaped::train
