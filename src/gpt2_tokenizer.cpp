// GPT-2's byte-level BPE (include/shaped/text/gpt2_tokenizer.hpp), as OpenAI's encoder.py does
// it. encode:
//   1. reads the text's characters, refusing bytes that are not UTF-8 (read_characters)
//   2. splits them into the pattern's words (word_end)
//   3. spells each word as its bytes' one-byte tokens and merges adjacent pairs, the pair of
//      lowest rank first, all of its places in one pass, as the reference's loop does (merge_word)
// The two files are checked entry by entry and line by line as they are read (read_vocab,
// read_merges): ids unique and dense, every token spelled in the byte-level alphabet, all 256
// one-byte tokens present, every merge's parts and result tokens of the vocabulary.

#include "shaped/text/gpt2_tokenizer.hpp"
#include "untrusted_input.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <limits>
#include <queue>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace shaped::text {

namespace {

// The merge of a pair of adjacent tokens: its rank (its line's place in the merges file, the
// lowest merged first) and the token it makes.
struct merge {
    std::int32_t rank;
    token_id result;
};

// A pair of token ids as one key.
std::uint64_t pair_key(token_id left, token_id right) {
    return (std::uint64_t{static_cast<std::uint32_t>(left)} << 32) | static_cast<std::uint32_t>(right);
}

}  // namespace

struct detail::gpt2_tables {
    std::vector<std::string> token_bytes;              // each token's bytes, by id
    std::array<token_id, 256> byte_token{};            // the one-byte token of each byte
    std::unordered_map<std::uint64_t, merge> merges;   // by pair_key(left, right)
};

namespace {

namespace fs = std::filesystem;
using io::detail::fail_io;
using io::detail::printable_excerpt;
using io::detail::quote_text;

using token_ids = std::unordered_map<std::string, token_id>;  // a token's bytes -> its id

// The two files of a tokenizer directory: Hugging Face's names first, then OpenAI's.
std::pair<fs::path, fs::path> tokenizer_files(const fs::path& directory);

// Reads and checks both files' contents; the names (paths) stand for the files in messages.
std::shared_ptr<const detail::gpt2_tables> load_tables(std::string_view vocab_json, std::string_view merges_text,
                                                          std::string_view vocab_name, std::string_view merges_name);

// What a message about a file begins with.
std::string file_context(std::string_view name) { return "shaped::text::gpt2_tokenizer: '" + std::string(name) + "': "; }

std::shared_ptr<const detail::gpt2_tables> load_files(const fs::path& vocab_file, const fs::path& merges_file) {
    const std::string vocab = io::detail::read_whole_file(file_context(vocab_file.string()), vocab_file,
                                                          "a vocabulary (JSON)", gpt2_tokenizer::max_file_bytes);
    const std::string merges = io::detail::read_whole_file(file_context(merges_file.string()), merges_file,
                                                           "a merges file", gpt2_tokenizer::max_file_bytes);
    return load_tables(vocab, merges, vocab_file.string(), merges_file.string());
}

// ---- text ------------------------------------------------------------------------------------

// The pattern's classes of characters; `other` is what none of the first three hold.
enum class character_class : std::uint8_t { letter, number, space, other };

struct character {
    char32_t code_point;
    character_class kind;
    std::size_t offset;  // of its first byte in the text
};

// Every character of `text`, classed; text_error at the first byte that is not UTF-8.
std::vector<character> read_characters(std::string_view text);

// Where the word that starts at characters[begin] ends (one past its last character).
std::size_t word_end(std::span<const character> characters, std::size_t begin);

// Appends the ids of one word (its bytes) to `ids`.
void merge_word(const detail::gpt2_tables& tables, std::string_view word, std::vector<token_id>& ids);

// How many bytes at the end of `bytes` begin a UTF-8 character that more bytes could complete.
std::size_t incomplete_tail(std::string_view bytes);

}  // namespace

// ---- the entry points ------------------------------------------------------------------------

