#pragma once
// The training of one preset, as shaped-train's main runs it (run.hpp): the text tokenized and
// split, the model drawn or resumed, each step's micro-batches, the sum over processes, clipping,
// AdamW, the log, evaluations and checkpoints. Compiled once for each preset, in
// presets/<name>.cpp.

#include "../common/command_line.hpp"
#include "checkpoint.hpp"
#include "presets.hpp"
#include "run.hpp"

#include <shaped/shaped.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace shaped_train {

using shaped_apps::usage_error;

// ---- data ------------------------------------------------------------------------------------

// The text's ids as training keeps them: as narrow as the tokenizer's vocabulary allows (nanoGPT
// keeps GPT-2's as uint16), for beside a small model they are much of what a run holds.
template <class Preset>
using stored_id = std::conditional_t<Preset::tokenizer == tokenizer_kind::bytes, std::uint8_t, std::uint16_t>;

// The text's ids, split in place: the first (1 - fraction) trains, the rest validates.
template <class Id>
struct token_split {
    std::span<const Id> train, val;
};

// The most bytes of training text. The text, the tokenizer's ids (4 bytes each, one a byte for
// the byte-level presets) and their narrowed copy are in memory at once, some 6 bytes a byte of
// text: 1 GiB (a thousand times nanoGPT's Shakespeare) keeps that within a workstation's memory,
// and a file given by mistake (a disk image) is refused before it is read.
inline constexpr std::size_t max_text_bytes = std::size_t{1} << 30;

template <class Preset>
std::vector<stored_id<Preset>> tokenize(const options& o) {
    using Id = stored_id<Preset>;
    constexpr std::size_t vocab_size = Preset::model_type::config::vocab_size;
    static_assert(vocab_size - 1 <= std::numeric_limits<Id>::max(),
                  "a preset's vocabulary must fit the ids its tokenizer's text is stored as");
    const std::string text = shaped::io::read_file(o.text, max_text_bytes, "the training text");
    std::vector<shaped::text::token_id> ids;
    if constexpr (Preset::tokenizer == tokenizer_kind::bytes) {
        ids = shaped::text::byte_tokenizer().encode(text);
    } else {
        ids = shaped::text::gpt2_tokenizer(o.tokenizer.value()).encode(text);  // the flag table required it
    }
    std::vector<Id> stored(ids.size());
    for (std::size_t i = 0; i < ids.size(); ++i) {
        // A tokenizer read from files can hold ids past what the preset's vocabulary has.
        if (static_cast<std::size_t>(ids[i]) >= vocab_size)
            throw std::runtime_error(o.text.string() + ": its id " + std::to_string(ids[i]) + " at " + std::to_string(i) +
                                     " is not an id of " + std::string(Preset::name) + "'s vocabulary of " +
                                     std::to_string(vocab_size));
        stored[i] = static_cast<Id>(ids[i]);
    }
    return stored;
}

// splitmix64: a seed for each (run seed, step, micro-batch), so that any step's batches can be
// drawn again on their own (a resumed run's, another process's).
inline std::uint64_t mix(std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
inline std::uint64_t batch_seed(std::uint64_t seed, std::uint64_t step, std::uint64_t micro) {
    return mix(mix(mix(seed) ^ step) ^ micro);
}

// B windows of T + 1 ids at random starts, as nanoGPT's get_batch: ids, and the next ids as targets.
template <class B, class T, class Id>
void draw_batch(std::span<const Id> tokens, std::uint64_t seed, shaped::train::batch_ids<B, T>& idx,
                shaped::train::batch_ids<B, T>& targets) {
    shaped::Generator gen(seed);
    const std::size_t starts = tokens.size() - T::extent;
    for (std::size_t b = 0; b < B::extent; ++b) {
        const auto start = std::min(static_cast<std::size_t>(gen.uniform() * static_cast<double>(starts)), starts - 1);
        for (std::size_t t = 0; t < T::extent; ++t) {
            idx(b, t) = tokens[start + t];
            targets(b, t) = tokens[start + t + 1];
        }
    }
}

// ---- the terminal ----------------------------------------------------------------------------

inline std::string duration(double seconds) {
    const auto s = static_cast<long long>(seconds);
    std::ostringstream out;
    if (s >= 3600) out << s / 3600 << "h" << (s / 60) % 60 << "m";
    else if (s >= 60) out << s / 60 << "m" << s % 60 << "s";
    else out << s << "s";
    return out.str();
}

inline std::string mib(std::size_t bytes) {
    std::ostringstream out;
    out.precision(1);
    out << std::fixed << static_cast<double>(bytes) / (1024.0 * 1024.0) << " MiB";
    return out.str();
}

inline std::size_t peak_resident_bytes() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return static_cast<std::size_t>(usage.ru_maxrss) * 1024;
}

