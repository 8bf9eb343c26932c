// GGUF reading and writing. The reader is checked against a file llama.cpp's own writer wrote
// (gguf-py: tests/unit/data/gguf_py_every_type.gguf, from tools/make_gguf_fixture.py) and
// against files built here byte by byte from the format's description, so that it is not only
// checked against shaped's own writer; every malformed file must be an io_error whose message
// names the file, the key or tensor and the problem.

#include <shaped/io.hpp>
#include <shaped/tensor.hpp>

#include "file_support.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using namespace file_support;
namespace io = shaped::io;
using Catch::Matchers::Contains;
using io::gguf_array;
using io::gguf_value;
using shaped::ggml_type;

const fs::path gguf_py_fixture = fs::path(SHAPED_TEST_DATA_DIR) / "gguf_py_every_type.gguf";

// ---- files built by hand -------------------------------------------------------------------

// Little-endian fields appended one by one.
struct image {
    std::vector<std::byte> bytes;

    image& raw(std::string_view text) {
        for (const char c : text) bytes.push_back(static_cast<std::byte>(c));
        return *this;
    }
    template <class T>
    image& put(T value) {
        const auto* p = reinterpret_cast<const std::byte*>(&value);
        bytes.insert(bytes.end(), p, p + sizeof(T));
        return *this;
    }
    image& u32(std::uint32_t value) { return put(value); }
    image& u64(std::uint64_t value) { return put(value); }
    image& str(std::string_view text) { return u64(text.size()).raw(text); }
    image& append(const image& other) {
        bytes.insert(bytes.end(), other.bytes.begin(), other.bytes.end());
        return *this;
    }
};

// One key/value as a file holds it: the key, the type id, then `payload`.
image kv(std::string_view key, std::uint32_t type, const image& payload) { return image().str(key).u32(type).append(payload); }
image kv_string(std::string_view key, std::string_view text) { return kv(key, 8, image().str(text)); }
image kv_u32(std::string_view key, std::uint32_t value) { return kv(key, 4, image().u32(value)); }

struct hand_tensor {
    std::string name = "w";
    std::vector<std::uint64_t> ne = {4, 2};
    std::uint32_t type = 0;  // f32
    std::uint64_t offset = 0;
    std::optional<std::uint32_t> n_dims;  // ne.size(), unless given
};

hand_tensor f32_tensor(std::string name, std::vector<std::uint64_t> ne, std::uint64_t offset) {
    hand_tensor tensor;
    tensor.name = std::move(name);
    tensor.ne = std::move(ne);
    tensor.offset = offset;
    return tensor;
}

// A GGUF file: by default version 3, a name, one f32 (2, 4) tensor "w" and its 32 bytes of data.
struct hand_file {
    std::string magic = "GGUF";
    std::uint32_t version = 3;
    std::vector<image> kvs = {kv_string("general.name", "tiny")};
    std::optional<std::uint64_t> kv_count;  // kvs.size(), unless given
    std::vector<hand_tensor> tensors = {hand_tensor{}};
    std::optional<std::uint64_t> tensor_count;
    std::size_t alignment = 32;  // where the data section starts; kvs say what the file claims
    std::size_t data_bytes = 32;

    std::vector<std::byte> bytes() const {
        image out;
        out.raw(magic).u32(version).u64(tensor_count.value_or(tensors.size())).u64(kv_count.value_or(kvs.size()));
        for (const image& entry : kvs) out.append(entry);
        for (const hand_tensor& t : tensors) {
            out.str(t.name).u32(t.n_dims.value_or(static_cast<std::uint32_t>(t.ne.size())));
            for (const std::uint64_t extent : t.ne) out.u64(extent);
            out.u32(t.type).u64(t.offset);
        }
        while (out.bytes.size() % alignment != 0) out.bytes.push_back(std::byte{0});
        for (std::size_t i = 0; i < data_bytes; ++i) out.bytes.push_back(static_cast<std::byte>(i));
        return out.bytes;
    }
};

// The one-line message of the io_error opening `bytes` as a file must throw; it names the file.
std::string open_error(const scratch_dir& dir, std::span<const std::byte> bytes) {
    const fs::path path = dir / "model.gguf";
    write_file(path, bytes);
    const std::string message = error_message<io::io_error>([&] { io::gguf_file file(path); });
    CHECK_THAT(message, Contains("model.gguf: "));
    CHECK(message.find('\n') == std::string::npos);
    return message;
}

std::uint16_t half_bits(std::span<const std::byte> bytes, std::size_t i) {
    std::uint16_t bits = 0;
    std::memcpy(&bits, bytes.data() + 2 * i, 2);
    return bits;
}

