// shaped-quantize, run as a user runs it: from llama2.c's stories260K.bin (and from llama.cpp's
// own F32 file) it writes llama.cpp's stories260K GGUFs (tests/parity/fixtures/llama_cpp) byte for
// byte; a Hugging Face directory's file gives PyTorch's logits back; a bad input or type is one
// line on stderr and exit status 1, with nothing written.
#include "app_support.hpp"

#include <shaped/shaped.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using apps_support::lines_of;
using apps_support::result;
using apps_support::scratch_dir;
using shaped::ggml_type;

result run(const std::string& args, const fs::path& scratch) { return apps_support::run_program(SHAPED_QUANTIZE, args, scratch); }

const fs::path llama_cpp = fs::path(SHAPED_FIXTURE_DIR) / "llama_cpp";
const fs::path stories = fs::path(SHAPED_MODELS_DIR) / "stories260K.bin";
const std::string tokenizer = " --tokenizer " + (llama_cpp / "tokenizer.bin").string();

std::string contents(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The same key/values in the same order, the same tensors (name, type, dims, offset, bytes), and
// so the same file.
void require_same_gguf(const fs::path& got_path, const fs::path& want_path) {
    const shaped::io::gguf_file got(got_path), want(want_path);
    CHECK(got.version() == want.version());
    REQUIRE(got.metadata().size() == want.metadata().size());
    for (std::size_t i = 0; i < got.metadata().size(); ++i) {
        INFO("key/value " << i << ": " << want.metadata()[i].key);
        CHECK(got.metadata()[i].key == want.metadata()[i].key);
        CHECK(got.metadata()[i].value == want.metadata()[i].value);
    }
    REQUIRE(got.tensors().size() == want.tensors().size());
    for (std::size_t i = 0; i < got.tensors().size(); ++i) {
        const auto &g = got.tensors()[i], &w = want.tensors()[i];
        INFO("tensor " << i << ": " << w.name);
        CHECK(g.name == w.name);
        CHECK(g.type == w.type);
        CHECK(g.ne == w.ne);
        CHECK(g.offset == w.offset);
        const auto gb = got.bytes(g.name), wb = want.bytes(w.name);
        CHECK(std::equal(gb.begin(), gb.end(), wb.begin(), wb.end()));
    }
    CHECK(contents(got_path) == contents(want_path));
}

// llama-quantize's warnings for stories260K (the README's): ffn_down's rows of 172 are in no
// 32-block, and in Q4_0 the classifier's Q6_K needs rows of 256.
std::string ffn_down_warning(int layer, const std::string& type) {
    return "shaped-quantize: warning: blk." + std::to_string(layer) + ".ffn_down.weight - ncols 172 not divisible by 32 (required for type " +
           type + ") (WARNING: must use F16 due to unusual shape) -> falling back to f16\n";
}

}  // namespace

TEST_CASE("shaped-quantize writes llama.cpp's stories260K GGUFs byte for byte from llama2.c's file", "[apps][shaped_quantize]") {
    scratch_dir scratch;
    for (const std::string type : {"f32", "q8_0", "q4_0"}) {
        INFO("--type " << type);
        const fs::path out = scratch.path / ("stories260K." + type + ".gguf");
        const result r = run(stories.string() + " " + out.string() + " --type " + type + tokenizer, scratch.path);
        INFO(r.err);
        REQUIRE(r.status == 0);
        CHECK(lines_of(r.out) == 48);  // a line a tensor
        std::string warnings;
        if (type == "q4_0") warnings += "shaped-quantize: warning: output.weight - ncols 64 not divisible by 256 (required for type q6_K) -> falling back to q8_0\n";
        if (type != "f32") {
            for (int layer = 0; layer < 5; ++layer) warnings += ffn_down_warning(layer, type);
            warnings += "shaped-quantize: " + std::string(type == "q4_0" ? "6" : "5") + " of 48 tensor(s) required fallback quantization\n";
        }
        CHECK(r.err == warnings);
        require_same_gguf(out, llama_cpp / ("stories260K." + type + ".gguf"));
    }
}

TEST_CASE("shaped-quantize requantizes llama.cpp's F32 GGUF into its Q8_0 and Q4_0 files byte for byte", "[apps][shaped_quantize]") {
    scratch_dir scratch;
    for (const std::string type : {"q8_0", "q4_0"}) {
        INFO("--type " << type);
        const fs::path out = scratch.path / ("requantized." + type + ".gguf");
        const result r = run((llama_cpp / "stories260K.f32.gguf").string() + " " + out.string() + " --type " + type, scratch.path);
        INFO(r.err);
        REQUIRE(r.status == 0);
        require_same_gguf(out, llama_cpp / ("stories260K." + type + ".gguf"));
    }
}

