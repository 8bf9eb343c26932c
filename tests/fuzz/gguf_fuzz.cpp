// libFuzzer target for the GGUF reader. It maps a path, so each input is written to a file of
// this process's own on a memory filesystem and opened; then every key is read through the
// typed getters, every tensor's bytes are compared with the input's and loaded as a user would,
// and what was read is written back with the writer and read again, which must give the same
// file; a Llama tokenizer is read from its tokenizer.ggml.* keys. io_error and shape_error are the reader's answers to bad input; any other exception, a
// broken invariant or a sanitizer report is a bug.

#include <shaped/io/gguf.hpp>
#include <shaped/text/llama_tokenizer.hpp>

#include "fuzz_support.hpp"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace {

using fuzz_support::require;
namespace io = shaped::io;

using A = shaped::dim<"A">;
using B = shaped::dim<"B">;
using C = shaped::dim<"C">;
using D = shaped::dim<"D">;

// Per process, so that the jobs of -fork or -jobs never share a file; in memory, so that the
// writes per input cost no disk I/O.
std::filesystem::path scratch_path(const char* what) {
    const std::filesystem::path shm = "/dev/shm";
    std::error_code error;
    const auto dir = std::filesystem::is_directory(shm, error) ? shm : std::filesystem::temp_directory_path();
    return dir / ("shaped_gguf_fuzz." + std::to_string(::getpid()) + "." + what);
}
const std::filesystem::path& input_path() {
    static const std::filesystem::path path = scratch_path("input");
    return path;
}
const std::filesystem::path& rewritten_path() {
    static const std::filesystem::path path = scratch_path("rewritten");
    return path;
}

void remove_scratch() {
    std::error_code ignored;
    std::filesystem::remove(input_path(), ignored);
    std::filesystem::remove(rewritten_path(), ignored);
}

void write_input(std::span<const std::uint8_t> bytes) {
    std::FILE* file = std::fopen(input_path().c_str(), "wb");
    require(file != nullptr, "the fuzz input file can be created");
    const bool written = bytes.empty() || std::fwrite(bytes.data(), 1, bytes.size(), file) == bytes.size();
    require(std::fclose(file) == 0 && written, "the fuzz input file can be written");
}

std::vector<char> whole_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The byte count of a tensor, computed here from the block sizes: whole blocks of ne[0], times
// the other extents.
std::optional<std::size_t> expected_size(const io::gguf_tensor_info& tensor) {
    const io::ggml_type_traits& traits = io::ggml_traits(tensor.type);
    const std::uint64_t row = tensor.ne.empty() ? 1 : tensor.ne[0];
    if (row % traits.block_size != 0) return std::nullopt;
    std::vector<std::size_t> shape(tensor.ne.begin(), tensor.ne.end());
    if (!shape.empty()) shape[0] /= traits.block_size;
    return fuzz_support::byte_count(shape, traits.block_bytes);
}

// load<T, Ds...>, which may refuse only with io_error or shape_error; a loaded tensor holds the
// tensor's bytes, its dims ne reversed.
template <class T, class... Ds>
bool try_load(const io::gguf_file& file, const io::gguf_tensor_info& tensor) {
    try {
        const auto loaded = file.load<T, Ds...>(tensor.name);
        fuzz_support::require_loaded_as(loaded, tensor.shape(), file.bytes(tensor.name));
        return true;
    } catch (const io::io_error&) {
    } catch (const shaped::shape_error&) {
    }
    return false;
}

// Every rank 0..4 with dynamic dims, of which exactly the tensor's own rank loads.
template <class T>
void load_as(const io::gguf_file& file, const io::gguf_tensor_info& tensor) {
    const std::size_t rank = tensor.ne.size();
    require(try_load<T>(file, tensor) == (rank == 0), "a 0-d tensor loads exactly a 0-d tensor");
    require(try_load<T, A>(file, tensor) == (rank == 1), "a rank-1 tensor loads exactly a 1-dim tensor");
    require(try_load<T, A, B>(file, tensor) == (rank == 2), "a rank-2 tensor loads exactly a 2-dim tensor");
    require(try_load<T, A, B, C>(file, tensor) == (rank == 3), "a rank-3 tensor loads exactly a 3-dim tensor");
    require(try_load<T, A, B, C, D>(file, tensor) == (rank == 4), "a rank-4 tensor loads exactly a 4-dim tensor");
}

template <class T>
void refuse_as(const io::gguf_file& file, const io::gguf_tensor_info& tensor) {
    try {
        (void)file.load<T, A>(tensor.name);
    } catch (const io::io_error&) {
        return;
    }
    require(false, "load refuses an element type the tensor does not hold");
}

