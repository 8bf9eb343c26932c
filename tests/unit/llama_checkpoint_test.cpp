// models/llama_checkpoint.hpp: llama2.c files and Hugging Face Llama directories, read back as
// written, and every way such a file can be wrong refused with what is wrong and where.
#include <shaped/shaped.hpp>

#include "file_support.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <string>
#include <variant>
#include <vector>

namespace {

using file_support::error_message;
using file_support::scratch_dir;
using shaped::io::io_error;
namespace models = shaped::models;

// dim 4, hidden 6, 1 layer, 2 heads over 1 key/value head, vocab 5, context 3.
using Tiny = models::llama_config<5, 3, 1, 2, 1, 4, 6>;
using TinyUntied = models::llama_config<5, 3, 1, 2, 1, 4, 6, false>;

// llama2.c's floats after the header for Tiny: every weight, then the two rotary tables
// (3 positions x 1 pair each), then the classifier when untied.
constexpr std::size_t weights_floats = 5 * 4 + 4 + 16 + 2 * 2 * 4 + 16 + 4 + 3 * 6 * 4 + 4;
constexpr std::size_t table_floats = 3 * 2;

std::vector<std::int32_t> tiny_header(bool tied = true) { return {4, 6, 1, 2, 1, tied ? 5 : -5, 3}; }

// The header, then value(i) for the i-th float: what export.py would write for such weights.
void write_llama2c(const std::filesystem::path& path, const std::vector<std::int32_t>& header, std::size_t floats,
                   float (*value)(std::size_t) = [](std::size_t i) { return static_cast<float>(i) * 0.5f - 3.0f; }) {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(header.data()), static_cast<std::streamsize>(header.size() * sizeof(std::int32_t)));
    for (std::size_t i = 0; i < floats; ++i) {
        const float v = value(i);
        out.write(reinterpret_cast<const char*>(&v), sizeof v);
    }
}

}  // namespace

TEST_CASE("a llama2.c file's weights land in the parameters in export.py's order", "[llama][io]") {
    scratch_dir dir;
    write_llama2c(dir / "tiny.bin", tiny_header(false), weights_floats + table_floats + 20);
    const auto model = models::load_llama<TinyUntied>(dir / "tiny.bin");
    const auto at = [](std::size_t i) { return static_cast<float>(i) * 0.5f - 3.0f; };
    // Offsets into the floats: embedding 0, attention norm 20, wq 24, wk 40, wv 48, wo 56,
    // ffn norm 72, w1 76, w2 100, w3 124, norm 148, tables 152 (skipped), classifier 158.
    CHECK(model->tok_embeddings.weight(0, 0) == at(0));
    CHECK(model->tok_embeddings.weight(4, 3) == at(19));
    const auto& layer = model->layers[0];
    CHECK(layer.attention_norm.weight(0) == at(20));
    CHECK(layer.attention.wq.weight(0, 0) == at(24));
    CHECK(layer.attention.wk.weight(0, 0) == at(40));
    CHECK(layer.attention.wv.weight(1, 3) == at(55));
    CHECK(layer.attention.wo.weight(3, 3) == at(71));
    CHECK(layer.ffn_norm.weight(3) == at(75));
    CHECK(layer.feed_forward.w1.weight(0, 0) == at(76));
    CHECK(layer.feed_forward.w2.weight(0, 0) == at(100));
    CHECK(layer.feed_forward.w3.weight(5, 3) == at(147));
    CHECK(model->norm.weight(0) == at(148));
    CHECK(model->output.weight(0, 0) == at(158));
    CHECK(model->output.weight(4, 3) == at(177));
}

