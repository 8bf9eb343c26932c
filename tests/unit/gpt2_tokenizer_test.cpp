// GPT-2's tokenizer: the reference's ids for every kind of text (the npm package gpt-3-encoder,
// through tests/unit/data/gpt2_tokenizer/reference.txt, which
// tools/text/make_gpt2_tokenizer_fixtures.js writes), round trips, the streaming decoder, the
// merge loop against a plain port of encoder.py's on vocabularies made at random, both pairs of
// file names, and every kind of damaged file.

#include "shaped/text/gpt2_tokenizer.hpp"

#include "file_support.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#ifndef SHAPED_TEST_DATA_DIR
#error "SHAPED_TEST_DATA_DIR must name the tests/unit/data directory"
#endif
#ifndef SHAPED_GPT2_TOKENIZER_DIR
#error "SHAPED_GPT2_TOKENIZER_DIR must name the directory of GPT-2's encoder.json and vocab.bpe"
#endif

namespace {

namespace fs = std::filesystem;
using namespace file_support;
using Catch::Matchers::Contains;
using shaped::io::io_error;
using shaped::text::gpt2_stream_decoder;
using shaped::text::gpt2_tokenizer;
using shaped::text::text_error;
using shaped::text::token_id;
using ids_t = std::vector<token_id>;

const fs::path gpt2_directory = SHAPED_GPT2_TOKENIZER_DIR;

// Loaded once: the real vocabulary is 50,257 tokens and 50,000 merges.
const gpt2_tokenizer& gpt2() {
    static const gpt2_tokenizer tokenizer(gpt2_directory);
    return tokenizer;
}

// ---- the reference fixture -------------------------------------------------------------------

struct reference_case {
    std::string name;
    std::string text;
    ids_t ids;
};

std::string from_hex(const std::string& hex) {
    REQUIRE(hex.size() % 2 == 0);
    std::string bytes;
    for (std::size_t i = 0; i < hex.size(); i += 2) bytes += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
    return bytes;
}

// The cases of reference.txt: "case <name>", then "text <hex>" and "ids <ids>", "#" comments.
const std::vector<reference_case>& reference_cases() {
    static const std::vector<reference_case> cases = [] {
        std::ifstream in(fs::path(SHAPED_TEST_DATA_DIR) / "gpt2_tokenizer" / "reference.txt");
        REQUIRE(in);
        std::vector<reference_case> read;
        std::string line;
        while (std::getline(in, line)) {
            if (line.empty() || line.starts_with('#')) continue;
            const std::size_t space = line.find(' ');
            const std::string field = line.substr(0, space);
            const std::string value = space == std::string::npos ? "" : line.substr(space + 1);
            if (field == "case") {
                read.push_back({value, {}, {}});
                continue;
            }
            REQUIRE(!read.empty());
            if (field == "text") {
                read.back().text = from_hex(value);
            } else {
                REQUIRE(field == "ids");
                std::istringstream numbers(value);
                for (token_id id; numbers >> id;) read.back().ids.push_back(id);
                REQUIRE(numbers.eof());
            }
        }
        return read;
    }();
    return cases;
}

// ---- a small vocabulary, written as the files spell it ----------------------------------------

// GPT-2's bytes_to_unicode, as encoder.py writes it: the printable Latin-1 bytes stand for
// themselves, the others for 256, 257, ... in order.
std::string spelling_of_byte(unsigned char byte) {
    const bool itself = (byte >= '!' && byte <= '~') || (byte >= 0xa1 && byte <= 0xac) || byte >= 0xae;
    unsigned code_point = byte;
    if (!itself) {
        code_point = 256;
        for (unsigned b = 0; b < byte; ++b)
            if (!((b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || b >= 0xae)) ++code_point;
    }
    if (code_point < 0x80) return std::string(1, static_cast<char>(code_point));
    return {static_cast<char>(0xc0 | (code_point >> 6)), static_cast<char>(0x80 | (code_point & 0x3f))};
}

std::string spelling_of(const std::string& bytes) {
    std::string spelled;
    for (const char c : bytes) spelled += spelling_of_byte(static_cast<unsigned char>(c));
    return spelled;
}

// A vocabulary and merges as the two files hold them: tokens (as bytes) by id, merges by rank.
struct small_vocabulary {
    std::vector<std::string> tokens;
    std::vector<std::pair<std::string, std::string>> merges;

    // All 256 bytes, byte b as id b.
    small_vocabulary() {
        for (unsigned b = 0; b < 256; ++b) tokens.emplace_back(1, static_cast<char>(b));
    }
    void add_merge(const std::string& left, const std::string& right) {
        merges.emplace_back(left, right);
        if (std::find(tokens.begin(), tokens.end(), left + right) == tokens.end()) tokens.push_back(left + right);
    }
    token_id id(const std::string& token) const {
        const auto found = std::find(tokens.begin(), tokens.end(), token);
        REQUIRE(found != tokens.end());
        return static_cast<token_id>(found - tokens.begin());
    }

    std::string vocab_json() const {
        std::string json = "{";
        for (std::size_t id = 0; id < tokens.size(); ++id) {
            if (id > 0) json += ", ";
            json += '"';
            for (const char c : spelling_of(tokens[id])) {
                if (c == '"' || c == '\\') json += '\\';
                json += c;
            }
            json += "\": " + std::to_string(id);
        }
        return json + "}";
    }
    std::string merges_text() const {
        std::string text = "#version: 0.2\n";
        for (const auto& [left, right] : merges) text += spelling_of(left) + " " + spelling_of(right) + "\n";
        return text;
    }
    gpt2_tokenizer load() const { return gpt2_tokenizer::from_contents(vocab_json(), merges_text()); }
};

// encoder.py's bpe() written out plainly: the pair of lowest rank among the word's adjacent
// pairs, merged wherever it stands, left to right, until no pair is a merge. The oracle for the
// tokenizer's merging (a word of letters only is one word of the pattern).
ids_t reference_merge(const small_vocabulary& vocabulary, const std::string& word) {
    std::map<std::pair<std::string, std::string>, std::size_t> ranks;
    for (std::size_t rank = 0; rank < vocabulary.merges.size(); ++rank) ranks.emplace(vocabulary.merges[rank], rank);
    std::vector<std::string> symbols;
    for (const char c : word) symbols.emplace_back(1, c);
    while (symbols.size() > 1) {
        std::size_t best = std::numeric_limits<std::size_t>::max();
        std::pair<std::string, std::string> bigram;
        for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
            const auto found = ranks.find({symbols[i], symbols[i + 1]});
            if (found != ranks.end() && found->second < best) {
                best = found->second;
                bigram = found->first;
            }
        }
        if (best == std::numeric_limits<std::size_t>::max()) break;
        std::vector<std::string> merged;
        for (std::size_t i = 0; i < symbols.size();) {
            if (i + 1 < symbols.size() && symbols[i] == bigram.first && symbols[i + 1] == bigram.second) {
                merged.push_back(bigram.first + bigram.second);
                i += 2;
            } else {
                merged.push_back(symbols[i]);
                i += 1;
            }
        }
        symbols = std::move(merged);
    }
    ids_t ids;
    for (const std::string& symbol : symbols) ids.push_back(vocabulary.id(symbol));
    return ids;
}

// The id of the token whose bytes are `bytes`, found by decoding every id.
token_id id_of_bytes(const gpt2_tokenizer& tokenizer, const std::string& bytes) {
    for (std::size_t id = 0; id < tokenizer.vocab_size(); ++id) {
        const ids_t one{static_cast<token_id>(id)};
        if (tokenizer.decode(one) == bytes) return one[0];
    }
    FAIL("no token holds these bytes");
    return -1;
}

// Where the UTF-8 characters of `text` begin, and its end.
std::set<std::size_t> character_boundaries(const std::string& text) {
    std::set<std::size_t> boundaries{text.size()};
    for (std::size_t i = 0; i < text.size(); ++i)
        if ((static_cast<unsigned char>(text[i]) & 0xc0) != 0x80) boundaries.insert(i);
    return boundaries;
}

void write_text(const fs::path& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    REQUIRE(out);
}

}  // namespace

