// shaped-run, run as a user runs it: greedy ids from the parity fixtures' tiny GPT-2 directory
// equal PyTorch's, and a missing file, a truncated safetensors file and a config not compiled in
// are each one line on stderr and exit status 1.
#include "app_support.hpp"
#include "../unit/file_support.hpp"

#include <shaped/shaped.hpp>

#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <vector>

namespace {

namespace fs = std::filesystem;
using apps_support::lines_of;
using apps_support::result;
using apps_support::scratch_dir;
using file_support::poke_float;

// Runs shaped-run with `args` (a shell-quoted string), capturing both streams.
result run(const std::string& args, const fs::path& scratch) { return apps_support::run_program(SHAPED_RUN, args, scratch); }

const fs::path fixtures = SHAPED_FIXTURE_DIR;

}  // namespace

TEST_CASE("shaped-run's greedy ids from a GPT-2 directory are PyTorch's", "[apps][shaped_run]") {
    using B = shaped::dim<"B", 2>;
    using T = shaped::dim<"T">;
    scratch_dir scratch;
    const auto idx = shaped::io::load_npy<std::int64_t, B, T>((fixtures / "hf_gpt2_idx.npy").string());
    const auto greedy = shaped::io::load_npy<std::int64_t, B, T>((fixtures / "hf_gpt2_greedy.npy").string());
    for (std::size_t b = 0; b < 2; ++b) {
        std::string prompt, want;
        for (std::size_t t = 0; t < idx.extents()[1]; ++t) prompt += (t ? " " : "") + std::to_string(idx(b, t));
        for (std::size_t t = 0; t < greedy.extents()[1]; ++t) want += std::to_string(greedy(b, t)) + "\n";
        const result r = run((fixtures / "hf_gpt2").string() + " -i '" + prompt + "' -n 32 -t 0 --ids", scratch.path);
        INFO(r.err);
        CHECK(r.status == 0);
        CHECK(r.out == want);
        CHECK(r.err.find("achieved tok/s: ") != std::string::npos);
    }
}

TEST_CASE("shaped-run reports a bad checkpoint in one line, exit status 1", "[apps][shaped_run]") {
    scratch_dir scratch;
    // A missing file.
    const result missing = run((scratch.path / "nowhere").string() + " -i '1 2'", scratch.path);
    CHECK(missing.status == 1);
    CHECK(lines_of(missing.err) == 2);  // and the pointer to -h
    CHECK(missing.err.find("nowhere\" (no such file or directory)") != std::string::npos);

    // A truncated safetensors file.
    const fs::path truncated = scratch.path / "truncated";
    fs::create_directories(truncated);
    fs::copy_file(fixtures / "hf_gpt2" / "config.json", truncated / "config.json");
    fs::copy_file(fixtures / "hf_gpt2" / "model.safetensors", truncated / "model.safetensors");
    fs::resize_file(truncated / "model.safetensors", fs::file_size(truncated / "model.safetensors") / 2);
    const result cut = run(truncated.string() + " -i '1 2'", scratch.path);
    INFO(cut.err);
    CHECK(cut.status == 1);
    CHECK(lines_of(cut.err) == 1);
    CHECK(cut.err.find("model.safetensors") != std::string::npos);

    // A config that is not compiled in: named, with the line that adds it.
    const fs::path other = scratch.path / "other";
    fs::create_directories(other);
    std::ifstream config_in(fixtures / "hf_gpt2" / "config.json");
    std::string config((std::istreambuf_iterator<char>(config_in)), std::istreambuf_iterator<char>());
    config.replace(config.find("\"n_layer\": 2"), 12, "\"n_layer\": 5");
    std::ofstream(other / "config.json") << config;
    fs::copy_file(fixtures / "hf_gpt2" / "model.safetensors", other / "model.safetensors");
    const result uncompiled = run(other.string() + " -i '1 2'", scratch.path);
    INFO(uncompiled.err);
    CHECK(uncompiled.status == 1);
    CHECK(lines_of(uncompiled.err) == 1);
    CHECK(uncompiled.err.find("shaped::models::gpt_config<67, 64, 5, 3, 24, shaped::nn::activation::gelu_tanh>, is not compiled in") !=
          std::string::npos);

    // A flag without its value.
    const result flag = run((fixtures / "hf_gpt2").string() + " -n", scratch.path);
    CHECK(flag.status == 1);
    CHECK(flag.err.find("-n needs a value") != std::string::npos);
}

