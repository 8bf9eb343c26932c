// Both tools' command lines, run as a user runs them: every flag with every kind of bad value
// (negative, zero, huge, not a number, missing, given twice; a path that is missing, a directory,
// a FIFO, a device) is exit status 1, one line naming the flag and the pointer to -h, and nothing
// written; so is a flag that would change nothing. Standard output that cannot be written is exit
// status 1 too. These runs fail before a model loads, except the /dev/full ones. The parser
// itself (apps/common/command_line.hpp) is tested directly at the end.
#include "app_support.hpp"

#include "../../apps/common/command_line.hpp"

#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using apps_support::lines_of;
using apps_support::result;
using apps_support::scratch_dir;

const fs::path fixtures = SHAPED_FIXTURE_DIR;
const fs::path gpt_checkpoint = fixtures / "hf_gpt2";
const fs::path text = fs::path(SHAPED_DATA_DIR) / "genesis-kjv.txt";

// A scratch folder with one of each kind of path a flag can be handed wrongly.
struct paths {
    scratch_dir scratch;
    fs::path missing = scratch.path / "missing";
    fs::path directory = scratch.path / "directory";
    fs::path fifo = scratch.path / "fifo";
    fs::path file = scratch.path / "file.txt";
    fs::path tokenizer = scratch.path / "tokenizer";  // vocab.json and merges.txt, empty
    fs::path out = scratch.path / "out";              // shaped-train's -o: never made here
    paths() {
        fs::create_directories(directory);
        REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
        std::ofstream(file) << "text\n";
        fs::create_directories(tokenizer);
        std::ofstream(tokenizer / "vocab.json") << "{}";
        std::ofstream(tokenizer / "merges.txt") << "";
    }
    std::vector<std::string> not_files() const { return {missing.string(), directory.string(), fifo.string(), "/dev/zero"}; }
};

// A run that must be refused: its arguments, and the flag its one line starts with.
struct refusal {
    std::string args;
    std::string flag;
};

std::string quoted(const std::string& s) { return "'" + s + "'"; }

// Runs `program` with each refusal's arguments: exit status 1, the line "PROGRAM: FLAG ..." and the
// pointer to -h, nothing on standard output, and OUT (if any) not made.
void expect_refused(const std::string& program, const std::string& name, const std::vector<refusal>& refusals,
                    const fs::path& scratch, const fs::path& out = {}) {
    for (const refusal& r : refusals) {
        INFO(name + " " + r.args);
        const result run = apps_support::run_program(program, r.args, scratch);
        INFO(run.err);
        CHECK(run.status == 1);
        CHECK(lines_of(run.err) == 2);
        CHECK(run.err.starts_with(name + ": " + r.flag + " "));
        CHECK(run.err.ends_with("\n(" + name + " -h for the flags)\n"));
        CHECK(run.out.empty());
        if (!out.empty()) CHECK(!fs::exists(out));
    }
}

// What a flag's value can be wrong in, by its kind.
const std::vector<std::string> bad_whole = {"-1", "-0", "+1", "1.5", "1e3", "abc", " 1", "99999999999999999999", ""};
const std::vector<std::string> bad_positive = {"0"};  // and bad_whole
const std::vector<std::string> bad_real = {"nan", "inf", "-inf", "abc", "1e400", "0x10", "1,5", ""};

// A flag of a tool, a value it takes, and the values it refuses.
struct flag_case {
    std::string flag;
    std::string good;               // for "given twice"; empty for a switch
    std::vector<std::string> bad;   // values refused
    bool takes_value = true;
};

std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

// Each flag's bad values, its value missing (last on the line), and it given twice.
std::vector<refusal> refusals_of(const std::vector<flag_case>& flags, const std::string& before) {
    std::vector<refusal> out;
    for (const flag_case& f : flags) {
        for (const std::string& bad : f.bad) out.push_back({before + " " + f.flag + " " + quoted(bad), f.flag});
        if (f.takes_value) {
            out.push_back({before + " " + f.flag, f.flag});
            out.push_back({before + " " + f.flag + " " + quoted(f.good) + " " + f.flag + " " + quoted(f.good), f.flag});
        } else {
            out.push_back({before + " " + f.flag + " " + f.flag, f.flag});
        }
    }
    return out;
}