// ---- the model shaped-run reads -------------------------------------------------------------

// The model as shaped-run reads it: a GPT as nanoGPT's state_dict, OUT/model.safetensors; a Llama
// as a Hugging Face directory, OUT itself (config.json beside model.safetensors). What shaped-run
// is given is returned. Each file is written beside and renamed over the old one.
template <class Config, class T>
fs::path save_model(const fs::path& out, const shaped::models::GPT<Config, T>& model, shaped::io::safetensors_metadata metadata) {
    metadata.emplace("format", "pt");
    metadata.emplace("n_head", std::to_string(Config::n_head));
    shaped::io::save_parameters(out / "model.safetensors", model, metadata);
    return out / "model.safetensors";
}
template <class Config, class T>
fs::path save_model(const fs::path& out, const shaped::models::Llama<Config, T>& model,
                    const shaped::io::safetensors_metadata& metadata) {
    shaped::models::save_hf_llama(model, out, metadata);
    return out;
}

// ---- training --------------------------------------------------------------------------------

// into += from, gradient by gradient.
template <class Model>
void add_gradients(const shaped::train::gradients<Model>& into, const shaped::train::gradients<Model>& from) {
    const auto sums = shaped::nn::parameter_list(into.storage());
    const auto terms = shaped::nn::parameter_list(std::as_const(from.storage()));
    for (std::size_t i = 0; i < sums.size(); ++i)
        shaped::nn::on_floating_elements(sums[i], [&](auto sum) {
            const auto term = terms[i].template elements<typename decltype(sum)::element_type>();
            for (std::size_t j = 0; j < sum.size(); ++j) sum[j] += term[j];
        });
}

// The step this run starts at: 0, or with --resume the step of OUT's checkpoint, whose model and
// moments are then read. A run killed before its first checkpoint left a log but no checkpoint:
// resumed, it starts over. A run not resumed never starts over a checkpoint it would replace.
template <class Model, class Optimizer>
std::size_t start_step(const options& o, const run_identity& run, std::size_t last, Model& model,
                       Optimizer& opt) {
    const fs::path checkpoint = o.out / checkpoint_file;
    const bool have_checkpoint = fs::exists(checkpoint);
    if (!o.resume) {
        if (have_checkpoint)
            throw std::runtime_error(o.out.string() + ": holds a checkpoint already (" + std::string(checkpoint_file) +
                                     "): --resume continues it; another -o OUT starts a new run");
        return 0;
    }
    if (have_checkpoint) return read_checkpoint(o.out, model, opt, run, last);
    if (fs::exists(o.out / log_file)) return 0;
    throw std::runtime_error(checkpoint.string() + ": no checkpoint to resume");
}