// Every value type, scalar and array, for the writer's round trip.
std::vector<io::gguf_kv> every_type() {
    using namespace std::string_literals;
    return {
        {"t.uint8", std::uint8_t{255}},
        {"t.int8", std::int8_t{-128}},
        {"t.uint16", std::uint16_t{65535}},
        {"t.int16", std::int16_t{-32768}},
        {"t.uint32", std::uint32_t{4294967295u}},
        {"t.int32", std::int32_t{std::numeric_limits<std::int32_t>::min()}},
        {"t.float32", -3.25f},
        {"t.bool.true", true},
        {"t.bool.false", false},
        {"t.string", "nul \0 inside, \xff not UTF-8"s},
        {"t.string.empty", ""s},
        {"t.uint64", std::uint64_t{std::numeric_limits<std::uint64_t>::max()}},
        {"t.int64", std::int64_t{std::numeric_limits<std::int64_t>::min()}},
        {"t.float64", 1e300},
        {"a.uint8", gguf_array(std::vector<std::uint8_t>{0, 1, 255})},
        {"a.int8", gguf_array(std::vector<std::int8_t>{-1, 2})},
        {"a.uint16", gguf_array(std::vector<std::uint16_t>{7})},
        {"a.int16", gguf_array(std::vector<std::int16_t>{-7, 8})},
        {"a.uint32", gguf_array(std::vector<std::uint32_t>{1, 2, 3})},
        {"a.int32", gguf_array(std::vector<std::int32_t>{-1, 0, 1})},
        {"a.float32", gguf_array(std::vector<float>{0.5f, -1e-30f})},
        {"a.bool", gguf_array(std::vector<bool>{true, false, false, true})},
        {"a.string", gguf_array(std::vector<std::string>{"a", "", "\xe2\x96\x81the"})},
        {"a.uint64", gguf_array(std::vector<std::uint64_t>{1ull << 63})},
        {"a.int64", gguf_array(std::vector<std::int64_t>{-(1ll << 62)})},
        {"a.float64", gguf_array(std::vector<double>{0.1, -0.2})},
        {"a.empty", gguf_array(std::vector<float>{})},
        {"a.array", gguf_array(std::vector<gguf_array>{gguf_array(std::vector<std::int32_t>{1, 2}),
                                                       gguf_array(std::vector<std::string>{"x"}),
                                                       gguf_array(std::vector<gguf_array>{})})},
        {"a.array.strings", gguf_array(std::vector<gguf_array>{gguf_array(std::vector<std::string>{"p", "q"})})},
    };
}

}  // namespace

TEST_CASE("gguf: a file written by llama.cpp's gguf-py reads with every value exact", "[io][gguf]") {
    const io::gguf_file file(gguf_py_fixture);
    CHECK(file.version() == 3);
    CHECK(file.alignment() == 64);

    // Every scalar type, in the file's order.
    const std::vector<std::string> keys = {
        "general.architecture", "general.alignment", "test.uint8", "test.int8", "test.uint16", "test.int16",
        "test.uint32", "test.int32", "test.float32", "test.bool", "test.string", "test.uint64", "test.int64",
        "test.float64", "llama.block_count", "tokenizer.ggml.tokens", "tokenizer.ggml.scores",
        "tokenizer.ggml.token_type", "test.array.uint16", "test.array.int64", "test.array.float64",
        "test.array.bool", "test.array.nested"};
    REQUIRE(file.metadata().size() == keys.size());
    for (std::size_t i = 0; i < keys.size(); ++i) CHECK(file.metadata()[i].key == keys[i]);
    CHECK(file.get<std::string>("general.architecture") == "llama");
    CHECK(file.get<std::uint32_t>("general.alignment") == 64);
    CHECK(file.get<std::uint8_t>("test.uint8") == 200);
    CHECK(file.get<std::int8_t>("test.int8") == -100);
    CHECK(file.get<std::uint16_t>("test.uint16") == 60000);
    CHECK(file.get<std::int16_t>("test.int16") == -30000);
    CHECK(file.get<std::uint32_t>("test.uint32") == 4000000000u);
    CHECK(file.get<std::int32_t>("test.int32") == -2000000000);
    CHECK(file.get<float>("test.float32") == 1.5f);
    CHECK(file.get<bool>("test.bool") == true);
    CHECK(file.get<std::string>("test.string") == "h\xc3\xa9llo \xe2\x96\x81world");
    CHECK(file.get<std::uint64_t>("test.uint64") == (std::uint64_t{1} << 63) + 5);
    CHECK(file.get<std::int64_t>("test.int64") == -(std::int64_t{1} << 62));
    CHECK(file.get<double>("test.float64") == -0.125);
    CHECK(file.get<std::uint32_t>("llama.block_count") == 2);

    // A llama vocabulary, and arrays of the other types.
    CHECK(file.get_array<std::string>("tokenizer.ggml.tokens") ==
          std::vector<std::string>{"<unk>", "<s>", "</s>", "\xe2\x96\x81the", ""});
    CHECK(file.get_array<float>("tokenizer.ggml.scores") == std::vector<float>{0.0f, -1.5f, -2.25f, 3.0f, -0.5f});
    CHECK(file.get_array<std::int32_t>("tokenizer.ggml.token_type") == std::vector<std::int32_t>{2, 3, 3, 1, 1});
    CHECK(file.get_array<std::uint16_t>("test.array.uint16") == std::vector<std::uint16_t>{1, 65535});
    CHECK(file.get_array<std::int64_t>("test.array.int64") == std::vector<std::int64_t>{-(std::int64_t{1} << 40), 7});
    CHECK(file.get_array<double>("test.array.float64") == std::vector<double>{0.25, -8.0});
    CHECK(file.get_array<bool>("test.array.bool") == std::vector<bool>{true, false, true});
    const auto& nested = file.get_array<gguf_array>("test.array.nested");
    REQUIRE(nested.size() == 3);
    CHECK(nested[0] == gguf_array(std::vector<std::int32_t>{1, 2}));
    CHECK(nested[1] == gguf_array(std::vector<std::int32_t>{3}));
    CHECK(nested[2] == gguf_array(std::vector<std::int32_t>{4, 5, 6}));
    CHECK(io::describe_type(file.value("test.array.nested")) == "array of array of int32");

    // Tensors: ne in ggml's order, the data section at the aligned end of the infos.
    CHECK(file.names() == std::vector<std::string>{"token_embd.weight", "output_norm.weight", "blk.0.attn_q.weight", "blk.0.ids"});
    CHECK(file.data_offset() == 1280);
    const io::gguf_tensor_info& embd = file.info("token_embd.weight");
    CHECK(embd.type == ggml_type::f32);
    CHECK(embd.ne == std::vector<std::uint64_t>{4, 3});
    CHECK(embd.shape() == std::vector<std::size_t>{3, 4});
    CHECK(embd.offset == 0);
    CHECK(embd.size == 48);
    using V = shaped::dim<"V", 3>;
    using C = shaped::dim<"C", 4>;
    const auto embeddings = file.load<float, V, C>("token_embd.weight");
    for (std::size_t v = 0; v < 3; ++v)
        for (std::size_t c = 0; c < 4; ++c) CHECK(embeddings(v, c) == 0.5f * static_cast<float>(4 * v + c) - 1.0f);

    const io::gguf_tensor_info& norm = file.info("output_norm.weight");
    CHECK(norm.type == ggml_type::f16);
    CHECK(norm.ne == std::vector<std::uint64_t>{5});
    CHECK(norm.offset == 64);
    const auto half = file.bytes("output_norm.weight");
    REQUIRE(half.size() == 10);
    const std::uint16_t expected_half[] = {0x3c00, 0xc000, 0x3800, 0x4400, 0x4800};  // 1, -2, 0.5, 4, 8
    for (std::size_t i = 0; i < 5; ++i) CHECK(half_bits(half, i) == expected_half[i]);

    const io::gguf_tensor_info& q = file.info("blk.0.attn_q.weight");
    CHECK(q.type == ggml_type::q8_0);
    CHECK(q.ne == std::vector<std::uint64_t>{32, 2});
    CHECK(q.offset == 128);
    const auto blocks = file.bytes("blk.0.attn_q.weight");
    REQUIRE(blocks.size() == 68);
    CHECK(half_bits(blocks, 0) == 0x3800);                        // the first block's scale, 0.5
    CHECK(static_cast<std::int8_t>(blocks[2]) == -16);           // its first quant
    CHECK(static_cast<std::int8_t>(blocks[33]) == 15);           // its last
    CHECK(static_cast<std::uint8_t>(blocks[34]) == 15);          // the second block is the first reversed
    CHECK(half_bits(blocks.subspan(66), 0) == 0x0038);            // ending in the scale's bytes swapped
    CHECK(reinterpret_cast<std::uintptr_t>(blocks.data()) % 64 == 0);  // in place in the map, aligned

    const io::gguf_tensor_info& ids = file.info("blk.0.ids");
    CHECK(ids.type == ggml_type::i32);
    CHECK(ids.shape() == std::vector<std::size_t>{1, 3});
    const auto loaded = file.load<std::int32_t, shaped::dim<"B">, shaped::dim<"T">>("blk.0.ids");
    CHECK(loaded.extents() == std::array<std::size_t, 2>{1, 3});
    CHECK(loaded(0, 0) == 7);
    CHECK(loaded(0, 1) == -3);
    CHECK(loaded(0, 2) == 2147483647);
}

