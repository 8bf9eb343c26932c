#pragma once
// What shaped-train's main hands the training of one preset: the flags, and the processes that
// train together. The training itself (training.hpp) is compiled once for each preset, each in a
// file of its own (presets/<name>.cpp), so that the presets compile side by side.

#include "mpi_calls.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <span>
#include <string>

namespace shaped_train {

namespace fs = std::filesystem;

struct options {
    fs::path text;
    fs::path out;
    std::string preset = "gpt-char";
    std::optional<fs::path> tokenizer;  // GPT-2's vocab.json and merges.txt, for a BPE preset
    std::size_t steps = 2000;
    std::size_t accumulate = 1;         // micro-batches a step
    double lr = 1e-3;
    std::optional<double> min_lr;       // lr / 10
    std::size_t warmup = 100;
    double weight_decay = 0.1;
    double beta1 = 0.9, beta2 = 0.99;
    double clip = 1.0;
    double val_fraction = 0.1;
    std::size_t eval_every = 250;
    std::size_t eval_batches = 20;
    std::optional<std::size_t> checkpoint_every;  // eval_every
    std::uint64_t seed = 1337;
    bool resume = false;
    std::optional<std::size_t> stop_at;  // stop after this step, checkpointed, to --resume later
};

// This process's place among those training together. Under mpirun (Open MPI sets
// OMPI_COMM_WORLD_SIZE), MPI is loaded and started, and the gradients and losses are summed over
// every process; otherwise there is one process and MPI is never loaded.
class processes {
public:
    // Loads and starts MPI under mpirun (main.cpp).
    processes(int* argc, char*** argv);
    ~processes() {
        if (mpi_) mpi_->finish();
    }
    processes(const processes&) = delete;
    processes& operator=(const processes&) = delete;

    std::size_t rank() const { return rank_; }
    std::size_t size() const { return size_; }
    bool leads() const { return rank_ == 0; }

    // Every process's values, summed in place, on every process.
    void sum(std::span<float> values) const { reduce(values.data(), values.size(), true); }
    void sum(std::span<double> values) const { reduce(values.data(), values.size(), false); }

    // A failure on one process ends them all (one that returned alone would leave the others
    // waiting in a sum for ever).
    [[noreturn]] void abort() const {
        if (mpi_) mpi_->abort();
        std::exit(1);
    }

private:
    void reduce(void* data, std::size_t n, bool single) const {
        if (size_ > 1) mpi_->sum(data, n, single);
    }

    const shaped_train::mpi_calls* mpi_ = nullptr;
    std::size_t rank_ = 0, size_ = 1;
};

// Trains `Preset` (presets.hpp) as the flags say; defined in training.hpp.
template <class Preset>
int train(const options& o, const processes& world);

}  // namespace shaped_train
