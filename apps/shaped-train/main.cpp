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
#include "presets.hpp"
#include "run.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <exception>
#include <filesystem>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace {

namespace fs = std::filesystem;
using shaped_train::options;
using shaped_train::processes;
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

}  // namespace

shaped_train::processes::processes(int* argc, char*** argv) {
    if (!std::getenv("OMPI_COMM_WORLD_SIZE")) return;
    mpi_ = load_mpi_module();
    int rank = 0, size = 1;
    mpi_->start(argc, argv, &rank, &size);
    rank_ = static_cast<std::size_t>(rank);
    size_ = static_cast<std::size_t>(size);
}

namespace {

// `o.preset` is one of the presets' names: the flag table takes no other.
template <class... Presets>
int train_preset(std::tuple<Presets...>*, const options& o, const processes& world) {
    int status = -1;
    ((status < 0 && o.preset == Presets::name ? (status = shaped_train::train<Presets>(o, world)) : 0), ...);
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
