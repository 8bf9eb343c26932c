// shaped-quantize: writes a Llama checkpoint as a GGUF file that llama.cpp loads, quantized, as
// llama.cpp's converter and llama-quantize write it (models/llama_gguf.hpp says how).
//
//   shaped-quantize IN OUT.gguf --type q8_0|q4_0|q4_k|q6_k|f16|f32 [--tokenizer tokenizer.bin]
//
// IN is a llama2.c .bin file, a Hugging Face Llama directory or a GGUF file; its config is read
// from it, so any Llama's is taken. Each tensor whose rows forced another type is one warning line
// on stderr, as llama-quantize's; standard output gets one line a tensor (name, type, ggml dims).
// A missing or corrupt input, an unknown type or a flag that would change nothing (--tokenizer
// with a GGUF, whose vocabulary is copied) is a one-line message on stderr and exit status 1.

#include "../common/command_line.hpp"

#include <shaped/io/core.hpp>
#include <shaped/io/gguf.hpp>
#include <shaped/models/llama_gguf.hpp>

#include <cstdint>
#include <exception>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using shaped_apps::usage_error;

struct options {
    fs::path checkpoint;
    std::string out;
    std::string type;
    std::optional<fs::path> tokenizer;
};

options parse(int argc, char** argv) {
    namespace cl = shaped_apps;
    options o;
    std::vector<std::string> types;
    for (const auto type : shaped::models::all_gguf_file_types) types.emplace_back(shaped::models::gguf_file_type_name(type));
    const cl::command_line line{
        "shaped-quantize",
        {{"IN", "", "a llama2.c .bin file, a Hugging Face Llama directory or a GGUF file", cl::file_or_directory(o.checkpoint)},
         {"OUT", "", "the GGUF file to write", cl::text(o.out)},
         {"--type", "TYPE", "the weights' format, as llama-quantize's TYPE", cl::one_of(o.type, types), cl::required},
         {"--tokenizer", "TOKENIZER", "llama2.c's tokenizer.bin, the vocabulary llama.cpp needs",
          cl::file(o.tokenizer, "none; a GGUF's own")}}};
    const cl::given_flags given = line.parse(argc, argv);
    if (o.tokenizer && !fs::is_directory(o.checkpoint) && o.checkpoint.extension() == ".gguf")
        throw cl::no_effect("--tokenizer", "with a GGUF file, whose vocabulary is copied");
    return o;
}

std::string dims(const std::vector<std::uint64_t>& ne) {
    std::string out = "[";
    for (std::size_t i = 0; i < ne.size(); ++i) out += (i ? ", " : "") + std::to_string(ne[i]);
    return out + "]";
}

}  // namespace

int main(int argc, char** argv) {
    try {
        shaped_apps::stop_on_output_error();
        const options opts = parse(argc, argv);
        const auto written = shaped::models::write_llama_gguf(
            opts.checkpoint, opts.out, {*shaped::models::gguf_file_type_named(opts.type), opts.tokenizer});
        std::size_t fallbacks = 0;
        for (const auto& tensor : written.tensors) {
            std::cout << tensor.name << " " << shaped::io::ggml_traits(tensor.type).name << " " << dims(tensor.ne) << '\n';
            if (tensor.fallback.empty()) continue;
            std::cerr << "shaped-quantize: " << tensor.fallback << '\n';
            ++fallbacks;
        }
        if (fallbacks != 0)
            std::cerr << "shaped-quantize: " << fallbacks << " of " << written.tensors.size()
                      << " tensor(s) required fallback quantization\n";
        if (!written.has_vocabulary)
            std::cerr << "shaped-quantize: " << opts.out << " has no vocabulary, without which llama.cpp does not load it "
                      << "(--tokenizer gives one)\n";
        shaped_apps::finish_output();
        return 0;
    } catch (const usage_error& error) {
        const std::string message = shaped_apps::message_of(error);
        std::cerr << "shaped-quantize: " << message << "\n(shaped-quantize -h for the flags)\n";
    } catch (const std::exception& error) {
        // The library's messages name the file and what is wrong; keep them to one line.
        const std::string message = shaped_apps::message_of(error);
        std::cerr << "shaped-quantize: " << message << '\n';
    }
    return 1;
}