template <class Preset>
int train(const options& o, const processes& world) {
    using Model = typename Preset::model_type;
    using B = typename Preset::batch_dim;
    using T = typename Preset::time_dim;
    using Trainer = shaped::train::trainer<Model, B, T>;
    if (o.accumulate % world.size() != 0)
        throw usage_error("--accumulate " + std::to_string(o.accumulate) + " is not a multiple of the " +
                          std::to_string(world.size()) + " processes");

    const auto tokens = tokenize<Preset>(o);
    const auto val_size = static_cast<std::size_t>(static_cast<double>(tokens.size()) * o.val_fraction);
    using Id = stored_id<Preset>;
    const std::span<const Id> all(tokens);
    const token_split<Id> data{all.first(tokens.size() - val_size), all.last(val_size)};
    if (data.train.size() <= T::extent + 1 || data.val.size() <= T::extent + 1)
        throw std::runtime_error(o.text.string() + ": " + std::to_string(tokens.size()) +
                                 " ids are too few for windows of " + std::to_string(T::extent + 1) + " in both splits");

    shaped::Generator init(o.seed);
    auto model = std::make_unique<Model>(init);
    shaped::train::AdamW<Model> opt({.beta1 = o.beta1, .beta2 = o.beta2, .eps = 1e-8, .weight_decay = o.weight_decay});
    const std::size_t last = std::min(o.steps, o.stop_at.value_or(o.steps));
    const run_identity run{std::string(Preset::name), o.seed, text_fingerprint(all)};
    // The first process writes OUT, and holds it while it does.
    std::optional<run_folder> folder;
    if (world.leads()) folder.emplace(o.out);
    // Before the gradients and activations are allocated: a checkpoint is read whole before it is
    // assigned, and its copy is then gone when they take their place.
    const std::size_t first = start_step(o, run, last, *model, opt);
    shaped::train::gradients<Model> grads;
    // A micro-batch's own gradients, when a process takes more than one a step.
    std::optional<shaped::train::gradients<Model>> micro;
    if (o.accumulate / world.size() > 1) micro.emplace();
    auto trainer = std::make_unique<Trainer>();
    const shaped::train::warmup_cosine schedule{.lr = o.lr, .min_lr = o.min_lr.value_or(o.lr / 10), .warmup_steps = o.warmup,
                                                .decay_steps = o.steps};

    constexpr std::size_t parameter_bytes = shaped::nn::parameter_bytes<Model>;
    // Parameters, gradients (twice with micro-batches) and AdamW's two moments: constants; and the
    // step's own tensors, the same every step, said after the first.
    const std::size_t model_bytes = (micro ? 5 : 4) * parameter_bytes;
    if (world.leads()) {
        std::cout << "shaped-train: " << Preset::name << ", " << shaped::nn::parameter_count<Model> << " parameters ("
                  << mib(parameter_bytes) << "; with gradients and AdamW's moments " << mib(4 * parameter_bytes)
                  << "), batches of " << B::extent << " x " << T::extent
                  << "\nshaped-train: " << data.train.size() << " ids train, " << data.val.size() << " validate; "
                  << o.accumulate << " micro-batch(es) a step over " << world.size() << " process(es)"
                  << (first ? ", resumed at step " + std::to_string(first) : std::string()) << "\n";
    }

    shaped::train::batch_ids<B, T> idx, targets;
    // The mean loss over eval_batches fixed batches of a split (the same batches every time).
    const auto evaluate = [&](std::span<const Id> split, std::uint64_t which) {
        double total = 0;
        for (std::size_t i = 0; i < o.eval_batches; ++i) {
            draw_batch(split, batch_seed(o.seed ^ which, ~std::uint64_t{0}, i), idx, targets);
            total += trainer->loss(*model, idx, targets);
        }
        return total / static_cast<double>(o.eval_batches);
    };
    const auto report = [&](std::size_t step) {
        const double train_loss = evaluate(data.train, 1), val_loss = evaluate(data.val, 2);
        if (world.leads()) std::cout << "step " << step << ": train loss " << train_loss << ", val loss " << val_loss << std::endl;
    };

    std::optional<training_log> log;
    if (world.leads()) log.emplace(o.out, first);
    const bool terminal = isatty(STDERR_FILENO);
    const std::size_t checkpoint_every = o.checkpoint_every.value_or(o.eval_every);
    const auto start = std::chrono::steady_clock::now();
    const std::size_t tokens_per_step = o.accumulate * B::extent * T::extent;
    fs::path written;  // the checkpoint shaped-run reads
    for (std::size_t step = first; step < last; ++step) {
        if (step % o.eval_every == 0) report(step);
        shaped::train::zero(grads);
        double loss = 0;
        for (std::size_t m = world.rank(); m < o.accumulate; m += world.size()) {
            draw_batch(data.train, batch_seed(o.seed, step, m), idx, targets);
            // Each micro-batch's gradients on their own, then added: the sum one process forms
            // is then the sum processes form (with two micro-batches over two, the same bits).
            const auto& into = micro ? *micro : grads;
            if (micro) shaped::train::zero(*micro);
            loss += trainer->forward_backward(*model, into, idx, targets, 1.0 / static_cast<double>(o.accumulate));
            if (micro) add_gradients(grads, *micro);
            if (step == first && m == world.rank() && world.leads())
                std::cout << "shaped-train: a step keeps activations " << mib(trainer->last_step().activations)
                          << " for its backward and holds " << mib(trainer->last_step().peak) << " at its peak"
                          << std::endl;
        }
        if (world.size() > 1) {
            for (const auto& g : shaped::nn::parameter_list(grads.storage()))
                shaped::nn::on_floating_elements(g, [&](auto elements) { world.sum(elements); });
            world.sum(std::span(&loss, 1));
        }
        loss /= static_cast<double>(o.accumulate);
        const double norm = shaped::train::clip_grad_norm(grads, o.clip);
        // Checked before the step is taken, so that what the step would write is never a model
        // of NaNs.
        if (!std::isfinite(loss) || !std::isfinite(norm))
            throw std::runtime_error("at step " + std::to_string(step) + " the loss is " + std::to_string(loss) +
                                     " and the gradients' norm " + std::to_string(norm) + "; stopped before taking it");
        const double lr = schedule(step);
        opt.step(*model, grads, lr);
        if (world.leads()) {
            log->write(step, loss, lr, norm);
            const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            const double done = static_cast<double>(step + 1 - first);
            if (terminal)
                std::cerr << "\rstep " << step + 1 << "/" << o.steps << "  loss " << loss << "  "
                          << static_cast<long long>(done * static_cast<double>(tokens_per_step) / seconds) << " tok/s  "
                          << duration(seconds / done * static_cast<double>(o.steps - step - 1)) << " left   " << std::flush;
            if ((step + 1) % checkpoint_every == 0 || step + 1 == last) {
                write_checkpoint(o.out, *model, opt, step + 1, run);
                written = save_model(o.out, *model,
                                     {{"tokenizer", Preset::tokenizer == tokenizer_kind::bytes ? "bytes" : "gpt2"},
                                      {"step", std::to_string(step + 1)}});
                folder->sync();
            }
        }
    }
    if (terminal && world.leads()) std::cerr << '\n';
    if (last == o.steps) report(o.steps);
    if (world.leads()) {
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        const std::size_t peak = peak_resident_bytes();
        const std::size_t state_bytes = model_bytes + trainer->last_step().peak;
        std::cout << "shaped-train: " << last - first << " steps in " << duration(seconds) << ", "
                  << static_cast<long long>(static_cast<double>((last - first) * tokens_per_step) / seconds)
                  << " tok/s; peak resident " << mib(peak) << ", " << static_cast<double>(peak) / static_cast<double>(state_bytes)
                  << "x the " << mib(state_bytes) << " of parameters, gradients, moments and activations\n"
                  << (written.empty() ? "" : "shaped-train: wrote " + written.string() + " (shaped-run " + written.string() + ")\n");
    }
    return 0;
}

}  // namespace shaped_train
