// What a checkpoint may not get past, in every format alike: a weight that is not finite (refused
// naming the file, the tensor, the element and its value, the model left as it was), a file
// larger than its format's limit (refused before it is read, naming the limit), and a config that
// no compiled config is (the mismatches named, and a line to compile it in only when one would).
#include <shaped/shaped.hpp>

#include "file_support.hpp"

#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
namespace io = shaped::io;
namespace models = shaped::models;
using file_support::error_message;
using file_support::poke_float;
using file_support::scratch_dir;
using io::io_error;
using Catch::Matchers::Contains;

const fs::path fixtures = fs::path(SHAPED_TEST_DATA_DIR) / ".." / ".." / "parity" / "fixtures";

// The parity fixtures' configs (apps/shaped-run/configs.hpp compiles them in too).
using nanogpt_config = models::gpt_config<67, 16, 2, 3, 24>;
using hf_gpt2_config = models::gpt_config<67, 64, 2, 3, 24, shaped::nn::activation::gelu_tanh>;
using hf_llama_config = models::llama_config<67, 32, 2, 6, 2, 24, 40, false, shaped::nn::rotary_pairing::halves>;

constexpr float not_a_number = std::numeric_limits<float>::quiet_NaN();
constexpr float infinity = std::numeric_limits<float>::infinity();

// A copy of the fixture `name` (a file or a directory) in `dir`.
fs::path copy_fixture(const scratch_dir& dir, const std::string& name) {
    const fs::path copy = dir / name;
    fs::copy(fixtures / name, copy, fs::copy_options::recursive);
    return copy;
}

// Every parameter's bytes, to tell whether a failed load changed any.
template <class Model>
std::vector<std::vector<std::byte>> parameter_bytes(const Model& model) {
    std::vector<std::vector<std::byte>> all;
    for (const auto& tensor : io::parameter_bytes(model)) all.emplace_back(tensor.data.begin(), tensor.data.end());
    return all;
}

// A sparse file of `bytes` zeros.
void sparse_file(const fs::path& path, std::size_t bytes) {
    std::ofstream{path};
    fs::resize_file(path, bytes);
}

}  // namespace

// ---- weights that are not finite --------------------------------------------------------------

TEST_CASE("finite weights: a nanoGPT safetensors file with a NaN or an inf is refused, the model left as it was",
          "[io][finite]") {
    scratch_dir dir;
    const fs::path file = copy_fixture(dir, "gpt.safetensors");
    auto model = models::load_gpt<nanogpt_config>(file);
    const auto before = parameter_bytes(*model);

    poke_float(file, "transformer.h.1.mlp.c_fc.weight", 5, not_a_number);
    CHECK_THAT(error_message<io_error>([&] { models::load_gpt<nanogpt_config>(file); }),
               Contains("gpt.safetensors: tensor \"transformer.h.1.mlp.c_fc.weight\": element 5 is nan, not a finite weight"));
    CHECK_THAT(error_message<io_error>([&] { io::load_parameters(*model, io::safetensors_file(file)); }),
               Contains("tensor \"transformer.h.1.mlp.c_fc.weight\": element 5 is nan, not a finite weight"));
    CHECK(parameter_bytes(*model) == before);

    poke_float(file, "transformer.h.1.mlp.c_fc.weight", 5, 0.5f);
    poke_float(file, "transformer.ln_f.bias", 23, -infinity);
    CHECK_THAT(error_message<io_error>([&] { io::load_parameters(*model, io::safetensors_file(file)); }),
               Contains("tensor \"transformer.ln_f.bias\": element 23 is -inf, not a finite weight"));
    CHECK(parameter_bytes(*model) == before);

    // Data, not a parameter, keeps its NaNs: only parameters are weights.
    using C = shaped::dim<"C", 24>;
    poke_float(file, "transformer.ln_f.bias", 23, not_a_number);
    CHECK(std::isnan(io::safetensors_file(file).load<float, C>("transformer.ln_f.bias")(23)));
}