TEST_CASE("shaped-run greedy-decodes stories260K from BOS: PyTorch's 256 ids", "[apps][shaped_run][llama]") {
    using N = shaped::dim<"N", 256>;
    scratch_dir scratch;
    const auto greedy = shaped::io::load_npy<std::int64_t, N>((fixtures / "stories260k_greedy.npy").string());
    std::string want;
    for (std::size_t t = 0; t < N::extent; ++t) want += std::to_string(greedy(t)) + "\n";
    const result r = run(std::string(SHAPED_MODELS_DIR) + "/stories260K.bin -t 0 -n 256 --ids", scratch.path);
    INFO(r.err);
    CHECK(r.status == 0);
    CHECK(r.out == want);
    CHECK(r.err.find("achieved tok/s: ") != std::string::npos);
}

TEST_CASE("shaped-run reports a bad llama2.c checkpoint in one line, exit status 1", "[apps][shaped_run][llama]") {
    scratch_dir scratch;
    const fs::path original = fs::path(SHAPED_MODELS_DIR) / "stories260K.bin";
    // Truncated: the file is shorter than its header's config needs.
    const fs::path truncated = scratch.path / "truncated.bin";
    fs::copy_file(original, truncated);
    fs::resize_file(truncated, fs::file_size(truncated) - 100);
    const result cut = run(truncated.string() + " -n 4", scratch.path);
    INFO(cut.err);
    CHECK(cut.status == 1);
    CHECK(lines_of(cut.err) == 1);
    CHECK(cut.err.find("truncated.bin: is 1056440 bytes") != std::string::npos);

    // A config not compiled in (6 layers): named, with the line that adds it.
    const fs::path other = scratch.path / "other.bin";
    fs::copy_file(original, other);
    {
        std::fstream file(other, std::ios::in | std::ios::out | std::ios::binary);
        const std::int32_t layers = 6;
        file.seekp(2 * sizeof(std::int32_t));
        file.write(reinterpret_cast<const char*>(&layers), sizeof layers);
    }
    const result uncompiled = run(other.string() + " -n 4", scratch.path);
    INFO(uncompiled.err);
    CHECK(uncompiled.status == 1);
    CHECK(lines_of(uncompiled.err) == 1);
    CHECK(uncompiled.err.find("shaped::models::llama_config<512, 512, 6, 8, 4, 64, 172>, is not compiled in") !=
          std::string::npos);
}

namespace {
// A tokenizer.bin of stories260K's 512 tokens (its own is not available here): llama2.c's
// specials and byte tokens, then words " w259" ... " w511", scored so that none merges.
fs::path write_llama_tokenizer(const fs::path& dir) {
    std::vector<std::string> tokens{"<unk>", "\n<s>\n", "\n</s>\n"};
    for (int b = 0; b < 256; ++b) {
        char spelled[8];
        std::snprintf(spelled, sizeof spelled, "<0x%02X>", b);
        tokens.push_back(spelled);
    }
    while (tokens.size() < 512) tokens.push_back(" w" + std::to_string(tokens.size()));
    const fs::path path = dir / "tokenizer.bin";
    std::ofstream out(path, std::ios::binary);
    const std::int32_t longest = 8;
    out.write(reinterpret_cast<const char*>(&longest), sizeof longest);
    for (const std::string& token : tokens) {
        const float score = -1.0f;
        const auto length = static_cast<std::int32_t>(token.size());
        out.write(reinterpret_cast<const char*>(&score), sizeof score);
        out.write(reinterpret_cast<const char*>(&length), sizeof length);
        out.write(token.data(), length);
    }
    return path;
}
}  // namespace

