// shaped-train, run as a user runs it: it trains a character-level GPT and Llama on the committed
// text (the loss falls, and shaped-run generates from what it wrote), a run stopped and resumed takes
// the very steps an unbroken run takes, two processes under mpirun reach the parameters one
// process reaches with the same global batch (MPI loaded only then), and bad input is one line and
// exit status 1.
#include "app_support.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
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

// A short run's flags: a fast schedule, a cheap evaluation.
const std::string short_run = "--steps 30 --warmup 5 --lr 3e-3 --eval-every 10 --eval-batches 2";

// The character-level presets: what each prints of its activations, and the file or folder of
// its checkpoint that shaped-run takes (a Llama's is a Hugging Face directory, OUT itself).
struct char_preset {
    std::string name;
    std::string activations;
    std::string checkpoint;
};
const std::vector<char_preset> char_presets{{"gpt-char", "activations 34.1 MiB", "model.safetensors"},
                                            {"llama-char", "activations 32.6 MiB", ""}};

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
    // The activations' bytes are a constant of the preset, printed before training.
    REQUIRE(r.out.find(preset.activations) != std::string::npos);
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
    REQUIRE(contents(resumed / "optimizer.safetensors") == contents(unbroken / "optimizer.safetensors"));
}

#if defined(SHAPED_MPIEXEC)
// NAME=value as a shell assignment: the caller's own options for that sanitizer, then one more.
std::string sanitizer_options(const char* name, const std::string& option) {
    const char* given = std::getenv(name);
    return std::string(name) + "='" + (given && *given ? std::string(given) + ":" : "") + option + "' ";
}

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
    CHECK(nothing.err.find("optimizer.safetensors") != std::string::npos);

    // A checkpoint cut short is refused, naming the file, and left as it was.
    REQUIRE(train(out + " --steps 4 --warmup 1 --eval-every 4 --eval-batches 1", scratch.path).status == 0);
    const fs::path state = scratch.path / "run" / "optimizer.safetensors";
    fs::resize_file(state, fs::file_size(state) / 2);
    const std::string cut = contents(state);
    const result truncated = train(out + " --steps 8 --warmup 1 --eval-every 4 --eval-batches 1 --resume", scratch.path);
    CHECK(truncated.status == 1);
    CHECK(lines_of(truncated.err) == 1);
    CHECK(truncated.err.find("optimizer.safetensors") != std::string::npos);
    CHECK(contents(state) == cut);

    const result bpe = train(out + " --preset gpt-bpe", scratch.path);
    CHECK(bpe.status == 1);
    CHECK(bpe.err.find("--tokenizer") != std::string::npos);
}