TEST_CASE("gpt2_tokenizer: encode gives the reference's ids for every fixture text", "[text][gpt2]") {
    const auto& cases = reference_cases();
    REQUIRE(cases.size() >= 80);  // a truncated fixture fails here
    for (const reference_case& reference : cases) {
        INFO("case " << reference.name);
        CHECK(gpt2().encode(reference.text) == reference.ids);
    }
}

TEST_CASE("gpt2_tokenizer: decode gives back the text, of the reference's ids and of encode's", "[text][gpt2]") {
    for (const reference_case& reference : reference_cases()) {
        INFO("case " << reference.name);
        CHECK(gpt2().decode(reference.ids) == reference.text);
        CHECK(gpt2().decode(gpt2().encode(reference.text)) == reference.text);
    }
}

TEST_CASE("gpt2_tokenizer: the vocabulary's size and its last token", "[text][gpt2]") {
    CHECK(gpt2().vocab_size() == 50257);
    const ids_t end_of_text{50256};
    CHECK(gpt2().decode(end_of_text) == "<|endoftext|>");
    CHECK(gpt2().encode("").empty());
    CHECK(gpt2().decode(ids_t{}).empty());
}

TEST_CASE("gpt2_tokenizer: decode refuses an id outside the vocabulary, naming it and the size", "[text][gpt2]") {
    const ids_t past_the_end{15496, 50257};
    const std::string message = error_message<text_error>([&] { (void)gpt2().decode(past_the_end); });
    CHECK_THAT(message, Contains("shaped::text::gpt2_tokenizer::decode") && Contains("id 50257") &&
                            Contains("position 1") && Contains("vocabulary of 50257 tokens"));
    const ids_t negative{-1};
    CHECK_THAT(error_message<text_error>([&] { (void)gpt2().decode(negative); }), Contains("id -1"));
}

