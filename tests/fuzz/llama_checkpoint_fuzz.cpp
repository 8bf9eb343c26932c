// libFuzzer target for the Llama checkpoint readers (models/llama_checkpoint.hpp): arbitrary bytes
// as llama2.c's header, as a Hugging Face config.json, and as a whole llama2.c file loaded into a
// tiny compiled config, written to a file of this process's own as the safetensors target does.
// io_error is the readers' answer to bad input; any other exception, a broken invariant or a
// sanitizer report is a bug.

#include <shaped/models/llama_checkpoint.hpp>

#include "fuzz_support.hpp"

#include <unistd.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <string_view>

namespace {

using fuzz_support::require;

// The seeds' configs (corpus/make_llama_checkpoint_seeds.py): dim 4, hidden 6, one layer, two
// heads over one key/value head, vocab 5, context 3; tied, and with a classifier of its own.
using Tied = shaped::models::llama_config<5, 3, 1, 2, 1, 4, 6>;
using Untied = shaped::models::llama_config<5, 3, 1, 2, 1, 4, 6, false>;

const std::filesystem::path& input_path() {
    static const std::filesystem::path path = [] {
        const std::filesystem::path shm = "/dev/shm";
        std::error_code error;
        const auto dir = std::filesystem::is_directory(shm, error) ? shm : std::filesystem::temp_directory_path();
        return dir / ("shaped_llama_checkpoint_fuzz." + std::to_string(::getpid()) + ".bin");
    }();
    return path;
}

void check_config(const shaped::models::llama_checkpoint_config& config) {
    require(config.dim > 0 && config.hidden_dim > 0 && config.n_layers > 0 && config.n_heads > 0 &&
                config.n_kv_heads > 0 && config.vocab_size > 0 && config.seq_len > 0,
            "a config read has positive sizes");
    require(config.dim % config.n_heads == 0 && config.n_heads % config.n_kv_heads == 0 &&
                (config.dim / config.n_heads) % 2 == 0,
            "a config read has heads that divide the channels, key/value heads that divide the heads, even heads");
    require(shaped::models::config_spelling(config).starts_with("shaped::models::llama_config<"), "a config is spelled");
}

template <class Config>
void load(const std::filesystem::path& path) {
    try {
        const auto model = shaped::models::load_llama<Config>(path);
        shaped::nn::for_each_parameter(*model, [](std::string_view, const auto& parameter) {
            for (const float value : parameter.elements()) require(std::isfinite(value), "a loaded weight is finite");
        });
    } catch (const shaped::io::io_error&) {
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::span bytes(reinterpret_cast<const std::byte*>(data), size);
    try {
        check_config(shaped::models::parse_hf_llama_config(std::string_view(reinterpret_cast<const char*>(data), size),
                                                           "fuzz/config.json"));
    } catch (const shaped::io::io_error&) {
    }
    try {
        const auto config = shaped::models::parse_llama2c_header(bytes, "fuzz.bin");
        check_config(config);
    } catch (const shaped::io::io_error&) {
        return 0;
    }
    {
        std::ofstream out(input_path(), std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    }
    load<Tied>(input_path());
    load<Untied>(input_path());
    std::error_code ignored;
    std::filesystem::remove(input_path(), ignored);
    return 0;
}
