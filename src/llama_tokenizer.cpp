// llama2.c's scored BPE (include/shaped/text/llama_tokenizer.hpp), as run.c does it. encode:
//   1. spells the text as symbols: BOS, the dummy prefix, each character's token or its bytes'
//      fallback tokens (character_end)
//   2. merges adjacent symbols, the best-scoring pair first and the leftmost among equals, as
//      run.c's loop does, but through a queue of candidate pairs instead of a scan of all pairs
//      after every merge (merge_symbols)
// Two sources give the tables: tokenizer.bin, whose layout is checked as it is read
// (read_tokenizer_bin: every length against the file's max_token_length and its end, the count
// against the model's vocab_size), and a GGUF's tokenizer.ggml.* keys (read_gguf_tables: their
// types, lengths and ids), respelled as llama2.c's export spells the same vocabulary. Both then
// check the tokens the same way (checked_tables): every score finite, no token empty or holding
// a NUL, no two alike (run.c looks tokens up by their bytes), and ids 3 to 258 the byte tokens
// encode falls back to.

#include "shaped/text/llama_tokenizer.hpp"
#include "shaped/io/gguf.hpp"
#include "untrusted_input.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <queue>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace shaped::text {

struct detail::llama_tables {
    std::vector<std::string> tokens;                       // each token's bytes, by id
    std::vector<float> scores;                             // by id
    std::unordered_map<std::string_view, token_id> ids;    // a token's bytes (viewing `tokens`) -> its id

    std::optional<token_id> id_of(std::string_view bytes) const {
        const auto found = ids.find(bytes);
        if (found == ids.end()) return std::nullopt;
        return found->second;
    }
};

namespace {

namespace fs = std::filesystem;
using io::detail::fail_io;
using io::detail::quote_text;

// Where run.c's search for the best merge starts: a token scoring this or less is never made by
// a merge.
constexpr float worst_merge_score = -1e10f;

// The byte-fallback token of a byte.
token_id byte_token(char byte) {
    return llama_tokenizer::first_byte_token_id + static_cast<token_id>(static_cast<unsigned char>(byte));
}

// What a message about the file begins with.
std::string file_context(std::string_view name) { return "shaped::text::llama_tokenizer: '" + std::string(name) + "': "; }

// Reads and checks a tokenizer.bin's contents; `name` stands for the file in messages.
std::shared_ptr<const detail::llama_tables> read_tokenizer_bin(std::string_view bytes, std::size_t vocab_size, std::string_view name);

// Reads and checks a GGUF's tokenizer.ggml.* keys.
std::shared_ptr<const detail::llama_tables> read_gguf_tables(const io::gguf_file& file, std::size_t vocab_size);

// One past the last byte of the character that starts at text[begin].
std::size_t character_end(std::string_view text, std::size_t begin);

// The symbols after every merge.
std::vector<token_id> merge_symbols(const detail::llama_tables& tables, const std::vector<token_id>& symbols);

// The byte a token spelled <0xXX> stands for; nothing for any other token.
std::optional<char> byte_of_token(std::string_view token);

// text_error unless `id` is in the vocabulary; `position` names where it stood in a sequence.
void check_id(std::string_view function, token_id id, std::size_t vocab_size, std::optional<std::size_t> position = {});

}  // namespace

// ---- the entry points ------------------------------------------------------------------------

llama_tokenizer::llama_tokenizer(const fs::path& file, std::size_t vocab_size)
    : tables_(read_tokenizer_bin(io::detail::read_whole_file(file_context(file.string()), file, "a tokenizer.bin", max_file_bytes),
                                 vocab_size, file.string())) {}

llama_tokenizer::llama_tokenizer(std::shared_ptr<const detail::llama_tables> loaded) : tables_(std::move(loaded)) {}

llama_tokenizer llama_tokenizer::from_contents(std::string_view bytes, std::size_t vocab_size, std::string_view name) {
    return llama_tokenizer(read_tokenizer_bin(bytes, vocab_size, name));
}

llama_tokenizer llama_tokenizer::from_gguf(const io::gguf_file& file, std::size_t vocab_size) {
    return llama_tokenizer(read_gguf_tables(file, vocab_size));
}

