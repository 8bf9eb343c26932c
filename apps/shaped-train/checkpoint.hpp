#pragma once
// What shaped-train keeps in its output folder OUT, and how it keeps it whole:
//
//   OUT/checkpoint.safetensors  the run's state, ONE file: the model's parameters ("model."),
//                               AdamW's moments ("exp_avg.", "exp_avg_sq."), and in its metadata
//                               the step it resumes at, the preset, the seed and the text's
//                               fingerprint
//   OUT/model.safetensors       the model as shaped-run reads it (a GPT's under nanoGPT's names;
//                               a Llama's under Hugging Face's, OUT/config.json beside it)
//   OUT/log.tsv                 one line a step, appended and flushed as each step ends
//
// The state is one file, not a model file and an optimizer file, because a file written beside
// and renamed over the old one is replaced whole or not at all: a kill or a full disk at any
// moment leaves the previous checkpoint or the new one, never a model of one step with moments
// of another. (A manifest over two files could only detect that mix and refuse it; the run
// would then have lost both.) The model file shaped-run reads is written after it, from the
// same parameters; a resume never reads it. The cost is the model's bytes written twice.

#include <shaped/shaped.hpp>

#include <sys/file.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

namespace shaped_train {

namespace fs = std::filesystem;

inline constexpr std::string_view checkpoint_file = "checkpoint.safetensors";
inline constexpr std::string_view log_file = "log.tsv";

// What a checkpoint must agree with to be resumed: a step taken with another preset, seed or
// text would silently be another run's.
struct run_identity {
    std::string preset;
    std::uint64_t seed = 0;
    std::string text;  // the text's ids' fingerprint (text_fingerprint)
};

// FNV-1a over the ids' bytes and their count: a changed or another text is another run.
template <class Id>
std::string text_fingerprint(std::span<const Id> ids) {
    std::uint64_t hash = 0xcbf29ce484222325ull;
    for (const std::byte b : std::as_bytes(ids)) hash = (hash ^ static_cast<std::uint64_t>(b)) * 0x100000001b3ull;
    char out[17];
    std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(hash));
    return std::to_string(ids.size()) + ":" + out;
}

// The first element of `module`'s parameters (a model's, or gradients' storage) that is not
// finite, as "name element i is v", or nothing.
template <class Module>
std::optional<std::string> first_non_finite(const Module& module, std::string_view prefix) {
    std::optional<std::string> found;
    for (const auto& parameter : shaped::nn::parameter_list(module))
        shaped::nn::on_floating_elements(parameter, [&](auto elements) {
            for (std::size_t i = 0; i < elements.size() && !found; ++i)
                if (!std::isfinite(elements[i]))
                    found = std::string(prefix) + std::string(parameter.name) + " element " + std::to_string(i) + " is " +
                            std::to_string(elements[i]);
        });
    return found;
}

// OUT held by one run at a time (an advisory lock on the folder, released when the process
// ends, however it ends), and cleared of the temporary files a killed run left.
class run_folder {
public:
    explicit run_folder(const fs::path& out) : out_(out) {
        fs::create_directories(out);
        fd_ = ::open(out.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd_ < 0) throw std::runtime_error(out.string() + ": cannot open: " + std::strerror(errno));
        if (::flock(fd_, LOCK_EX | LOCK_NB) != 0)
            throw std::runtime_error(out.string() + ": another shaped-train is writing there");
        remove_temporaries();
    }
    ~run_folder() { ::close(fd_); }
    run_folder(const run_folder&) = delete;
    run_folder& operator=(const run_folder&) = delete;

    // Makes the renames done in the folder durable (its entries on the disk, not only the files).
    void sync() const {
        if (::fsync(fd_) != 0) throw std::runtime_error(out_.string() + ": cannot sync: " + std::strerror(errno));
    }

private:
    // ".NAME.tmp-..." beside each file shaped-train writes, as the library's writers name them.
    void remove_temporaries() const {
        for (const auto& entry : fs::directory_iterator(out_)) {
            const std::string name = entry.path().filename().string();
            for (const std::string_view target : {checkpoint_file, std::string_view("model.safetensors"),
                                                  std::string_view("config.json"), log_file})
                if (name.starts_with("." + std::string(target) + ".tmp-")) fs::remove(entry.path());
        }
    }

    fs::path out_;
    int fd_ = -1;
};

// Writes the run's state at `step` (the step a resume starts at) as OUT/checkpoint.safetensors.
// A model or moment that is not finite is never written over a good checkpoint.
template <class Model, class Optimizer>
void write_checkpoint(const fs::path& out, const Model& model, const Optimizer& opt, std::size_t step,
                      const run_identity& run) {
    for (const auto& problem : {first_non_finite(model, "model."), first_non_finite(opt.exp_avg().storage(), "exp_avg."),
                                first_non_finite(opt.exp_avg_sq().storage(), "exp_avg_sq.")})
        if (problem)
            throw std::runtime_error("after step " + std::to_string(step - 1) + ", " + *problem +
                                     ": the checkpoint before it is kept");
    auto tensors = shaped::io::parameter_bytes(model, "model.");
    for (auto* moments : {&opt.exp_avg(), &opt.exp_avg_sq()})
        for (auto& tensor : shaped::io::parameter_bytes(moments->storage(), moments == &opt.exp_avg() ? "exp_avg." : "exp_avg_sq."))
            tensors.push_back(std::move(tensor));
    const shaped::io::safetensors_metadata metadata{{"step", std::to_string(step)},
                                                    {"preset", run.preset},
                                                    {"seed", std::to_string(run.seed)},
                                                    {"text", run.text}};
    shaped::io::write_safetensors(out / checkpoint_file, shaped::io::safetensors_views(std::move(tensors)), metadata);
}

