// shaped-run: generates text from a GPT or Llama checkpoint, as llama2.c's `run` does.
//
//   shaped-run CHECKPOINT [-i PROMPT] [-n STEPS] [-t TEMPERATURE] [-k TOP_K] [-p TOP_P] [-s SEED]
//              [-z TOKENIZER] [--ids] [--encode TEXT]
//
// CHECKPOINT is a Hugging Face GPT-2 or Llama directory, a nanoGPT state_dict saved as
// safetensors, a llama2.c .bin file or a Llama's .gguf; its tokenizer is GPT-2's BPE files
// beside a GPT checkpoint, a Llama's -z, else a GGUF's own vocabulary (tokenizer.ggml.*), else
// llama2.c's tokenizer.bin beside it, or bytes where the safetensors metadata says
// {"tokenizer": "bytes"} (shaped-train's character-level models). The text
// streams to stdout as it is decoded, tokens/s goes to stderr at the end. A file that is
// missing, corrupt or of a config not compiled in (configs.hpp) is a one-line message on stderr
// and exit status 1; so is standard output that cannot be written. A flag out of its range, or
// one that would change nothing (-k with -t 0, -n with --encode, -z with a GPT), is refused the
// same way, with a pointer to -h; -s 0 is a seed like any other, the clock's when -s is not given.

#include "../common/command_line.hpp"
#include "configs.hpp"

#include <shaped/shaped.hpp>

#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace {

namespace fs = std::filesystem;
using shaped::models::token_id;

// What the command line asks for; llama2.c's flags and defaults where they overlap.
struct options {
    fs::path checkpoint;
    std::string prompt;
    std::size_t steps = 256;
    double temperature = 1.0;
    std::size_t top_k = 0;
    double top_p = 0.9;
    std::uint64_t seed = 0;  // -s, else from the clock
    std::optional<fs::path> tokenizer;  // llama2.c's tokenizer.bin, for a Llama
    bool print_ids = false;
    std::optional<std::string> encode;
};

using shaped_apps::usage_error;

// The flags, read by the table that also writes -h (apps/common/command_line.hpp). A flag that
// would change nothing is refused here; -z against the checkpoint's kind in refuse_unused_tokenizer.
options parse(int argc, char** argv) {
    namespace cl = shaped_apps;
    options o;
    std::optional<std::uint64_t> seed;
    const cl::command_line line{
        "shaped-run",
        {{"CHECKPOINT", "", "a Hugging Face GPT-2 or Llama directory, a nanoGPT state_dict as .safetensors, or a llama2.c .bin file",
          cl::file_or_directory(o.checkpoint)},
         {"-i", "PROMPT", "the prompt (as ids \"1 2 3\" when the checkpoint has no tokenizer)", cl::text(o.prompt)},
         {"-n", "STEPS", "most tokens to generate", cl::whole(o.steps, 1)},
         {"-t", "TEMPERATURE", "0 is greedy", cl::real(o.temperature, cl::at_least(0))},
         {"-k", "TOP_K", "sample from the k most likely only, 0 for all", cl::whole(o.top_k, 0)},
         {"-p", "TOP_P", "nucleus sampling's p, 1 for all", cl::real(o.top_p, cl::greater_than(0), cl::at_most(1))},
         {"-s", "SEED", "the random seed (0 is one like any other)", cl::whole(seed, 0, "from the clock")},
         {"-z", "TOKENIZER", "a Llama's llama2.c tokenizer.bin",
          cl::file(o.tokenizer, "a GGUF's own vocabulary, else tokenizer.bin beside CHECKPOINT")},
         {"--ids", "", "print the generated ids, one a line, instead of text", cl::on(o.print_ids)},
         {"--encode", "TEXT", "print TEXT's ids as a prompt (a Llama's BOS first), one a line, and exit", cl::text(o.encode)}}};
    const cl::given_flags given = line.parse(argc, argv);
    if (o.temperature == 0)
        for (const std::string_view sampling : {"-k", "-p", "-s"})
            if (given.contains(sampling)) throw cl::no_effect(sampling, "with -t 0: greedy decoding takes the likeliest id");
    if (o.encode)
        for (const std::string_view generation : {"-i", "-n", "-t", "-k", "-p", "-s", "--ids"})
            if (given.contains(generation)) throw cl::no_effect(generation, "with --encode, which generates nothing");
    o.seed = seed ? *seed : static_cast<std::uint64_t>(std::time(nullptr));
    return o;
}

bool says_bytes(const fs::path& checkpoint);