TEST_CASE("shaped-run decodes a Llama's ids with llama2.c's tokenizer.bin", "[apps][shaped_run][llama]") {
    using N = shaped::dim<"N", 256>;
    scratch_dir scratch;
    const fs::path tokenizer_file = write_llama_tokenizer(scratch.path);
    const shaped::text::llama_tokenizer tokenizer(tokenizer_file, 512);
    const auto greedy = shaped::io::load_npy<std::int64_t, N>((fixtures / "stories260k_greedy.npy").string());
    std::string want;
    shaped::text::token_id previous = shaped::text::llama_tokenizer::bos_id;
    for (std::size_t t = 0; t < 16; ++t) {
        const auto id = static_cast<shaped::text::token_id>(greedy(t));
        want += tokenizer.decode(previous, id);
        previous = id;
    }
    const std::string model = std::string(SHAPED_MODELS_DIR) + "/stories260K.bin";
    const result r = run(model + " -z " + tokenizer_file.string() + " -t 0 -n 16", scratch.path);
    INFO(r.err);
    CHECK(r.status == 0);
    CHECK(r.out == want + "\n");

    // --encode: the prompt's ids as the tokenizer gives them, BOS first.
    std::string want_ids;
    for (const auto id : tokenizer.encode("Once w300", true, false)) want_ids += std::to_string(id) + "\n";
    const result encoded = run(model + " -z " + tokenizer_file.string() + " --encode 'Once w300'", scratch.path);
    CHECK(encoded.status == 0);
    CHECK(encoded.out == want_ids);
    CHECK(encoded.out.starts_with("1\n"));

    // A tokenizer file that is missing is refused in one line.
    const result missing = run(model + " -z " + (scratch.path / "none.bin").string() + " -n 4", scratch.path);
    CHECK(missing.status == 1);
    CHECK(lines_of(missing.err) == 2);  // and the pointer to -h
    CHECK(missing.err.find("none.bin") != std::string::npos);
}

TEST_CASE("shaped-run decodes a GGUF's ids with its own vocabulary, and says its context binds nothing",
          "[apps][shaped_run][llama]") {
    scratch_dir scratch;
    // Alone in the scratch directory, with no tokenizer.bin beside it to fall back on.
    const fs::path gguf = scratch.path / "stories260K.f32.gguf";
    fs::copy_file(fixtures / "llama_cpp" / "stories260K.f32.gguf", gguf);
    // The tokenizer.bin llama.cpp's converter made the GGUF's vocabulary from.
    const std::string tokenizer_file = (fixtures / "llama_cpp" / "tokenizer.bin").string();
    const result own = run(gguf.string() + " -i 'Once upon a time' -t 0 -n 16", scratch.path);
    INFO(own.err);
    CHECK(own.status == 0);
    CHECK(own.out.starts_with(" Once upon a time"));  // the dummy prefix, <0x20> in this vocabulary, then the prompt
    CHECK(own.out.size() > std::string(" Once upon a time\n").size());
    const result given = run(gguf.string() + " -z " + tokenizer_file + " -i 'Once upon a time' -t 0 -n 16", scratch.path);
    CHECK(given.status == 0);
    CHECK(own.out == given.out);

    // A config not compiled in (6 layers): the line that adds it spells the file's
    // llama.context_length, and says that it binds nothing.
    const shaped::io::gguf_file file(gguf);
    shaped::io::gguf_writer out;
    for (const shaped::io::gguf_kv& kv : file.metadata())
        out.add(kv.key, kv.key == "llama.block_count" ? shaped::io::gguf_value(std::uint32_t{6}) : kv.value);
    for (const shaped::io::gguf_tensor_info& info : file.tensors()) {
        const auto bytes = file.bytes(info.name);
        out.add_tensor(info.name, info.type, info.ne, std::vector<std::byte>(bytes.begin(), bytes.end()));
    }
    out.save(scratch.path / "other.gguf");
    const result uncompiled = run((scratch.path / "other.gguf").string() + " -n 4", scratch.path);
    INFO(uncompiled.err);
    CHECK(uncompiled.status == 1);
    CHECK(lines_of(uncompiled.err) == 1);
    CHECK(uncompiled.err.find("differs in n_layers: the checkpoint has 6, the compiled config 5;") != std::string::npos);
    CHECK(uncompiled.err.find("add the line `shaped::models::llama_config<512, 128, 6, 8, 4, 64, 172>,` to "
                              "apps/shaped-run/configs.hpp (its context, 128, is the file's llama.context_length, "
                              "which binds nothing: any context is yours to choose)") != std::string::npos);
}

