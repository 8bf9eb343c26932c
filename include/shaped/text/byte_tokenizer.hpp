#pragma once
// text::byte_tokenizer: a text's bytes as its ids, 0 to 255 — the vocabulary of a character-level
// model (nanoGPT's shakespeare_char, over bytes, so that every text encodes and a character
// outside ASCII is its UTF-8 bytes). Decoding a stream prints whole characters only:
//
//   shaped::text::byte_tokenizer bytes;
//   auto ids = bytes.encode("naïve");           // 6 ids: ï is two bytes
//   shaped::text::utf8_stream stream;           // while generating:
//   std::cout << stream.push(bytes.decode(id)); //   whole UTF-8 characters only

#include <shaped/text/core.hpp>

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace shaped::text {

class byte_tokenizer {
public:
    static constexpr std::size_t vocab_size = 256;

    std::vector<token_id> encode(std::string_view text) const {
        std::vector<token_id> ids;
        ids.reserve(text.size());
        for (const char c : text) ids.push_back(static_cast<token_id>(static_cast<unsigned char>(c)));
        return ids;
    }

    // text_error for an id outside 0 to 255, naming it.
    std::string decode(std::span<const token_id> ids) const {
        std::string text;
        text.reserve(ids.size());
        for (const token_id id : ids) {
            if (id < 0 || id >= static_cast<token_id>(vocab_size))
                throw text_error("shaped::text::byte_tokenizer::decode: id " + std::to_string(id) +
                                 " is not a byte (0 to 255)");
            text += static_cast<char>(static_cast<unsigned char>(id));
        }
        return text;
    }
    std::string decode(token_id id) const { return decode(std::span(&id, 1)); }
};

}  // namespace shaped::text