gpt2_tokenizer::gpt2_tokenizer(const fs::path& directory) {
    const auto [vocab_file, merges_file] = tokenizer_files(directory);
    tables_ = load_files(vocab_file, merges_file);
}

gpt2_tokenizer::gpt2_tokenizer(const fs::path& vocab_file, const fs::path& merges_file)
    : tables_(load_files(vocab_file, merges_file)) {}

gpt2_tokenizer::gpt2_tokenizer(std::shared_ptr<const detail::gpt2_tables> loaded) : tables_(std::move(loaded)) {}

gpt2_tokenizer gpt2_tokenizer::from_contents(std::string_view vocab_json, std::string_view merges_text,
                                             std::string_view vocab_name, std::string_view merges_name) {
    return gpt2_tokenizer(load_tables(vocab_json, merges_text, vocab_name, merges_name));
}

std::vector<token_id> gpt2_tokenizer::encode(std::string_view text) const {
    const std::vector<character> characters = read_characters(text);
    std::vector<token_id> ids;
    for (std::size_t begin = 0; begin < characters.size();) {
        const std::size_t end = word_end(characters, begin);
        const std::size_t first_byte = characters[begin].offset;
        const std::size_t end_byte = end < characters.size() ? characters[end].offset : text.size();
        merge_word(*tables_, text.substr(first_byte, end_byte - first_byte), ids);
        begin = end;
    }
    return ids;
}

std::string gpt2_tokenizer::decode(std::span<const token_id> ids) const {
    const std::vector<std::string>& token_bytes = tables_->token_bytes;
    std::string bytes;
    for (std::size_t i = 0; i < ids.size(); ++i) {
        const token_id id = ids[i];
        if (id < 0 || static_cast<std::size_t>(id) >= token_bytes.size()) {
            throw text_error("shaped::text::gpt2_tokenizer::decode: id " + std::to_string(id) + " (at position " +
                             std::to_string(i) + ") is outside the vocabulary of " +
                             std::to_string(token_bytes.size()) + " tokens (ids 0 to " +
                             std::to_string(token_bytes.size() - 1) + ")");
        }
        bytes += token_bytes[static_cast<std::size_t>(id)];
    }
    return bytes;
}

std::size_t gpt2_tokenizer::vocab_size() const { return tables_->token_bytes.size(); }

gpt2_stream_decoder::gpt2_stream_decoder(gpt2_tokenizer tokenizer) : tokenizer_(std::move(tokenizer)) {}

std::string gpt2_stream_decoder::decode(token_id id) { return stream_.push(tokenizer_.decode(std::span(&id, 1))); }

std::string gpt2_stream_decoder::flush() { return stream_.flush(); }

std::string utf8_stream::push(std::string_view bytes) {
    held_ += bytes;
    const std::size_t complete = held_.size() - incomplete_tail(held_);
    std::string done = held_.substr(0, complete);
    held_.erase(0, complete);
    return done;
}

std::string utf8_stream::flush() { return std::exchange(held_, std::string()); }

// ---- the details -----------------------------------------------------------------------------

