// shaped-train: trains a GPT or a Llama on a text file, as nanoGPT's train.py does, and writes a
// checkpoint shaped-run generates from.
//
//   shaped-train TEXT -o OUT [--preset gpt-char] [--steps N] [--lr LR] ... [--resume]
//
// The text is tokenized (bytes, or GPT-2's BPE from --tokenizer DIR), its first 90% trains and
// the rest validates. Each step draws its batches from a generator seeded by (seed, step), so a
// run resumed from a checkpoint takes the same batches, and the same losses, as an unbroken one.
// OUT/checkpoint.safetensors is the run's state, one file (checkpoint.hpp says why), and
// OUT/model.safetensors the model shaped-run reads (a GPT's under nanoGPT's names; a Llama's
// under Hugging Face's, OUT/config.json beside it; the tokenizer in its metadata); OUT/log.tsv
// each step's loss and learning rate. Under mpirun, each process takes its share of a step's micro-batches and the
// gradients are summed over all of them (MPI_Allreduce): the same step as one process takes.
// A flag out of its range (each flag's is in -h), or --tokenizer with a preset that reads bytes,
// is one line naming the flag and a pointer to -h, exit status 1, before anything is written; a
// report that cannot be written to standard output is exit status 1 too.

#include "../common/command_line.hpp"
#include "checkpoint.hpp"
#include "mpi_calls.hpp"
#include "presets.hpp"

#include <shaped/shaped.hpp>

#include <dlfcn.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

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

using shaped_apps::usage_error;

template <class... Presets>
std::vector<std::string> preset_names(std::tuple<Presets...>*) {
    return {std::string(Presets::name)...};
}
// The tokenizer of the preset named `name`, which is one of them.
template <class... Presets>
shaped_train::tokenizer_kind tokenizer_of(std::tuple<Presets...>*, std::string_view name) {
    auto kind = shaped_train::tokenizer_kind::bytes;
    ((name == Presets::name ? (kind = Presets::tokenizer, 0) : 0), ...);
    return kind;
}

// The flags, read by the table that also writes -h (apps/common/command_line.hpp); then the rules
// between them, and --tokenizer against the preset.
options parse(int argc, char** argv) {
    namespace cl = shaped_apps;
    options o;
    auto* const presets = static_cast<shaped_train::presets*>(nullptr);
    const cl::command_line line{
        "shaped-train",
        {{"TEXT", "", "the training text (its first 1 - F trains, the rest validates)", cl::file(o.text)},
         {"-o", "OUT", "the folder for checkpoint.safetensors, model.safetensors (a Llama's config.json) and log.tsv",
          cl::out_directory(o.out), cl::required},
         {"--preset", "NAME", "what to train: gpt-char and llama-char read bytes, gpt-bpe GPT-2's BPE (--tokenizer)",
          cl::one_of(o.preset, preset_names(presets))},
         {"--tokenizer", "DIR", "GPT-2's BPE files, for a preset that reads them",
          cl::directory_holding(o.tokenizer, {{"vocab.json", "merges.txt"}, {"encoder.json", "vocab.bpe"}})},
         {"--steps", "N", "optimizer steps in all", cl::whole(o.steps, 1)},
         {"--accumulate", "K", "micro-batches a step; under mpirun, a multiple of the processes", cl::whole(o.accumulate, 1)},
         {"--lr", "LR", "the cosine schedule's top", cl::real(o.lr, cl::greater_than(0))},
         {"--min-lr", "LR", "the cosine schedule's bottom (<= --lr)", cl::real(o.min_lr, cl::at_least(0), {}, "--lr / 10")},
         {"--warmup", "N", "steps of linear warmup before the cosine (< --steps)", cl::whole(o.warmup, 0)},
         {"--weight-decay", "W", "AdamW's, on the matrices only", cl::real(o.weight_decay, cl::at_least(0))},
         {"--beta2", "B", "AdamW's decay of its second moment", cl::real(o.beta2, cl::at_least(0), cl::less_than(1))},
         {"--clip", "C", "the gradients' global norm at most C", cl::real(o.clip, cl::greater_than(0))},
         {"--val-fraction", "F", "the text's last F validates", cl::real(o.val_fraction, cl::greater_than(0), cl::less_than(1))},
         {"--eval-every", "N", "train and validation loss every N steps", cl::whole(o.eval_every, 1)},
         {"--eval-batches", "N", "the batches each of those losses is the mean of", cl::whole(o.eval_batches, 1)},
         {"--checkpoint-every", "N", "write the checkpoint every N steps and at the end",
          cl::whole(o.checkpoint_every, 1, "--eval-every")},
         {"--seed", "S", "the model's initialisation and every batch", cl::whole(o.seed, 0)},
         {"--resume", "", "continue from OUT's checkpoint, as if never stopped", cl::on(o.resume)},
         {"--stop-at", "N", "stop after step N (<= --steps), its checkpoint written, to --resume later",
          cl::whole(o.stop_at, 1, "--steps")}}};
    const cl::given_flags given = line.parse(argc, argv);
    const std::string steps = " (" + std::to_string(o.steps) + ")";
    if (o.warmup >= o.steps) cl::refuse(given, "--warmup", "a whole number < --steps" + steps, std::to_string(o.warmup));
    if (o.stop_at && *o.stop_at > o.steps) cl::refuse(given, "--stop-at", "a whole number >= 1 and <= --steps" + steps, "");
    if (o.min_lr && *o.min_lr > o.lr)
        cl::refuse(given, "--min-lr", cl::number_kind(cl::at_least(0), {}) + " and <= --lr (" + cl::spelled(o.lr) + ")", "");
    const bool reads_bpe = tokenizer_of(presets, o.preset) == shaped_train::tokenizer_kind::gpt2;
    if (o.tokenizer && !reads_bpe) throw cl::no_effect("--tokenizer", "with --preset " + o.preset + ", which reads bytes");
    if (!o.tokenizer && reads_bpe)
        throw usage_error("--preset " + o.preset + " needs --tokenizer DIR, GPT-2's BPE files");
    return o;
}