// dequantize<Ds...> of the tensor's rank: the dequantizers read untrusted blocks (any scale, any
// quant bits), which must give as many floats as the tensor has elements, or io_error for a type
// shaped has no format for, or shape_error for extents whose floats no array can address (an
// empty tensor of extents {0, 2^62}: ggml counts it, a Tensor of floats would overflow its bytes).
void dequantize_as(const io::gguf_file& file, const io::gguf_tensor_info& tensor) {
    const auto check = [&](const auto& floats) {
        std::size_t elements = 1;
        for (const std::uint64_t extent : tensor.ne) elements *= static_cast<std::size_t>(extent);
        require(floats.size() == elements, "a dequantized tensor has the tensor's elements");
    };
    try {
        switch (tensor.ne.size()) {
            case 0: check(file.dequantize<>(tensor.name)); break;
            case 1: check(file.dequantize<A>(tensor.name)); break;
            case 2: check(file.dequantize<A, B>(tensor.name)); break;
            case 3: check(file.dequantize<A, B, C>(tensor.name)); break;
            default: check(file.dequantize<A, B, C, D>(tensor.name)); break;
        }
    } catch (const io::io_error&) {
        const bool dequantizable = tensor.type == shaped::ggml_type::f32 || tensor.type == shaped::ggml_type::f16 ||
                                   tensor.type == shaped::ggml_type::bf16 || tensor.type == shaped::ggml_type::q8_0 ||
                                   tensor.type == shaped::ggml_type::q4_0 || tensor.type == shaped::ggml_type::q4_K ||
                                   tensor.type == shaped::ggml_type::q6_K;
        require(!dequantizable, "dequantize refuses only a type shaped has no format for");
    } catch (const shaped::shape_error&) {
    }
}

void exercise_tensor(const io::gguf_file& file, const io::gguf_tensor_info& tensor, std::span<const std::uint8_t> input) {
    require(file.contains(tensor.name) && &file.info(tensor.name) == &tensor, "info() finds every tensor of tensors()");
    require(tensor.ne.size() <= 4, "a tensor has at most 4 dims");
    require(tensor.offset % file.alignment() == 0, "a tensor's offset is aligned");
    require(expected_size(tensor) == tensor.size, "a tensor's size is whole blocks of its type");
    const std::span<const std::byte> bytes = file.bytes(tensor.name);
    require(bytes.size() == tensor.size, "bytes() spans the tensor's size");
    const std::size_t begin = file.data_offset() + static_cast<std::size_t>(tensor.offset);
    require(begin <= input.size() && tensor.size <= input.size() - begin, "a tensor's bytes lie inside the file");
    require(tensor.size == 0 || std::memcmp(bytes.data(), input.data() + begin, tensor.size) == 0,
            "bytes() are the file's bytes at the data section plus the offset");

    if (tensor.type == shaped::ggml_type::f32) { load_as<float>(file, tensor); refuse_as<double>(file, tensor); }
    else if (tensor.type == shaped::ggml_type::f64) { load_as<double>(file, tensor); refuse_as<float>(file, tensor); }
    else if (tensor.type == shaped::ggml_type::i32) { load_as<std::int32_t>(file, tensor); refuse_as<std::int64_t>(file, tensor); }
    else if (tensor.type == shaped::ggml_type::i64) { load_as<std::int64_t>(file, tensor); refuse_as<float>(file, tensor); }
    else refuse_as<float>(file, tensor);
    dequantize_as(file, tensor);
}

// get<T> of the value's own type gives it; of another type, io_error.
template <class T>
void get_as(const io::gguf_file& file, const io::gguf_kv& entry) {
    const bool holds = std::holds_alternative<T>(entry.value);
    try {
        const T& value = file.get<T>(entry.key);
        require(holds && &value == &std::get<T>(entry.value), "get<T> gives the value it holds");
    } catch (const io::io_error&) {
        require(!holds, "get<T> refuses only a value of another type");
    }
}

void exercise_metadata(const io::gguf_file& file) {
    std::set<std::string_view> keys;
    for (const io::gguf_kv& entry : file.metadata()) {
        require(!entry.key.empty() && keys.insert(entry.key).second, "keys are nonempty and distinct");
        require(file.find(entry.key) == &entry.value && file.has_key(entry.key), "find() finds every key");
        require(!io::describe_type(entry.value).empty(), "every value's type can be described");
        get_as<std::uint32_t>(file, entry);
        get_as<float>(file, entry);
        get_as<std::string>(file, entry);
        get_as<bool>(file, entry);
        if (const auto* array = std::get_if<io::gguf_array>(&entry.value)) {
            require(io::type_of(entry.value) == io::gguf_type::array, "an array's type id is array");
            try {
                require(file.get_array<std::string>(entry.key).size() == array->size(), "get_array gives the whole array");
            } catch (const io::io_error&) {
                require(array->element_type() != io::gguf_type::string, "get_array refuses only another element type");
            }
        }
    }
    const std::string missing = "missing." + std::to_string(keys.size());
    if (!file.has_key(missing)) {
        try {
            (void)file.get<std::uint32_t>(missing);
            require(false, "get<T> refuses a key the file does not hold");
        } catch (const io::io_error&) {
        }
    }
}