TEST_CASE("gpt2_tokenizer: encode refuses text that is not UTF-8, naming the byte", "[text][gpt2]") {
    const std::vector<std::pair<std::string, std::string>> not_utf8 = {
        {"a stray byte", "ok \xff"},
        {"a lone continuation byte", "ok \x80"},
        {"an overlong slash", "ok \xc0\xaf"},
        {"an overlong three-byte form", "ok \xe0\x80\xaf"},
        {"a surrogate", "ok \xed\xa0\x80"},
        {"past U+10FFFF", "ok \xf4\x90\x80\x80"},
        {"a lead byte before ASCII", "ok \xe2x"},
        {"a truncated character at the end", "ok \xe2\x82"},
    };
    for (const auto& [what, bytes] : not_utf8) {
        INFO(what);
        const std::string& text = bytes;  // clang 14 cannot capture a structured binding
        CHECK_THAT(error_message<text_error>([&] { (void)gpt2().encode(text); }),
                   Contains("shaped::text::gpt2_tokenizer::encode") && Contains("not valid UTF-8 at byte 3"));
    }
}

TEST_CASE("gpt2_stream_decoder: an emoji cut between tokens comes out whole, once complete", "[text][gpt2]") {
    const std::string hugging_face = "\xf0\x9f\xa4\x97";  // U+1F917, three tokens
    const ids_t ids = gpt2().encode("a" + hugging_face + "b");
    REQUIRE(ids.size() >= 4);  // a, the emoji's tokens, b
    gpt2_stream_decoder stream(gpt2());
    CHECK(stream.decode(ids.front()) == "a");
    for (std::size_t i = 1; i + 2 < ids.size(); ++i) CHECK(stream.decode(ids[i]).empty());
    CHECK(stream.decode(ids[ids.size() - 2]) == hugging_face);
    CHECK(stream.decode(ids.back()) == "b");
    CHECK(stream.flush().empty());
}