// ---- processes: one, or many under mpirun --------------------------------------------------

// The MPI module (mpi_calls.hpp): beside the executable, as in a build tree, or where it is
// installed.
const shaped_train::mpi_calls* load_mpi_module() {
#if defined(SHAPED_TRAIN_MPI_MODULE)
    const fs::path here = fs::read_symlink("/proc/self/exe").parent_path();
    const fs::path installed = (here / SHAPED_TRAIN_MPI_MODULE_INSTALLED_DIR / SHAPED_TRAIN_MPI_MODULE).lexically_normal();
    for (const fs::path& path : {here / SHAPED_TRAIN_MPI_MODULE, installed}) {
        if (!fs::exists(path)) continue;
        // Global: the plugins Open MPI loads in turn need libmpi's symbols.
        void* module = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
        if (!module) throw std::runtime_error("started by mpirun, but " + path.string() + " cannot be loaded: " + dlerror());
        using entry = const shaped_train::mpi_calls* (*)();
        const auto calls = reinterpret_cast<entry>(dlsym(module, shaped_train::mpi_calls_symbol));
        if (!calls) throw std::runtime_error("started by mpirun, but " + path.string() + " is not shaped-train's MPI module");
        return calls();
    }
    throw std::runtime_error("started by mpirun, but its MPI module is neither beside it nor at " + installed.string());
#else
    throw std::runtime_error("started by mpirun, but built without Open MPI (libopenmpi-dev): it trains in one process only");
#endif
}