std::vector<token_id> llama_tokenizer::encode(std::string_view text, bool bos, bool eos) const {
    const detail::llama_tables& tables = *tables_;
    std::vector<token_id> symbols;
    symbols.reserve(text.size() + 2);
    if (bos) symbols.push_back(bos_id);  // run.c merges it too: no real vocabulary has a token that starts with it
    if (!text.empty()) symbols.push_back(tables.id_of(" ").value_or(byte_token(' ')));
    for (std::size_t begin = 0; begin < text.size();) {
        const std::size_t end = character_end(text, begin);
        const std::string_view character = text.substr(begin, end - begin);
        if (const std::optional<token_id> id = tables.id_of(character)) {
            symbols.push_back(*id);
        } else {
            for (const char byte : character) symbols.push_back(byte_token(byte));
        }
        begin = end;
    }
    std::vector<token_id> ids = merge_symbols(tables, symbols);
    if (eos) ids.push_back(eos_id);
    return ids;
}

std::string llama_tokenizer::decode(token_id previous, token_id id) const {
    check_id("decode", id, vocab_size());
    std::string_view piece = tables_->tokens[static_cast<std::size_t>(id)];
    if (previous == bos_id && piece.starts_with(' ')) piece.remove_prefix(1);
    if (const std::optional<char> byte = byte_of_token(piece)) return std::string(1, *byte);
    return std::string(piece);
}

std::string llama_tokenizer::decode(std::span<const token_id> ids) const {
    std::string text;
    for (std::size_t i = 0; i < ids.size(); ++i) {
        check_id("decode", ids[i], vocab_size(), i);
        if (ids[i] == bos_id || ids[i] == eos_id) continue;
        text += decode(i > 0 ? ids[i - 1] : -1, ids[i]);
    }
    return text;
}

std::size_t llama_tokenizer::vocab_size() const { return tables_->tokens.size(); }

std::string_view llama_tokenizer::token(token_id id) const {
    check_id("token", id, vocab_size());
    return tables_->tokens[static_cast<std::size_t>(id)];
}

float llama_tokenizer::score(token_id id) const {
    check_id("score", id, vocab_size());
    return tables_->scores[static_cast<std::size_t>(id)];
}

// ---- the details -----------------------------------------------------------------------------

namespace {

void check_id(std::string_view function, token_id id, std::size_t vocab_size, std::optional<std::size_t> position) {
    if (id >= 0 && static_cast<std::size_t>(id) < vocab_size) return;
    throw text_error("shaped::text::llama_tokenizer::" + std::string(function) + ": id " + std::to_string(id) +
                     (position ? " (at position " + std::to_string(*position) + ")" : std::string()) +
                     " is outside the vocabulary of " + std::to_string(vocab_size) + " tokens (ids 0 to " +
                     std::to_string(vocab_size - 1) + ")");
}

// ---- text ------------------------------------------------------------------------------------

bool is_continuation_byte(char byte) { return (static_cast<unsigned char>(byte) & 0xc0) == 0x80; }

// As run.c reads UTF-8: the byte at `begin`, whatever it is, then the continuation bytes after
// it, up to four bytes in all. Neither the lead byte nor the count is checked, so a stray
// continuation byte starts a character of its own, and an invalid sequence is one character
// that no token of a real vocabulary spells (its bytes then fall back to byte tokens).
std::size_t character_end(std::string_view text, std::size_t begin) {
    constexpr std::size_t longest = 4;
    std::size_t end = begin + 1;
    while (end < text.size() && end - begin < longest && is_continuation_byte(text[end])) ++end;
    return end;
}

std::optional<char> byte_of_token(std::string_view token) {
    // run.c parses with sscanf("<0x%02hhX>"), which also takes looser spellings ("<0x4>",
    // "<0x41 and more"); here only the spelling sentencepiece gives byte tokens counts, its two
    // digits in either case.
    if (token.size() != 6 || !token.starts_with("<0x") || token.back() != '>') return std::nullopt;
    const auto digit = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        return -1;
    };
    const int high = digit(token[3]), low = digit(token[4]);
    if (high < 0 || low < 0) return std::nullopt;
    return static_cast<char>(high * 16 + low);
}