TEST_CASE("gguf: rewriting gguf-py's file with shaped's writer gives its bytes exactly", "[io][gguf]") {
    // The same key/values and tensors in the same order: the writer lays out, pads and aligns
    // as llama.cpp's writer does, byte for byte.
    scratch_dir dir;
    const io::gguf_file file(gguf_py_fixture);
    std::vector<io::gguf_tensor_view> tensors;
    for (const io::gguf_tensor_info& tensor : file.tensors())
        tensors.push_back({tensor.name, tensor.type, tensor.ne, file.bytes(tensor.name)});
    io::write_gguf(dir / "again.gguf", file.metadata(), tensors);
    CHECK(file_bytes(dir / "again.gguf") == file_bytes(gguf_py_fixture));
}

TEST_CASE("gguf: metadata of every type round trips through the writer", "[io][gguf]") {
    scratch_dir dir;
    const std::vector<io::gguf_kv> written = every_type();
    io::gguf_writer out;
    for (const io::gguf_kv& entry : written) out.add(entry.key, entry.value);
    out.save(dir / "meta.gguf");
    CHECK(dir.entry_count() == 1);  // no temporary file left behind

    const io::gguf_file file(dir / "meta.gguf");
    CHECK(file.version() == 3);
    CHECK(file.alignment() == 32);
    CHECK(file.tensors().empty());
    REQUIRE(file.metadata().size() == written.size());
    for (std::size_t i = 0; i < written.size(); ++i) {
        INFO("key " << written[i].key);
        CHECK(file.metadata()[i].key == written[i].key);
        CHECK(io::type_of(file.metadata()[i].value) == io::type_of(written[i].value));
        CHECK(file.metadata()[i].value == written[i].value);
    }
    CHECK(file.get<std::string>("t.string").find('\0') == 4);  // the NUL kept
    CHECK(file.get_array<bool>("a.bool") == std::vector<bool>{true, false, false, true});
    CHECK(file.get_array<float>("a.empty").empty());
    CHECK(io::describe_type(file.value("a.array.strings")) == "array of array of string");
    CHECK(file.get_array<gguf_array>("a.array")[1] == gguf_array(std::vector<std::string>{"x"}));
    // A file without tensors is its header padded to the alignment.
    CHECK(file_bytes(dir / "meta.gguf").size() % 32 == 0);
}