// -z names llama2.c's tokenizer.bin, which only a Llama's ids are read with: a GPT's tokenizer is
// GPT-2's BPE files beside it, and a byte-level model's is its bytes.
void refuse_unused_tokenizer(const options& opts, bool llama) {
    if (!opts.tokenizer) return;
    const std::string checkpoint = "\"" + opts.checkpoint.string() + "\"";
    if (!llama)
        throw shaped_apps::no_effect("-z", "on " + checkpoint + ", a GPT's checkpoint: its tokenizer is GPT-2's BPE files beside it");
    if (says_bytes(opts.checkpoint))
        throw shaped_apps::no_effect("-z", "on " + checkpoint + ", whose metadata says its ids are bytes");
}

std::vector<token_id> parse_ids(const std::string& text, std::size_t vocab) {
    std::istringstream in(text);
    std::vector<token_id> ids;
    std::string word;
    while (in >> word) {
        long long id = 0;
        const auto [end, error] = std::from_chars(word.data(), word.data() + word.size(), id);
        if (error != std::errc{} || end != word.data() + word.size() || id < 0 || static_cast<std::size_t>(id) >= vocab)
            throw usage_error("-i takes ids of the vocabulary, whole numbers >= 0 and < " + std::to_string(vocab) + ", not \"" +
                              word + "\"");
        ids.push_back(static_cast<token_id>(id));
    }
    return ids;
}

// A tokenizer as shaped-run uses it, whichever family's it is.
struct text_side {
    std::function<std::vector<token_id>(const std::string&)> encode;   // a prompt's ids
    std::function<std::string(const std::vector<token_id>&)> decode;   // the prompt's text
    std::function<std::string(token_id)> next;                         // each new id's text, as it comes
    std::function<std::string()> flush;                                // what is held back at the end
    // A vocabulary of bytes has no id that starts or ends a text: it starts after a newline and
    // runs to the step count.
    bool bytes = false;
};

// The folder a checkpoint's tokenizer files are looked for in: the directory, or the file's.
fs::path beside(const fs::path& checkpoint) { return fs::is_directory(checkpoint) ? checkpoint : checkpoint.parent_path(); }

// Whether the checkpoint's safetensors metadata says {"tokenizer": "bytes"} (shaped-train's
// character-level models, a GPT's file or a Llama's directory): its ids are a text's bytes.
bool says_bytes(const fs::path& checkpoint) {
    const fs::path tensors = fs::is_directory(checkpoint) ? checkpoint / "model.safetensors" : checkpoint;
    if (tensors.extension() != ".safetensors" || !fs::exists(tensors)) return false;
    const shaped::io::safetensors_file file(tensors);
    const auto found = file.metadata().find("tokenizer");
    return found != file.metadata().end() && found->second == "bytes";
}

template <class Config>
text_side byte_side(const options& opts) {
    if (Config::vocab_size != shaped::text::byte_tokenizer::vocab_size)
        throw std::runtime_error(opts.checkpoint.string() + ": its metadata says its ids are bytes, but its vocabulary has " +
                                 std::to_string(Config::vocab_size) + " ids, not 256");
    const auto stream = std::make_shared<shaped::text::utf8_stream>();
    const shaped::text::byte_tokenizer bytes;
    return text_side{[=](const std::string& text) { return bytes.encode(text); },
                     [=](const std::vector<token_id>& ids) { return bytes.decode(ids); },
                     [=](token_id id) { return stream->push(bytes.decode(id)); }, [=] { return stream->flush(); }, true};
}

