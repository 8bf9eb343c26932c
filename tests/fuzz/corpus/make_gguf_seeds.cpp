// Writes the GGUF seed files of tests/fuzz/corpus/gguf/ with shaped's own writer: a tiny
// llama-like model (hyperparameters, a scored vocabulary, tensors of the common ggml types), a
// file of every metadata value type without tensors, and edge cases the reader must accept
// (alignment 1, a 0-d and an empty tensor, version 2, arrays of arrays). The seed that llama.cpp's
// gguf-py wrote comes from tools/make_gguf_fixture.py. Built and run by hand, from the repository:
//
//   g++ -std=c++20 -O1 -DXTENSOR_USE_XSIMD -Iinclude -isystem /usr/include/x86_64-linux-gnu/openblas-pthread \
//       tests/fuzz/corpus/make_gguf_seeds.cpp src/gguf.cpp src/io_core.cpp src/shape_error.cpp \
//       -o /tmp/make_gguf_seeds && /tmp/make_gguf_seeds tests/fuzz/corpus/gguf

#include <shaped/io/gguf.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {

namespace io = shaped::io;
using io::gguf_array;
using shaped::ggml_type;

// Bytes that differ from one to the next: tensors' values only need to be bytes.
std::vector<std::byte> pattern(std::size_t size) {
    std::vector<std::byte> bytes(size);
    for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<std::byte>((i * 37 + 11) & 0xff);
    return bytes;
}

std::size_t size_of(ggml_type type, std::uint64_t elements) {
    const io::ggml_type_traits& traits = io::ggml_traits(type);
    return elements / traits.block_size * traits.block_bytes;
}

void add_raw(io::gguf_writer& out, std::string name, ggml_type type, std::vector<std::uint64_t> ne) {
    std::uint64_t elements = 1;
    for (const std::uint64_t extent : ne) elements *= extent;
    out.add_tensor(std::move(name), type, std::move(ne), pattern(size_of(type, elements)));
}

void tiny_llama(const std::filesystem::path& path) {
    io::gguf_writer out;
    out.add("general.architecture", std::string("llama"));
    out.add("general.name", std::string("tiny"));
    out.add("llama.block_count", std::uint32_t{1});
    out.add("llama.context_length", std::uint32_t{32});
    out.add("llama.embedding_length", std::uint32_t{32});
    out.add("llama.feed_forward_length", std::uint32_t{256});
    out.add("llama.attention.head_count", std::uint32_t{4});
    out.add("llama.attention.layer_norm_rms_epsilon", 1e-5f);
    out.add("tokenizer.ggml.model", std::string("llama"));
    out.add("tokenizer.ggml.tokens", gguf_array(std::vector<std::string>{"<unk>", "<s>", "</s>", "\xe2\x96\x81" "a", "b"}));
    out.add("tokenizer.ggml.scores", gguf_array(std::vector<float>{0, 0, 0, -1.5f, -2}));
    out.add("tokenizer.ggml.token_type", gguf_array(std::vector<std::int32_t>{2, 3, 3, 1, 1}));
    out.add("tokenizer.ggml.bos_token_id", std::uint32_t{1});
    out.add("tokenizer.ggml.eos_token_id", std::uint32_t{2});
    add_raw(out, "token_embd.weight", ggml_type::q8_0, {32, 5});
    add_raw(out, "blk.0.attn_norm.weight", ggml_type::f32, {32});
    add_raw(out, "blk.0.attn_q.weight", ggml_type::q4_0, {32, 32});
    add_raw(out, "blk.0.attn_k.weight", ggml_type::f16, {32, 32});
    add_raw(out, "blk.0.ffn_up.weight", ggml_type::q4_K, {256, 2});
    add_raw(out, "blk.0.ffn_down.weight", ggml_type::q6_K, {256, 1});
    add_raw(out, "output_norm.weight", ggml_type::bf16, {32});
    add_raw(out, "output.weight", ggml_type::f32, {32, 5});
    out.save(path);
}

void every_type(const std::filesystem::path& path) {
    io::gguf_writer out;
    out.add("t.uint8", std::uint8_t{255});
    out.add("t.int8", std::int8_t{-1});
    out.add("t.uint16", std::uint16_t{65535});
    out.add("t.int16", std::int16_t{-2});
    out.add("t.uint32", std::uint32_t{4000000000u});
    out.add("t.int32", std::int32_t{-3});
    out.add("t.float32", 0.5f);
    out.add("t.bool", true);
    out.add("t.string", std::string("text"));
    out.add("t.uint64", std::uint64_t{1} << 63);
    out.add("t.int64", std::int64_t{-4});
    out.add("t.float64", -0.25);
    out.add("a.uint8", gguf_array(std::vector<std::uint8_t>{1, 2}));
    out.add("a.int16", gguf_array(std::vector<std::int16_t>{-1}));
    out.add("a.uint64", gguf_array(std::vector<std::uint64_t>{7}));
    out.add("a.float64", gguf_array(std::vector<double>{1.5}));
    out.add("a.bool", gguf_array(std::vector<bool>{true, false}));
    out.add("a.empty", gguf_array(std::vector<std::int32_t>{}));
    out.save(path);
}

void edge_cases(const std::filesystem::path& path) {
    io::gguf_writer out;
    out.add("general.alignment", std::uint32_t{1});
    out.add("a.nested", gguf_array(std::vector<gguf_array>{gguf_array(std::vector<std::string>{"x", ""}),
                                                           gguf_array(std::vector<gguf_array>{gguf_array(std::vector<float>{1})})}));
    out.add_tensor("scalar", ggml_type::f32, {}, pattern(4));
    out.add_tensor("empty", ggml_type::q8_0, {32, 0}, {});
    add_raw(out, "i8", ggml_type::i8, {3});
    add_raw(out, "i64", ggml_type::i64, {1, 2, 1, 2});
    add_raw(out, "f64", ggml_type::f64, {2, 1, 1});
    out.save(path);
}

// As its writer wrote it, but version 2 (the same layout).
void version_2(const std::filesystem::path& from, const std::filesystem::path& path) {
    std::filesystem::copy_file(from, path, std::filesystem::copy_options::overwrite_existing);
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(4);
    file.put(2);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: make_gguf_seeds DIRECTORY\n");
        return 2;
    }
    const std::filesystem::path dir = argv[1];
    std::filesystem::create_directories(dir);
    tiny_llama(dir / "tiny_llama.gguf");
    every_type(dir / "every_type.gguf");
    edge_cases(dir / "edge_cases.gguf");
    version_2(dir / "every_type.gguf", dir / "version_2.gguf");
    return 0;
}