// ---- merging ---------------------------------------------------------------------------------

std::vector<token_id> merge_symbols(const detail::llama_tables& tables, const std::vector<token_id>& initial) {
    // The symbols as a list linked through `next`, each standing where it was spelled; a symbol
    // that has merged into the one before it is dead.
    constexpr std::size_t none = std::numeric_limits<std::size_t>::max();
    struct symbol {
        token_id id;
        std::size_t previous, next;
        bool alive;
    };
    std::vector<symbol> symbols(initial.size());
    for (std::size_t i = 0; i < initial.size(); ++i)
        symbols[i] = {initial[i], i == 0 ? none : i - 1, i + 1 < initial.size() ? i + 1 : none, true};

    // A pair that may merge: the symbols at `left` and after it, as they were when it was found.
    // The best is the highest score, and among equal scores the leftmost, as run.c's scan finds.
    struct candidate {
        float score;
        std::size_t left;
        token_id left_id, right_id, result;
    };
    const auto worse = [](const candidate& a, const candidate& b) {
        return a.score != b.score ? a.score < b.score : a.left > b.left;
    };
    std::priority_queue<candidate, std::vector<candidate>, decltype(worse)> candidates(worse);
    std::string joined;
    const auto consider = [&](std::size_t left) {
        if (left == none || symbols[left].next == none) return;
        const token_id left_id = symbols[left].id, right_id = symbols[symbols[left].next].id;
        joined = tables.tokens[static_cast<std::size_t>(left_id)];
        joined += tables.tokens[static_cast<std::size_t>(right_id)];
        const std::optional<token_id> result = tables.id_of(joined);
        if (!result) return;
        const float score = tables.scores[static_cast<std::size_t>(*result)];
        if (score > worst_merge_score) candidates.push({score, left, left_id, right_id, *result});
    };
    for (std::size_t i = 0; i + 1 < symbols.size(); ++i) consider(i);

    // Every adjacent pair that can merge is in the queue; one that a merge has taken apart since
    // is passed over when it comes up (a merged symbol's token is longer, so its id never
    // returns).
    while (!candidates.empty()) {
        const candidate pair = candidates.top();
        candidates.pop();
        symbol& left = symbols[pair.left];
        if (!left.alive || left.id != pair.left_id || left.next == none || symbols[left.next].id != pair.right_id) continue;
        symbol& right = symbols[left.next];
        left.id = pair.result;
        left.next = right.next;
        if (right.next != none) symbols[right.next].previous = pair.left;
        right.alive = false;
        consider(left.previous);
        consider(pair.left);
    }
    std::vector<token_id> ids;
    for (std::size_t at = symbols.empty() ? none : 0; at != none; at = symbols[at].next) ids.push_back(symbols[at].id);
    return ids;
}

// ---- the file --------------------------------------------------------------------------------

// The file's bytes, read in order; each read is of bytes that are there (the caller checks).
class file_cursor {
public:
    explicit file_cursor(std::string_view bytes) : bytes_(bytes) {}

    std::size_t offset() const { return at_; }
    std::size_t left() const { return bytes_.size() - at_; }

    std::uint32_t next_u32() {  // little-endian
        std::uint32_t value = 0;
        for (std::size_t k = 0; k < 4; ++k) value |= std::uint32_t{static_cast<unsigned char>(bytes_[at_ + k])} << (8 * k);
        at_ += 4;
        return value;
    }
    std::int32_t next_i32() { return static_cast<std::int32_t>(next_u32()); }
    float next_f32() { return std::bit_cast<float>(next_u32()); }
    std::string_view next_bytes(std::size_t count) {
        const std::string_view taken = bytes_.substr(at_, count);
        at_ += count;
        return taken;
    }

private:
    std::string_view bytes_;
    std::size_t at_ = 0;
};

static_assert(std::numeric_limits<float>::is_iec559 && sizeof(float) == 4, "tokenizer.bin's scores are IEEE float32");