// A byte-level Llama's checkpoint as far as -z's check reads it: a Hugging Face directory whose
// model.safetensors says {"tokenizer": "bytes"} (and holds no tensors).
fs::path byte_llama(const fs::path& dir) {
    fs::create_directories(dir);
    fs::copy_file(fixtures / "hf_llama" / "config.json", dir / "config.json");
    const std::string header = R"({"__metadata__":{"tokenizer":"bytes"}})";
    std::ofstream out(dir / "model.safetensors", std::ios::binary);
    const std::uint64_t size = header.size();
    out.write(reinterpret_cast<const char*>(&size), sizeof size);
    out << header;
    return dir;
}

}  // namespace

TEST_CASE("shaped-run refuses each flag's bad values in one line naming it", "[apps][command_line]") {
    const paths p;
    const std::vector<flag_case> flags{
        {"-n", "3", bad_whole + bad_positive},
        {"-t", "0.5", bad_real + std::vector<std::string>{"-0.5", "-1"}},
        {"-k", "3", bad_whole},
        {"-p", "0.5", bad_real + std::vector<std::string>{"0", "-0.5", "1.5"}},
        {"-s", "7", bad_whole},
        {"-z", p.file.string(), p.not_files()},
        {"-i", "1 2", {"x", "-1", "+1", "1.5", "1 x", "67", "99999999999999999999"}},  // its vocabulary has 67 ids
        {"--encode", "hi", {}},
        {"--ids", "", {}, false},
    };
    std::vector<refusal> refusals = refusals_of(flags, gpt_checkpoint.string());
    for (const std::string& checkpoint : {p.missing.string(), p.fifo.string(), std::string("/dev/zero")})
        refusals.push_back({checkpoint + " -n 3", "CHECKPOINT"});
    refusals.push_back({gpt_checkpoint.string() + " " + gpt_checkpoint.string(), "CHECKPOINT"});
    refusals.push_back({"-n 3", "no"});  // no CHECKPOINT given
    refusals.push_back({gpt_checkpoint.string() + " --top-k 3", "unknown"});
    expect_refused(SHAPED_RUN, "shaped-run", refusals, p.scratch.path);
}

TEST_CASE("shaped-run refuses a flag that would change nothing", "[apps][command_line]") {
    const paths p;
    const std::string gpt = gpt_checkpoint.string();
    const std::string llama = std::string(SHAPED_MODELS_DIR) + "/stories260K.bin";
    std::vector<refusal> refusals;
    // Greedy decoding samples nothing.
    for (const std::string flag : {"-k 3", "-p 0.5", "-s 7"}) refusals.push_back({llama + " -t 0 " + flag, flag.substr(0, 2)});
    // --encode generates nothing.
    for (const std::string flag : {"-i 'Once'", "-n 3", "-t 0.5", "-k 3", "-p 0.5", "-s 7", "--ids"})
        refusals.push_back({llama + " --encode hi " + flag, flag.substr(0, flag.find(' '))});
    expect_refused(SHAPED_RUN, "shaped-run", refusals, p.scratch.path);

    // -z is a Llama's llama2.c tokenizer.bin: with a GPT, or a model whose ids are bytes, it is
    // refused naming both.
    for (const fs::path& checkpoint : {gpt_checkpoint, byte_llama(p.scratch.path / "byte_llama")}) {
        const result run = apps_support::run_program(SHAPED_RUN, checkpoint.string() + " -z " + p.file.string(), p.scratch.path);
        INFO(run.err);
        CHECK(run.status == 1);
        CHECK(lines_of(run.err) == 2);
        CHECK(run.err.starts_with("shaped-run: -z has no effect on \"" + checkpoint.string() + "\""));
        CHECK(run.out.empty());
    }
}

