#pragma once
// llama2.c's tokenizer: the scored BPE of its tokenizer.bin (what llama2.c's tokenizer.py exports
// from a sentencepiece model), giving the ids llama2.c's run.c gives:
//
//   shaped::text::llama_tokenizer tokenizer("tokenizer.bin", 32000);   // the model's vocab_size
//   std::vector<shaped::text::token_id> ids = tokenizer.encode("Hello world", /*bos=*/true, /*eos=*/false);
//   std::string text = tokenizer.decode(ids);                          // "Hello world"
//   std::cout << tokenizer.decode(previous, next);                     // while generating
//
// The file, little-endian: an int32 max_token_length, then for each of the model's vocab_size
// tokens (the file does not say how many: the model's checkpoint does) a float32 score, an int32
// length and that many bytes. Ids 1 and 2 are BOS and EOS; ids 3 to 258 are the byte-fallback
// tokens <0x00> to <0xFF>.
//
// encode, as run.c's encode:
//   1. BOS, if asked;
//   2. if the text is not empty, the dummy prefix: the token " " (sentencepiece's
//      add_dummy_prefix);
//   3. each character as its token, or, where the vocabulary has none, each of its bytes as its
//      byte-fallback token (id 3 + byte). A character is a byte and the continuation bytes
//      (10xxxxxx) after it, at most four bytes, as run.c reads UTF-8: so text that is not UTF-8
//      is never refused, its bytes that make no token coming out as their byte tokens, and
//      decode gives them back;
//   4. the merges: again and again, the adjacent pair whose joined bytes are the token of the
//      highest score (the leftmost of equal pairs) becomes that token, until no pair joins to a
//      token scoring above -1e10 (where run.c's search for the best starts);
//   5. EOS, if asked.
// Two things run.c cannot see: a NUL byte in the text is a character like any other (run.c reads
// a C string, which ends there), and a vocabulary without " " gives the dummy prefix as <0x20>
// (run.c would look it up as id -1 and read out of bounds).
//
// Every byte of the file is checked before it is used: a file that is missing, ends early, holds
// bytes past the model's vocab_size tokens, or holds a length or score that cannot be, is an
// io_error naming the file, the token and what is wrong.
//
// The same vocabulary also comes in a GGUF file's tokenizer.ggml.* metadata (from_gguf), which
// llama.cpp's converters write from the sentencepiece model llama2.c's export reads: both give
// the same tables, so the same ids and text.

#include <shaped/text/core.hpp>

#include <cstddef>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace shaped::io {
class gguf_file;
}

namespace shaped::text {

namespace detail {
struct llama_tables;  // the tokens, their scores and their ids by bytes, as src/llama_tokenizer.cpp reads them
}

class llama_tokenizer {
public:
    static constexpr token_id bos_id = 1;                // <s>, which llama2.c's export spells "\n<s>\n"
    static constexpr token_id eos_id = 2;                // </s>, spelled "\n</s>\n"
    static constexpr token_id first_byte_token_id = 3;   // <0x00>; the byte b is token 3 + b
    // The most bytes a tokenizer.bin may be: llama2.c's of 32000 tokens is 424 KiB, one of
    // Llama 3's 128256 about 2 MiB; 64 MiB refuses what is no tokenizer's file.
    static constexpr std::size_t max_file_bytes = std::size_t{64} << 20;

    // From a tokenizer.bin of `vocab_size` tokens: the model's vocabulary size (its checkpoint's
    // vocab_size, whose sign only says whether the classifier is shared). The file must hold
    // exactly that many tokens, each of at most max_token_length bytes, none empty, none holding
    // a NUL byte, no two alike, every score finite, and ids 3 to 258 must be <0x00> to <0xFF>.
    llama_tokenizer(const std::filesystem::path& file, std::size_t vocab_size);

    // From the file's contents, already in memory; `name` stands for the file in messages.
    static llama_tokenizer from_contents(std::string_view bytes, std::size_t vocab_size,
                                         std::string_view name = "tokenizer.bin");

    // From a GGUF file's vocabulary, in llama.cpp's keys, giving the tables the same model's
    // tokenizer.bin gives: tokenizer.ggml.model must be "llama" (sentencepiece's scored BPE;
    // "gpt2" is a byte-level BPE, another tokenizer); tokenizer.ggml.tokens (strings, exactly
    // `vocab_size`: the model's, token_embd.weight's rows) and tokenizer.ggml.scores (float32, as
    // many) are the tokens and scores, with U+2581 spelled as a space and BOS and EOS as
    // "\n<s>\n" and "\n</s>\n", as llama2.c's export spells them; tokenizer.ggml.token_type
    // (int32), when there, must say byte (6) for ids 3 to 258; tokenizer.ggml.bos_token_id and
    // eos_token_id (uint32), when there, must be 1 and 2 (their default, as llama.cpp's). The
    // tokens are then checked as the constructor checks a file's. Each refusal is an io_error
    // naming the file and the key.
    static llama_tokenizer from_gguf(const io::gguf_file& file, std::size_t vocab_size);

    // The ids of `text`, after BOS (id 1) if `bos` and before EOS (id 2) if `eos`; any bytes
    // (see the rules above). The text "" gives only BOS and EOS, as asked.
    std::vector<token_id> encode(std::string_view text, bool bos, bool eos) const;

    // The text of `id` when it follows `previous`, as run.c's decode prints it while generating:
    // its token's bytes, less a leading space when `previous` is BOS (sentencepiece strips the
    // dummy prefix), and a token spelled <0xXX> (two hex digits) gives that one raw byte.
    // `previous` is only compared with BOS. An id outside the vocabulary is a text_error naming
    // it and the vocabulary's size.
    std::string decode(token_id previous, token_id id) const;

    // The text of a sequence of ids: each id's decode(previous, id), the first having no previous
    // id, joined, except that BOS and EOS give nothing (they mark where sequences begin and end;
    // their tokens are not text). So decode(encode(text, true, eos)) is the text whenever the
    // vocabulary is llama2.c's. A text_error, naming the id and its position, for an id outside
    // the vocabulary.
    std::string decode(std::span<const token_id> ids) const;

    // How many tokens the vocabulary holds: ids run from 0 to vocab_size() - 1.
    std::size_t vocab_size() const;

    // The bytes and the score of token `id`, as the file holds them; text_error outside the
    // vocabulary.
    std::string_view token(token_id id) const;
    float score(token_id id) const;

private:
    explicit llama_tokenizer(std::shared_ptr<const detail::llama_tables> loaded);

    std::shared_ptr<const detail::llama_tables> tables_;  // immutable, so copies share them
};

}  // namespace shaped::text