TEST_CASE("gguf: tensors round trip, each at an aligned offset, loads reversing ggml's dims", "[io][gguf]") {
    scratch_dir dir;
    using R = shaped::dim<"R", 3>;
    using C = shaped::dim<"C", 5>;
    shaped::Generator gen(3);
    const auto w = shaped::randn<float, R, C>(gen);
    const auto d = shaped::randn<double, C>(gen);
    std::vector<std::byte> blocks(2 * 34);
    for (std::size_t i = 0; i < blocks.size(); ++i) blocks[i] = static_cast<std::byte>(i * 7);

    for (const std::uint32_t alignment : {1u, 32u, 256u}) {
        INFO("alignment " << alignment);
        io::gguf_writer out;
        out.add("general.alignment", alignment);
        out.add_tensor("w", w);
        out.add_tensor("w_doubled", w * 2.0f);  // an expression is evaluated
        out.add_tensor("d", d);
        out.add_tensor("blk.0.attn_k.weight", ggml_type::q8_0, {64, 1}, blocks);
        out.add_tensor("scalar", shaped::full<float>(2.5f));
        out.add_tensor("empty", ggml_type::q4_K, {256, 0}, {});
        out.save(dir / "t.gguf");

        const io::gguf_file file(dir / "t.gguf");
        CHECK(file.alignment() == alignment);
        CHECK(file.data_offset() % alignment == 0);
        CHECK(file.names() == std::vector<std::string>{"w", "w_doubled", "d", "blk.0.attn_k.weight", "scalar", "empty"});
        for (const io::gguf_tensor_info& tensor : file.tensors()) {
            INFO("tensor " << tensor.name);
            CHECK(tensor.offset % alignment == 0);
            CHECK(reinterpret_cast<std::uintptr_t>(file.bytes(tensor.name).data()) % alignment == 0);
        }
        CHECK(file.info("w").ne == std::vector<std::uint64_t>{5, 3});
        const auto loaded = file.load<float, R, C>("w");
        const auto doubled = file.load<float, R, shaped::dim<"C">>("w_doubled");
        for (std::size_t i = 0; i < w.size(); ++i) {
            CHECK(loaded.data()[i] == w.data()[i]);
            CHECK(doubled.data()[i] == 2.0f * w.data()[i]);
        }
        const auto loaded_d = file.load<double, C>("d");
        for (std::size_t i = 0; i < d.size(); ++i) CHECK(loaded_d.data()[i] == d.data()[i]);
        const auto q = file.bytes("blk.0.attn_k.weight");
        CHECK(std::vector<std::byte>(q.begin(), q.end()) == blocks);
        CHECK(file.info("scalar").ne.empty());
        CHECK(file.load<float>("scalar").item() == 2.5f);
        CHECK(file.info("empty").size == 0);
        CHECK(file.bytes("empty").empty());
    }
}

TEST_CASE("gguf: quantized matrices are written and loaded in their blocks, their format and dims checked", "[io][gguf]") {
    scratch_dir dir;
    using R = shaped::dim<"R", 3>;
    using K = shaped::dim<"K", 64>;
    shaped::Generator gen(5);
    const auto w = shaped::randn<float, R, K>(gen);
    const auto q8 = shaped::quantize<shaped::q8_0>(w);
    const auto q4 = shaped::quantize<shaped::q4_K>(shaped::randn<float, R, shaped::dim<"K", 256>>(gen));
    io::gguf_writer out;
    out.add_tensor("q8", q8);
    out.add_tensor("q4", q4);
    out.add_tensor("w", w);
    out.save(dir / "q.gguf");

    const io::gguf_file file(dir / "q.gguf");
    CHECK(file.info("q8").type == ggml_type::q8_0);
    CHECK(file.info("q8").ne == std::vector<std::uint64_t>{64, 3});
    CHECK(file.info("q4").type == ggml_type::q4_K);
    const auto loaded = file.load_quantized<shaped::q8_0, R, K>("q8");
    const auto stored = std::as_bytes(q8.blocks()), read = std::as_bytes(loaded.blocks());
    CHECK(std::vector<std::byte>(read.begin(), read.end()) == std::vector<std::byte>(stored.begin(), stored.end()));
    const auto back = shaped::dequantize(loaded), expected = shaped::dequantize(q8);
    for (std::size_t i = 0; i < back.size(); ++i) CHECK(back.data()[i] == expected.data()[i]);
    const auto dynamic = file.load_quantized<shaped::q4_K, shaped::dim<"R">, shaped::dim<"K">>("q4");
    CHECK(dynamic.extents() == std::array<std::size_t, 2>{3, 256});

    CHECK_THROWS_WITH((file.load_quantized<shaped::q4_0, R, K>("q8")), Contains(R"(tensor "q8" is q8_0, expected q4_0)"));
    CHECK_THROWS_WITH((file.load_quantized<shaped::q8_0, R, K>("w")), Contains("is f32, expected q8_0"));
    CHECK_THROWS_AS((file.load_quantized<shaped::q8_0, shaped::dim<"R", 4>, K>("q8")), shaped::shape_error);
    CHECK_THROWS_AS((file.load_quantized<shaped::q8_0, R, shaped::dim<"K", 96>>("q8")), shaped::shape_error);

    // dequantize gives the floats of any format shaped has, with its dims; f32 as load does.
    const auto floats = file.dequantize<R, K>("q8");
    for (std::size_t i = 0; i < floats.size(); ++i) CHECK(floats.data()[i] == expected.data()[i]);
    const auto q4_floats = file.dequantize<R, shaped::dim<"K">>("q4");
    const auto q4_expected = shaped::dequantize(q4);
    for (std::size_t i = 0; i < q4_floats.size(); ++i) CHECK(q4_floats.data()[i] == q4_expected.data()[i]);
    const auto w_floats = file.dequantize<R, K>("w");
    for (std::size_t i = 0; i < w.size(); ++i) CHECK(w_floats.data()[i] == w.data()[i]);
    CHECK_THROWS_AS((file.dequantize<K, R>("q8")), shaped::shape_error);

    // llama.cpp's gguf-py wrote this Q8_0 tensor: its first block's scale is 0.5, its first quant -16.
    const io::gguf_file python(std::string(SHAPED_TEST_DATA_DIR) + "/gguf_py_every_type.gguf");
    const auto attn_q = shaped::dequantize(python.load_quantized<shaped::q8_0, shaped::dim<"O">, shaped::dim<"I">>("blk.0.attn_q.weight"));
    CHECK(attn_q.extents() == std::array<std::size_t, 2>{2, 32});
    CHECK(attn_q(0, 0) == -8.0f);
    CHECK_THROWS_WITH((python.load_quantized<shaped::q8_0, shaped::dim<"O">, shaped::dim<"I">>("output_norm.weight")),
                      Contains("is f16, expected q8_0"));
    const auto norm = python.dequantize<shaped::dim<"C">>("output_norm.weight");  // f16: 1, -2, 0.5, 4, 8
    CHECK(std::vector<float>(norm.data(), norm.data() + norm.size()) == std::vector<float>{1, -2, 0.5f, 4, 8});
    CHECK_THROWS_WITH((python.dequantize<shaped::dim<"B">, shaped::dim<"T">>("blk.0.ids")),
                      Contains(R"(tensor "blk.0.ids" is i32, which shaped cannot dequantize)"));
}