TEST_CASE("shaped-train refuses each flag's bad values in one line naming it", "[apps][command_line]") {
    const paths p;
    const std::string before = text.string() + " -o " + p.out.string();
    const std::vector<flag_case> flags{
        {"--preset", "gpt-char", {"gpt-huge", "GPT-CHAR", ""}},
        {"--tokenizer", p.tokenizer.string(), p.not_files() + std::vector<std::string>{p.file.string()}},
        {"--steps", "3000", bad_whole + bad_positive},
        {"--accumulate", "2", bad_whole + bad_positive},
        {"--lr", "0.01", bad_real + std::vector<std::string>{"0", "-1", "-0"}},
        {"--min-lr", "0.0001", bad_real + std::vector<std::string>{"-1", "-1e-9"}},
        {"--warmup", "10", bad_whole},
        {"--weight-decay", "0", bad_real + std::vector<std::string>{"-1", "-0.1"}},
        {"--beta2", "0.9", bad_real + std::vector<std::string>{"1", "2", "-0.1"}},
        {"--clip", "0.5", bad_real + std::vector<std::string>{"0", "-1"}},
        {"--val-fraction", "0.2", bad_real + std::vector<std::string>{"0", "1", "-0.1", "1.5"}},
        {"--eval-every", "10", bad_whole + bad_positive},
        {"--eval-batches", "2", bad_whole + bad_positive},
        {"--checkpoint-every", "10", bad_whole + bad_positive},
        {"--seed", "7", bad_whole},
        {"--stop-at", "10", bad_whole + bad_positive},
        {"--resume", "", {}, false},
    };
    std::vector<refusal> refusals = refusals_of(flags, before);
    // -o: a file, a FIFO, a device; and missing.
    for (const std::string& out : {p.file.string(), p.fifo.string(), std::string("/dev/zero")})
        refusals.push_back({text.string() + " -o " + out, "-o"});
    refusals.push_back({text.string() + " -o", "-o"});
    refusals.push_back({text.string(), "no"});  // no -o OUT given
    for (const std::string& bad : p.not_files()) refusals.push_back({bad + " -o " + p.out.string(), "TEXT"});
    refusals.push_back({"-o " + p.out.string(), "no"});  // no TEXT given
    refusals.push_back({before + " " + text.string(), "TEXT"});
    refusals.push_back({before + " --steps=3", "unknown"});
    // The rules between flags, named by the flag refused, given or by its default.
    refusals.push_back({before + " --steps 50", "--warmup"});
    refusals.push_back({before + " --steps 50 --warmup 50", "--warmup"});
    refusals.push_back({before + " --steps 50 --warmup 5 --stop-at 51", "--stop-at"});
    refusals.push_back({before + " --min-lr 0.01", "--min-lr"});
    refusals.push_back({before + " --lr 0.01 --min-lr 0.02", "--min-lr"});
    // --tokenizer only with a preset that reads GPT-2's BPE, and always with one.
    for (const std::string preset : {"gpt-char", "llama-char"})
        refusals.push_back({before + " --preset " + preset + " --tokenizer " + p.tokenizer.string(), "--tokenizer"});
    refusals.push_back({before + " --preset gpt-bpe", "--preset"});
    expect_refused(SHAPED_TRAIN, "shaped-train", refusals, p.scratch.path, p.out);
}

TEST_CASE("both tools exit 1 when standard output cannot be written", "[apps][command_line]") {
    scratch_dir scratch;
    const auto check = [&](const std::string& program, const std::string& name, const std::string& args) {
        INFO(name + " " + args);
        const result run = apps_support::run_program(program, args + " >/dev/full", scratch.path);
        INFO(run.err);
        CHECK(run.status == 1);
        // One line: a run that lost its output stops there, with no tok/s or summary after it.
        CHECK(run.err == name + ": cannot write to standard output: No space left on device\n");
    };
    const std::string llama = std::string(SHAPED_MODELS_DIR) + "/stories260K.bin";
    check(SHAPED_RUN, "shaped-run", "-h");
    check(SHAPED_RUN, "shaped-run", llama + " -t 0 -n 16 --ids");
    check(SHAPED_RUN, "shaped-run", (fixtures / "hf_gpt2").string() + " -i '1 2' -n 8 -s 3 --ids");
    check(SHAPED_TRAIN, "shaped-train", "-h");
    check(SHAPED_TRAIN, "shaped-train",
          text.string() + " -o " + (scratch.path / "run").string() + " --steps 2 --warmup 1 --eval-every 2 --eval-batches 1");
}

// ---- the parser itself ---------------------------------------------------------------------------