TEST_CASE("finite weights: a Hugging Face GPT-2 directory with an inf is refused, naming the stored tensor",
          "[io][finite]") {
    scratch_dir dir;
    const fs::path gpt2 = copy_fixture(dir, "hf_gpt2");
    poke_float(gpt2 / "model.safetensors", "h.0.attn.c_attn.weight", 7, infinity);
    // The Conv1D weight is transposed on load; the element is the transpose's, and said to be.
    CHECK_THAT(error_message<io_error>([&] { models::load_gpt<hf_gpt2_config>(gpt2); }),
               Contains("model.safetensors: tensor \"h.0.attn.c_attn.weight\" (transposed on load): element 168 is inf, "
                        "not a finite weight"));
    poke_float(gpt2 / "model.safetensors", "h.0.attn.c_attn.weight", 7, 0.0f);
    poke_float(gpt2 / "model.safetensors", "wte.weight", 3, not_a_number);
    CHECK_THAT(error_message<io_error>([&] { models::load_gpt<hf_gpt2_config>(gpt2); }),
               Contains("tensor \"wte.weight\": element 3 is nan, not a finite weight"));
}

TEST_CASE("finite weights: a Hugging Face Llama directory with a NaN in model.norm.weight is refused", "[io][finite][llama]") {
    scratch_dir dir;
    const fs::path llama = copy_fixture(dir, "hf_llama");
    poke_float(llama / "model.safetensors", "model.norm.weight", 3, not_a_number);
    CHECK_THAT(error_message<io_error>([&] { models::load_llama<hf_llama_config>(llama); }),
               Contains("shaped::io::load_parameter: " + (llama / "model.safetensors").string() +
                        ": tensor \"model.norm.weight\": element 3 is nan, not a finite weight"));
}

TEST_CASE("finite weights: an npy directory with a NaN is refused, the layer left as it was", "[io][finite][npy]") {
    using C = shaped::dim<"C", 3>;
    using H = shaped::dim<"H", 2>;
    scratch_dir dir;
    shaped::nn::Linear<C, H> layer;
    layer.weight.elements()[0] = 1.5f;
    layer.bias.elements()[1] = -2.0f;
    io::save_npy(dir / "weight.npy", layer.weight);
    io::save_npy(dir / "bias.npy", layer.bias);
    shaped::nn::Linear<C, H> loaded;
    io::load_parameters(loaded, io::npy_directory(dir / ""));
    CHECK(loaded.weight.elements()[0] == 1.5f);

    auto bad = layer.weight;
    bad.elements()[4] = not_a_number;
    io::save_npy(dir / "weight.npy", bad);
    const auto before = parameter_bytes(loaded);
    CHECK_THAT(error_message<io_error>([&] { io::load_parameters(loaded, io::npy_directory(dir / "")); }),
               Contains("weight.npy: tensor \"weight\": element 4 is nan, not a finite weight"));
    CHECK(parameter_bytes(loaded) == before);
    // As data, the file loads with its NaN.
    CHECK(std::isnan(io::load_npy<float, H, C>(dir / "weight.npy")(1, 1)));
}

// ---- size limits ---------------------------------------------------------------------------------

TEST_CASE("read_file: a file at its limit is read, one byte more is refused naming the limit", "[io][limit]") {
    scratch_dir dir;
    const fs::path text = dir / "text.txt";
    std::ofstream(text) << std::string(4096, 'a');
    CHECK(io::read_file(text, 4096, "the training text") == std::string(4096, 'a'));
    CHECK(error_message<io_error>([&] { io::read_file(text, 4095, "the training text"); }) ==
          "shaped::io::read_file: " + text.string() + ": is 4096 bytes, more than the 4095 bytes the training text may be");
    sparse_file(text, (std::size_t{1} << 30) + 1);
    CHECK_THAT(error_message<io_error>([&] { io::read_file(text, std::size_t{1} << 30, "the training text"); }),
               Contains(": is 1073741825 bytes, more than the 1 GiB the training text may be"));
}