TEST_CASE("gguf: typed getters and loads name the key or tensor, the expected and the found type", "[io][gguf]") {
    const io::gguf_file file(gguf_py_fixture);
    const auto fails = [](const auto& action) { return error_message<io::io_error>(action); };
    CHECK_THAT(fails([&] { (void)file.get<std::uint32_t>("test.float32"); }),
               Contains(R"(gguf_py_every_type.gguf: key "test.float32" is float32, expected uint32)"));
    CHECK_THAT(fails([&] { (void)file.get<std::int32_t>("test.uint32"); }), Contains("is uint32, expected int32"));
    CHECK_THAT(fails([&] { (void)file.get<std::uint32_t>("llama.context_length"); }),
               Contains(R"(no key "llama.context_length" (expected uint32))"));
    CHECK_THAT(fails([&] { (void)file.get_array<float>("tokenizer.ggml.token_type"); }),
               Contains(R"(key "tokenizer.ggml.token_type" is array of int32, expected array of float32)"));
    CHECK_THAT(fails([&] { (void)file.get_array<std::string>("test.string"); }), Contains("is string, expected array of string"));
    CHECK_THAT(fails([&] { (void)file.get<std::string>("tokenizer.ggml.tokens"); }), Contains("is array of string, expected string"));
    CHECK_THAT(fails([&] { (void)file.value("nope"); }), Contains(R"(no key "nope")"));
    CHECK(file.find("nope") == nullptr);
    CHECK_FALSE(file.has_key("nope"));
    CHECK(file.has_key("test.bool"));

    CHECK_THAT(fails([&] { (void)file.info("output.weight"); }), Contains(R"(no tensor named "output.weight"; the file holds 4 tensors)"));
    CHECK_THAT(fails([&] { (void)file.load<float, shaped::dim<"N">>("output_norm.weight"); }),
               Contains(R"(tensor "output_norm.weight": holds f16, but the tensor's elements are float32)"));
    CHECK_THAT(fails([&] { (void)file.load<double, shaped::dim<"A">, shaped::dim<"B">>("token_embd.weight"); }),
               Contains("holds f32 (float32), but the tensor's elements are float64"));
    const std::string shape = error_message<shaped::shape_error>([&] {
        (void)file.load<float, shaped::dim<"C", 4>, shaped::dim<"V", 3>>("token_embd.weight");
    });
    CHECK_THAT(shape, Contains(R"(tensor "token_embd.weight": the file's shape (3, 4) does not fit)"));
    CHECK_THAT(shape, Contains("transposed"));
}

TEST_CASE("gguf: copies share the map, whose bytes outlive the first file", "[io][gguf]") {
    std::optional<io::gguf_file> first(std::in_place, gguf_py_fixture);
    const io::gguf_file copy = *first;
    const std::span<const std::byte> bytes = first->bytes("token_embd.weight");
    first.reset();
    float value = 0;
    std::memcpy(&value, bytes.data() + 4, sizeof value);
    CHECK(value == -0.5f);
    CHECK(copy.bytes("token_embd.weight").data() == bytes.data());
}

namespace {
// Kilobytes of the mapping holding `address` resident in this process (Linux's /proc/self/smaps).
std::size_t resident_kb_of_mapping(const void* address) {
    std::ifstream smaps("/proc/self/smaps");
    const auto at = reinterpret_cast<std::uintptr_t>(address);
    bool inside = false;
    for (std::string line; std::getline(smaps, line);) {
        std::uintptr_t first = 0, end = 0;
        char dash = 0;
        std::istringstream range(line);
        if (range >> std::hex >> first >> dash >> end && dash == '-') inside = first <= at && at < end;
        else if (inside && line.rfind("Rss:", 0) == 0) return std::stoul(line.substr(4));
    }
    FAIL("no mapping holds the tensor's bytes");
    return 0;
}
}  // namespace

TEST_CASE("gguf: loading a tensor releases its pages of the map, whose bytes still read", "[io][gguf]") {
    scratch_dir dir;
    using R = shaped::dim<"R", 64>;
    using C = shaped::dim<"C", 1024>;  // 256 KiB of floats
    shaped::Generator gen(5);
    const auto w = shaped::randn<float, R, C>(gen);
    io::gguf_writer out;
    out.add_tensor("w", w);
    out.save(dir / "w.gguf");
    const io::gguf_file file(dir / "w.gguf");
    const std::span<const std::byte> bytes = file.bytes("w");
    float sum = 0;  // every page touched: resident
    for (std::size_t i = 0; i < bytes.size(); i += 1024) sum += static_cast<float>(bytes[i]);
    CHECK(sum >= 0);
    CHECK(resident_kb_of_mapping(bytes.data()) >= 256);
    const auto loaded = file.load<float, R, C>("w");
    CHECK(resident_kb_of_mapping(bytes.data()) < 16);  // the header's page, at most a few more
    CHECK(std::memcmp(bytes.data(), w.data(), bytes.size()) == 0);  // read back from the file
    CHECK(std::memcmp(loaded.data(), w.data(), bytes.size()) == 0);
}