// What a model family's checkpoints need of shaped-run: how to read a config, match it, load it;
// its tokenizer; its first id when the prompt is empty, and the id that ends a text.
struct gpt_family {
    using config_type = shaped::models::gpt_checkpoint_config;
    template <class Config>
    static auto load(const fs::path& path, const config_type& found) { return shaped::models::load_gpt<Config>(path, found); }
    // GPT's weights are float, as every checkpoint of it stores them.
    template <class Config>
    static bool keeps(const config_type&) { return true; }
    // GPT-2's BPE files beside the checkpoint, Hugging Face's names or OpenAI's.
    template <class Config>
    static std::optional<text_side> text(const options& opts) {
        if (says_bytes(opts.checkpoint)) return byte_side<Config>(opts);
        const fs::path dir = beside(opts.checkpoint);
        const bool hf = fs::exists(dir / "vocab.json") && fs::exists(dir / "merges.txt");
        const bool openai = fs::exists(dir / "encoder.json") && fs::exists(dir / "vocab.bpe");
        if (!hf && !openai) return std::nullopt;
        const auto tokenizer = std::make_shared<shaped::text::gpt2_tokenizer>(dir);
        const auto stream = std::make_shared<shaped::text::gpt2_stream_decoder>(*tokenizer);
        return text_side{[=](const std::string& text) { return tokenizer->encode(text); },
                         [=](const std::vector<token_id>& ids) { return tokenizer->decode(ids); },
                         [=](token_id id) { return stream->decode(id); }, [=] { return stream->flush(); }};
    }
    // GPT-2 starts a text after <|endoftext|>, its last id, and ends one with it.
    template <class Config>
    static constexpr token_id first_id = static_cast<token_id>(Config::vocab_size - 1);
    template <class Config>
    static constexpr token_id end_id = first_id<Config>;
    static constexpr bool ends_without_tokenizer = false;
};
struct llama_family {
    using config_type = shaped::models::llama_checkpoint_config;
    template <class Config>
    static auto load(const fs::path& path, const config_type& found) { return shaped::models::load_llama<Config>(path, found); }
    template <class Config>
    static bool keeps(const config_type& found) { return shaped::models::keeps_stored_weights<Config>(found); }
    // llama2.c's tokenizer.bin given with -z; else a GGUF's own vocabulary, when it has one;
    // else the tokenizer.bin beside the checkpoint. Its vocabulary is the model's.
    template <class Config>
    static std::optional<text_side> text(const options& opts) {
        if (!opts.tokenizer && says_bytes(opts.checkpoint)) return byte_side<Config>(opts);
        std::shared_ptr<const shaped::text::llama_tokenizer> tokenizer;
        if (!opts.tokenizer && opts.checkpoint.extension() == ".gguf") {
            const shaped::io::gguf_file file(opts.checkpoint);
            if (file.has_key("tokenizer.ggml.tokens"))
                tokenizer = std::make_shared<const shaped::text::llama_tokenizer>(
                    shaped::text::llama_tokenizer::from_gguf(file, Config::vocab_size));
        }
        if (!tokenizer) {
            const fs::path file = opts.tokenizer.value_or(beside(opts.checkpoint) / "tokenizer.bin");
            if (!opts.tokenizer && !fs::exists(file)) return std::nullopt;
            tokenizer = std::make_shared<const shaped::text::llama_tokenizer>(file, Config::vocab_size);
        }
        const auto previous = std::make_shared<token_id>(first_id<Config>);
        return text_side{[=](const std::string& text) { return tokenizer->encode(text, true, false); },
                         [=](const std::vector<token_id>& ids) {
                             if (!ids.empty()) *previous = ids.back();
                             return tokenizer->decode(ids);
                         },
                         [=](token_id id) { return tokenizer->decode(std::exchange(*previous, id), id); },
                         [] { return std::string(); }};
    }
    // llama2.c's: a text starts with BOS (1), and BOS delimits texts.
    template <class Config>
    static constexpr token_id first_id = 1;
    template <class Config>
    static constexpr token_id end_id = 1;
    static constexpr bool ends_without_tokenizer = true;
};

template <class Family, class Config>
int run(const options& opts, const typename Family::config_type& found) {
    const auto text = Family::template text<Config>(opts);
    if (opts.encode) {
        if (!text) throw std::runtime_error(opts.checkpoint.string() + ": no tokenizer beside it");
        for (const auto id : text->encode(*opts.encode)) std::cout << id << '\n';
        return 0;
    }
    const auto model = Family::template load<Config>(opts.checkpoint, found);
    using Model = typename std::remove_cvref_t<decltype(*model)>;
    std::vector<token_id> prompt = text ? text->encode(opts.prompt) : parse_ids(opts.prompt, Model::vocab_dim::extent);
    if (prompt.empty()) prompt.push_back(text && text->bytes ? token_id{'\n'} : Family::template first_id<Config>);

    const bool show_text = text && !opts.print_ids;
    if (show_text) std::cout << text->decode(prompt) << std::flush;
    shaped::Generator gen(opts.seed);
    const shaped::models::generation how{
        .max_new_tokens = opts.steps,
        .end_token = (text && !text->bytes) || (!text && Family::ends_without_tokenizer)
                         ? std::optional<token_id>(Family::template end_id<Config>)
                         : std::nullopt,
        .how = {.temperature = opts.temperature, .top_k = opts.top_k, .top_p = opts.top_p}};
    const auto start = std::chrono::steady_clock::now();
    const auto out = shaped::models::generate(*model, {prompt}, how, gen, [&](std::size_t, token_id id) {
        if (show_text) std::cout << text->next(id) << std::flush;
        else std::cout << id << '\n';
    });
    if (show_text) std::cout << text->flush() << '\n';
    shaped_apps::finish_output();  // before tok/s: a run whose ids were lost says only that
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (out[0].stopped == shaped::models::stop_reason::context)
        std::cerr << "shaped-run: stopped at the context's end (" << Model::context_dim::extent << " positions)\n";
    std::cerr << "achieved tok/s: " << static_cast<double>(out[0].ids.size()) / seconds << '\n';
    return 0;
}