TEST_CASE("gpt2_stream_decoder: every step returns the whole characters so far, joined they are decode",
          "[text][gpt2]") {
    for (const reference_case& reference : reference_cases()) {
        INFO("case " << reference.name);
        const std::set<std::size_t> boundaries = character_boundaries(reference.text);
        gpt2_stream_decoder stream(gpt2());
        std::string streamed;
        std::size_t bytes_so_far = 0;
        for (const token_id id : reference.ids) {
            streamed += stream.decode(id);
            bytes_so_far += gpt2().decode(ids_t{id}).size();
            // Up to the last character boundary the bytes so far reach, and no further.
            const std::size_t whole = *std::prev(boundaries.upper_bound(bytes_so_far));
            CHECK(streamed == reference.text.substr(0, whole));
        }
        streamed += stream.flush();
        CHECK(streamed == reference.text);
        CHECK(stream.flush().empty());
    }
}

TEST_CASE("gpt2_stream_decoder: bytes that cannot become a character pass through, flush ends a cut one",
          "[text][gpt2]") {
    const token_id continuation = id_of_bytes(gpt2(), "\x80");
    const token_id lead = id_of_bytes(gpt2(), "\xe2");
    const token_id letter = id_of_bytes(gpt2(), "A");
    gpt2_stream_decoder stream(gpt2());
    CHECK(stream.decode(continuation) == "\x80");  // no lead byte before it: it never completes
    CHECK(stream.decode(lead).empty());            // may still become a character
    CHECK(stream.decode(letter) == "\xe2" "A");    // cannot any more: both pass
    CHECK(stream.decode(lead).empty());
    CHECK(stream.flush() == "\xe2");
    CHECK(stream.flush().empty());

    CHECK(stream.decode(lead).empty());
    CHECK_THROWS_AS(stream.decode(50257), text_error);
    CHECK(stream.flush() == "\xe2");  // the bad id changed nothing
}

TEST_CASE("gpt2_tokenizer: Hugging Face's and OpenAI's file names load the same tokenizer", "[text][gpt2]") {
    scratch_dir hugging_face;
    fs::copy_file(gpt2_directory / "encoder.json", hugging_face / "vocab.json");
    fs::copy_file(gpt2_directory / "vocab.bpe", hugging_face / "merges.txt");
    const gpt2_tokenizer from_hugging_face_names(hugging_face / "");
    const gpt2_tokenizer from_files(gpt2_directory / "encoder.json", gpt2_directory / "vocab.bpe");
    CHECK(from_hugging_face_names.vocab_size() == gpt2().vocab_size());
    for (const reference_case& reference : reference_cases()) {
        INFO("case " << reference.name);
        CHECK(from_hugging_face_names.encode(reference.text) == reference.ids);
        CHECK(from_files.encode(reference.text) == reference.ids);
    }
}

TEST_CASE("gpt2_tokenizer: a directory without both files of a pair is refused, named", "[text][gpt2]") {
    scratch_dir directory;
    write_text(directory / "vocab.json", "{}");
    write_text(directory / "vocab.bpe", "#version: 0.2\n");
    CHECK_THAT(error_message<io_error>([&] { gpt2_tokenizer tokenizer(directory / ""); }),
               Contains((directory / "").string()) && Contains("neither vocab.json and merges.txt nor encoder.json and vocab.bpe"));
    CHECK_THAT(error_message<io_error>([&] { gpt2_tokenizer tokenizer(directory / "absent"); }),
               Contains("absent") && Contains("directory not found"));
    CHECK_THAT(error_message<io_error>([&] { gpt2_tokenizer tokenizer(directory / "vocab.json"); }),
               Contains("is not a directory"));
}

TEST_CASE("gpt2_tokenizer: merges apply lowest rank first, as encoder.py's loop merges", "[text][gpt2]") {
    small_vocabulary in_order;
    in_order.add_merge("a", "b");
    in_order.add_merge("b", "c");
    small_vocabulary reversed;
    reversed.add_merge("b", "c");
    reversed.add_merge("a", "b");
    CHECK(in_order.load().encode("abc") == reference_merge(in_order, "abc"));
    CHECK(reversed.load().encode("abc") == reference_merge(reversed, "abc"));
    CHECK(in_order.load().encode("abc") != reversed.load().encode("abc"));  // the ranks decide

    // A pair that a merge makes, ranked before the merge that makes it: the reference first
    // merges every place of the pair it chose, then looks again.
    small_vocabulary made_pair_first;
    made_pair_first.tokens.push_back("ab");
    made_pair_first.add_merge("ab", "a");
    made_pair_first.add_merge("a", "b");
    for (const std::string word : {"abab", "ababa", "aaab", "abaab"})
        CHECK(made_pair_first.load().encode(word) == reference_merge(made_pair_first, word));
}