// "1 more byte", "3 more bytes".
std::string counted(std::size_t count, std::string_view noun) {
    return std::to_string(count) + " " + std::string(noun) + (count == 1 ? "" : "s");
}

std::string describe_score(float score) {
    if (std::isnan(score)) return "NaN";
    return score > 0 ? "+infinity" : "-infinity";
}

// How many whole tokens the bytes after the model's vocabulary make, read leniently (any score,
// lengths that fit); nothing when they do not end on a token's end.
std::optional<std::size_t> whole_tokens_after(file_cursor cursor) {
    std::size_t count = 0;
    while (cursor.left() >= 8) {
        (void)cursor.next_f32();
        const std::int32_t length = cursor.next_i32();
        if (length < 0 || static_cast<std::size_t>(length) > cursor.left()) return std::nullopt;
        (void)cursor.next_bytes(static_cast<std::size_t>(length));
        ++count;
    }
    if (cursor.left() != 0) return std::nullopt;
    return count;
}

// Refused before anything is read by it: a vocabulary of llama2.c's layout has ids that fit a
// token_id, and room for the byte tokens.
void check_vocab_size(std::size_t vocab_size, std::string_view context) {
    constexpr std::size_t byte_tokens_end = llama_tokenizer::first_byte_token_id + 256;
    if (vocab_size > static_cast<std::size_t>(std::numeric_limits<token_id>::max()))
        fail_io(context, "the model's vocab_size, " + std::to_string(vocab_size) + ", is past the largest token id, " +
                             std::to_string(std::numeric_limits<token_id>::max()));
    if (vocab_size < byte_tokens_end)
        fail_io(context, "the model's vocabulary of " + std::to_string(vocab_size) +
                             " tokens has no room for the byte-fallback tokens <0x00> to <0xFF> at ids 3 to 258, "
                             "which encode gives the bytes of characters that are no token");
}

// The tables of `tokens` and their `scores` (as many, at least 259: the caller checked), checked
// as every source's are. `context` begins each message; `label(id)` names a token in it.
std::shared_ptr<const detail::llama_tables> checked_tables(std::vector<std::string> tokens, std::vector<float> scores,
                                                           std::string_view context,
                                                           const std::function<std::string(std::size_t)>& label) {
    for (std::size_t id = 0; id < tokens.size(); ++id) {
        const std::string_view text = tokens[id];
        if (!std::isfinite(scores[id])) fail_io(context, label(id) + ": its score is " + describe_score(scores[id]));
        if (text.empty()) fail_io(context, label(id) + " is empty: a token is at least one byte (llama2.c's run.c cannot read one either)");
        if (const std::size_t nul = text.find('\0'); nul != std::string_view::npos)
            fail_io(context, label(id) + " holds a NUL byte (its byte " + std::to_string(nul) + " of " + std::to_string(text.size()) +
                                 "): llama2.c keeps tokens as C strings, which would end there");
    }
    auto tables = std::make_shared<detail::llama_tables>();
    tables->tokens = std::move(tokens);
    tables->scores = std::move(scores);

    // Every token's bytes name one id: encode looks tokens up by their bytes, as run.c does.
    tables->ids.reserve(tables->tokens.size());
    for (std::size_t id = 0; id < tables->tokens.size(); ++id) {
        const auto [found, added] = tables->ids.emplace(tables->tokens[id], static_cast<token_id>(id));
        if (!added)
            fail_io(context, "tokens " + std::to_string(found->second) + " and " + std::to_string(id) + " are both " +
                                 quote_text(tables->tokens[id]) + ": a token's bytes must name one id");
    }
    for (unsigned byte = 0; byte < 256; ++byte) {
        const std::size_t id = llama_tokenizer::first_byte_token_id + byte;
        const std::optional<char> stands_for = byte_of_token(tables->tokens[id]);
        if (!stands_for || static_cast<unsigned char>(*stands_for) != byte) {
            constexpr char hex[] = "0123456789ABCDEF";
            const std::string expected = std::string("<0x") + hex[byte >> 4] + hex[byte & 0xf] + ">";
            fail_io(context, "token " + std::to_string(id) + " is " + quote_text(tables->tokens[id]) + ", expected " + expected +
                                 ": ids 3 to 258 are the byte-fallback tokens <0x00> to <0xFF>, which encode gives the bytes of "
                                 "characters that are no token");
        }
    }
    return tables;
}