namespace {

struct parsed {
    std::size_t count = 5;
    std::uint64_t seed = 0;
    std::optional<std::size_t> every;
    double rate = 0.5;
    std::string name = "a";
    bool flag = false;
    std::optional<fs::path> file;
};

// Parses `args` (one word each) with a table over `into`; the usage_error's message, or empty.
std::string parse(parsed& into, std::vector<std::string> args) {
    namespace cl = shaped_apps;
    const cl::command_line line{"tool",
                                {{"--count", "N", "how many", cl::whole(into.count, 1)},
                                 {"--seed", "S", "the seed", cl::whole(into.seed, 0)},
                                 {"--every", "N", "how often", cl::whole(into.every, 1, "--count")},
                                 {"--rate", "R", "how fast", cl::real(into.rate, cl::greater_than(0), cl::at_most(1))},
                                 {"--name", "NAME", "which", cl::one_of(into.name, {"a", "b"})},
                                 {"--flag", "", "whether", cl::on(into.flag)},
                                 {"--file", "F", "what", cl::file(into.file, "none")}}};
    args.insert(args.begin(), "tool");
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    try {
        line.parse(static_cast<int>(argv.size()), argv.data());
    } catch (const cl::usage_error& error) {
        return error.what();
    }
    return {};
}

}  // namespace

TEST_CASE("the command-line parser reads whole numbers and numbers whole, within their ranges", "[apps][command_line]") {
    parsed p;
    CHECK(parse(p, {"--count", "007", "--seed", "18446744073709551615", "--every", "3", "--rate", "1e-3", "--flag"}).empty());
    CHECK(p.count == 7);
    CHECK(p.seed == 18446744073709551615ull);
    CHECK(p.every == 3u);
    CHECK(p.rate == 1e-3);
    CHECK(p.flag);

    CHECK(parse(p, {"--count", "-1"}) == "--count takes a whole number >= 1, not \"-1\"");
    CHECK(parse(p, {"--seed", "-0"}) == "--seed takes a whole number >= 0, not \"-0\"");
    CHECK(parse(p, {"--seed", "18446744073709551616"}) ==
          "--seed takes a whole number >= 0, not \"18446744073709551616\" (more than 18446744073709551615)");
    CHECK(parse(p, {"--every", "0"}) == "--every takes a whole number >= 1, not \"0\"");
    CHECK(parse(p, {"--rate", "nan"}) == "--rate takes a finite number > 0 and <= 1, not \"nan\"");
    CHECK(parse(p, {"--rate", "1e400"}) == "--rate takes a finite number > 0 and <= 1, not \"1e400\" (out of a double's range)");
    CHECK(parse(p, {"--rate", "0"}) == "--rate takes a finite number > 0 and <= 1, not \"0\"");
    CHECK(parse(p, {"--name", "c"}) == "--name takes one of a, b, not \"c\"");
    CHECK(parse(p, {"--count"}) == "--count needs a value: a whole number >= 1");
    CHECK(parse(p, {"--count", "2", "--count", "3"}) == "--count is given twice (\"2\", then \"3\")");
    CHECK(parse(p, {"--flag", "--flag"}) == "--flag is given twice");
    CHECK(parse(p, {"--file", "/dev/zero"}) == "--file takes a readable regular file, not \"/dev/zero\" (a character device)");
    CHECK(parse(p, {"--file", "/"}) == "--file takes a readable regular file, not \"/\" (a directory)");
    CHECK(parse(p, {"--counts", "2"}) == "unknown flag \"--counts\"");
    CHECK(parse(p, {"extra"}) == "unexpected argument \"extra\"");
}

TEST_CASE("the command-line parser's usage text says each flag's range and default as its messages do", "[apps][command_line]") {
    parsed p;
    namespace cl = shaped_apps;
    const cl::command_line line{"tool",
                                {{"FILE", "", "the input", cl::file_or_directory(p.file.emplace())},
                                 {"--count", "N", "how many", cl::whole(p.count, 1)},
                                 {"--rate", "R", "how fast", cl::real(p.rate, cl::at_least(0), cl::less_than(1))},
                                 {"--flag", "", "whether", cl::on(p.flag)}}};
    const std::string usage = line.usage();
    CHECK(usage.starts_with("usage: tool FILE [--count N] [--rate R] [--flag]\n"));
    CHECK(usage.find("  --count N  how many; a whole number >= 1 (default: 5)\n") != std::string::npos);
    CHECK(usage.find("  --rate R   how fast; a finite number >= 0 and < 1 (default: 0.5)\n") != std::string::npos);
    CHECK(usage.find("  FILE       the input; a readable file or directory\n") != std::string::npos);
}