TEST_CASE("gguf: every truncation of a valid file is an io_error", "[io][gguf]") {
    // Its last tensor's bytes end the file (32 bytes, a multiple of the alignment: no padding
    // follows), so that every byte of it is needed.
    scratch_dir dir;
    io::gguf_writer out;
    out.add("general.name", std::string("truncated"));
    out.add("a.scores", gguf_array(std::vector<float>{1, 2, 3}));
    out.add("a.tokens", gguf_array(std::vector<std::string>{"ab", "c"}));
    out.add("a.nested", gguf_array(std::vector<gguf_array>{gguf_array(std::vector<std::uint8_t>{1})}));
    out.add("t.bool", true);
    out.add_tensor("first", ggml_type::f16, {3}, std::vector<std::byte>(6, std::byte{1}));
    out.add_tensor("last", ggml_type::f32, {8}, std::vector<std::byte>(32, std::byte{2}));
    out.save(dir / "whole.gguf");
    const std::vector<std::byte> whole = file_bytes(dir / "whole.gguf");
    REQUIRE_NOTHROW(io::gguf_file(dir / "whole.gguf"));
    for (std::size_t size = 0; size < whole.size(); ++size) {
        INFO("the first " << size << " of " << whole.size() << " bytes");
        write_file(dir / "cut.gguf", std::span(whole).first(size));
        CHECK_THROWS_AS(io::gguf_file(dir / "cut.gguf"), io::io_error);
    }

    // gguf-py's file, cut anywhere before its last tensor's last byte.
    const std::vector<std::byte> fixture = file_bytes(gguf_py_fixture);
    const io::gguf_file whole_fixture(gguf_py_fixture);
    const io::gguf_tensor_info& last = whole_fixture.tensors().back();
    const std::size_t needed = whole_fixture.data_offset() + last.offset + last.size;
    for (std::size_t size = 0; size < needed; ++size) {
        INFO("the first " << size << " bytes of gguf-py's file");
        write_file(dir / "cut.gguf", std::span(fixture).first(size));
        CHECK_THROWS_AS(io::gguf_file(dir / "cut.gguf"), io::io_error);
    }
}

TEST_CASE("gguf: a file built by hand from the format reads", "[io][gguf]") {
    scratch_dir dir;
    const hand_file hand;
    write_file(dir / "hand.gguf", hand.bytes());
    const io::gguf_file file(dir / "hand.gguf");
    CHECK(file.get<std::string>("general.name") == "tiny");
    CHECK(file.info("w").shape() == std::vector<std::size_t>{2, 4});
    const auto w = file.bytes("w");
    REQUIRE(w.size() == 32);
    CHECK(w[31] == std::byte{31});

    // Version 2 has version 3's layout; a file without tensors may end at its last value.
    hand_file v2;
    v2.version = 2;
    write_file(dir / "v2.gguf", v2.bytes());
    CHECK(io::gguf_file(dir / "v2.gguf").version() == 2);
    hand_file no_tensors;
    no_tensors.tensors.clear();
    no_tensors.alignment = 1;
    no_tensors.data_bytes = 0;
    write_file(dir / "meta.gguf", no_tensors.bytes());
    CHECK(io::gguf_file(dir / "meta.gguf").tensors().empty());
    // Holes between tensors and bytes after the last are allowed, as llama.cpp's loader allows them.
    hand_file holes;
    holes.tensors = {f32_tensor("a", {8}, 64), f32_tensor("b", {8}, 0)};
    holes.data_bytes = 200;
    write_file(dir / "holes.gguf", holes.bytes());
    CHECK(io::gguf_file(dir / "holes.gguf").info("a").offset == 64);
}

