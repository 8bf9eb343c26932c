// shaped-train, run as a user runs it: it trains a character-level GPT and Llama on the committed
// text (the loss falls, and shaped-run generates from what it wrote), a run stopped and resumed takes
// the very steps an unbroken run takes, two processes under mpirun reach the parameters one
// process reaches with the same global batch (MPI loaded only then), and bad input is one line and
// exit status 1.
#include "app_support.hpp"
#include "../unit/file_support.hpp"

#include <shaped/shaped.hpp>

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using apps_support::lines_of;
using apps_support::result;
using apps_support::scratch_dir;

const fs::path text = fs::path(SHAPED_DATA_DIR) / "genesis-kjv.txt";

result train(const std::string& args, const fs::path& scratch) {
    return apps_support::run_program(SHAPED_TRAIN, text.string() + " " + args, scratch);
}

std::string contents(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// log.tsv's losses, one a step.
std::vector<double> losses(const fs::path& out) {
    std::istringstream in(contents(out / "log.tsv"));
    std::string line;
    std::getline(in, line);  // the header
    std::vector<double> found;
    for (std::size_t step; in >> step;) {
        double loss = 0, lr = 0, norm = 0;
        in >> loss >> lr >> norm;
        REQUIRE(step == found.size());
        found.push_back(loss);
    }
    return found;
}

// NAME=value as a shell assignment: the caller's own options for that sanitizer, then one more.
std::string sanitizer_options(const char* name, const std::string& option) {
    const char* given = std::getenv(name);
    return std::string(name) + "='" + (given && *given ? std::string(given) + ":" : "") + option + "' ";
}

// A short run's flags: a fast schedule, a cheap evaluation.
const std::string short_run = "--steps 30 --warmup 5 --lr 3e-3 --eval-every 10 --eval-batches 2";

// The character-level presets: the most MiB of activations a step may keep, and the file or
// folder of its checkpoint that shaped-run takes (a Llama's is a Hugging Face directory, OUT
// itself). The GPT's derived step keeps no more than the hand-written passes it replaced held
// (34.1 MiB); the Llama's within 5% of theirs (32.6 MiB): it keeps its rotated queries and keys
// beside the projections they were rotated from.
struct char_preset {
    std::string name;
    double activation_mib;
    std::string checkpoint;
};
const std::vector<char_preset> char_presets{{"gpt-char", 34.1, "model.safetensors"}, {"llama-char", 32.6 * 1.05, ""}};

// The MiB after `label` in a run's output.
double mib_after(const std::string& out, const std::string& label) {
    const auto at = out.find(label);
    if (at == std::string::npos) throw std::runtime_error("no '" + label + "' in the output");
    return std::stod(out.substr(at + label.size()));
}

}  // namespace

TEST_CASE("shaped-train lowers a character-level model's loss, and shaped-run generates from it", "[apps][shaped_train]") {
    const auto preset = GENERATE(from_range(char_presets));
    INFO(preset.name);
    scratch_dir scratch;
    const fs::path out = scratch.path / "run";
    const result r = train("-o " + out.string() + " --preset " + preset.name +
                               " --steps 60 --warmup 5 --lr 3e-3 --eval-every 30 --eval-batches 2",
                           scratch.path);
    INFO(r.err);
    REQUIRE(r.status == 0);
    // What a step keeps for its backward, said after the first step.
    const double kept = mib_after(r.out, "a step keeps activations ");
    CHECK(kept > 1);
    CHECK(kept <= preset.activation_mib);
    REQUIRE(r.out.find("step 60: train loss") != std::string::npos);
    const auto seen = losses(out);
    REQUIRE(seen.size() == 60);
    // From about log(256) = 5.5 nats down past 3 in 60 steps: the model is learning the text.
    REQUIRE(seen.front() > 5.0);
    REQUIRE(seen.back() < 3.2);

    const fs::path checkpoint = preset.checkpoint.empty() ? out : out / preset.checkpoint;
    REQUIRE(r.out.find("wrote " + checkpoint.string()) != std::string::npos);
    const result run = apps_support::run_program(SHAPED_RUN, checkpoint.string() + " -i 'And God said' -n 40 -t 0.8 -s 7", scratch.path);
    INFO(run.err);
    REQUIRE(run.status == 0);
    REQUIRE(run.out.starts_with("And God said"));
    REQUIRE(run.out.size() > 40);
}

