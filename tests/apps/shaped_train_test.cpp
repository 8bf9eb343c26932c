// shaped-train, run as a user runs it: it trains a character-level GPT on the committed text
// (its loss falls, and shaped-run generates from what it wrote), a run stopped and resumed takes
// the very steps an unbroken run takes, two processes under mpirun reach the parameters one
// process reaches with the same global batch, and bad input is one line and exit status 1.
#include "app_support.hpp"

#include <shaped/shaped.hpp>

#include <catch2/catch.hpp>

#include <cmath>
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

}  // namespace

TEST_CASE("shaped-train lowers a character-level GPT's loss, and shaped-run generates from it", "[apps][shaped_train]") {
    scratch_dir scratch;
    const fs::path out = scratch.path / "run";
    const result r = train("-o " + out.string() + " --steps 60 --warmup 5 --lr 3e-3 --eval-every 30 --eval-batches 2", scratch.path);
    INFO(r.err);
    REQUIRE(r.status == 0);
    // The activations' bytes are a constant of the preset, printed before training.
    REQUIRE(r.out.find("activations 34.1 MiB") != std::string::npos);
    REQUIRE(r.out.find("step 60: train loss") != std::string::npos);
    const auto seen = losses(out);
    REQUIRE(seen.size() == 60);
    // From about log(256) = 5.5 nats down past 3 in 60 steps: the model is learning the text.
    REQUIRE(seen.front() > 5.0);
    REQUIRE(seen.back() < 3.2);

    const result run = apps_support::run_program(SHAPED_RUN, (out / "model.safetensors").string() + " -i 'And God said' -n 40 -t 0.8 -s 7", scratch.path);
    INFO(run.err);
    REQUIRE(run.status == 0);
    REQUIRE(run.out.starts_with("And God said"));
    REQUIRE(run.out.size() > 40);
}

TEST_CASE("a shaped-train run stopped and resumed takes the steps an unbroken run takes", "[apps][shaped_train]") {
    scratch_dir scratch;
    const fs::path unbroken = scratch.path / "unbroken", resumed = scratch.path / "resumed";
    REQUIRE(train("-o " + unbroken.string() + " " + short_run, scratch.path).status == 0);
    REQUIRE(train("-o " + resumed.string() + " " + short_run + " --stop-at 17", scratch.path).status == 0);
    REQUIRE(losses(resumed).size() == 17);
    const result r = train("-o " + resumed.string() + " " + short_run + " --resume", scratch.path);
    INFO(r.err);
    REQUIRE(r.status == 0);
    REQUIRE(r.out.find("resumed at step 17") != std::string::npos);
    REQUIRE(contents(resumed / "log.tsv") == contents(unbroken / "log.tsv"));
    REQUIRE(contents(resumed / "model.safetensors") == contents(unbroken / "model.safetensors"));
    REQUIRE(contents(resumed / "optimizer.safetensors") == contents(unbroken / "optimizer.safetensors"));
}

#if defined(SHAPED_MPIEXEC)
namespace {
// Every tensor of two checkpoints' models, element by element, to tolerance.
void require_same_parameters(const fs::path& a, const fs::path& b, double tolerance) {
    const shaped::io::safetensors_file one(a), other(b);
    REQUIRE(one.names() == other.names());
    using Model = shaped::models::GPT<shaped::models::gpt_config<256, 64, 4, 4, 128>>;
    auto first = std::make_unique<Model>(), second = std::make_unique<Model>();
    shaped::io::load_parameters(*first, one);
    shaped::io::load_parameters(*second, other);
    std::vector<float> values;
    shaped::nn::for_each_parameter(*first, [&](std::string_view, auto& p) { values.insert(values.end(), p.data(), p.data() + p.size()); });
    std::size_t i = 0;
    shaped::nn::for_each_parameter(*second, [&](std::string_view name, auto& p) {
        for (const float v : p.elements()) {
            INFO(name);
            REQUIRE(std::abs(v - values[i++]) <= tolerance);
        }
    });
}

}  // namespace

TEST_CASE("two shaped-train processes under mpirun reach one process's parameters", "[apps][shaped_train][mpi]") {
    scratch_dir scratch;
    const fs::path one = scratch.path / "one", two = scratch.path / "two";
    const std::string flags = " --steps 10 --warmup 2 --lr 3e-3 --eval-every 10 --eval-batches 1 --accumulate 2";
    REQUIRE(train("-o " + one.string() + flags, scratch.path).status == 0);
    // As root (CI), Open MPI must be told that is meant; --oversubscribe, since a machine may
    // have fewer cores than processes.
    const std::string mpirun = std::string(SHAPED_MPIEXEC) + " --allow-run-as-root --oversubscribe -np 2 " + SHAPED_TRAIN;
    const result r = apps_support::run_program(mpirun, text.string() + " -o " + two.string() + flags, scratch.path);
    INFO(r.err);
    REQUIRE(r.status == 0);
    REQUIRE(r.out.find("over 2 process(es)") != std::string::npos);
    const auto a = losses(one), b = losses(two);
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) REQUIRE(b[i] == Approx(a[i]).epsilon(1e-6));
    require_same_parameters(one / "model.safetensors", two / "model.safetensors", 1e-6);
}
#endif

TEST_CASE("shaped-train reports bad input in one line, exit status 1", "[apps][shaped_train]") {
    scratch_dir scratch;
    const std::string out = " -o " + (scratch.path / "run").string();

    const result missing = apps_support::run_program(SHAPED_TRAIN, (scratch.path / "nowhere.txt").string() + out, scratch.path);
    CHECK(missing.status == 1);
    CHECK(lines_of(missing.err) == 1);
    CHECK(missing.err.find("nowhere.txt") != std::string::npos);

    const result preset = train(out + " --preset gpt-huge", scratch.path);
    CHECK(preset.status == 1);
    CHECK(preset.err.find("no preset \"gpt-huge\" (compiled in: gpt-char, gpt-bpe") != std::string::npos);

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