// What the suggested line's context (its second number) means when the checkpoint does not
// bind it: a GGUF's llama.context_length is only the file's say (llama.cpp's llama2.c
// converter writes 128 whatever the model's), so the context is the user's to choose.
std::string context_choice(const shaped::models::gpt_checkpoint_config&) { return ""; }
std::string context_choice(const shaped::models::llama_checkpoint_config& found) {
    if (found.context_binds) return "";
    return " (its context, " + std::to_string(found.seq_len) +
           ", is the file's llama.context_length, which binds nothing: any context is yours to choose)";
}

// Why no compiled config is the checkpoint's: how it differs from the nearest one (the fewest
// mismatches), and the line that would compile it in, when there is one that would.
template <class... Configs, class Found>
std::string not_compiled_in(const fs::path& checkpoint, const Found& found) {
    std::vector<std::string> nearest;
    std::string nearest_spelling;
    const auto consider = [&]<class Config>(std::type_identity<Config>) {
        auto mismatches = shaped::models::config_mismatches<Config>(found);
        if (!nearest_spelling.empty() && mismatches.size() >= nearest.size()) return;
        nearest = std::move(mismatches);
        nearest_spelling = shaped::models::config_spelling<Config>();
    };
    (consider(std::type_identity<Configs>{}), ...);
    std::string message = checkpoint.string() + ": its config, " + shaped::models::config_spelling(found) +
                          ", is not compiled in; the nearest compiled config, " + nearest_spelling + ", differs in ";
    for (std::size_t i = 0; i < nearest.size(); ++i) message += (i == 0 ? "" : "; ") + nearest[i];
    if (const auto reasons = shaped::models::why_not_compilable(found); !reasons.empty()) {
        message += "; no line of apps/shaped-run/configs.hpp can compile it in: ";
        for (std::size_t i = 0; i < reasons.size(); ++i) message += (i == 0 ? "" : "; ") + reasons[i];
    } else {
        message += "; add the line `" + shaped::models::config_spelling(found) + ",` to apps/shaped-run/configs.hpp" +
                   context_choice(found);
    }
    return message;
}

// The first compiled config the checkpoint's is, run; none is a one-line error.
template <class Family, class... Configs>
int run_compiled(std::tuple<Configs...>*, const options& opts, const typename Family::config_type& found) {
    int status = -1;
    // First a config that keeps the weights as stored (a Q8_0 file's blocks), then any that loads.
    ((status < 0 && shaped::models::config_mismatches<Configs>(found).empty() && Family::template keeps<Configs>(found)
          ? (status = run<Family, Configs>(opts, found))
          : 0),
     ...);
    ((status < 0 && shaped::models::config_mismatches<Configs>(found).empty()
          ? (status = run<Family, Configs>(opts, found))
          : 0),
     ...);
    if (status < 0) throw std::runtime_error(not_compiled_in<Configs...>(opts.checkpoint, found));
    return status;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        shaped_apps::stop_on_output_error();
        const options opts = parse(argc, argv);
        // The checkpoint's config, read once: it says the family, and is matched and loaded with.
        const auto found = shaped::models::read_checkpoint_config(opts.checkpoint);
        const auto* llama = std::get_if<shaped::models::llama_checkpoint_config>(&found);
        refuse_unused_tokenizer(opts, llama != nullptr);
        const int status =
            llama ? run_compiled<llama_family>(static_cast<shaped_run::compiled_llama_configs*>(nullptr), opts, *llama)
                  : run_compiled<gpt_family>(static_cast<shaped_run::compiled_gpt_configs*>(nullptr), opts,
                                             std::get<shaped::models::gpt_checkpoint_config>(found));
        shaped_apps::finish_output();  // --encode's ids, or what a run wrote last
        return status;
    } catch (const usage_error& error) {
        const std::string message = shaped_apps::message_of(error);
        std::cerr << "shaped-run: " << message << "\n(shaped-run -h for the flags)\n";
    } catch (const std::exception& error) {
        // The library's messages name the file and what is wrong; keep them to one line.
        const std::string message = shaped_apps::message_of(error);
        std::cerr << "shaped-run: " << message << '\n';
    }
    return 1;
}