TEST_CASE("shaped-quantize's q4_k, q6_k and f16 types follow llama-quantize's choices", "[apps][shaped_quantize]") {
    scratch_dir scratch;
    const shaped::io::gguf_file f32(llama_cpp / "stories260K.f32.gguf");
    for (const std::string type : {"q4_k", "q6_k", "f16"}) {
        INFO("--type " << type);
        const fs::path out = scratch.path / ("stories260K." + type + ".gguf");
        const result r = run(stories.string() + " " + out.string() + " --type " + type, scratch.path);
        INFO(r.err);
        REQUIRE(r.status == 0);
        // No vocabulary: said, since llama.cpp needs one.
        CHECK(r.err.find("has no vocabulary") != std::string::npos);
        const shaped::io::gguf_file file(out);
        CHECK(!file.has_key("tokenizer.ggml.tokens"));
        CHECK(file.get<std::uint32_t>("general.file_type") == (type == "q4_k" ? 15u : type == "q6_k" ? 18u : 1u));
        for (const auto& tensor : file.tensors()) {
            INFO(tensor.name);
            // Rows of 64 and 172 fill no 256-block: Q8_0 instead (llama.cpp's own for Q6_K; for Q4_K its
            // Q5_0), and F16 for 172, in no 32-block either. The norms stay F32.
            const ggml_type want = tensor.ne.size() == 1                      ? ggml_type::f32
                                   : type == "f16" || tensor.ne[0] == 172 ? ggml_type::f16
                                                                            : ggml_type::q8_0;
            CHECK(tensor.type == want);
            if (tensor.ne.size() != 2) continue;
            // The weights they stand for, to within the format's rounding.
            const auto got = file.dequantize<shaped::dim<"R">, shaped::dim<"C">>(tensor.name);
            const auto reference = f32.dequantize<shaped::dim<"R">, shaped::dim<"C">>(tensor.name);
            REQUIRE(got.size() == reference.size());
            float largest = 0, most = 0;
            for (std::size_t i = 0; i < got.size(); ++i) {
                largest = std::max(largest, std::abs(reference.data()[i]));
                most = std::max(most, std::abs(got.data()[i] - reference.data()[i]));
            }
            CHECK(most <= largest / 100);
        }
        // Each row forced to another type is warned about: 36 of the 37 2-d weights are Q8_0 or F16
        // in place of a K-quant (output.weight takes Q8_0 by its own rule, unwarned).
        if (type != "f16") CHECK(r.err.find("36 of 48 tensor(s) required fallback quantization") != std::string::npos);
    }
}

TEST_CASE("shaped-quantize's GGUF of a Hugging Face directory gives PyTorch's logits", "[apps][shaped_quantize]") {
    // The parity fixture's Llama (tests/parity/llama_parity_test.cpp), its q and k rows permuted
    // into llama.cpp's adjacent rotary pairs.
    using Config = shaped::models::llama_config<67, 32, 2, 6, 2, 24, 40, false, shaped::nn::rotary_pairing::adjacent>;
    using B = shaped::dim<"B", 2>;
    using T = shaped::dim<"T">;
    scratch_dir scratch;
    const fs::path out = scratch.path / "hf_llama.gguf";
    const result r = run((fs::path(SHAPED_FIXTURE_DIR) / "hf_llama").string() + " " + out.string() + " --type f32", scratch.path);
    INFO(r.err);
    REQUIRE(r.status == 0);
    const auto model = shaped::models::load_llama<Config>(out);
    const auto idx = shaped::io::load_npy<std::int64_t, B, T>((fs::path(SHAPED_FIXTURE_DIR) / "hf_llama_idx.npy").string());
    const auto want = shaped::io::load_npy<float, B, T, shaped::dim<"V", 67>>(
        (fs::path(SHAPED_FIXTURE_DIR) / "hf_llama_logits.npy").string());
    const auto logits = (*model)(idx);
    REQUIRE(logits.size() == want.size());
    float most = 0;
    for (std::size_t i = 0; i < logits.size(); ++i) most = std::max(most, std::abs(logits.data()[i] - want.data()[i]));
    CHECK(most <= 1e-5f);
}

TEST_CASE("shaped-quantize reports a bad type or input in one line, exit status 1, writing nothing", "[apps][shaped_quantize]") {
    scratch_dir scratch;
    const fs::path out = scratch.path / "out.gguf";
    const auto refused = [&](const std::string& args, const std::string& says, std::size_t lines) {
        INFO(args);
        const result r = run(args, scratch.path);
        INFO(r.err);
        CHECK(r.status == 1);
        CHECK(lines_of(r.err) == lines);
        CHECK(r.err.find(says) != std::string::npos);
        CHECK(r.out.empty());
        CHECK(!fs::exists(out));
    };
    // Usage errors: the message and the pointer to -h.
    refused(stories.string() + " " + out.string() + " --type q5_0",
            "--type takes one of q8_0, q4_0, q4_k, q6_k, f16, f32, not \"q5_0\"", 2);
    refused(stories.string() + " " + out.string(), "no --type TYPE given", 2);
    refused((scratch.path / "nowhere.bin").string() + " " + out.string() + " --type q8_0",
            "nowhere.bin\" (no such file or directory)", 2);
    refused((llama_cpp / "stories260K.f32.gguf").string() + " " + out.string() + " --type q8_0" + tokenizer,
            "--tokenizer has no effect with a GGUF file", 2);

    // Corrupt inputs: the library's one line, naming the file.
    const fs::path truncated = scratch.path / "truncated.bin";
    fs::copy_file(stories, truncated);
    fs::resize_file(truncated, fs::file_size(truncated) - 4);
    refused(truncated.string() + " " + out.string() + " --type q8_0", "truncated.bin: is ", 1);
    const fs::path cut = scratch.path / "cut.gguf";
    fs::copy_file(llama_cpp / "stories260K.q8_0.gguf", cut);
    fs::resize_file(cut, fs::file_size(cut) / 2);
    refused(cut.string() + " " + out.string() + " --type q4_0", "cut.gguf", 1);
    // A tokenizer that is not the model's: too few tokens for its vocabulary.
    const fs::path short_tokenizer = scratch.path / "short.bin";
    const std::string whole = contents(llama_cpp / "tokenizer.bin");
    std::ofstream(short_tokenizer, std::ios::binary) << whole.substr(0, whole.size() / 2);
    refused(stories.string() + " " + out.string() + " --type q8_0 --tokenizer " + short_tokenizer.string(), "short.bin", 1);
}
