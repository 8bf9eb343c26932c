// libFuzzer target for GPT-2's tokenizer. The input's first byte says what the rest is:
//   'f'   a tokenizer's two files, the vocabulary then the merges, split at the line
//         "=== merges.txt ===": from_contents loads them or refuses them with io_error, and a
//         tokenizer it loads gives back the UTF-8 text it encodes (the files' own bytes).
//   else  text for GPT-2's real vocabulary: encode refuses it with text_error exactly when it is
//         not UTF-8, else decode(encode(text)) is the text and the stream decoder returns whole
//         characters only, which join to the text.
// Any other exception, a broken invariant or a sanitizer report is a bug.

#include <shaped/text/gpt2_tokenizer.hpp>

#include "fuzz_support.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#ifndef SHAPED_GPT2_TOKENIZER_DIR
#error "SHAPED_GPT2_TOKENIZER_DIR must name the directory of GPT-2's encoder.json and vocab.bpe"
#endif

namespace {

using fuzz_support::require;
using shaped::text::gpt2_stream_decoder;
using shaped::text::gpt2_tokenizer;
using shaped::text::token_id;

constexpr std::string_view separator = "\n=== merges.txt ===\n";
constexpr std::size_t max_round_trip_bytes = 4096;  // of the files' bytes, as text for their tokenizer

// Whether `text` is UTF-8, worked out apart from the library: each sequence's length from its
// lead byte, then the code point it spells, which must need that many bytes, be no surrogate
// and be at most U+10FFFF.
bool is_utf8(std::string_view text) {
    for (std::size_t i = 0; i < text.size();) {
        const auto lead = static_cast<unsigned char>(text[i]);
        const std::size_t length = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xe ? 3 : (lead >> 3) == 0x1e ? 4 : 0;
        if (length == 0 || i + length > text.size()) return false;
        std::uint32_t code_point = length == 1 ? lead : lead & (0x7fu >> length);
        for (std::size_t k = 1; k < length; ++k) {
            const auto next = static_cast<unsigned char>(text[i + k]);
            if ((next >> 6) != 0x2) return false;
            code_point = (code_point << 6) | (next & 0x3fu);
        }
        constexpr std::uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
        if (code_point < least[length] || code_point > 0x10ffff || (code_point >= 0xd800 && code_point <= 0xdfff))
            return false;
        i += length;
    }
    return true;
}

// UTF-8 text encodes to ids of the vocabulary that decode to it, one id at a time or all at once.
void require_round_trip(const gpt2_tokenizer& tokenizer, std::string_view text) {
    const std::vector<token_id> ids = tokenizer.encode(text);
    for (const token_id id : ids) require(id >= 0 && static_cast<std::size_t>(id) < tokenizer.vocab_size(), "encode's ids are in the vocabulary");
    require(tokenizer.decode(ids) == text, "decode(encode(text)) == text");
    require(ids.size() <= text.size(), "no more ids than bytes");

    gpt2_stream_decoder stream(tokenizer);
    std::string streamed;
    for (const token_id id : ids) {
        const std::string piece = stream.decode(id);
        require(is_utf8(piece), "the stream decoder returns whole UTF-8 characters of UTF-8 text");
        streamed += piece;
    }
    require(stream.flush().empty(), "nothing is left held back at the end of UTF-8 text");
    require(streamed == text, "the stream decoder's pieces join to the text");
}

void fuzz_text(std::string_view text) {
    static const gpt2_tokenizer gpt2(SHAPED_GPT2_TOKENIZER_DIR);
    if (!is_utf8(text)) {
        bool refused = false;
        try {
            (void)gpt2.encode(text);
        } catch (const shaped::text::text_error&) {
            refused = true;
        }
        require(refused, "encode refuses text that is not UTF-8");
        return;
    }
    require_round_trip(gpt2, text);
}

void fuzz_files(std::string_view files) {
    const std::size_t split = files.find(separator);
    const std::string_view vocab = files.substr(0, split);
    const std::string_view merges = split == std::string_view::npos ? std::string_view() : files.substr(split + separator.size());
    std::optional<gpt2_tokenizer> tokenizer;
    try {
        tokenizer = gpt2_tokenizer::from_contents(vocab, merges);
    } catch (const shaped::io::io_error&) {
        return;
    }
    require(tokenizer->vocab_size() >= 256, "a loaded vocabulary holds every byte");
    const token_id past_the_end[] = {static_cast<token_id>(tokenizer->vocab_size())};
    bool refused = false;
    try {
        (void)tokenizer->decode(past_the_end);
    } catch (const shaped::text::text_error&) {
        refused = true;
    }
    require(refused, "decode refuses an id past the vocabulary");
    for (const std::string_view text : {vocab, merges}) {
        std::size_t end = std::min(text.size(), max_round_trip_bytes);
        while (end < text.size() && end > 0 && (static_cast<unsigned char>(text[end]) & 0xc0) == 0x80) --end;
        const std::string_view sample = text.substr(0, end);  // cut between characters
        if (is_utf8(sample)) require_round_trip(*tokenizer, sample);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    if (input.front() == 'f') fuzz_files(input.substr(1));
    else fuzz_text(input.substr(1));
    return 0;
}