TEST_CASE("llama2.c files that are not what their header says are refused", "[llama][io]") {
    scratch_dir dir;
    const auto path = dir / "bad.bin";
    SECTION("a header field that is not a positive count") {
        auto header = tiny_header();
        header[3] = 0;
        write_llama2c(path, header, 0);
        CHECK_THAT(error_message<io_error>([&] { models::read_llama_config(path); }),
                   Catch::Contains("header field n_heads is 0, not a positive count"));
        header = tiny_header();
        header[5] = std::numeric_limits<std::int32_t>::min();
        write_llama2c(path, header, 0);
        CHECK_THAT(error_message<io_error>([&] { models::read_llama_config(path); }),
                   Catch::Contains("header field vocab_size is -2147483648"));
    }
    SECTION("heads that do not divide") {
        write_llama2c(path, {4, 6, 1, 3, 1, 5, 3}, 0);
        CHECK_THAT(error_message<io_error>([&] { models::read_llama_config(path); }),
                   Catch::Contains("dim 4 is not a multiple of n_heads 3"));
        write_llama2c(path, {8, 6, 1, 4, 3, 5, 3}, 0);
        CHECK_THAT(error_message<io_error>([&] { models::read_llama_config(path); }),
                   Catch::Contains("n_heads 4 is not a multiple of n_kv_heads 3"));
    }
    SECTION("shorter than a header") {
        std::ofstream(path) << "abc";
        CHECK_THAT(error_message<io_error>([&] { models::read_llama_config(path); }),
                   Catch::Contains("is 3 bytes, shorter than llama2.c's header of 28"));
    }
    SECTION("truncated, or with bytes past the weights") {
        write_llama2c(path, tiny_header(), weights_floats + table_floats - 1);
        CHECK_THAT(error_message<io_error>([&] { models::load_llama<Tiny>(path); }),
                   Catch::Contains("is 656 bytes; its header's config shaped::models::llama_config<5, 3, 1, 2, 1, 4, 6> "
                                   "needs 660 (truncated?)"));
        write_llama2c(path, tiny_header(), weights_floats + table_floats + 1);
        CHECK_THAT(error_message<io_error>([&] { models::load_llama<Tiny>(path); }), Catch::Contains("(trailing bytes?)"));
    }
    SECTION("a weight that is not finite") {
        write_llama2c(path, tiny_header(), weights_floats + table_floats,
                      [](std::size_t i) { return i == 30 ? std::numeric_limits<float>::infinity() : 1.0f; });
        CHECK_THAT(error_message<io_error>([&] { models::load_llama<Tiny>(path); }),
                   Catch::Contains("bad.bin: tensor \"layers.0.attention.wq.weight\": element 6 is inf, not a finite weight"));
    }
    SECTION("a config that is not the compiled one, every difference named") {
        write_llama2c(path, tiny_header(false), weights_floats + table_floats + 20);
        const std::string message = error_message<io_error>([&] { models::load_llama<Tiny>(path); });
        CHECK_THAT(message, Catch::Contains("the checkpoint's config, shaped::models::llama_config<5, 3, 1, 2, 1, 4, 6, false>, "
                                            "is not the compiled one"));
        CHECK_THAT(message, Catch::Contains("classifier: the checkpoint has its own, the compiled config tied to the embedding"));
        CHECK_THAT(error_message<io_error>([&] { models::load_llama<models::stories260k>(path); }),
                   Catch::Contains("dim: the checkpoint has 4, the compiled config 64"));
    }
}

TEST_CASE("a Hugging Face Llama config.json is read, and refused where shaped's Llama is not it", "[llama][io]") {
    const std::string base = R"({"model_type": "llama", "hidden_act": "silu", "hidden_size": 24, "intermediate_size": 40,
        "num_hidden_layers": 2, "num_attention_heads": 6, "num_key_value_heads": 2, "vocab_size": 67,
        "max_position_embeddings": 32, "rms_norm_eps": 1e-06, "rope_theta": 500000.0, "tie_word_embeddings": true)";
    const auto config = models::parse_hf_llama_config(base + "}", "config.json");
    CHECK(config.dim == 24);
    CHECK(config.n_kv_heads == 2);
    CHECK(config.tied_classifier);
    CHECK(config.rotary_pairing == shaped::nn::rotary_pairing::halves);
    CHECK(config.norm_eps == 1e-6);
    CHECK(config.rope_theta == 500000.0);
    // The compiled default's eps and theta differ, and are named.
    using Compiled = models::llama_config<67, 32, 2, 6, 2, 24, 40, true, shaped::nn::rotary_pairing::halves>;
    const auto mismatches = models::config_mismatches<Compiled>(config);
    REQUIRE(mismatches.size() == 2);
    CHECK(mismatches[0] == "rms_norm_eps: the checkpoint has 1e-06, the compiled config 1e-05");
    CHECK(mismatches[1] == "rope_theta: the checkpoint has 500000, the compiled config 10000");

    const auto refused = [&](const std::string& text) {
        return error_message<io_error>([&] { models::parse_hf_llama_config(text, "config.json"); });
    };
    CHECK_THAT(refused(base + R"(, "rope_scaling": {"type": "linear", "factor": 2}})"), Catch::Contains("rope_scaling"));
    CHECK_THAT(refused(R"({"model_type": "gpt2"})"), Catch::Contains("is the config of a \"gpt2\" model, not of Llama"));
    CHECK_THAT(refused(R"({"model_type": "llama", "hidden_act": "gelu"})"), Catch::Contains("\"hidden_act\" is \"gelu\""));
    CHECK_THAT(refused(R"({"model_type": "llama", "hidden_size": 24})"), Catch::Contains("has no \"intermediate_size\""));
    CHECK_THAT(refused(R"({"model_type": "llama", "hidden_size": -1})"), Catch::Contains("\"hidden_size\" is not a positive integer"));
    CHECK_THAT(refused("[1, 2"), Catch::Contains("is not JSON"));
}