std::shared_ptr<const detail::llama_tables> read_tokenizer_bin(std::string_view bytes, std::size_t vocab_size, std::string_view name) {
    const std::string context = file_context(name);
    check_vocab_size(vocab_size, context);

    file_cursor file(bytes);
    if (file.left() < 4)
        fail_io(context, "is " + std::to_string(bytes.size()) + " bytes long, too short for the int32 max_token_length it begins with");
    const std::int32_t max_token_length = file.next_i32();
    if (max_token_length < 0) fail_io(context, "its max_token_length is " + std::to_string(max_token_length) + ", a negative length");

    std::vector<std::string> tokens;
    std::vector<float> scores;
    std::vector<std::size_t> offsets;                            // where each token begins, for messages
    tokens.reserve(std::min(vocab_size, file.left() / 8));  // the file's size, not the caller's count, bounds it
    scores.reserve(tokens.capacity());
    offsets.reserve(tokens.capacity());
    const auto label = [&](std::size_t id) { return "token " + std::to_string(id) + " (at byte " + std::to_string(offsets[id]) + ")"; };
    for (std::size_t id = 0; id < vocab_size; ++id) {
        offsets.push_back(file.offset());
        if (file.left() == 0)
            fail_io(context, "holds " + std::to_string(id) + " tokens, but the model's vocabulary has " + std::to_string(vocab_size) +
                                 ": the file is cut short, or is another model's tokenizer");
        if (file.left() < 8)
            fail_io(context, "ends inside " + label(id) + ": its score and length take 8 bytes, and the file has only " +
                                 counted(file.left(), "more byte"));
        const float score = file.next_f32();
        const std::int32_t length = file.next_i32();
        if (length < 0) fail_io(context, label(id) + ": its length is " + std::to_string(length) + ", a negative length");
        if (length > max_token_length)
            fail_io(context, label(id) + ": its length, " + std::to_string(length) + ", is more than the file's max_token_length, " +
                                 std::to_string(max_token_length));
        if (static_cast<std::size_t>(length) > file.left())
            fail_io(context, label(id) + ": its length, " + std::to_string(length) + ", runs past the file's end (the file has only " +
                                 counted(file.left(), "more byte") + ")");
        tokens.emplace_back(file.next_bytes(static_cast<std::size_t>(length)));
        scores.push_back(score);
    }
    if (file.left() != 0) {
        const std::optional<std::size_t> more = whole_tokens_after(file);
        fail_io(context, "goes on for " + std::to_string(file.left()) + " bytes after token " + std::to_string(vocab_size - 1) +
                             ", the last of the model's vocabulary of " + std::to_string(vocab_size) +
                             (more ? " tokens: they hold " + counted(*more, "more token") + ", so it is another model's tokenizer"
                                   : " tokens"));
    }
    return checked_tables(std::move(tokens), std::move(scores), context, label);
}

// ---- a GGUF's keys ---------------------------------------------------------------------------

// How messages name a GGUF key, as the GGUF reader's do.
std::string key_label(std::string_view key) { return "key " + quote_text(key); }

// A sentencepiece piece as llama2.c's export writes it: its word boundaries, U+2581, as spaces.
std::string spaced(std::string_view piece) {
    constexpr std::string_view boundary = "\xE2\x96\x81";
    std::string out;
    out.reserve(piece.size());
    for (std::size_t at = 0; at < piece.size();) {
        if (piece.substr(at).starts_with(boundary)) {
            out += ' ';
            at += boundary.size();
        } else {
            out += piece[at++];
        }
    }
    return out;
}

