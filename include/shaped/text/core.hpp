#pragma once
// What every tokenizer in text/ shares: the id type and the error for text and ids that a
// tokenizer cannot take. Problems with a tokenizer's files are shaped::io::io_error, as for
// every file shaped reads.

#include <shaped/io/core.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace shaped::text {

// A token's index in its vocabulary; int32, as a model's embedding lookup takes it.
using token_id = std::int32_t;

// Raised for text a tokenizer cannot encode (bytes that are not UTF-8) and for ids outside its
// vocabulary. The message names the function, the offending id or byte offset, and the limit.
class text_error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Bytes in, whole UTF-8 characters out: what a streaming decoder prints as ids arrive, holding
// back the bytes of a character that more bytes could complete (a byte-level tokenizer's id may
// be half of one).
class utf8_stream {
public:
    // The characters these bytes complete, possibly none.
    std::string push(std::string_view bytes);
    // The bytes still held back (an incomplete character), and a fresh start.
    std::string flush();

private:
    std::string held_;
};

}  // namespace shaped::text
