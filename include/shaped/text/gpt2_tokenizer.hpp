#pragma once
// GPT-2's byte-level BPE tokenizer, giving the ids OpenAI's encoder.py (and the npm package
// gpt-3-encoder, its port) give:
//
//   shaped::text::gpt2_tokenizer tokenizer("models/gpt2");      // vocab.json + merges.txt
//   std::vector<shaped::text::token_id> ids = tokenizer.encode("Hello world");  // 15496 995
//   std::string text = tokenizer.decode(ids);                    // "Hello world"
//
//   shaped::text::gpt2_stream_decoder stream(tokenizer);         // while generating:
//   std::cout << stream.decode(id);                              // whole UTF-8 characters only
//   std::cout << stream.flush();                                 // at the end
//
// encode splits the text into words with GPT-2's pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// (letters, numbers and white space as JavaScript's u-flag regular expressions class them: a
// generated table, src/unicode_classes.inc), spells each word's UTF-8 bytes in the byte-level
// alphabet and merges adjacent symbols, the pair of lowest rank first, until no pair is a merge.
//
// Every byte of the two files is checked before it is used: a file that is missing or is not
// what the format says is an io_error naming the file and the entry or line.

#include <shaped/text/core.hpp>

#include <cstddef>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace shaped::text {

namespace detail {
struct gpt2_tables;  // the vocabulary and the merges, as src/gpt2_tokenizer.cpp reads them
}

class gpt2_tokenizer {
public:
    // The most bytes each of the two files may be: GPT-2's are 1 MB and 456 KB, and 64 MiB
    // holds a vocabulary of a million long tokens, yet refuses what is no tokenizer's file.
    static constexpr std::size_t max_file_bytes = std::size_t{64} << 20;

    // From a directory holding Hugging Face's vocab.json + merges.txt, or else OpenAI's
    // encoder.json + vocab.bpe (the same data under other names).
    explicit gpt2_tokenizer(const std::filesystem::path& directory);

    // From the two files: the vocabulary (a JSON object, token -> id, ids 0 to N-1, all 256
    // one-byte tokens among them) and the merges (a "#version" line, then a merge "a b" a line,
    // ranked by their order; each of a, b and ab a token of the vocabulary).
    gpt2_tokenizer(const std::filesystem::path& vocab_file, const std::filesystem::path& merges_file);

    // From the two files' contents, already in memory; the names stand for the files in messages.
    static gpt2_tokenizer from_contents(std::string_view vocab_json, std::string_view merges_text,
                                        std::string_view vocab_name = "vocab.json",
                                        std::string_view merges_name = "merges.txt");

    // The ids of UTF-8 text. Text that is not valid UTF-8 (a stray byte, a truncated or overlong
    // sequence, a surrogate) is a text_error naming the byte offset: the reference encodes
    // strings of characters, which such bytes are not.
    std::vector<token_id> encode(std::string_view text) const;

    // The bytes the ids stand for, joined. They are UTF-8 whenever the ids came from encode; any
    // other sequence may cut a character, and its bytes are returned as they are. An id that is
    // not in the vocabulary is a text_error naming it and the vocabulary's size.
    std::string decode(std::span<const token_id> ids) const;

    // How many tokens the vocabulary holds: ids run from 0 to vocab_size() - 1.
    std::size_t vocab_size() const;

private:
    explicit gpt2_tokenizer(std::shared_ptr<const detail::gpt2_tables> loaded);

    std::shared_ptr<const detail::gpt2_tables> tables_;  // immutable, so copies share them
};

// Decodes ids one at a time, as a model generates them, returning only whole UTF-8 characters:
// the bytes of a character cut between tokens (an emoji is often two or three) are held back
// until the rest arrive. Bytes that can no longer become a character are returned as they are,
// so that what decode and flush return, joined, is always gpt2_tokenizer::decode of the ids.
class gpt2_stream_decoder {
public:
    explicit gpt2_stream_decoder(gpt2_tokenizer tokenizer);

    // The characters completed by this id's bytes (possibly none); text_error as for decode.
    std::string decode(token_id id);

    // The bytes still held back (an incomplete character), and a fresh start.
    std::string flush();

private:
    gpt2_tokenizer tokenizer_;
    utf8_stream stream_;
};

}  // namespace shaped::text