// This process's place among those training together. Under mpirun (Open MPI sets
// OMPI_COMM_WORLD_SIZE), MPI is loaded and started, and the gradients and losses are summed over
// every process; otherwise there is one process and MPI is never loaded.
class processes {
public:
    processes(int* argc, char*** argv) {
        if (!std::getenv("OMPI_COMM_WORLD_SIZE")) return;
        mpi_ = load_mpi_module();
        int rank = 0, size = 1;
        mpi_->start(argc, argv, &rank, &size);
        rank_ = static_cast<std::size_t>(rank);
        size_ = static_cast<std::size_t>(size);
    }
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

// ---- data ------------------------------------------------------------------------------------

// The text's ids as training keeps them: as narrow as the tokenizer's vocabulary allows (nanoGPT
// keeps GPT-2's as uint16), for beside a small model they are much of what a run holds.
template <class Preset>
using stored_id = std::conditional_t<Preset::tokenizer == shaped_train::tokenizer_kind::bytes, std::uint8_t, std::uint16_t>;

// The text's ids, split in place: the first (1 - fraction) trains, the rest validates.
template <class Id>
struct token_split {
    std::span<const Id> train, val;
};

// The most bytes of training text. The text, the tokenizer's ids (4 bytes each, one a byte for
// the byte-level presets) and their narrowed copy are in memory at once, some 6 bytes a byte of
// text: 1 GiB (a thousand times nanoGPT's Shakespeare) keeps that within a workstation's memory,
// and a file given by mistake (a disk image) is refused before it is read.
constexpr std::size_t max_text_bytes = std::size_t{1} << 30;

template <class Preset>
std::vector<stored_id<Preset>> tokenize(const options& o) {
    using Id = stored_id<Preset>;
    constexpr std::size_t vocab_size = Preset::model_type::config::vocab_size;
    static_assert(vocab_size - 1 <= std::numeric_limits<Id>::max(),
                  "a preset's vocabulary must fit the ids its tokenizer's text is stored as");
    const std::string text = shaped::io::read_file(o.text, max_text_bytes, "the training text");
    std::vector<shaped::text::token_id> ids;
    if constexpr (Preset::tokenizer == shaped_train::tokenizer_kind::bytes) {
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
std::uint64_t mix(std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
std::uint64_t batch_seed(std::uint64_t seed, std::uint64_t step, std::uint64_t micro) {
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

std::string duration(double seconds) {
    const auto s = static_cast<long long>(seconds);
    std::ostringstream out;
    if (s >= 3600) out << s / 3600 << "h" << (s / 60) % 60 << "m";
    else if (s >= 60) out << s / 60 << "m" << s % 60 << "s";
    else out << s << "s";
    return out.str();
}

std::string mib(std::size_t bytes) {
    std::ostringstream out;
    out.precision(1);
    out << std::fixed << static_cast<double>(bytes) / (1024.0 * 1024.0) << " MiB";
    return out.str();
}

std::size_t peak_resident_bytes() {
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
void add(const shaped::train::gradients<Model>& into, const shaped::train::gradients<Model>& from) {
    shaped::train::for_each_gradient(into.storage(), from, [](std::string_view, auto& sum, auto& term) {
        for (std::size_t i = 0; i < sum.size(); ++i) sum.data()[i] += term.data()[i];
    });
}

// The step this run starts at: 0, or with --resume the step of OUT's checkpoint, whose model and
// moments are then read. A run killed before its first checkpoint left a log but no checkpoint:
// resumed, it starts over. A run not resumed never starts over a checkpoint it would replace.
template <class Model, class Optimizer>
std::size_t start_step(const options& o, const shaped_train::run_identity& run, std::size_t last, Model& model,
                       Optimizer& opt) {
    const fs::path checkpoint = o.out / shaped_train::checkpoint_file;
    const bool have_checkpoint = fs::exists(checkpoint);
    if (!o.resume) {
        if (have_checkpoint)
            throw std::runtime_error(o.out.string() + ": holds a checkpoint already (" + std::string(shaped_train::checkpoint_file) +
                                     "): --resume continues it; another -o OUT starts a new run");
        return 0;
    }
    if (have_checkpoint) return shaped_train::read_checkpoint(o.out, model, opt, run, last);
    if (fs::exists(o.out / shaped_train::log_file)) return 0;
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
    const shaped_train::run_identity run{std::string(Preset::name), o.seed, shaped_train::text_fingerprint(all)};
    // The first process writes OUT, and holds it while it does.
    std::optional<shaped_train::run_folder> folder;
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

    std::optional<shaped_train::training_log> log;
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
            if (micro) add(grads, *micro);
            if (step == first && m == world.rank() && world.leads())
                std::cout << "shaped-train: a step keeps activations " << mib(trainer->last_step().activations)
                          << " for its backward and holds " << mib(trainer->last_step().peak) << " at its peak"
                          << std::endl;
        }
        if (world.size() > 1) {
            shaped::train::for_each_gradient(grads, [&](std::string_view, auto& g) { world.sum(g.elements()); });
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
                shaped_train::write_checkpoint(o.out, *model, opt, step + 1, run);
                written = save_model(o.out, *model,
                                     {{"tokenizer", Preset::tokenizer == shaped_train::tokenizer_kind::bytes ? "bytes" : "gpt2"},
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

// `o.preset` is one of the presets' names: the flag table takes no other.
template <class... Presets>
int train_preset(std::tuple<Presets...>*, const options& o, const processes& world) {
    int status = -1;
    ((status < 0 && o.preset == Presets::name ? (status = train<Presets>(o, world)) : 0), ...);
    if (status < 0) throw std::logic_error("shaped-train: --preset " + o.preset + " passed the flag table but names no preset");
    return status;
}

}  // namespace

int main(int argc, char** argv) {
    std::unique_ptr<processes> started;
    try {
        started = std::make_unique<processes>(&argc, &argv);
    } catch (const std::exception& error) {
        std::cerr << "shaped-train: " << error.what() << '\n';
        return 1;
    }
    const processes& world = *started;
    try {
        shaped_apps::stop_on_output_error();
        const options o = parse(argc, argv);
        const int status = train_preset(static_cast<shaped_train::presets*>(nullptr), o, world);
        shaped_apps::finish_output();  // a report lost is a failure, not a success
        return status;
    } catch (const usage_error& error) {
        const std::string message = shaped_apps::message_of(error);
        if (world.leads()) std::cerr << "shaped-train: " << message << "\n(shaped-train -h for the flags)\n";
    } catch (const std::exception& error) {
        const std::string message = shaped_apps::message_of(error);
        std::cerr << "shaped-train: " << message << '\n';
    }
    world.abort();
}