// The id `key` names, when the file has it: in the vocabulary, and the one this tokenizer's
// constant is (llama2.c's BOS and EOS are fixed ids, as every Llama 1 and 2 vocabulary has them).
void check_special_id(const io::gguf_file& file, std::string_view context, std::string_view key, token_id expected,
                      std::size_t vocab_size) {
    if (!file.has_key(key)) return;  // llama.cpp's default for a "llama" vocabulary is the expected id
    const std::uint32_t id = file.get<std::uint32_t>(key);
    if (id >= vocab_size)
        fail_io(context, key_label(key) + " is " + std::to_string(id) + ", outside the vocabulary of " +
                             std::to_string(vocab_size) + " tokens (ids 0 to " + std::to_string(vocab_size - 1) + ")");
    if (id != static_cast<std::uint32_t>(expected))
        fail_io(context, key_label(key) + " is " + std::to_string(id) + ", expected " + std::to_string(expected) +
                             ": llama_tokenizer's ids are llama2.c's, BOS 1 and EOS 2");
}

std::shared_ptr<const detail::llama_tables> read_gguf_tables(const io::gguf_file& file, std::size_t vocab_size) {
    const std::string context = file_context(file.path().string());
    check_vocab_size(vocab_size, context);

    constexpr std::string_view model_key = "tokenizer.ggml.model", tokens_key = "tokenizer.ggml.tokens",
                               scores_key = "tokenizer.ggml.scores", types_key = "tokenizer.ggml.token_type";
    if (const std::string& model = file.get<std::string>(model_key); model != "llama")
        fail_io(context, key_label(model_key) + " is " + quote_text(model) +
                             ", expected \"llama\": only sentencepiece's scored BPE (llama2.c's) is read here" +
                             (model == "gpt2" ? "; \"gpt2\" is a byte-level BPE with merges, another tokenizer" : ""));

    const std::vector<std::string>& pieces = file.get_array<std::string>(tokens_key);
    if (pieces.size() != vocab_size)
        fail_io(context, key_label(tokens_key) + " holds " + std::to_string(pieces.size()) +
                             " tokens, but the model's vocabulary (token_embd.weight's rows) has " + std::to_string(vocab_size));
    const std::vector<float>& scores = file.get_array<float>(scores_key);
    if (scores.size() != pieces.size())
        fail_io(context, key_label(scores_key) + " holds " + std::to_string(scores.size()) + " scores, but " +
                             key_label(tokens_key) + " " + std::to_string(pieces.size()) + " tokens: each token has one");
    if (file.has_key(types_key)) {
        // ggml's token types: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte.
        constexpr std::int32_t byte_type = 6;
        const std::vector<std::int32_t>& types = file.get_array<std::int32_t>(types_key);
        if (types.size() != pieces.size())
            fail_io(context, key_label(types_key) + " holds " + std::to_string(types.size()) + " types, but " +
                                 key_label(tokens_key) + " " + std::to_string(pieces.size()) + " tokens: each token has one");
        for (std::size_t id = llama_tokenizer::first_byte_token_id; id < llama_tokenizer::first_byte_token_id + 256; ++id)
            if (types[id] != byte_type)
                fail_io(context, key_label(types_key) + " says token " + std::to_string(id) + " (" + quote_text(pieces[id]) +
                                     ") is of type " + std::to_string(types[id]) +
                                     ", expected 6 (byte): ids 3 to 258 are the byte-fallback tokens <0x00> to <0xFF>");
    }
    check_special_id(file, context, "tokenizer.ggml.bos_token_id", llama_tokenizer::bos_id, vocab_size);
    check_special_id(file, context, "tokenizer.ggml.eos_token_id", llama_tokenizer::eos_id, vocab_size);

    // As llama2.c's export (tokenizer.py) writes the same sentencepiece model, so that both
    // sources give one table: spaces for U+2581, and BOS and EOS, which the converters name
    // "<s>" and "</s>", respelled.
    std::vector<std::string> tokens;
    tokens.reserve(pieces.size());
    for (const std::string& piece : pieces) tokens.push_back(spaced(piece));
    tokens[static_cast<std::size_t>(llama_tokenizer::bos_id)] = "\n<s>\n";
    tokens[static_cast<std::size_t>(llama_tokenizer::eos_id)] = "\n</s>\n";
    return checked_tables(std::move(tokens), scores, context + key_label(tokens_key) + ": ",
                          [](std::size_t id) { return "token " + std::to_string(id); });
}

}  // namespace

}  // namespace shaped::text