namespace {

// ---- UTF-8 and the byte-level alphabet -------------------------------------------------------

enum class utf8_status { complete, truncated, invalid };

struct utf8_read {
    utf8_status status;
    char32_t code_point;
    std::size_t length;
};

// The character whose first byte is text[at], as RFC 3629 spells characters: no overlong form,
// no surrogate, nothing past U+10FFFF. `truncated` when the text ends inside a character whose
// bytes are valid so far.
utf8_read read_utf8(std::string_view text, std::size_t at) {
    const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
    const unsigned char lead = byte(at);
    if (lead < 0x80) return {utf8_status::complete, lead, 1};
    std::size_t length = 0;
    char32_t code_point = 0;
    unsigned char second_low = 0x80, second_high = 0xbf;  // what the second byte may be
    if (lead >= 0xc2 && lead <= 0xdf) {
        length = 2;
        code_point = lead & 0x1fu;
    } else if (lead >= 0xe0 && lead <= 0xef) {
        length = 3;
        code_point = lead & 0x0fu;
        if (lead == 0xe0) second_low = 0xa0;   // else overlong
        if (lead == 0xed) second_high = 0x9f;  // else a surrogate
    } else if (lead >= 0xf0 && lead <= 0xf4) {
        length = 4;
        code_point = lead & 0x07u;
        if (lead == 0xf0) second_low = 0x90;   // else overlong
        if (lead == 0xf4) second_high = 0x8f;  // else past U+10FFFF
    } else {
        return {utf8_status::invalid, 0, 1};
    }
    for (std::size_t k = 1; k < length; ++k) {
        if (at + k >= text.size()) return {utf8_status::truncated, 0, k};
        const unsigned char next = byte(at + k);
        const unsigned char low = k == 1 ? second_low : 0x80, high = k == 1 ? second_high : 0xbf;
        if (next < low || next > high) return {utf8_status::invalid, 0, k};
        code_point = (code_point << 6) | (next & 0x3fu);
    }
    return {utf8_status::complete, code_point, length};
}

std::size_t incomplete_tail(std::string_view bytes) {
    for (std::size_t k = 1; k <= 3 && k <= bytes.size(); ++k) {
        const auto byte = static_cast<unsigned char>(bytes[bytes.size() - k]);
        if ((byte & 0xc0) == 0x80) continue;  // a continuation byte: the character began further back
        return read_utf8(bytes, bytes.size() - k).status == utf8_status::truncated ? k : 0;
    }
    return 0;
}

// GPT-2's bytes_to_unicode: the bytes that print as Latin-1 characters are spelled by those
// characters, and the other 68 (controls, space, no-break space, soft hyphen), in order, by
// U+0100 to U+0143, so that every token is printable text in the files.
constexpr bool spelled_as_itself(unsigned byte) {
    return (byte >= '!' && byte <= '~') || (byte >= 0xa1 && byte <= 0xac) || (byte >= 0xae && byte <= 0xff);
}

constexpr char32_t alphabet_end = 0x144;  // one past the alphabet's last symbol

struct byte_alphabet {
    std::array<char32_t, 256> symbol_of_byte{};
    std::array<int, alphabet_end> byte_of_symbol{};  // -1 where a code point is no symbol
};

constexpr byte_alphabet make_byte_alphabet() {
    byte_alphabet alphabet;
    alphabet.byte_of_symbol.fill(-1);
    char32_t next_symbol = 0x100;
    for (unsigned byte = 0; byte < 256; ++byte) {
        const char32_t symbol = spelled_as_itself(byte) ? byte : next_symbol++;
        alphabet.symbol_of_byte[byte] = symbol;
        alphabet.byte_of_symbol[symbol] = static_cast<int>(byte);
    }
    return alphabet;
}

constexpr byte_alphabet alphabet = make_byte_alphabet();
static_assert(alphabet.symbol_of_byte[' '] == 0x120 && alphabet.symbol_of_byte[0xff] == 0xff &&
              alphabet.symbol_of_byte[0xad] == alphabet_end - 1);

// The bytes a token of the files spells; io_error, naming `what`, for a spelling that is empty
// or holds a character that is not a symbol of the alphabet.
std::string bytes_of_spelling(std::string_view spelling, std::string_view context, const std::string& what) {
    if (spelling.empty()) fail_io(context, what + ": an empty token, which spells no byte");
    std::string bytes;
    for (std::size_t at = 0; at < spelling.size();) {
        const utf8_read read = read_utf8(spelling, at);
        if (read.status != utf8_status::complete) fail_io(context, what + ": not valid UTF-8");
        if (read.code_point >= alphabet_end || alphabet.byte_of_symbol[read.code_point] < 0) {
            constexpr char hex[] = "0123456789ABCDEF";
            std::string code = "U+";
            for (int shift = read.code_point > 0xffff ? 20 : 12; shift >= 0; shift -= 4) code += hex[(read.code_point >> shift) & 0xf];
            fail_io(context, what + ": holds " + code + ", which is no symbol of GPT-2's byte-level alphabet");
        }
        bytes += static_cast<char>(alphabet.byte_of_symbol[read.code_point]);
        at += read.length;
    }
    return bytes;
}

// The spelling of a token's bytes, for messages.
std::string spelling_of(std::string_view bytes) {
    std::string spelling;
    for (const char c : bytes) {
        const char32_t symbol = alphabet.symbol_of_byte[static_cast<unsigned char>(c)];
        if (symbol < 0x80) {
            spelling += static_cast<char>(symbol);
        } else {  // two UTF-8 bytes: every symbol is below U+0800
            spelling += static_cast<char>(0xc0 | (symbol >> 6));
            spelling += static_cast<char>(0x80 | (symbol & 0x3f));
        }
    }
    return spelling;
}

// ---- the pattern -----------------------------------------------------------------------------

struct code_point_range {
    char32_t first, last;
    character_class kind;
};

#include "unicode_classes.inc"

constexpr bool ordered_and_disjoint(std::span<const code_point_range> ranges) {
    for (std::size_t i = 0; i < ranges.size(); ++i) {
        if (ranges[i].first > ranges[i].last) return false;
        if (i > 0 && ranges[i - 1].last >= ranges[i].first) return false;
    }
    return true;
}
static_assert(ordered_and_disjoint(unicode_class_ranges), "src/unicode_classes.inc: ranges out of order");

character_class class_of(char32_t code_point) {
    const auto* after = std::upper_bound(std::begin(unicode_class_ranges), std::end(unicode_class_ranges), code_point,
                                         [](char32_t c, const code_point_range& range) { return c < range.first; });
    if (after == std::begin(unicode_class_ranges)) return character_class::other;
    const code_point_range& range = *(after - 1);
    return code_point <= range.last ? range.kind : character_class::other;
}

std::vector<character> read_characters(std::string_view text) {
    std::vector<character> characters;
    for (std::size_t at = 0; at < text.size();) {
        const utf8_read read = read_utf8(text, at);
        if (read.status != utf8_status::complete) {
            throw text_error("shaped::text::gpt2_tokenizer::encode: the text is not valid UTF-8 at byte " +
                             std::to_string(at) + " (\"" + printable_excerpt(text.substr(at), 8) + "\")" +
                             (read.status == utf8_status::truncated ? ": it ends inside a character" : ""));
        }
        characters.push_back({read.code_point, class_of(read.code_point), at});
        at += read.length;
    }
    return characters;
}

// The pattern's alternatives, tried in order at `begin`, where one always matches:
//   's|'t|'re|'ve|'m|'ll|'d             a contraction (lower case only, as the pattern says)
//   | ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+   a run of one class, after at most one space
//   |\s+(?!\S)                          white space, less the last character if a word follows
//   |\s+                                white space (a lone space or tab before a word)
std::size_t word_end(std::span<const character> characters, std::size_t begin) {
    const std::size_t size = characters.size();
    const auto is = [&](std::size_t i, char32_t c) { return i < size && characters[i].code_point == c; };

    if (is(begin, U'\'')) {
        if (is(begin + 1, U's') || is(begin + 1, U't') || is(begin + 1, U'm') || is(begin + 1, U'd')) return begin + 2;
        if ((is(begin + 1, U'r') && is(begin + 2, U'e')) || (is(begin + 1, U'v') && is(begin + 2, U'e')) ||
            (is(begin + 1, U'l') && is(begin + 2, U'l')))
            return begin + 3;
    }

    const bool space_then_run = is(begin, U' ') && begin + 1 < size && characters[begin + 1].kind != character_class::space;
    const std::size_t run_begin = space_then_run ? begin + 1 : begin;
    const character_class kind = characters[run_begin].kind;
    std::size_t end = run_begin + 1;
    while (end < size && characters[end].kind == kind) ++end;
    if (kind != character_class::space) return end;

    // White space from `begin` to `end`: up to the end of the text, or up to the character before
    // the word that follows, which keeps its space; a single white space character is a word.
    if (end == size || end - begin == 1) return end;
    return end - 1;
}

// ---- merging ---------------------------------------------------------------------------------

void merge_word(const detail::gpt2_tables& tables, std::string_view word, std::vector<token_id>& ids) {
    // The word's symbols as a list linked through `next`, each standing where its first byte is;
    // a symbol that has merged into the one before it is dead.
    constexpr std::size_t none = std::numeric_limits<std::size_t>::max();
    struct symbol {
        token_id id;
        std::size_t previous, next;
        bool alive;
    };
    std::vector<symbol> symbols(word.size());
    for (std::size_t i = 0; i < word.size(); ++i)
        symbols[i] = {tables.byte_token[static_cast<unsigned char>(word[i])], i == 0 ? none : i - 1,
                      i + 1 < word.size() ? i + 1 : none, true};

    // A pair that may merge: the symbols at `left` and after it, as they were when it was found.
    // Popped lowest rank first and, within a rank, leftmost first.
    struct candidate {
        std::int32_t rank;
        std::size_t left;
        token_id left_id, right_id, result;
        bool operator>(const candidate& other) const {
            return rank != other.rank ? rank > other.rank : left > other.left;
        }
    };
    std::priority_queue<candidate, std::vector<candidate>, std::greater<>> candidates;
    const auto consider = [&](std::size_t left) {
        if (left == none || symbols[left].next == none) return;
        const token_id left_id = symbols[left].id, right_id = symbols[symbols[left].next].id;
        const auto found = tables.merges.find(pair_key(left_id, right_id));
        if (found != tables.merges.end()) candidates.push({found->second.rank, left, left_id, right_id, found->second.result});
    };
    for (std::size_t i = 0; i + 1 < word.size(); ++i) consider(i);

    // Each rank in one pass over the places its pair holds now, left to right, as the reference
    // rewrites the word: a pair that a merge to its left has taken apart is passed over, and the
    // pairs a merge makes wait until the pass is done (no new pair has this rank: its left or
    // right is the new, longer token).
    std::vector<candidate> pass;
    std::vector<std::size_t> merged_at;
    while (!candidates.empty()) {
        pass.clear();
        merged_at.clear();
        const std::int32_t rank = candidates.top().rank;
        while (!candidates.empty() && candidates.top().rank == rank) {
            pass.push_back(candidates.top());
            candidates.pop();
        }
        for (const candidate& pair : pass) {
            symbol& left = symbols[pair.left];
            if (!left.alive || left.id != pair.left_id || left.next == none || symbols[left.next].id != pair.right_id)
                continue;
            symbol& right = symbols[left.next];
            left.id = pair.result;
            left.next = right.next;
            if (right.next != none) symbols[right.next].previous = pair.left;
            right.alive = false;
            merged_at.push_back(pair.left);
        }
        for (const std::size_t at : merged_at) {
            consider(symbols[at].previous);
            consider(at);
        }
    }
    for (std::size_t at = word.empty() ? none : 0; at != none; at = symbols[at].next) ids.push_back(symbols[at].id);
}

// ---- the files -------------------------------------------------------------------------------

std::pair<fs::path, fs::path> tokenizer_files(const fs::path& directory) {
    const std::string context = "shaped::text::gpt2_tokenizer: '" + directory.string() + "': ";
    std::error_code error;
    const auto type = fs::status(directory, error).type();
    if (type == fs::file_type::not_found) fail_io(context, "directory not found");
    if (type != fs::file_type::directory) fail_io(context, "is not a directory");
    constexpr std::array<std::pair<std::string_view, std::string_view>, 2> names{{
        {"vocab.json", "merges.txt"},    // Hugging Face's
        {"encoder.json", "vocab.bpe"},   // OpenAI's
    }};
    for (const auto& [vocab, merges] : names) {
        if (fs::exists(directory / vocab, error) && fs::exists(directory / merges, error))
            return {directory / vocab, directory / merges};
    }
    fail_io(context, "holds neither vocab.json and merges.txt nor encoder.json and vocab.bpe");
}

// vocab.json's object of token -> id, read as it is parsed (nlohmann's SAX interface: no DOM,
// so memory follows what the file really holds), each entry checked as it closes.
class vocab_reader {
public:
    explicit vocab_reader(std::string_view context) : context_(context) {}

