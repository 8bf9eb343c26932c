// models::load_llama of a GGUF file: the `llama.*` metadata read as a config and checked against
// the compiled one, llama.cpp's tensor names mapped to the model's parameters, weights in any
// format of tensor/quantized.hpp dequantized; and every way the metadata can be wrong refused,
// naming the key.
#include <shaped/shaped.hpp>

#include "file_support.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace {

using Catch::Matchers::Contains;
using file_support::error_message;
using file_support::scratch_dir;
namespace io = shaped::io;
namespace models = shaped::models;

// dim 64 (two Q8_0 blocks a row), hidden 96, 2 layers, 4 heads over 2 key/value heads, vocab 7,
// context 16, a classifier of its own.
using Small = models::llama_config<7, 16, 2, 4, 2, 64, 96, false>;

// A Small model whose every weight differs from every other (and from 1, a norm's start).
std::unique_ptr<models::Llama<Small>> distinct_weights() {
    shaped::Generator gen(11);
    auto model = std::make_unique<models::Llama<Small>>(gen);
    for (const shaped::nn::parameter_slot& parameter : shaped::nn::parameter_list(*model)) {
        const std::span<float> elements = parameter.elements<float>();
        gen.fill_normal(elements);
        for (float& value : elements) value = 0.1f * value + (parameter.rank == 1 ? 1.0f : 0.0f);
    }
    return model;
}

// llama.cpp's metadata of Small, as its converters write it (uint32 counts, float32 numbers).
std::vector<io::gguf_kv> small_metadata() {
    return {{"general.architecture", std::string("llama")},
            {"general.name", std::string("small")},
            {"llama.context_length", std::uint32_t{16}},
            {"llama.embedding_length", std::uint32_t{64}},
            {"llama.feed_forward_length", std::uint32_t{96}},
            {"llama.block_count", std::uint32_t{2}},
            {"llama.attention.head_count", std::uint32_t{4}},
            {"llama.attention.head_count_kv", std::uint32_t{2}},
            {"llama.attention.layer_norm_rms_epsilon", 1e-5f},
            {"llama.rope.freq_base", 10000.0f}};
}

// The model's weights under llama.cpp's names, 2-d ones of 64 columns in `matrices` (f32 or q8_0).
void write_small(const std::filesystem::path& path, const models::Llama<Small>& model, std::vector<io::gguf_kv> metadata,
                 shaped::ggml_type matrices = shaped::ggml_type::f32) {
    io::gguf_writer out;
    for (io::gguf_kv& kv : metadata) out.add(std::move(kv.key), std::move(kv.value));
    for (const io::tensor_bytes& tensor : io::parameter_bytes(model)) {
        std::vector<std::uint64_t> ne(tensor.shape.rbegin(), tensor.shape.rend());
        const std::string name = models::detail::gguf_llama_name(tensor.name);
        if (matrices == shaped::ggml_type::q8_0 && ne.size() == 2 && ne[0] % 32 == 0) {
            const std::span<const float> floats(reinterpret_cast<const float*>(tensor.data.data()), tensor.data.size() / 4);
            std::vector<shaped::block_q8_0> blocks(floats.size() / 32);
            shaped::q8_0::quantize_row(floats, blocks);
            const auto bytes = std::as_bytes(std::span(blocks));
            out.add_tensor(name, shaped::ggml_type::q8_0, ne, std::vector<std::byte>(bytes.begin(), bytes.end()));
        } else {
            out.add_tensor(name, shaped::ggml_type::f32, ne, std::vector<std::byte>(tensor.data.begin(), tensor.data.end()));
        }
    }
    out.save(path);
}

// Each parameter of `loaded` against `written`'s, through `expected` (the identity, or a round
// trip through a format).
template <class Expected>
void require_same_parameters(const models::Llama<Small>& loaded, const models::Llama<Small>& written,
                             const Expected& expected) {
    const auto want = io::parameter_bytes(written);
    const auto got = io::parameter_bytes(loaded);
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
        INFO(got[i].name);
        REQUIRE(got[i].name == want[i].name);
        REQUIRE(got[i].shape == want[i].shape);
        const auto* a = reinterpret_cast<const float*>(got[i].data.data());
        const std::vector<float> b = expected(want[i]);
        for (std::size_t j = 0; j < b.size(); ++j) REQUIRE(a[j] == b[j]);
    }
}