TEST_CASE("gguf: every corrupt field is an io_error naming the key or tensor and the problem", "[io][gguf]") {
    scratch_dir dir;
    const auto refused = [&](const hand_file& hand) { return open_error(dir, hand.bytes()); };
    hand_file hand;

    SECTION("the magic") {
        hand.magic = "GGUX";
        CHECK_THAT(refused(hand), Contains("does not start with the magic \"GGUF\" (it starts \"GGUX\""));
        CHECK_THAT(open_error(dir, {}), Contains("does not start with the magic"));
    }
    SECTION("version 1, 0, 4 and a byte-swapped 3") {
        hand.version = 1;
        CHECK_THAT(refused(hand), Contains("GGUF version 1 is not supported"));
        hand.version = 0;
        CHECK_THAT(refused(hand), Contains("GGUF version 0"));
        hand.version = 4;
        CHECK_THAT(refused(hand), Contains("GGUF version 4 is not supported (shaped reads versions 2 and 3)"));
        hand.version = 0x03000000;
        CHECK_THAT(refused(hand), Contains("big-endian"));
    }
    SECTION("counts larger than the file could hold") {
        hand.kv_count = std::uint64_t{1} << 62;
        CHECK_THAT(refused(hand), Contains("the header claims 4611686018427387904 key/values"));
        hand.kv_count.reset();
        hand.tensor_count = ~std::uint64_t{0};
        CHECK_THAT(refused(hand), Contains("the header claims 18446744073709551615 tensors"));
    }
    SECTION("a string's length past the end") {
        hand.kvs = {kv("general.name", 8, image().u64(1000).raw("abc"))};
        const std::string message = refused(hand);
        CHECK_THAT(message, Contains(R"(key "general.name": a string of 1000 bytes runs past the end of the file)"));
        hand.kvs = {image().u64(~std::uint64_t{0}).raw("key")};
        CHECK_THAT(refused(hand), Contains("key 0's name: a string of 18446744073709551615 bytes runs past the end"));
    }
    SECTION("a huge array count") {
        hand.kvs = {kv("tokenizer.ggml.tokens", 9, image().u32(8).u64(std::uint64_t{1} << 60))};
        CHECK_THAT(refused(hand), Contains(R"(key "tokenizer.ggml.tokens": an array of 1152921504606846976 string elements cannot fit)"));
        hand.kvs = {kv("tokenizer.ggml.scores", 9, image().u32(6).u64(~std::uint64_t{0} / 4 + 1))};
        CHECK_THAT(refused(hand), Contains(R"(key "tokenizer.ggml.scores": an array of 4611686018427387904 float32 elements cannot fit)"));
        hand.kvs = {kv("a", 9, image().u32(9).u64(std::uint64_t{1} << 40))};
        CHECK_THAT(refused(hand), Contains("array elements cannot fit"));
    }
    SECTION("arrays nested too deep") {
        image value;
        for (int i = 0; i < 20; ++i) value.u32(9).u64(1);
        hand.kvs = {kv("deep", 9, value)};
        CHECK_THAT(refused(hand), Contains(R"(key "deep": arrays nested more than 16 deep)"));
    }
    SECTION("an unknown value type, a bool that is neither 0 nor 1") {
        hand.kvs = {kv("odd", 13, image().u32(0))};
        CHECK_THAT(refused(hand), Contains(R"(key "odd": unknown value type id 13)"));
        hand.kvs = {kv("odd", 9, image().u32(77).u64(1))};
        CHECK_THAT(refused(hand), Contains(R"(key "odd": an array of unknown value type id 77)"));
        hand.kvs = {kv("flag", 7, image().put(std::uint8_t{2}))};
        CHECK_THAT(refused(hand), Contains(R"(key "flag": a bool of byte value 2, neither 0 nor 1)"));
    }
    SECTION("a duplicate or empty key, a duplicate tensor name") {
        hand.kvs = {kv_u32("llama.block_count", 1), kv_string("general.name", "x"), kv_u32("llama.block_count", 2)};
        CHECK_THAT(refused(hand), Contains(R"(key "llama.block_count" appears twice)"));
        hand.kvs = {kv_u32("", 1)};
        CHECK_THAT(refused(hand), Contains("key 0 has an empty name"));
        hand.kvs = {};
        hand.tensors = {f32_tensor("w", {4, 2}, 0), f32_tensor("w", {4, 2}, 32)};
        hand.data_bytes = 64;
        CHECK_THAT(refused(hand), Contains(R"(tensor "w" appears twice)"));
    }
    SECTION("general.alignment: wrong-typed, zero, not a power of two") {
        hand.kvs = {kv("general.alignment", 5, image().u32(32))};
        CHECK_THAT(refused(hand), Contains(R"(key "general.alignment" is int32, expected uint32)"));
        hand.kvs = {kv("general.alignment", 10, image().u64(32))};
        CHECK_THAT(refused(hand), Contains(R"(key "general.alignment" is uint64, expected uint32)"));
        hand.kvs = {kv_u32("general.alignment", 0)};
        CHECK_THAT(refused(hand), Contains(R"(key "general.alignment" is 0, not a power of two)"));
        hand.kvs = {kv_u32("general.alignment", 48)};
        CHECK_THAT(refused(hand), Contains(R"(key "general.alignment" is 48, not a power of two)"));
    }
    SECTION("5 dims") {
        hand.tensors[0].ne = {1, 1, 1, 1, 32};
        CHECK_THAT(refused(hand), Contains(R"(tensor "w" has 5 dims, more than ggml's 4)"));
        hand.tensors[0].ne = {};
        hand.tensors[0].n_dims = 0xffffffff;
        CHECK_THAT(refused(hand), Contains(R"(tensor "w" has 4294967295 dims)"));
    }
    SECTION("an unknown or removed ggml type id") {
        hand.tensors[0].type = 99;
        CHECK_THAT(refused(hand), Contains(R"(tensor "w": unknown ggml type id 99)"));
        hand.tensors[0].type = 4;  // Q4_2, removed from ggml
        CHECK_THAT(refused(hand), Contains(R"(tensor "w": unknown ggml type id 4)"));
        hand.tensors[0].type = 43;
        CHECK_THAT(refused(hand), Contains("unknown ggml type id 43"));
    }
    SECTION("ne[0] not a whole number of blocks") {
        hand.tensors[0].type = 8;  // q8_0
        hand.tensors[0].ne = {33, 1};
        CHECK_THAT(refused(hand), Contains(R"(tensor "w": ne[0] = 33 is not a multiple of q8_0's block of 32 elements)"));
        hand.tensors[0].type = 12;  // q4_K
        hand.tensors[0].ne = {};
        CHECK_THAT(refused(hand), Contains("ne[0] = 1 is not a multiple of q4_K's block of 256 elements"));
    }
    SECTION("an element or byte count that overflows") {
        hand.tensors[0].ne = {std::uint64_t{1} << 32, std::uint64_t{1} << 32};
        CHECK_THAT(refused(hand), Contains(R"(tensor "w": ne (4294967296, 4294967296) holds more elements than ggml's int64_t counts)"));
        hand.tensors[0].ne = {std::uint64_t{1} << 62, 0};  // empty, but ggml counts its extents all the same
        CHECK_THAT(refused(hand), Contains("spans more bytes than an array can address"));
        hand.tensors[0].ne = {std::uint64_t{1} << 61};  // 2^61 elements of 4 bytes
        CHECK_THAT(refused(hand), Contains(R"(tensor "w": f32 ne (2305843009213693952) spans more bytes than an array can address)"));
        hand.tensors[0].ne = {~std::uint64_t{0}};
        CHECK_THAT(refused(hand), Contains(R"(tensor "w": ne[0] is 18446744073709551615, more than ggml's int64_t extents hold)"));
    }
    SECTION("a misaligned offset") {
        hand.tensors[0].offset = 8;
        CHECK_THAT(refused(hand), Contains(R"(tensor "w": offset 8 is not a multiple of the alignment 32)"));
        hand.kvs = {kv_u32("general.alignment", 8)};  // the same offset, aligned to what the file claims
        hand.alignment = 8;
        hand.data_bytes = 40;
        write_file(dir / "aligned.gguf", hand.bytes());
        CHECK(io::gguf_file(dir / "aligned.gguf").alignment() == 8);
    }
    SECTION("overlapping tensors") {
        hand.tensors = {f32_tensor("a", {16}, 0), f32_tensor("b", {8}, 32)};
        hand.data_bytes = 64;
        CHECK_THAT(refused(hand), Contains(R"(tensor "a" [0, 64) and tensor "b" [32, 64) overlap in the data section)"));
    }
    SECTION("a tensor past the end") {
        hand.data_bytes = 31;
        CHECK_THAT(refused(hand), Contains(R"(tensor "w": bytes [0, 32) of the data section reach past the end of the file)"));
        hand.data_bytes = 32;
        hand.tensors[0].offset = std::uint64_t{1} << 63;
        CHECK_THAT(refused(hand), Contains("reach past the end of the file, which holds 32 bytes of data"));
        hand.tensors[0].offset = 0;
        hand.data_bytes = 0;
        hand.alignment = 1;  // the padding before the data section is missing too
        CHECK_THAT(refused(hand), Contains("the data section would start at byte"));
    }
    SECTION("a truncated tensor info") {
        image cut;
        cut.raw("GGUF").u32(3).u64(1).u64(0).str("w").u32(4).u64(4).u64(1).u64(1);  // 3 of its 4 ne
        CHECK_THAT(open_error(dir, cut.bytes), Contains(R"(the file ends inside tensor "w"'s ne)"));
    }
}

