// libFuzzer target for llama2.c's tokenizer. The input's first byte says what the rest is:
//   'f'   the model's vocab_size (two bytes, little-endian), then a tokenizer.bin: from_contents
//         loads it exactly when a reading written here, apart from the library, finds it valid,
//         and then with the same tokens and scores; encode of the file's own bytes agrees with
//         run.c's loop (tests/unit/llama_tokenizer_reference.hpp).
//   else  text for a fixed vocabulary of llama2.c's shape (BOS, EOS, the byte tokens, printable
//         ASCII, merges with tied scores): encode agrees with run.c's loop, gives ids of the
//         vocabulary, and decode(encode(text, true, eos)) is the text, whatever its bytes.
// Any other exception, a broken invariant or a sanitizer report is a bug.

#include <shaped/text/llama_tokenizer.hpp>

#include "../unit/llama_tokenizer_reference.hpp"
#include "fuzz_support.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace {

using fuzz_support::require;
using llama_reference::vocabulary;
using shaped::text::llama_tokenizer;
using shaped::text::token_id;

constexpr std::size_t max_reference_bytes = 512;  // of text for run.c's loop, which is quadratic

// tokenizer.bin read by its rules (the header's list), written again apart from the library.
std::optional<vocabulary> read_independently(std::string_view file, std::size_t vocab_size) {
    if (vocab_size < 259 || file.size() < 4) return std::nullopt;
    std::size_t at = 0;
    const auto next_u32 = [&] {
        std::uint32_t value = 0;
        for (int k = 0; k < 4; ++k) value |= std::uint32_t{static_cast<unsigned char>(file[at++])} << (8 * k);
        return value;
    };
    const auto max_token_length = static_cast<std::int32_t>(next_u32());
    if (max_token_length < 0) return std::nullopt;
    vocabulary words;
    for (std::size_t id = 0; id < vocab_size; ++id) {
        if (file.size() - at < 8) return std::nullopt;
        const std::uint32_t score_bits = next_u32();
        float score;
        std::memcpy(&score, &score_bits, sizeof score);
        const auto length = static_cast<std::int32_t>(next_u32());
        if (!std::isfinite(score) || length <= 0 || length > max_token_length) return std::nullopt;
        if (static_cast<std::size_t>(length) > file.size() - at) return std::nullopt;
        const std::string_view token = file.substr(at, static_cast<std::size_t>(length));
        at += static_cast<std::size_t>(length);
        if (token.find('\0') != std::string_view::npos) return std::nullopt;
        words.add(std::string(token), score);
    }
    if (at != file.size()) return std::nullopt;
    if (std::set<std::string>(words.tokens.begin(), words.tokens.end()).size() != words.tokens.size()) return std::nullopt;
    // Ids 3 to 258 are <0x00> to <0xFF>, their digits in either case.
    constexpr char hex[] = "0123456789abcdef";
    for (unsigned byte = 0; byte < 256; ++byte) {
        std::string token = words.tokens[3 + byte];
        for (std::size_t digit = 3; digit < 5 && digit < token.size(); ++digit)
            token[digit] = static_cast<char>(std::tolower(static_cast<unsigned char>(token[digit])));
        if (token != std::string("<0x") + hex[byte >> 4] + hex[byte & 0xf] + ">") return std::nullopt;
    }
    return words;
}

// encode's ids are the vocabulary's, at most one a byte and three more, and are run.c's.
std::vector<token_id> require_encodes_as_run_c(const llama_tokenizer& tokenizer, const vocabulary& words,
                                               std::string_view text, bool bos, bool eos) {
    const std::vector<token_id> ids = tokenizer.encode(text, bos, eos);
    for (const token_id id : ids)
        require(id >= 0 && static_cast<std::size_t>(id) < tokenizer.vocab_size(), "encode's ids are in the vocabulary");
    require(ids.size() <= text.size() + 3, "no more ids than the text's bytes, BOS, the dummy prefix and EOS");
    if (text.size() <= max_reference_bytes)
        require(ids == llama_reference::encode(words, text, bos, eos), "encode gives run.c's ids");
    return ids;
}