    // Each token's bytes and id, in the file's order.
    std::vector<std::pair<std::string, std::uint64_t>> entries;

    bool start_object(std::size_t) {
        if (depth_ == 1) value_is("an object");
        ++depth_;
        return true;
    }
    bool end_object() {
        --depth_;
        return true;
    }
    bool key(std::string& key) {
        ++entry_;
        key_ = key;
        return true;
    }
    bool number_unsigned(std::uint64_t id) {
        if (depth_ == 0) value_is("a number");
        entries.emplace_back(bytes_of_spelling(key_, context_, entry_label()), id);
        if (id > static_cast<std::uint64_t>(std::numeric_limits<token_id>::max()))
            fail_io(context_, entry_label() + ": id " + std::to_string(id) + " is past the largest token id, " +
                                  std::to_string(std::numeric_limits<token_id>::max()));
        return true;
    }
    bool number_integer(std::int64_t) { return value_is("a negative integer"); }
    bool number_float(double, const std::string&) { return value_is("a non-integer number"); }
    bool string(std::string&) { return value_is("a string"); }
    bool boolean(bool) { return value_is("a boolean"); }
    bool null() { return value_is("null"); }
    bool binary(nlohmann::json::binary_t&) { return value_is("binary data"); }
    bool start_array(std::size_t) { return value_is("an array"); }
    bool end_array() { return true; }
    bool parse_error(std::size_t, const std::string&, const nlohmann::json::exception& error) {
        fail_io(context_, "not valid JSON: " + printable_excerpt(error.what(), 400));
    }

private:
    std::string entry_label() const { return "entry " + std::to_string(entry_) + " (token " + quote_text(key_) + ")"; }