TEST_CASE("a shaped-train run stopped and resumed takes the steps an unbroken run takes", "[apps][shaped_train]") {
    const auto preset = GENERATE(from_range(char_presets));
    INFO(preset.name);
    scratch_dir scratch;
    const fs::path unbroken = scratch.path / "unbroken", resumed = scratch.path / "resumed";
    const std::string flags = short_run + " --preset " + preset.name;
    REQUIRE(train("-o " + unbroken.string() + " " + flags, scratch.path).status == 0);
    REQUIRE(train("-o " + resumed.string() + " " + flags + " --stop-at 17", scratch.path).status == 0);
    REQUIRE(losses(resumed).size() == 17);
    const result r = train("-o " + resumed.string() + " " + flags + " --resume", scratch.path);
    INFO(r.err);
    REQUIRE(r.status == 0);
    REQUIRE(r.out.find("resumed at step 17") != std::string::npos);
    REQUIRE(contents(resumed / "log.tsv") == contents(unbroken / "log.tsv"));
    REQUIRE(contents(resumed / "model.safetensors") == contents(unbroken / "model.safetensors"));
    REQUIRE(contents(resumed / "checkpoint.safetensors") == contents(unbroken / "checkpoint.safetensors"));
}

#if defined(SHAPED_MPIEXEC)

TEST_CASE("two shaped-train processes under mpirun reach one process's parameters", "[apps][shaped_train][mpi]") {
    scratch_dir scratch;
    const fs::path one = scratch.path / "one", two = scratch.path / "two";
    const std::string flags = " --steps 10 --warmup 2 --lr 3e-3 --eval-every 10 --eval-batches 1 --accumulate 2";
    // One BLAS thread a process on both sides: OpenBLAS's sgemm rounds differently on one thread
    // and on two, and what is compared is the processes' sum, not BLAS's.
    const std::string one_thread = "OPENBLAS_NUM_THREADS=1 ";
    REQUIRE(apps_support::run_program(one_thread + SHAPED_TRAIN, text.string() + " -o " + one.string() + flags, scratch.path)
                .status == 0);
    // As root (CI), Open MPI must be told that is meant; --oversubscribe, since a machine may
    // have fewer cores than processes.
    // A sanitized build's LeakSanitizer would report what Open MPI itself never frees. The
    // suppressions name its libraries only, so they need whole stacks: Open MPI is built without
    // frame pointers, which the fast unwinder follows. (Other builds ignore both variables.)
    const std::string open_mpi_leaks = sanitizer_options("ASAN_OPTIONS", "fast_unwind_on_malloc=0") +
                                       sanitizer_options("LSAN_OPTIONS", "suppressions=" SHAPED_APPS_TEST_DIR "/open_mpi.supp");
    const std::string mpirun = one_thread + open_mpi_leaks + SHAPED_MPIEXEC +
                               " --allow-run-as-root --oversubscribe -x OPENBLAS_NUM_THREADS -x ASAN_OPTIONS -x LSAN_OPTIONS -np 2 " +
                               SHAPED_TRAIN;
    const result r = apps_support::run_program(mpirun, text.string() + " -o " + two.string() + flags, scratch.path);
    INFO(r.err);
    REQUIRE(r.status == 0);
    REQUIRE(r.out.find("over 2 process(es)") != std::string::npos);
    // Each micro-batch's gradients are formed on their own and then added, by one process or by
    // MPI_Allreduce over two: the same sums, so the same losses and parameters, bit for bit.
    REQUIRE(contents(two / "log.tsv") == contents(one / "log.tsv"));
    REQUIRE(contents(two / "model.safetensors") == contents(one / "model.safetensors"));
}

// MPI is a module of shaped-train's own, loaded under mpirun only: one process does not map Open
// MPI's libraries, and one started as by mpirun without the module says so and writes nothing.
TEST_CASE("shaped-train loads MPI only under mpirun, and says when it cannot", "[apps][shaped_train][mpi]") {
    scratch_dir scratch;
    const result linked = apps_support::run_program("ldd", SHAPED_TRAIN, scratch.path);
    REQUIRE(linked.status == 0);
    CHECK(linked.out.find("libopenblas") != std::string::npos);
    CHECK(linked.out.find("libmpi") == std::string::npos);

    const fs::path lone = scratch.path / "shaped-train";
    fs::copy_file(SHAPED_TRAIN, lone);
    const fs::path out = scratch.path / "run";
    const result r = apps_support::run_program("OMPI_COMM_WORLD_SIZE=2 " + lone.string(), text.string() + " -o " + out.string(),
                                               scratch.path);
    INFO(r.err);
    CHECK(r.status == 1);
    CHECK(lines_of(r.err) == 1);
    CHECK(r.err.find("started by mpirun, but its MPI module is neither beside it nor at") != std::string::npos);
    CHECK(!fs::exists(out));
}
#endif