void require_refuses_past_the_end(const llama_tokenizer& tokenizer) {
    bool refused = false;
    try {
        (void)tokenizer.decode(1, static_cast<token_id>(tokenizer.vocab_size()));
    } catch (const shaped::text::text_error&) {
        refused = true;
    }
    require(refused, "decode refuses an id past the vocabulary");
}

void fuzz_file(std::string_view input) {
    if (input.size() < 2) return;
    const std::size_t vocab_size = static_cast<unsigned char>(input[0]) | (static_cast<std::size_t>(static_cast<unsigned char>(input[1])) << 8);
    const std::string_view file = input.substr(2);
    std::optional<llama_tokenizer> tokenizer;
    try {
        tokenizer = llama_tokenizer::from_contents(file, vocab_size);
    } catch (const shaped::io::io_error&) {
    }
    const std::optional<vocabulary> expected = read_independently(file, vocab_size);
    require(tokenizer.has_value() == expected.has_value(), "from_contents loads exactly the files its rules allow");
    if (!tokenizer) return;
    require(tokenizer->vocab_size() == vocab_size, "a loaded vocabulary has the model's size");
    for (std::size_t id = 0; id < vocab_size; ++id) {
        const auto as_id = static_cast<token_id>(id);
        require(tokenizer->token(as_id) == expected->tokens[id], "a loaded token holds the file's bytes");
        require(tokenizer->score(as_id) == expected->scores[id], "a loaded token has the file's score");
    }
    require_refuses_past_the_end(*tokenizer);
    const std::string_view text = file.substr(4, max_reference_bytes);
    const std::vector<token_id> ids = require_encodes_as_run_c(*tokenizer, *expected, text, true, text.size() % 2 == 0);
    (void)tokenizer->decode(ids);
}

// llama2.c's first 259 tokens, printable ASCII, and merges towards a few English words, their
// scores tied in places, as a small sentencepiece vocabulary's would be.
const vocabulary& fixed_vocabulary() {
    static const vocabulary words = [] {
        vocabulary built = vocabulary::llama2c_base();
        for (char c = ' '; c <= '~'; ++c) built.add(std::string(1, c), 0);
        built.add("\xc3\xa9", 0);
        built.add("\xe2\x98\x83", 0);
        const std::vector<std::pair<std::string, float>> merged = {
            {"th", -1}, {"he", -2}, {"the", -3}, {" t", -1}, {" the", -4}, {"in", -2}, {"ng", -2}, {"ing", -5},
            {" a", -1}, {"an", -2}, {"nd", -3}, {"and", -3}, {" and", -6}, {"er", -2}, {"re", -2}, {"ere", -7},
            {"e ", -8}, {"  ", -9}, {"\xc3\xa9t", -4}, {" \xc3\xa9", -4}};
        for (const auto& [token, score] : merged) built.add(token, score);
        return built;
    }();
    return words;
}

void fuzz_text(std::string_view text) {
    static const llama_tokenizer tokenizer = llama_tokenizer::from_contents(
        llama_reference::file_bytes(fixed_vocabulary()), fixed_vocabulary().tokens.size());
    const bool eos = !text.empty() && (static_cast<unsigned char>(text.back()) & 1) != 0;
    const std::vector<token_id> ids = require_encodes_as_run_c(tokenizer, fixed_vocabulary(), text, true, eos);
    require(tokenizer.decode(ids) == text, "decode(encode(text, true, eos)) == text");
    // No token of this vocabulary begins with BOS's, so BOS and EOS only add their ids.
    std::vector<token_id> bare = tokenizer.encode(text, false, false);
    bare.insert(bare.begin(), llama_tokenizer::bos_id);
    if (eos) bare.push_back(llama_tokenizer::eos_id);
    require(bare == ids, "BOS and EOS add their ids and change no other");
    require_refuses_past_the_end(tokenizer);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    if (input.front() == 'f') fuzz_file(input.substr(1));
    else fuzz_text(input.substr(1));
    return 0;
}