    // A value where an object of token -> id has none of its kind.
    bool value_is(std::string_view kind) {
        if (depth_ == 0) fail_io(context_, "holds " + std::string(kind) + ", expected an object of token -> id");
        fail_io(context_, entry_label() + ": its id is " + std::string(kind) + ", expected a non-negative integer");
    }

    std::string_view context_;
    int depth_ = 0;
    std::size_t entry_ = 0;  // counted from 1, as a person counts
    std::string key_;
};

// Each token's bytes by id, from the vocabulary's entries; `ids` gets each token's id.
std::vector<std::string> read_vocab(std::string_view json, std::string_view context, token_ids& ids) {
    vocab_reader reader(context);
    nlohmann::json::sax_parse(json.begin(), json.end(), &reader);

    // By id: then a repeated id stands next to its twin, and a gap is where ids and places part.
    std::vector<std::pair<std::string, std::uint64_t>>& entries = reader.entries;
    std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
    std::vector<std::string> token_bytes;
    token_bytes.reserve(entries.size());
    for (std::size_t i = 0; i < entries.size(); ++i) {
        auto& [bytes, id] = entries[i];
        const std::string token = "token " + quote_text(spelling_of(bytes));
        if (i > 0 && entries[i - 1].second == id)
            fail_io(context, "id " + std::to_string(id) + " is given to two tokens, " +
                                 quote_text(spelling_of(token_bytes.back())) + " and " + quote_text(spelling_of(bytes)));
        if (id != i)
            fail_io(context, "the ids must run from 0 to " + std::to_string(entries.size() - 1) + " (one a token), but " +
                                 token + " has id " + std::to_string(id) + " and no token has id " + std::to_string(i));
        if (!ids.emplace(bytes, static_cast<token_id>(id)).second)
            fail_io(context, token + " appears twice");
        token_bytes.push_back(std::move(bytes));
    }
    return token_bytes;
}

// Each merge of merges_text, checked against the vocabulary (`ids`, the file `vocab_name`).
std::unordered_map<std::uint64_t, merge> read_merges(std::string_view text, std::string_view context,
                                                     const token_ids& ids, std::string_view vocab_name) {
    std::unordered_map<std::uint64_t, merge> merges;
    std::size_t line_number = 0;
    for (std::size_t begin = 0; begin < text.size();) {
        std::size_t end = text.find('\n', begin);
        if (end == std::string_view::npos) end = text.size();
        std::string_view line = text.substr(begin, end - begin);
        begin = end + 1;
        ++line_number;
        if (line.ends_with('\r')) line.remove_suffix(1);
        const std::string at = "line " + std::to_string(line_number);
        for (std::size_t i = 0; i < line.size();) {
            const utf8_read read = read_utf8(line, i);
            if (read.status != utf8_status::complete)
                fail_io(context, at + ": not valid UTF-8 at byte " + std::to_string(i + 1) + " of the line (\"" +
                                     printable_excerpt(line) + "\")");
            i += read.length;
        }

        if (line_number == 1) {
            if (!line.starts_with("#version"))
                fail_io(context, at + ": expected the \"#version\" line a merges file begins with, found " +
                                     quote_text(printable_excerpt(line)));
            continue;
        }
        const std::size_t space = line.find(' ');
        if (space == std::string_view::npos || space == 0 || space + 1 == line.size() ||
            line.find(' ', space + 1) != std::string_view::npos)
            fail_io(context, at + ": expected two tokens separated by one space, found " +
                                 quote_text(printable_excerpt(line)));
        const std::string_view left_spelling = line.substr(0, space), right_spelling = line.substr(space + 1);
        const std::string left = bytes_of_spelling(left_spelling, context, at + ": token " + quote_text(left_spelling));
        const std::string right = bytes_of_spelling(right_spelling, context, at + ": token " + quote_text(right_spelling));
        const auto id_of = [&](const std::string& bytes, std::string_view what) {
            const auto found = ids.find(bytes);
            if (found == ids.end())
                fail_io(context, at + ": " + std::string(what) + quote_text(spelling_of(bytes)) + " is not a token of '" +
                                     std::string(vocab_name) + "'");
            return found->second;
        };
        const token_id left_id = id_of(left, "");
        const token_id right_id = id_of(right, "");
        const token_id result = id_of(left + right, "the merge's result ");

        if (merges.size() == static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
            fail_io(context, at + ": more merges than a rank can count");
        const auto rank = static_cast<std::int32_t>(merges.size());
        const auto [found, added] = merges.emplace(pair_key(left_id, right_id), merge{rank, result});
        if (!added)
            fail_io(context, at + ": repeats the merge of line " + std::to_string(found->second.rank + 2) + ", " +
                                 quote_text(line));
    }
    if (line_number == 0) fail_io(context, "is empty, expected a \"#version\" line and then the merges");
    return merges;
}

std::shared_ptr<const detail::gpt2_tables> load_tables(std::string_view vocab_json, std::string_view merges_text,
                                                          std::string_view vocab_name, std::string_view merges_name) {
    const std::string vocab_context = file_context(vocab_name);
    auto loaded = std::make_shared<detail::gpt2_tables>();
    token_ids ids;
    loaded->token_bytes = read_vocab(vocab_json, vocab_context, ids);
    for (unsigned byte = 0; byte < 256; ++byte) {
        const auto found = ids.find(std::string(1, static_cast<char>(byte)));
        if (found == ids.end()) {
            constexpr char hex[] = "0123456789abcdef";
            fail_io(vocab_context, std::string("has no token for the byte 0x") + hex[byte >> 4] + hex[byte & 0xf] +
                                       " (spelled " + quote_text(spelling_of(std::string(1, static_cast<char>(byte)))) +
                                       "): a byte-level vocabulary holds all 256");
        }
        loaded->byte_token[byte] = found->second;
    }
    loaded->merges = read_merges(merges_text, file_context(merges_name), ids, vocab_name);
    return loaded;
}

}  // namespace

}  // namespace shaped::text