TEST_CASE("read_file: a directory, a FIFO, a device and a missing file are refused without reading them", "[io][limit]") {
    scratch_dir dir;
    const auto refused = [](const fs::path& path) { return error_message<io_error>([&] { io::read_file(path, 1024, "a text"); }); };
    CHECK_THAT(refused(dir / ""), Contains("is a directory, not a text"));
    REQUIRE(::mkfifo((dir / "fifo").c_str(), 0600) == 0);
    // Opened for reading, a FIFO with no writer would block: it must be refused before.
    CHECK_THAT(refused(dir / "fifo"), Contains("fifo: is not a regular file (a device, FIFO or socket), not a text"));
    CHECK_THAT(refused("/dev/zero"), Contains("/dev/zero: is not a regular file"));
    CHECK_THAT(refused(dir / "nowhere.txt"), Contains("nowhere.txt: file not found"));
}

TEST_CASE("config.json limit: a sparse oversized config.json is refused before it is read, one at the limit is parsed",
          "[io][limit][config]") {
    scratch_dir dir;
    const fs::path checkpoint = dir / "checkpoint";
    fs::create_directories(checkpoint);
    sparse_file(checkpoint / "config.json", models::max_config_json_bytes + 1);
    const std::string too_large = "is 16777217 bytes, more than the 16 MiB a config.json may be";
    CHECK_THAT(error_message<io_error>([&] { models::read_checkpoint_config(checkpoint); }), Contains(too_large));
    CHECK_THAT(error_message<io_error>([&] { models::read_llama_config(checkpoint); }), Contains(too_large));
    CHECK_THAT(error_message<io_error>([&] { models::read_gpt_config(checkpoint); }), Contains(too_large));
    // At the limit it is read, and refused for what it holds.
    fs::resize_file(checkpoint / "config.json", models::max_config_json_bytes);
    const std::string at_limit = error_message<io_error>([&] { models::read_checkpoint_config(checkpoint); });
    CHECK_THAT(at_limit, Contains("is not JSON"));
    CHECK_THAT(at_limit, !Contains("more than"));
}

// ---- configs no compiled config is ---------------------------------------------------------------

TEST_CASE("config advice: an rms_norm_eps of 1/N is named with both values, and spelled as the line that loads it",
          "[llama][config]") {
    scratch_dir dir;
    const fs::path llama = copy_fixture(dir, "hf_llama");
    {
        std::ifstream in(llama / "config.json");
        std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        text.replace(text.find("\"rms_norm_eps\": 1e-05"), 21, "\"rms_norm_eps\": 1e-06");
        std::ofstream(llama / "config.json") << text;
    }
    const auto found = models::read_llama_config(llama);
    const auto mismatches = models::config_mismatches<hf_llama_config>(found);
    REQUIRE(mismatches.size() == 1);
    CHECK(mismatches[0] == "rms_norm_eps: the checkpoint has 1e-06, the compiled config 1e-05");
    CHECK(models::why_not_compilable(found).empty());
    const std::string line = models::config_spelling(found);
    CHECK(line == "shaped::models::llama_config<67, 32, 2, 6, 2, 24, 40, false, shaped::nn::rotary_pairing::halves, 1000000>");
    // That line is a config the checkpoint is, and loads as.
    using suggested = models::llama_config<67, 32, 2, 6, 2, 24, 40, false, shaped::nn::rotary_pairing::halves, 1000000>;
    CHECK(suggested::norm_eps == 1e-6);
    CHECK(models::config_mismatches<suggested>(found).empty());
    CHECK(models::config_spelling<suggested>() == line);
    CHECK(models::load_llama<suggested>(llama)->norm.eps == 1e-6);
    // The defaults are llama2.c's, and are not spelled.
    CHECK(hf_llama_config::norm_eps == 1e-5);
    CHECK(hf_llama_config::rope_theta == 10000.0);
    CHECK(models::config_spelling<hf_llama_config>() ==
          "shaped::models::llama_config<67, 32, 2, 6, 2, 24, 40, false, shaped::nn::rotary_pairing::halves>");
}