TEST_CASE("shaped-train reports bad input in one line, exit status 1", "[apps][shaped_train]") {
    scratch_dir scratch;
    const std::string out = " -o " + (scratch.path / "run").string();

    const result missing = apps_support::run_program(SHAPED_TRAIN, (scratch.path / "nowhere.txt").string() + out, scratch.path);
    CHECK(missing.status == 1);
    CHECK(lines_of(missing.err) == 2);  // and the pointer to -h
    CHECK(missing.err.find("nowhere.txt") != std::string::npos);

    const result preset = train(out + " --preset gpt-huge", scratch.path);
    CHECK(preset.status == 1);
    CHECK(preset.err.find("--preset takes one of gpt-char, gpt-bpe, llama-char, not \"gpt-huge\"") != std::string::npos);

    const result nothing = train(out + " --resume", scratch.path);
    CHECK(nothing.status == 1);
    CHECK(lines_of(nothing.err) == 1);
    CHECK(nothing.err.find("no checkpoint to resume") != std::string::npos);

    // A checkpoint cut short is refused, naming the file, and left as it was.
    REQUIRE(train(out + " --steps 4 --warmup 1 --eval-every 4 --eval-batches 1", scratch.path).status == 0);
    const fs::path state = scratch.path / "run" / "checkpoint.safetensors";
    fs::resize_file(state, fs::file_size(state) / 2);
    const std::string cut = contents(state);
    const result truncated = train(out + " --steps 8 --warmup 1 --eval-every 4 --eval-batches 1 --resume", scratch.path);
    CHECK(truncated.status == 1);
    CHECK(lines_of(truncated.err) == 1);
    CHECK(truncated.err.find("checkpoint.safetensors") != std::string::npos);
    CHECK(contents(state) == cut);

    const result bpe = train(out + " --preset gpt-bpe", scratch.path);
    CHECK(bpe.status == 1);
    CHECK(bpe.err.find("--tokenizer") != std::string::npos);
}

// ---- checkpoints that survive kills and full disks ---------------------------------------------

namespace {

// shaped-train with the fault-injection library preloaded (fault_injection.cpp: SHAPED_FAULT is
// ACTION:FILE:OPERATION:N). A sanitized build's runtime must then be told that it need not be the
// first library loaded.
result train_with_fault(const std::string& fault, const std::string& args, const fs::path& scratch) {
    const std::string preload = "SHAPED_FAULT=" + fault + " LD_PRELOAD=" SHAPED_FAULT_INJECTION " " +
                                sanitizer_options("ASAN_OPTIONS", "verify_asan_link_order=0");
    return apps_support::run_program(preload + SHAPED_TRAIN, text.string() + " " + args, scratch);
}

// The files a run leaves that a later one would find: none may be a temporary.
std::vector<std::string> temporaries(const fs::path& out) {
    std::vector<std::string> found;
    for (const auto& entry : fs::directory_iterator(out))
        if (entry.path().filename().string().find(".tmp-") != std::string::npos) found.push_back(entry.path().filename());
    return found;
}

// A run's files as a resume must reproduce them, bit for bit.
void require_same_run(const fs::path& resumed, const fs::path& unbroken, const std::vector<std::string>& files) {
    for (const auto& file : files) {
        INFO(file);
        REQUIRE(contents(resumed / file) == contents(unbroken / file));
    }
    REQUIRE(temporaries(resumed).empty());
}

// A run of three checkpoints (after steps 4, 8 and 12), each line of its log a step.
const std::string checkpointed_run = "--steps 12 --warmup 2 --lr 3e-3 --eval-every 4 --eval-batches 1";

// A fault, and what it does to a checkpointed_run.
struct fault_case {
    std::string fault;
    std::string preset;
    bool stops_with_error;  // a full disk: exit 1, one line; a kill: killed by SIGKILL
    std::string says;       // in that line
};

// The tensors of a preset's checkpoint, hence its writes: the length, the header, one a tensor.
std::size_t checkpoint_writes(const fs::path& out) {
    return shaped::io::safetensors_file(out / "checkpoint.safetensors").names().size() + 2;
}

}  // namespace

