#pragma once
// The oracle for shaped::text::llama_tokenizer, shared by llama_tokenizer_test.cpp and the fuzz
// target: llama2.c's run.c encode transcribed as it is written (a scan of every pair after each
// merge, tokens looked up in a sorted map), and tokenizer.bin written as llama2.c's
// tokenizer.py exports it. No Catch2 here, so that the fuzzer can include it.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace llama_reference {

// Tokens and their scores, by id.
struct vocabulary {
    std::vector<std::string> tokens;
    std::vector<float> scores;

    // What every llama2.c vocabulary begins with, as tokenizer.py exports it: <unk>, BOS and EOS
    // (spelled "\n<s>\n" and "\n</s>\n"), then the byte tokens <0x00> to <0xFF>, all scoring 0.
    static vocabulary llama2c_base() {
        vocabulary base;
        base.add("<unk>", 0.0f);
        base.add("\n<s>\n", 0.0f);
        base.add("\n</s>\n", 0.0f);
        constexpr char hex[] = "0123456789ABCDEF";
        for (unsigned byte = 0; byte < 256; ++byte) base.add(std::string("<0x") + hex[byte >> 4] + hex[byte & 0xf] + ">", 0.0f);
        return base;
    }

    // Appends a token; its id.
    std::int32_t add(std::string token, float score) {
        tokens.push_back(std::move(token));
        scores.push_back(score);
        return static_cast<std::int32_t>(tokens.size() - 1);
    }

    std::int32_t id(std::string_view token) const {
        for (std::size_t i = 0; i < tokens.size(); ++i)
            if (tokens[i] == token) return static_cast<std::int32_t>(i);
        return -1;
    }
};

inline void append_u32(std::string& out, std::uint32_t value) {
    for (int k = 0; k < 4; ++k) out += static_cast<char>((value >> (8 * k)) & 0xff);
}

inline void append_f32(std::string& out, float value) {
    std::uint32_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    append_u32(out, bits);
}

// tokenizer.py's export: max_token_length (the longest token's, unless given), then each token's
// score, length and bytes, little-endian.
inline std::string file_bytes(const vocabulary& vocabulary, std::int64_t max_token_length = -1) {
    if (max_token_length < 0) {
        max_token_length = 0;
        for (const std::string& token : vocabulary.tokens)
            max_token_length = std::max<std::int64_t>(max_token_length, static_cast<std::int64_t>(token.size()));
    }
    std::string out;
    append_u32(out, static_cast<std::uint32_t>(max_token_length));
    for (std::size_t i = 0; i < vocabulary.tokens.size(); ++i) {
        append_f32(out, vocabulary.scores[i]);
        append_u32(out, static_cast<std::uint32_t>(vocabulary.tokens[i].size()));
        out += vocabulary.tokens[i];
    }
    return out;
}

// run.c's encode, line for line but in std::string, with one departure where run.c reads out of
// bounds: a vocabulary without " " gives the dummy prefix as its byte token, <0x20>.
inline std::vector<std::int32_t> encode(const vocabulary& vocabulary, std::string_view text, bool bos, bool eos) {
    std::map<std::string, std::int32_t> sorted_vocab;
    for (std::size_t i = 0; i < vocabulary.tokens.size(); ++i) sorted_vocab.emplace(vocabulary.tokens[i], static_cast<std::int32_t>(i));
    const auto str_lookup = [&](const std::string& str) {
        const auto found = sorted_vocab.find(str);
        return found == sorted_vocab.end() ? -1 : found->second;
    };

    std::vector<std::int32_t> tokens;
    if (bos) tokens.push_back(1);
    if (!text.empty()) {
        const std::int32_t dummy_prefix = str_lookup(" ");
        tokens.push_back(dummy_prefix != -1 ? dummy_prefix : ' ' + 3);
    }

    std::string str_buffer;
    for (std::size_t c = 0; c < text.size(); ++c) {
        if ((text[c] & 0xC0) != 0x80) str_buffer.clear();  // not a continuation byte: a new code point
        str_buffer += text[c];
        if (c + 1 < text.size() && (text[c + 1] & 0xC0) == 0x80 && str_buffer.size() < 4) continue;
        const std::int32_t id = str_lookup(str_buffer);
        if (id != -1) {
            tokens.push_back(id);
        } else {
            for (const char byte : str_buffer) tokens.push_back(static_cast<unsigned char>(byte) + 3);
        }
        str_buffer.clear();
    }

    while (true) {
        float best_score = -1e10;
        std::int32_t best_id = -1;
        std::ptrdiff_t best_idx = -1;
        for (std::size_t i = 0; i + 1 < tokens.size(); ++i) {
            const std::int32_t id = str_lookup(vocabulary.tokens[static_cast<std::size_t>(tokens[i])] +
                                               vocabulary.tokens[static_cast<std::size_t>(tokens[i + 1])]);
            if (id != -1 && vocabulary.scores[static_cast<std::size_t>(id)] > best_score) {
                best_score = vocabulary.scores[static_cast<std::size_t>(id)];
                best_id = id;
                best_idx = static_cast<std::ptrdiff_t>(i);
            }
        }
        if (best_idx == -1) break;
        tokens[static_cast<std::size_t>(best_idx)] = best_id;
        tokens.erase(tokens.begin() + best_idx + 1);
    }

    if (eos) tokens.push_back(2);
    return tokens;
}

}  // namespace llama_reference