TEST_CASE("config advice: an eps that is not 1/N, or a theta that is not whole, has no line, and says why", "[llama][config]") {
    models::llama_checkpoint_config found = models::read_llama_config(fixtures / "hf_llama");
    found.norm_eps = 3e-6;
    CHECK(models::config_mismatches<hf_llama_config>(found) ==
          std::vector<std::string>{"rms_norm_eps: the checkpoint has 3e-06, the compiled config 1e-05"});
    CHECK(models::why_not_compilable(found) ==
          std::vector<std::string>{"rms_norm_eps 3e-06 is not 1/N for a whole N, as llama_config's eps is"});
    CHECK_THAT(models::config_spelling(found), Contains("/* no whole N has 1 / N = 3e-06 */"));

    found.norm_eps = 1e-5;
    found.rope_theta = 500000.0;
    CHECK(models::why_not_compilable(found).empty());
    CHECK(models::config_spelling(found) ==
          "shaped::models::llama_config<67, 32, 2, 6, 2, 24, 40, false, shaped::nn::rotary_pairing::halves, 100000, 500000>");
    found.rope_theta = 10000.5;
    CHECK(models::why_not_compilable(found) ==
          std::vector<std::string>{"rope_theta 10000.5 is not a whole number, as llama_config's theta is"});
}

TEST_CASE("config advice: a GPT-2 config with another layer_norm_epsilon, or what shaped's GPT does not do",
          "[gpt][config]") {
    const auto parse = [](const std::string& extra) {
        return models::parse_gpt2_config(R"({"model_type": "gpt2", "vocab_size": 67, "n_positions": 64, "n_layer": 2,
            "n_head": 3, "n_embd": 24)" + extra + "}", "config.json");
    };
    const auto found = parse(R"(, "layer_norm_epsilon": 1e-06)");
    CHECK(models::config_mismatches<hf_gpt2_config>(found) ==
          std::vector<std::string>{"layer_norm_epsilon: the checkpoint has 1e-06, shaped's LayerNorm 1e-05"});
    CHECK(models::why_not_compilable(found) ==
          std::vector<std::string>{"layer_norm_epsilon: shaped's LayerNorm has 1e-05 in every config"});
    CHECK(models::why_not_compilable(parse("")).empty());

    const auto refused = [&](const std::string& extra) { return error_message<io_error>([&] { parse(extra); }); };
    CHECK_THAT(refused(R"(, "n_inner": 64)"), Contains("\"n_inner\": 64, but shaped's GPT has an MLP of 4 n_embd, 96"));
    CHECK(parse(R"(, "n_inner": null)").n_embd == 24);
    CHECK_THAT(refused(R"(, "scale_attn_by_inverse_layer_idx": true)"), Contains("scale_attn_by_inverse_layer_idx"));
    CHECK_THAT(refused(R"(, "scale_attn_weights": false)"), Contains("scale_attn_weights"));
}

TEST_CASE("config advice: a Llama config with biases or a head_dim of its own is refused", "[llama][config]") {
    const std::string base = R"({"model_type": "llama", "hidden_size": 24, "intermediate_size": 40, "num_hidden_layers": 2,
        "num_attention_heads": 6, "vocab_size": 67, "max_position_embeddings": 32)";
    const auto refused = [&](const std::string& extra) {
        return error_message<io_error>([&] { models::parse_hf_llama_config(base + extra + "}", "config.json"); });
    };
    CHECK_THAT(refused(R"(, "attention_bias": true)"), Contains("\"attention_bias\": true, but shaped's Llama has no biases"));
    CHECK_THAT(refused(R"(, "mlp_bias": true)"), Contains("\"mlp_bias\": true"));
    CHECK_THAT(refused(R"(, "head_dim": 8)"), Contains("\"head_dim\": 8, but shaped's Llama's heads are"));
    CHECK(models::parse_hf_llama_config(base + R"(, "attention_bias": false, "head_dim": 4})", "config.json").dim == 24);
}
