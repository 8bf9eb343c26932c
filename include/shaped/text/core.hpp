#pragma once
// What every tokenizer in text/ shares: the id type and the error for text and ids that a
// tokenizer cannot take. Problems with a tokenizer's files are shaped::io::io_error, as for
// every file shaped reads.

#include <shaped/io/core.hpp>

#include <cstdint>
#include <stdexcept>

namespace shaped::text {

// A token's index in its vocabulary; int32, as a model's embedding lookup takes it.
using token_id = std::int32_t;

// Raised for text a tokenizer cannot encode (bytes that are not UTF-8) and for ids outside its
// vocabulary. The message names the function, the offending id or byte offset, and the limit.
class text_error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

}  // namespace shaped::text