namespace {
// A copy of the parity fixtures' Hugging Face Llama in `dir`, its config.json's `from` made `to`.
fs::path llama_copy(const fs::path& dir, const std::string& from = "", const std::string& to = "") {
    fs::copy(fixtures / "hf_llama", dir, fs::copy_options::recursive);
    if (from.empty()) return dir;
    std::ifstream in(dir / "config.json");
    std::string config((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    config.replace(config.find(from), from.size(), to);
    std::ofstream(dir / "config.json") << config;
    return dir;
}

}  // namespace

TEST_CASE("shaped-run refuses a NaN weight and an oversized config.json in one line, exit status 1", "[apps][shaped_run]") {
    scratch_dir scratch;
    const fs::path nan_weights = llama_copy(scratch.path / "nan");
    poke_float(nan_weights / "model.safetensors", "model.norm.weight", 3, std::numeric_limits<float>::quiet_NaN());
    const result nan = run(nan_weights.string() + " -i '1 2' -n 4 -t 0", scratch.path);
    INFO(nan.err);
    CHECK(nan.status == 1);
    CHECK(nan.out.empty());
    CHECK(lines_of(nan.err) == 1);
    CHECK(nan.err.find("tensor \"model.norm.weight\": element 3 is nan, not a finite weight") != std::string::npos);

    // 512 MiB, sparse: refused by its size before a byte of it is read.
    const fs::path big = llama_copy(scratch.path / "big");
    fs::resize_file(big / "config.json", std::size_t{512} << 20);
    const result oversized = run(big.string() + " -n 4", scratch.path);
    INFO(oversized.err);
    CHECK(oversized.status == 1);
    CHECK(lines_of(oversized.err) == 1);
    CHECK(oversized.err.find("config.json: is 536870912 bytes, more than the 16 MiB a config.json may be") != std::string::npos);
}

TEST_CASE("shaped-run names a config's differing eps, and suggests a line only when one would load it", "[apps][shaped_run]") {
    scratch_dir scratch;
    const result reciprocal = run(llama_copy(scratch.path / "eps", "\"rms_norm_eps\": 1e-05", "\"rms_norm_eps\": 1e-06").string() + " -n 4",
                                  scratch.path);
    INFO(reciprocal.err);
    CHECK(reciprocal.status == 1);
    CHECK(lines_of(reciprocal.err) == 1);
    CHECK(reciprocal.err.find("differs in rms_norm_eps: the checkpoint has 1e-06, the compiled config 1e-05") != std::string::npos);
    CHECK(reciprocal.err.find("add the line `shaped::models::llama_config<67, 32, 2, 6, 2, 24, 40, false, "
                              "shaped::nn::rotary_pairing::halves, 1000000>,` to apps/shaped-run/configs.hpp") != std::string::npos);

    const result other = run(llama_copy(scratch.path / "odd", "\"rms_norm_eps\": 1e-05", "\"rms_norm_eps\": 3e-06").string() + " -n 4",
                             scratch.path);
    INFO(other.err);
    CHECK(other.status == 1);
    CHECK(lines_of(other.err) == 1);
    CHECK(other.err.find("rms_norm_eps: the checkpoint has 3e-06, the compiled config 1e-05") != std::string::npos);
    CHECK(other.err.find("no line of apps/shaped-run/configs.hpp can compile it in: rms_norm_eps 3e-06 is not 1/N for a whole N") !=
          std::string::npos);
    CHECK(other.err.find("add the line") == std::string::npos);
}