std::vector<float> as_written(const io::tensor_bytes& tensor) {
    const auto* f = reinterpret_cast<const float*>(tensor.data.data());
    return {f, f + tensor.data.size() / 4};
}

}  // namespace

TEST_CASE("a GGUF Llama loads by llama.cpp's names, its config from the llama metadata", "[llama][io][gguf]") {
    scratch_dir dir;
    const auto model = distinct_weights();
    write_small(dir / "small.gguf", *model, small_metadata());

    const models::llama_checkpoint_config found = models::read_llama_config(dir / "small.gguf");
    CHECK(models::config_mismatches<Small>(found).empty());
    CHECK(found.norm_eps == 1e-5);  // float32's 9.99999974737875e-06 read as the config's 1e-5
    CHECK(std::holds_alternative<models::llama_checkpoint_config>(models::read_checkpoint_config(dir / "small.gguf")));
    // llama.cpp's names (llama-arch.cpp; its llama2.c converter: w1 is ffn_gate, w2 ffn_down, w3 ffn_up).
    const std::vector<std::pair<std::string, std::string>> names{
        {"tok_embeddings.weight", "token_embd.weight"},
        {"layers.0.attention_norm.weight", "blk.0.attn_norm.weight"},
        {"layers.1.attention.wq.weight", "blk.1.attn_q.weight"},
        {"layers.0.attention.wk.weight", "blk.0.attn_k.weight"},
        {"layers.0.attention.wv.weight", "blk.0.attn_v.weight"},
        {"layers.0.attention.wo.weight", "blk.0.attn_output.weight"},
        {"layers.1.ffn_norm.weight", "blk.1.ffn_norm.weight"},
        {"layers.0.feed_forward.w1.weight", "blk.0.ffn_gate.weight"},
        {"layers.1.feed_forward.w2.weight", "blk.1.ffn_down.weight"},
        {"layers.0.feed_forward.w3.weight", "blk.0.ffn_up.weight"},
        {"norm.weight", "output_norm.weight"},
        {"output.weight", "output.weight"},
    };
    for (const auto& [ours, theirs] : names) CHECK(models::detail::gguf_llama_name(ours) == theirs);

    const auto loaded = models::load_llama<Small>(dir / "small.gguf");
    require_same_parameters(*loaded, *model, as_written);

    // Q8_0 matrices (those of 64 columns; w2's 96 are 3 blocks too): the model holds ggml's
    // dequantization of ggml's quantization.
    write_small(dir / "small.q8_0.gguf", *model, small_metadata(), shaped::ggml_type::q8_0);
    const io::gguf_file q8(dir / "small.q8_0.gguf");
    CHECK(q8.info("blk.0.attn_q.weight").type == shaped::ggml_type::q8_0);
    CHECK(q8.info("blk.0.attn_norm.weight").type == shaped::ggml_type::f32);
    const auto quantized = models::load_llama<Small>(dir / "small.q8_0.gguf");
    require_same_parameters(*quantized, *model, [](const io::tensor_bytes& tensor) {
        std::vector<float> floats = as_written(tensor);
        if (tensor.shape.size() != 2 || tensor.shape[1] % 32 != 0) return floats;
        std::vector<shaped::block_q8_0> blocks(floats.size() / 32);
        shaped::q8_0::quantize_row(floats, blocks);
        shaped::q8_0::dequantize_row(blocks, floats);
        return floats;
    });
    // The two agree in the forward too, to Q8_0's error.
    const auto ids = shaped::tensor<models::token_id, shaped::dim<"B", 1>, shaped::dim<"T", 6>>({1, 4, 2, 6, 0, 3});
    const auto exact = (*loaded)(ids);
    const auto rounded = (*quantized)(ids);
    for (std::size_t i = 0; i < exact.size(); ++i) CHECK(rounded.data()[i] == Approx(exact.data()[i]).margin(0.05));
}