TEST_CASE("gpt2_tokenizer: merging agrees with encoder.py's loop on random vocabularies and words", "[text][gpt2]") {
    std::mt19937 random(20190214);
    const std::string letters = "abc";
    for (int trial = 0; trial < 60; ++trial) {
        small_vocabulary vocabulary;
        std::vector<std::string> pool = {"a", "b", "c"};
        std::set<std::pair<std::string, std::string>> used;
        const int merge_count = 1 + static_cast<int>(random() % 25);
        for (int m = 0; m < merge_count; ++m) {
            const std::string left = pool[random() % pool.size()], right = pool[random() % pool.size()];
            if (!used.insert({left, right}).second || left.size() + right.size() > 8) continue;
            vocabulary.add_merge(left, right);
            pool.push_back(left + right);
        }
        if (trial % 2 == 1) std::shuffle(vocabulary.merges.begin(), vocabulary.merges.end(), random);  // ranks in any order
        const gpt2_tokenizer tokenizer = vocabulary.load();
        for (int w = 0; w < 40; ++w) {
            std::string word;
            const std::size_t length = 1 + random() % 24;
            for (std::size_t i = 0; i < length; ++i) word += letters[random() % letters.size()];
            INFO("trial " << trial << ", word " << word);
            REQUIRE(tokenizer.encode(word) == reference_merge(vocabulary, word));
        }
    }
}

TEST_CASE("gpt2_tokenizer: a merges file with CRLF line ends, or no newline at its end, reads the same",
          "[text][gpt2]") {
    small_vocabulary vocabulary;
    vocabulary.add_merge("h", "e");
    vocabulary.add_merge("l", "l");
    vocabulary.add_merge("he", "ll");
    std::string crlf;
    for (const char c : vocabulary.merges_text()) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
    std::string unterminated = vocabulary.merges_text();
    unterminated.pop_back();
    const ids_t expected = vocabulary.load().encode("hello");
    CHECK(expected == ids_t{vocabulary.id("hell"), vocabulary.id("o")});
    CHECK(gpt2_tokenizer::from_contents(vocabulary.vocab_json(), crlf).encode("hello") == expected);
    CHECK(gpt2_tokenizer::from_contents(vocabulary.vocab_json(), unterminated).encode("hello") == expected);
}