TEST_CASE("gguf: the writer refuses what llama.cpp could not read, and leaves the old file", "[io][gguf]") {
    scratch_dir dir;
    const fs::path path = dir / "out.gguf";
    write_file(path, std::vector<std::byte>(3, std::byte{7}));
    const auto refused = [&](const io::gguf_writer& out) {
        const std::string message = error_message<io::io_error>([&] { out.save(path); });
        CHECK_THAT(message, Contains("shaped::io::write_gguf: "));
        CHECK(file_bytes(path) == std::vector<std::byte>(3, std::byte{7}));
        CHECK(dir.entry_count() == 1);
        return message;
    };
    io::gguf_writer out;
    SECTION("a key given twice, an empty key") {
        out.add("general.name", std::string("a"));
        out.add("general.name", std::string("b"));
        CHECK_THAT(refused(out), Contains(R"(key "general.name" is given twice)"));
        io::gguf_writer empty;
        empty.add("", true);
        CHECK_THAT(refused(empty), Contains("a key is empty"));
    }
    SECTION("general.alignment wrong-typed or not a power of two") {
        out.add("general.alignment", std::int32_t{32});
        CHECK_THAT(refused(out), Contains(R"(key "general.alignment" is int32, expected uint32)"));
        io::gguf_writer odd;
        odd.add("general.alignment", std::uint32_t{24});
        CHECK_THAT(refused(odd), Contains("is 24, not a power of two"));
    }
    SECTION("tensors") {
        out.add_tensor("w", ggml_type::f32, {4}, std::vector<std::byte>(12));
        CHECK_THAT(refused(out), Contains(R"(tensor "w": 12 bytes of data, but f32 ne (4) needs 16)"));
        io::gguf_writer twice;
        twice.add_tensor("w", ggml_type::f32, {1}, std::vector<std::byte>(4));
        twice.add_tensor("w", ggml_type::f32, {1}, std::vector<std::byte>(4));
        CHECK_THAT(refused(twice), Contains(R"(tensor "w" is given twice)"));
        io::gguf_writer blocks;
        blocks.add_tensor("q", ggml_type::q4_0, {48, 1}, std::vector<std::byte>(27));
        CHECK_THAT(refused(blocks), Contains(R"(tensor "q": ne[0] = 48 is not a multiple of q4_0's block of 32 elements)"));
        io::gguf_writer dims;
        dims.add_tensor("x", ggml_type::f32, {1, 1, 1, 1, 1}, std::vector<std::byte>(4));
        CHECK_THAT(refused(dims), Contains(R"(tensor "x" has 5 dims)"));
        io::gguf_writer long_name;
        long_name.add_tensor(std::string(64, 'n'), ggml_type::f32, {1}, std::vector<std::byte>(4));
        CHECK_THAT(refused(long_name), Contains("a name of 64 bytes, more than llama.cpp's 63"));
    }
    SECTION("arrays nested deeper than the reader reads") {
        gguf_array deep(std::vector<std::int32_t>{1});
        for (int i = 0; i < 16; ++i) deep = gguf_array(std::vector<gguf_array>{deep});
        out.add("deep", deep);
        CHECK_THAT(refused(out), Contains(R"(key "deep": arrays nested more than 16 deep)"));
    }
    SECTION("an element type ggml has no type for") {
        const std::string message = error_message<io::io_error>([&] { out.add_tensor("mask", shaped::ones<bool, shaped::dim<"T", 2>>()); });
        CHECK_THAT(message, Contains(R"(tensor "mask": ggml has no type for bool elements)"));
    }
}