// The step OUT's checkpoint resumes at, its model and moments read into `model` and `opt`; the
// checkpoint must be this run's (preset, seed, text), and its step in [1, last_step].
template <class Model, class Optimizer>
std::size_t read_checkpoint(const fs::path& out, Model& model, Optimizer& opt, const run_identity& run,
                            std::size_t last_step) {
    const shaped::io::safetensors_file state(out / checkpoint_file);
    const auto& meta = state.metadata();
    const auto field = [&](const std::string& key) {
        const auto found = meta.find(key);
        if (found == meta.end()) throw std::runtime_error(state.path().string() + ": no \"" + key + "\" in its metadata");
        return found->second;
    };
    const auto refuse = [&](const std::string& why) { throw std::runtime_error(state.path().string() + ": " + why); };
    if (field("preset") != run.preset) refuse("a checkpoint of preset " + field("preset") + ", not " + run.preset);
    if (field("seed") != std::to_string(run.seed))
        refuse("a checkpoint of seed " + field("seed") + ", not " + std::to_string(run.seed) + " (pass --seed " + field("seed") + ")");
    if (field("text") != run.text) refuse("a checkpoint of another text (its ids' fingerprint " + field("text") + ", this text's " + run.text + ")");
    const std::string step_text = field("step");
    std::size_t step = 0;
    const char* end = step_text.data() + step_text.size();
    if (const auto [stop, error] = std::from_chars(step_text.data(), end, step); error != std::errc() || stop != end || step == 0)
        refuse("its step \"" + step_text + "\" is not a step count");
    if (step >= last_step)
        refuse("its step " + std::to_string(step) + " is already at or past this run's last step " + std::to_string(last_step) +
               " (--steps, --stop-at): nothing to resume");
    // load_parameters refuses a value that is not finite, so NaN moments cannot turn the next
    // step's weights into NaNs.
    shaped::io::load_parameters(model, state, "model.");
    shaped::io::load_parameters(opt.exp_avg().storage(), state, "exp_avg.");
    shaped::io::load_parameters(opt.exp_avg_sq().storage(), state, "exp_avg_sq.");
    opt.set_steps(step);
    return step;
}

// OUT/log.tsv: "step loss lr grad_norm", a line a step, each flushed as it is written, so a kill
// loses at most the line being written. A resumed run keeps the lines of the steps before its
// checkpoint and drops the rest (steps a killed run took past it, or a line cut short), then
// appends: the log after a kill and a resume is the unbroken run's.
class training_log {
public:
    training_log(const fs::path& out, std::size_t first_step) : path_(out / log_file) {
        if (first_step == 0 || !fs::exists(path_)) {
            file_ = std::fopen(path_.c_str(), "wb");
            if (!file_) fail();
            write_line("step\tloss\tlr\tgrad_norm\n");
            return;
        }
        const auto keep = bytes_before(first_step);
        if (!keep)
            throw std::runtime_error(path_.string() + ": does not hold steps 0 to " + std::to_string(first_step - 1) +
                                     " of this run, one a line; move it away to resume without it");
        // Cut in place: one call, which a kill cannot leave half done.
        std::error_code error;
        fs::resize_file(path_, *keep, error);
        if (error) throw std::runtime_error(path_.string() + ": cannot cut it after step " + std::to_string(first_step - 1) + ": " + error.message());
        file_ = std::fopen(path_.c_str(), "ab");
        if (!file_) fail();
    }
    ~training_log() {
        if (file_) std::fclose(file_);
    }
    training_log(const training_log&) = delete;
    training_log& operator=(const training_log&) = delete;

    void write(std::size_t step, double loss, double lr, double grad_norm) {
        char line[128];
        const int n = std::snprintf(line, sizeof line, "%zu\t%.17g\t%.17g\t%.17g\n", step, loss, lr, grad_norm);
        write_line(std::string_view(line, static_cast<std::size_t>(n)));
    }

private:
    // The bytes of the header and of the lines of steps 0 to first_step - 1, if the log has each
    // of them, whole and in order.
    std::optional<std::size_t> bytes_before(std::size_t first_step) const {
        std::ifstream in(path_, std::ios::binary);
        if (!in) return std::nullopt;
        std::string line;
        if (!std::getline(in, line) || !line.starts_with("step\t") || in.eof()) return std::nullopt;
        std::size_t kept = line.size() + 1, expected = 0;
        while (expected < first_step && std::getline(in, line) && !in.eof()) {
            const auto tab = line.find('\t');
            if (tab == std::string::npos || line.substr(0, tab) != std::to_string(expected)) return std::nullopt;
            kept += line.size() + 1;
            ++expected;
        }
        if (expected != first_step) return std::nullopt;
        return kept;
    }

    void write_line(std::string_view text) {
        if (std::fwrite(text.data(), 1, text.size(), file_) != text.size() || std::fflush(file_) != 0) fail();
    }
    [[noreturn]] void fail() const {
        throw std::runtime_error(path_.string() + ": cannot write: " + std::strerror(errno));
    }

    fs::path path_;
    std::FILE* file_ = nullptr;
};

}  // namespace shaped_train