TEST_CASE("a Llama's checkpoint is told from a GPT's, its config read once", "[llama][io][config]") {
    using models::checkpoint_config;
    using models::gpt_checkpoint_config;
    using models::llama_checkpoint_config;
    scratch_dir dir;
    write_llama2c(dir / "tiny.bin", tiny_header(), 1);
    CHECK(std::holds_alternative<llama_checkpoint_config>(models::read_checkpoint_config(dir / "tiny.bin")));
    std::filesystem::create_directories(dir / "hf");
    std::ofstream(dir / "hf" / "config.json")
        << R"({"model_type": "llama", "hidden_size": 24, "intermediate_size": 40, "num_hidden_layers": 2,
              "num_attention_heads": 6, "vocab_size": 67, "max_position_embeddings": 32})";
    const checkpoint_config hf = models::read_checkpoint_config(dir / "hf");
    REQUIRE(std::holds_alternative<llama_checkpoint_config>(hf));
    CHECK(std::get<llama_checkpoint_config>(hf).n_kv_heads == 6);
    std::filesystem::create_directories(dir / "gpt2");
    std::ofstream(dir / "gpt2" / "config.json")
        << R"({"model_type": "gpt2", "vocab_size": 67, "n_positions": 64, "n_layer": 2, "n_head": 3, "n_embd": 24})";
    const checkpoint_config gpt2 = models::read_checkpoint_config(dir / "gpt2");
    REQUIRE(std::holds_alternative<gpt_checkpoint_config>(gpt2));
    CHECK(std::get<gpt_checkpoint_config>(gpt2).n_layer == 2);
    // A file that is no safetensors file is refused by the GPT reader, which names it.
    std::ofstream(dir / "model.safetensors") << "x";
    CHECK_THAT(error_message<io_error>([&] { models::read_checkpoint_config(dir / "model.safetensors"); }),
               Catch::Contains("model.safetensors"));
    CHECK_THAT(error_message<io_error>([&] { models::read_checkpoint_config(dir / "nowhere"); }),
               Catch::Contains("does not exist"));
}

TEST_CASE("a Llama saved as a Hugging Face directory loads back the same, config and every weight", "[llama][io]") {
    using Halves = models::llama_config<5, 3, 1, 2, 1, 4, 6, true, shaped::nn::rotary_pairing::halves>;
    using HalvesUntied = models::llama_config<5, 3, 1, 2, 1, 4, 6, false, shaped::nn::rotary_pairing::halves>;
    scratch_dir dir;
    const auto round_trip = [&]<class Config>(Config*, const std::string& name) {
        shaped::Generator gen(7);
        const models::Llama<Config> model(gen);
        models::save_hf_llama(model, dir / name, {{"tokenizer", "bytes"}});
        CHECK(std::holds_alternative<models::llama_checkpoint_config>(models::read_checkpoint_config(dir / name)));
        CHECK(models::config_mismatches<Config>(models::read_llama_config(dir / name)).empty());
        const shaped::io::safetensors_file file(dir / name / "model.safetensors");
        CHECK(file.metadata().at("tokenizer") == "bytes");
        CHECK(file.contains("model.layers.0.self_attn.k_proj.weight"));
        CHECK(file.contains("lm_head.weight") == !Config::tied_classifier);
        const auto loaded = models::load_llama<Config>(dir / name);
        const auto saved = shaped::io::parameter_bytes(model), back = shaped::io::parameter_bytes(*loaded);
        REQUIRE(saved.size() == back.size());
        for (std::size_t i = 0; i < saved.size(); ++i) {
            INFO(saved[i].name);
            CHECK(std::equal(saved[i].data.begin(), saved[i].data.end(), back[i].data.begin(), back[i].data.end()));
        }
    };
    round_trip(static_cast<Halves*>(nullptr), "tied");
    round_trip(static_cast<HalvesUntied*>(nullptr), "untied");
}

TEST_CASE("save_llama2c writes a file load_llama reads back weight for weight at export.py size", "[llama][io]") {
    scratch_dir dir;
    shaped::Generator gen(7);
    const auto model = std::make_unique<models::Llama<TinyUntied>>(gen);
    models::save_llama2c(*model, dir / "saved.bin");
    const auto found = models::read_llama_config(dir / "saved.bin");
    CHECK(models::config_mismatches<TinyUntied>(found).empty());
    CHECK(std::filesystem::file_size(dir / "saved.bin") == 7 * 4 + (weights_floats + table_floats + 20) * 4);
    const auto back = models::load_llama<TinyUntied>(dir / "saved.bin");
    const auto a = shaped::nn::parameter_list(*model), b = shaped::nn::parameter_list(*back);
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
        INFO(a[i].name);
        const auto x = a[i].elements<float>(), y = b[i].elements<float>();
        CHECK(std::equal(x.begin(), x.end(), y.begin(), y.end()));
    }
}