TEST_CASE("a shaped-train run killed or out of disk at any moment of a checkpoint resumes to the unbroken run's bits",
          "[apps][shaped_train][faults]") {
    scratch_dir scratch;
    std::map<std::string, fs::path> unbroken;
    for (const std::string preset : {"gpt-char", "llama-char"}) {
        unbroken[preset] = scratch.path / ("unbroken-" + preset);
        REQUIRE(train("-o " + unbroken[preset].string() + " " + checkpointed_run + " --preset " + preset, scratch.path).status == 0);
    }
    const std::size_t writes = checkpoint_writes(unbroken["gpt-char"]);
    const std::string mid_second = std::to_string(writes + writes / 2);
    const std::vector<fault_case> cases{
        // Killed: before the first checkpoint is begun (a log, no checkpoint), in the middle of the
        // second one, with it whole but not yet renamed, just after its rename, while the model
        // shaped-run reads is written, and in the middle of a log line.
        {"kill:checkpoint.safetensors:open:1", "gpt-char", false, ""},
        {"kill:checkpoint.safetensors:write:" + mid_second, "gpt-char", false, ""},
        {"kill:checkpoint.safetensors:rename:2", "gpt-char", false, ""},
        {"kill:checkpoint.safetensors:renamed:2", "gpt-char", false, ""},
        {"kill:model.safetensors:write:3", "gpt-char", false, ""},
        {"kill:log.tsv:write:7", "gpt-char", false, ""},
        {"kill:config.json:write:1", "llama-char", false, ""},
        {"kill:checkpoint.safetensors:renamed:1", "llama-char", false, ""},
        // The disk full: while the second checkpoint is written, when it is flushed, while the
        // model or the log is written.
        {"full:checkpoint.safetensors:write:" + mid_second, "gpt-char", true, "checkpoint.safetensors"},
        {"full:checkpoint.safetensors:flush:2", "gpt-char", true, "checkpoint.safetensors"},
        {"full:model.safetensors:write:2", "gpt-char", true, "model.safetensors"},
        {"full:log.tsv:write:7", "gpt-char", true, "log.tsv"},
        {"full:config.json:flush:2", "llama-char", true, "config.json"},
    };
    for (const auto& c : cases) {
        INFO(c.fault << " " << c.preset);
        const fs::path out = scratch.path / ("run-" + std::to_string(&c - cases.data()));
        const std::string flags = "-o " + out.string() + " " + checkpointed_run + " --preset " + c.preset;
        const result stopped = train_with_fault(c.fault, flags, scratch.path);
        INFO(stopped.err);
        if (c.stops_with_error) {
            REQUIRE(stopped.status == 1);
            REQUIRE(lines_of(stopped.err) == 1);
            REQUIRE(stopped.err.find(c.says) != std::string::npos);
            REQUIRE(stopped.err.find("No space left on device") != std::string::npos);
        } else {
            REQUIRE(stopped.status == 128 + 9);  // the shell's word for killed by SIGKILL
        }
        // The run stopped short of its end: its checkpoint, if any, is an earlier step's.
        REQUIRE(contents(out / "log.tsv") != contents(unbroken[c.preset] / "log.tsv"));
        const result resumed = train(flags + " --resume", scratch.path);
        INFO(resumed.err);
        REQUIRE(resumed.status == 0);
        require_same_run(out, unbroken[c.preset], {"log.tsv", "checkpoint.safetensors", "model.safetensors"});
        if (c.preset == "llama-char") require_same_run(out, unbroken[c.preset], {"config.json"});
    }
}