TEST_CASE("a GGUF Llama whose output.weight is a copy of token_embd, as llama.cpp's converter writes it, is tied",
          "[llama][io][gguf]") {
    using Tied = models::llama_config<7, 16, 2, 4, 2, 64, 96>;
    scratch_dir dir;
    shaped::Generator gen(2);
    const models::Llama<Tied> model(gen);
    io::gguf_writer out;
    for (io::gguf_kv& kv : small_metadata()) out.add(std::move(kv.key), std::move(kv.value));
    for (const io::tensor_bytes& tensor : io::parameter_bytes(model)) {
        std::vector<std::uint64_t> ne(tensor.shape.rbegin(), tensor.shape.rend());
        std::vector<std::byte> bytes(tensor.data.begin(), tensor.data.end());
        if (tensor.name == "tok_embeddings.weight") out.add_tensor("output.weight", shaped::ggml_type::f32, ne, bytes);
        out.add_tensor(models::detail::gguf_llama_name(tensor.name), shaped::ggml_type::f32, ne, bytes);
    }
    out.save(dir / "tied.gguf");
    CHECK(models::read_llama_config(dir / "tied.gguf").tied_classifier);
    const auto loaded = models::load_llama<Tied>(dir / "tied.gguf");
    CHECK(std::equal(loaded->tok_embeddings.weight.data(), loaded->tok_embeddings.weight.data() + 7 * 64,
                     model.tok_embeddings.weight.data()));
    // An output.weight of its own is an untied classifier, which the tied config is not.
    const auto untied = distinct_weights();
    write_small(dir / "untied.gguf", *untied, small_metadata());
    CHECK_THAT(error_message<io::io_error>([&] { (void)models::load_llama<Tied>(dir / "untied.gguf"); }),
               Contains("classifier: the checkpoint has its own, the compiled config tied to the embedding"));
}

TEST_CASE("a GGUF Llama's metadata that is not the compiled config, or not a Llama's, is refused naming the key",
          "[llama][io][gguf]") {
    scratch_dir dir;
    const auto model = distinct_weights();
    const auto refused = [&](std::vector<io::gguf_kv> metadata) {
        write_small(dir / "bad.gguf", *model, std::move(metadata));
        return error_message<io::io_error>([&] { (void)models::load_llama<Small>(dir / "bad.gguf"); });
    };
    const auto with = [](std::string key, io::gguf_value value) {
        auto metadata = small_metadata();
        bool replaced = false;
        for (io::gguf_kv& kv : metadata)
            if (kv.key == key) kv.value = value, replaced = true;
        if (!replaced) metadata.push_back({key, value});
        return metadata;
    };
    const auto without = [](std::string_view key) {
        auto metadata = small_metadata();
        std::erase_if(metadata, [&](const io::gguf_kv& kv) { return kv.key == key; });
        return metadata;
    };
    CHECK_THAT(refused(with("general.architecture", std::string("gpt2"))),
               Contains(R"("general.architecture" is "gpt2", not "llama")"));
    CHECK_THAT(refused(with("llama.block_count", std::uint32_t{3})),
               Contains("n_layers: the checkpoint has 3, the compiled config 2"));
    CHECK_THAT(refused(with("llama.block_count", 2.0f)), Contains(R"("llama.block_count" is float32, not a positive integer)"));
    CHECK_THAT(refused(with("llama.block_count", std::uint32_t{0})), Contains("not a positive integer"));
    CHECK_THAT(refused(with("llama.attention.head_count", std::uint32_t{3})),
               Contains("dim 64 is not a multiple of n_heads 3"));
    CHECK_THAT(refused(with("llama.attention.layer_norm_rms_epsilon", 1e-6f)),
               Contains("rms_norm_eps: the checkpoint has 1e-06, the compiled config 1e-05"));
    CHECK_THAT(refused(with("llama.rope.freq_base", std::string("10000"))), Contains("is string, not a float32"));
    CHECK_THAT(refused(without("llama.context_length")), Contains("llama.context_length"));
    CHECK_THAT(refused(without("general.architecture")), Contains("general.architecture"));
    // llama.context_length is the context the file was made for, not a bound on the compiled one.
    auto shorter = small_metadata();
    for (io::gguf_kv& kv : shorter)
        if (kv.key == "llama.context_length") kv.value = std::uint32_t{4};
    write_small(dir / "short.gguf", *model, shorter);
    CHECK(models::load_llama<Small>(dir / "short.gguf")->norm.weight(0) == model->norm.weight(0));
    // Optional keys take llama.cpp's defaults: no head_count_kv is one per head (4, not 2).
    CHECK_THAT(refused(without("llama.attention.head_count_kv")),
               Contains("n_kv_heads: the checkpoint has 4, the compiled config 2"));
}