// What was read, written again: the same key/values and tensors (a fixpoint: written once more,
// the same bytes). The writer refuses a tensor name longer than llama.cpp reads, which the
// reader accepts.
void exercise_rewrite(const io::gguf_file& file) {
    std::vector<io::gguf_tensor_view> views;
    bool writable = true;
    for (const io::gguf_tensor_info& tensor : file.tensors()) {
        views.push_back({tensor.name, tensor.type, tensor.ne, file.bytes(tensor.name)});
        writable = writable && tensor.name.size() < 64;
    }
    try {
        io::write_gguf(rewritten_path(), file.metadata(), views);
        require(writable, "the writer refuses only names longer than llama.cpp reads");
    } catch (const io::io_error&) {
        require(!writable, "the writer writes whatever the reader read");
        return;
    }
    const io::gguf_file again(rewritten_path());
    require(again.version() == 3 && again.alignment() == file.alignment(), "the rewritten file is version 3, as aligned");
    require(again.metadata().size() == file.metadata().size(), "the rewritten file has every key");
    for (std::size_t i = 0; i < file.metadata().size(); ++i)
        require(again.metadata()[i].key == file.metadata()[i].key &&
                    io::describe_type(again.metadata()[i].value) == io::describe_type(file.metadata()[i].value),
                "the rewritten file has the same keys, of the same types, in order");
    require(again.tensors().size() == file.tensors().size(), "the rewritten file has every tensor");
    for (std::size_t i = 0; i < file.tensors().size(); ++i) {
        const io::gguf_tensor_info& before = file.tensors()[i];
        const io::gguf_tensor_info& after = again.tensors()[i];
        require(after.name == before.name && after.type == before.type && after.ne == before.ne, "the same tensor infos");
        const auto a = file.bytes(before.name);
        const auto b = again.bytes(after.name);
        require(a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0), "the same tensor bytes");
    }
    const std::vector<char> first = whole_file(rewritten_path());
    std::vector<io::gguf_tensor_view> again_views;
    for (const io::gguf_tensor_info& tensor : again.tensors())
        again_views.push_back({tensor.name, tensor.type, tensor.ne, again.bytes(tensor.name)});
    io::write_gguf(rewritten_path(), again.metadata(), again_views);
    require(whole_file(rewritten_path()) == first, "writing what was read is a fixpoint");
}

// llama_tokenizer::from_gguf of a vocabulary as large as the file's tokens (else 512): a
// tokenizer of that many tokens that encodes and decodes, or io_error.
void exercise_tokenizer(const io::gguf_file& file) {
    std::size_t vocab_size = 512;
    if (const auto* tokens = file.find("tokenizer.ggml.tokens"))
        if (const auto* array = std::get_if<io::gguf_array>(tokens)) vocab_size = array->size();
    try {
        const auto tokenizer = shaped::text::llama_tokenizer::from_gguf(file, vocab_size);
        require(tokenizer.vocab_size() == vocab_size, "a GGUF's tokenizer has the vocabulary asked for");
        (void)tokenizer.decode(tokenizer.encode("Once \xE2\x96\x81upon \xFF", true, true));
    } catch (const io::io_error&) {
    }
}

void exercise(const io::gguf_file& file, std::span<const std::uint8_t> input) {
    require(file.version() == 2 || file.version() == 3, "an opened file is version 2 or 3");
    require(std::has_single_bit(file.alignment()), "the alignment is a power of two");
    require(file.tensors().empty() || file.data_offset() % file.alignment() == 0, "a file's data section is aligned");
    require(file.data_offset() <= input.size(), "the data section starts inside the file");
    exercise_metadata(file);

    const std::vector<std::string> names = file.names();
    require(names.size() == file.tensors().size() && std::set<std::string>(names.begin(), names.end()).size() == names.size(),
            "tensor names are distinct");
    std::vector<std::pair<std::uint64_t, std::size_t>> ranges;
    for (const io::gguf_tensor_info& tensor : file.tensors()) {
        exercise_tensor(file, tensor, input);
        if (tensor.size > 0) ranges.emplace_back(tensor.offset, tensor.size);
    }
    std::sort(ranges.begin(), ranges.end());
    for (std::size_t i = 1; i < ranges.size(); ++i)
        require(ranges[i].first >= ranges[i - 1].first + ranges[i - 1].second, "tensors do not overlap");
    try {
        (void)file.info("missing~");
        require(file.contains("missing~"), "info() refuses a name the file does not hold");
    } catch (const io::io_error&) {
    }
    exercise_tokenizer(file);
    exercise_rewrite(file);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::span<const std::uint8_t> bytes(data, size);
    write_input(bytes);
    std::optional<io::gguf_file> file;
    try {
        file.emplace(input_path());
    } catch (const io::io_error&) {
        remove_scratch();
        return 0;
    }
    exercise(*file, bytes);
    // Removed now, since libFuzzer's exit runs no atexit handlers; the map outlives the path.
    remove_scratch();
    return 0;
}