TEST_CASE("shaped-train resumes only a whole checkpoint of its own run, and never replaces one with NaNs",
          "[apps][shaped_train][faults]") {
    scratch_dir scratch;
    const fs::path out = scratch.path / "run";
    const std::string flags = "-o " + out.string() + " " + short_run;
    REQUIRE(train(flags + " --stop-at 10", scratch.path).status == 0);
    const fs::path state = out / "checkpoint.safetensors";
    const std::string good = contents(state);

    SECTION("a run started without --resume does not write over it") {
        const result fresh = train(flags, scratch.path);
        CHECK(fresh.status == 1);
        CHECK(lines_of(fresh.err) == 1);
        CHECK(fresh.err.find("--resume continues it") != std::string::npos);
    }
    SECTION("a second run on the same folder at once is refused") {
        const int fd = ::open(out.c_str(), O_RDONLY | O_DIRECTORY);
        REQUIRE(fd >= 0);
        REQUIRE(::flock(fd, LOCK_EX) == 0);
        const result second = train(flags + " --resume", scratch.path);
        ::close(fd);
        CHECK(second.status == 1);
        CHECK(lines_of(second.err) == 1);
        CHECK(second.err.find("another shaped-train is writing there") != std::string::npos);
    }
    SECTION("another seed, preset or text is refused, naming what differs") {
        const result seed = train(flags + " --seed 7 --resume", scratch.path);
        CHECK(seed.status == 1);
        CHECK(seed.err.find("a checkpoint of seed 1337, not 7") != std::string::npos);
        const fs::path other_text = scratch.path / "other.txt";
        std::ofstream(other_text) << contents(text).substr(1000);
        const result other = apps_support::run_program(SHAPED_TRAIN, other_text.string() + " " + flags + " --resume", scratch.path);
        CHECK(other.status == 1);
        CHECK(lines_of(other.err) == 1);
        CHECK(other.err.find("a checkpoint of another text") != std::string::npos);
    }
    SECTION("a step that is not a step count, or past the run's end, is refused") {
        const shaped::io::safetensors_file file(state);
        for (const std::string step : {"-1", "18446744073709551615", "0", "ten"}) {
            INFO(step);
            // The same tensors, another step in the metadata.
            std::vector<std::vector<std::byte>> bytes;
            std::vector<shaped::io::safetensors_view> views;
            for (const auto& name : file.names()) {
                const auto& info = file.info(name);
                bytes.emplace_back(info.data_end - info.data_begin);
                file.read(name, bytes.back());
            }
            for (std::size_t i = 0; i < bytes.size(); ++i)
                views.push_back({file.names()[i], file.info(file.names()[i]).dtype, file.info(file.names()[i]).shape, bytes[i]});
            auto metadata = file.metadata();
            metadata["step"] = step;
            shaped::io::write_safetensors(state, views, metadata);
            const result r = train(flags + " --resume", scratch.path);
            CHECK(r.status == 1);
            CHECK(lines_of(r.err) == 1);
            CHECK(r.err.find(step == "18446744073709551615" ? "past this run's last step 30" : "is not a step count") !=
                  std::string::npos);
        }
    }
    SECTION("NaN moments are refused on resume, and the checkpoint kept") {
        std::string first_moment;
        for (const auto& name : shaped::io::safetensors_file(state).names())
            if (name.starts_with("exp_avg_sq.")) {
                first_moment = name;
                break;
            }
        file_support::poke_float(state, first_moment, 0, std::numeric_limits<float>::quiet_NaN());
        const std::string poisoned = contents(state);
        const result r = train(flags + " --resume", scratch.path);
        CHECK(r.status == 1);
        CHECK(lines_of(r.err) == 1);
        CHECK(r.err.find("tensor \"" + first_moment + "\": element 0 is nan") != std::string::npos);
        CHECK(contents(state) == poisoned);
    }
    SECTION("stale temporaries of a killed run are removed by the next") {
        std::ofstream(out / ".checkpoint.safetensors.tmp-12345") << "half a checkpoint";
        std::ofstream(out / ".model.safetensors.tmp-678") << "half a model";
        const result r = train(flags + " --resume", scratch.path);
        INFO(r.err);
        CHECK(r.status == 0);
        CHECK(temporaries(out).empty());
    }
}

// A TEXT that is no readable regular file is the command line's to refuse
// (command_line_test.cpp); one too large to read is refused by the reading itself, unread.
TEST_CASE("shaped-train refuses a TEXT of more than 1 GiB in one line naming it, unread", "[apps][shaped_train]") {
    scratch_dir scratch;
    const fs::path out = scratch.path / "run";
    const fs::path huge = scratch.path / "huge.txt";
    std::ofstream{huge};
    fs::resize_file(huge, (std::size_t{1} << 30) + 1);  // sparse: nothing is written
    // `timeout` keeps a regression that reads it all from holding up the suite for long.
    const result r = apps_support::run_program("timeout 60 " + std::string(SHAPED_TRAIN), huge.string() + " -o " + out.string(),
                                               scratch.path);
    INFO(r.err);
    CHECK(r.status == 1);
    CHECK(lines_of(r.err) == 1);
    CHECK(r.err.find(huge.string() + ": is 1073741825 bytes, more than the 1 GiB the training text may be") != std::string::npos);
    CHECK(!fs::exists(out / "model.safetensors"));
}