TEST_CASE("gpt2_tokenizer: every damaged vocabulary is an io_error naming the file and the entry", "[text][gpt2]") {
    small_vocabulary vocabulary;
    vocabulary.add_merge("h", "e");
    const std::string valid = vocabulary.vocab_json();
    const std::string entries = valid.substr(1, valid.size() - 2);  // without the braces
    const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
        {"", {"not valid JSON"}},
        {"{", {"not valid JSON"}},
        {valid + " x", {"not valid JSON"}},
        {"[]", {"holds an array, expected an object of token -> id"}},
        {"7", {"holds a number, expected an object of token -> id"}},
        {"{" + entries + ", \"x1\": \"257\"}", {"entry 258 (token \"x1\")", "its id is a string"}},
        {"{" + entries + ", \"x1\": -3}", {"entry 258", "its id is a negative integer"}},
        {"{" + entries + ", \"x1\": 2.5}", {"entry 258", "its id is a non-integer number"}},
        {"{" + entries + ", \"x1\": {\"y\": 1}}", {"entry 258", "its id is an object"}},
        {"{" + entries + ", \"x1\": [257]}", {"entry 258", "its id is an array"}},
        {"{" + entries + ", \"x1\": null}", {"entry 258", "its id is null"}},
        {"{" + entries + ", \"x1\": 2147483648}", {"entry 258", "is past the largest token id"}},
        {"{" + entries + ", \"x1\": 5}", {"id 5 is given to two tokens"}},
        {"{" + entries + ", \"x1\": 300}", {"the ids must run from 0 to 257", "no token has id 257"}},
        {"{" + entries + ", \"he\": 257}", {"token \"he\" appears twice"}},
        {"{" + entries + ", \"a b\": 257}", {"entry 258 (token \"a b\")", "holds U+0020", "byte-level alphabet"}},
        {"{" + entries + ", \"\\u20ac\": 257}", {"entry 258", "holds U+20AC"}},
        {"{" + entries + ", \"\": 257}", {"entry 258", "an empty token"}},
        {"{\"\\ud800\": 0}", {"not valid JSON"}},
    };
    for (const auto& [json, words] : cases) {
        INFO(json.substr(0, 40) << " ... " << json.substr(json.size() > 40 ? json.size() - 40 : 0));
        scratch_dir directory;
        write_text(directory / "vocab.json", json);
        write_text(directory / "merges.txt", vocabulary.merges_text());
        const std::string message = error_message<io_error>([&] { gpt2_tokenizer tokenizer(directory / ""); });
        CHECK_THAT(message, Contains("shaped::text::gpt2_tokenizer") && Contains((directory / "vocab.json").string()));
        for (const std::string& word : words) CHECK_THAT(message, Contains(word));
    }

    SECTION("a vocabulary without one of the 256 bytes") {
        small_vocabulary without_a = vocabulary;
        without_a.tokens['A'] = "\xff\xfe";  // keeps the ids dense
        CHECK_THAT(error_message<io_error>([&] { (void)without_a.load(); }),
                   Contains("'vocab.json'") && Contains("has no token for the byte 0x41 (spelled \"A\")"));
    }
    SECTION("a missing file") {
        scratch_dir directory;
        write_text(directory / "merges.txt", vocabulary.merges_text());
        CHECK_THAT(error_message<io_error>([&] { gpt2_tokenizer tokenizer(directory / "vocab.json", directory / "merges.txt"); }),
                   Contains((directory / "vocab.json").string()) && Contains("file not found"));
    }
}

TEST_CASE("gpt2_tokenizer: every damaged merges file is an io_error naming the file and the line", "[text][gpt2]") {
    small_vocabulary vocabulary;
    vocabulary.add_merge("h", "e");
    vocabulary.add_merge("l", "l");
    const std::string header = "#version: 0.2\n";
    const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
        {"", {"is empty, expected a \"#version\" line"}},
        {"h e\nl l\n", {"line 1", "expected the \"#version\" line"}},
        {header + "h e\nl\n", {"line 3", "expected two tokens separated by one space, found \"l\""}},
        {header + "h e\nl l l\n", {"line 3", "found \"l l l\""}},
        {header + "h  e\n", {"line 2", "expected two tokens"}},
        {header + " h\n", {"line 2", "expected two tokens"}},
        {header + "h e\n\nl l\n", {"line 3", "found \"\""}},
        {header + "h e\nhe lo\n", {"line 3", "\"lo\" is not a token of 'vocab.json'"}},
        {header + "h e\nl o\n", {"line 3", "the merge's result \"lo\" is not a token of 'vocab.json'"}},
        {header + "h e\nl l\nh e\n", {"line 4", "repeats the merge of line 2"}},
        {header + "h \xc3\n", {"line 2", "not valid UTF-8"}},
        {header + "h \xe2\x82\xac\n", {"line 2", "holds U+20AC"}},
    };
    for (const auto& [merges, words] : cases) {
        INFO(merges);
        const std::string& text = merges;  // clang 14 cannot capture a structured binding
        const std::string message = error_message<io_error>(
            [&] { (void)gpt2_tokenizer::from_contents(vocabulary.vocab_json(), text, "vocab.json", "merges.txt"); });
        CHECK_THAT(message, Contains("shaped::text::gpt2_tokenizer: 'merges.txt'"));
        for (const std::string& word : words) CHECK_THAT(message, Contains(word));
    }
    SECTION("a missing file") {
        scratch_dir directory;
        write_text(directory / "vocab.json", vocabulary.vocab_json());
        CHECK_THAT(error_message<io_error>([&] { gpt2_tokenizer tokenizer(directory / "vocab.json", directory / "merges.txt"); }),
                   Contains((directory / "merges.txt").string()) && Contains("file not found"));
    }
}
