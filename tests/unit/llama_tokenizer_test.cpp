// llama2.c's tokenizer: each rule of run.c's encode and decode pinned on a small vocabulary
// whose ids are worked out by hand below, encode against a transcription of run.c's loop
// (llama_tokenizer_reference.hpp) on vocabularies made at random, and every kind of damaged
// tokenizer.bin. The real tokenizer.bin is not here: every file is written by the test, as
// llama2.c's tokenizer.py writes one. A GGUF's vocabulary is pinned against the tokenizer.bin
// llama.cpp's converter made it from (the parity fixtures' stories260K), and every kind of
// damaged tokenizer.ggml.* key.

#include "shaped/io/gguf.hpp"
#include "shaped/text/llama_tokenizer.hpp"

#include "file_support.hpp"
#include "llama_tokenizer_reference.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace file_support;
using Catch::Matchers::Contains;
using llama_reference::vocabulary;
using shaped::io::io_error;
using shaped::text::llama_tokenizer;
using shaped::text::text_error;
using shaped::text::token_id;
using ids_t = std::vector<token_id>;

shaped::text::llama_tokenizer load(const vocabulary& words) {
    return llama_tokenizer::from_contents(llama_reference::file_bytes(words), words.tokens.size());
}

// The vocabulary the hand-worked cases use. Ids 0 to 258 are llama2.c's: <unk>, BOS, EOS, then
// the byte b at 3 + b. A single character's score never matters (no merge makes one).
struct designed_vocabulary {
    vocabulary words = vocabulary::llama2c_base();
    token_id space = words.add(" ", 0);          // 259: the dummy prefix
    token_id a = words.add("a", 0);              // 260
    token_id b = words.add("b", 0);              // 261
    token_id c = words.add("c", 0);              // 262
    token_id ab = words.add("ab", 5);            // 263
    token_id bc = words.add("bc", 3);            // 264: scores less than ab
    token_id space_a = words.add(" a", 1);       // 265
    token_id abc = words.add("abc", 10);         // 266
    token_id p = words.add("p", 0);              // 267
    token_id q = words.add("q", 0);              // 268
    token_id r = words.add("r", 0);              // 269
    token_id pq = words.add("pq", 2);            // 270: ties with qr
    token_id qr = words.add("qr", 2);            // 271
    token_id m = words.add("m", 0);              // 272
    token_id n = words.add("n", 0);              // 273
    token_id mn = words.add("mn", -1e10f);       // 274: at run.c's floor, never merged
    token_id o = words.add("o", 0);              // 275
    token_id mo = words.add("mo", -9e9f);        // 276: just above it
    token_id snowman = words.add("\xe2\x98\x83", 0);       // 277: U+2603, three bytes
    token_id lower_case_byte = words.add("<0x4a>", 0);     // 278: a byte token in lower case
    token_id one_digit = words.add("<0x4>", 0);            // 279: not a byte token
    token_id spaced_byte = words.add(" <0x41>", 0);        // 280
    llama_tokenizer tokenizer = load(words);
};

const designed_vocabulary& designed() {
    static const designed_vocabulary instance;
    return instance;
}

// The byte-fallback token of a byte.
constexpr token_id byte_id(unsigned char byte) { return 3 + byte; }

// Where token `id` begins in tokenizer.bin: after max_token_length and each earlier token's
// score, length and bytes.
std::size_t offset_of_token(const vocabulary& words, std::size_t id) {
    std::size_t offset = 4;
    for (std::size_t i = 0; i < id; ++i) offset += 8 + words.tokens[i].size();
    return offset;
}

void put_u32(std::string& file, std::size_t at, std::uint32_t value) {
    std::string bytes;
    llama_reference::append_u32(bytes, value);
    file.replace(at, 4, bytes);
}

void put_f32(std::string& file, std::size_t at, float value) {
    std::string bytes;
    llama_reference::append_f32(bytes, value);
    file.replace(at, 4, bytes);
}

void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
    write_file(path, std::as_bytes(std::span(bytes.data(), bytes.size())));
}

}  // namespace

// ---- encode ----------------------------------------------------------------------------------

TEST_CASE("llama_tokenizer: merges take the best score first", "[text][llama]") {
    const designed_vocabulary& v = designed();
    // " " a b c: " a" scores 1, "ab" 5, "bc" 3, so ab first; then "abc" (10); " abc" is no token.
    // Taking bc first (a scan by position, or the lowest score) would give " a" bc instead.
    CHECK(v.tokenizer.encode("abc", false, false) == ids_t{v.space, v.abc});
    // " " a: " a" is the only pair.
    CHECK(v.tokenizer.encode("a", false, false) == ids_t{v.space_a});
    // " " b a: neither " b" nor "ba" is a token.
    CHECK(v.tokenizer.encode("ba", false, false) == ids_t{v.space, v.b, v.a});
}

TEST_CASE("llama_tokenizer: of pairs with equal scores, the leftmost merges", "[text][llama]") {
    const designed_vocabulary& v = designed();
    // " " p q r: "pq" and "qr" both score 2; run.c's scan keeps the first it finds, pq.
    CHECK(v.tokenizer.encode("pqr", false, false) == ids_t{v.space, v.pq, v.r});
    // " " q r p q: qr stands left of pq now.
    CHECK(v.tokenizer.encode("qrpq", false, false) == ids_t{v.space, v.qr, v.pq});
}

TEST_CASE("llama_tokenizer: a token scoring -1e10 or less is never made, as run.c's search starts there",
          "[text][llama]") {
    const designed_vocabulary& v = designed();
    CHECK(v.tokenizer.encode("mn", false, false) == ids_t{v.space, v.m, v.n});
    CHECK(v.tokenizer.encode("mo", false, false) == ids_t{v.space, v.mo});
}

TEST_CASE("llama_tokenizer: BOS, EOS and the dummy prefix", "[text][llama]") {
    const designed_vocabulary& v = designed();
    CHECK(v.tokenizer.encode("abc", true, true) == ids_t{1, v.space, v.abc, 2});
    CHECK(v.tokenizer.encode("abc", true, false) == ids_t{1, v.space, v.abc});
    CHECK(v.tokenizer.encode("abc", false, true) == ids_t{v.space, v.abc, 2});
    // No text, no dummy prefix.
    CHECK(v.tokenizer.encode("", true, true) == ids_t{1, 2});
    CHECK(v.tokenizer.encode("", true, false) == ids_t{1});
    CHECK(v.tokenizer.encode("", false, false).empty());
    // The text's own space after the prefix: "  " is no token.
    CHECK(v.tokenizer.encode(" ", false, false) == ids_t{v.space, v.space});

    SECTION("a vocabulary without \" \" gives the prefix as its byte token, <0x20>") {
        vocabulary without_space = vocabulary::llama2c_base();
        const token_id a = without_space.add("a", 0);
        CHECK(load(without_space).encode("a", true, false) == ids_t{1, byte_id(' '), a});
    }
    SECTION("BOS takes part in the merges, as in run.c") {
        vocabulary words = vocabulary::llama2c_base();
        const token_id space = words.add(" ", 0);
        const token_id bos_space = words.add("\n<s>\n ", 1);
        // BOS " " " ": BOS and the prefix join; no real vocabulary has such a token.
        CHECK(load(words).encode(" ", true, false) == ids_t{bos_space, space});
        CHECK(load(words).encode(" ", false, false) == ids_t{space, space});
    }
}

TEST_CASE("llama_tokenizer: a character that is no token falls back to its bytes, id 3 + byte", "[text][llama]") {
    const designed_vocabulary& v = designed();
    // U+00E9 is C3 A9, and no token.
    CHECK(v.tokenizer.encode("\xc3\xa9", false, false) == ids_t{v.space, byte_id(0xc3), byte_id(0xa9)});
    CHECK(v.tokenizer.encode("\xe2\x98\x83", false, false) == ids_t{v.space, v.snowman});
    // The byte tokens' spellings never join: "<0xC3><0xA9>" is no token. The fallback of a
    // character does not stop the letters around it merging.
    CHECK(v.tokenizer.encode("ab\xc3\xa9" "a", false, false) == ids_t{v.space, v.ab, byte_id(0xc3), byte_id(0xa9), v.a});
}

TEST_CASE("llama_tokenizer: text that is not UTF-8 is read as run.c reads it, never refused", "[text][llama]") {
    const designed_vocabulary& v = designed();
    // A character is a byte and at most three continuation bytes after it, whatever they are.
    CHECK(v.tokenizer.encode("\xff", false, false) == ids_t{v.space, byte_id(0xff)});
    CHECK(v.tokenizer.encode("\x80", false, false) == ids_t{v.space, byte_id(0x80)});
    // "a" and a stray continuation byte are one character, "a\x80", which is no token: so "a"
    // falls back too, where a UTF-8 decoder would keep it.
    CHECK(v.tokenizer.encode("a\x80", false, false) == ids_t{v.space, byte_id('a'), byte_id(0x80)});
    // The snowman and one continuation byte more: four bytes, one character, no token.
    CHECK(v.tokenizer.encode("\xe2\x98\x83\x83", false, false) ==
          ids_t{v.space, byte_id(0xe2), byte_id(0x98), byte_id(0x83), byte_id(0x83)});
    // Five bytes: the first four are a character, the fifth one more.
    CHECK(v.tokenizer.encode("\xf8\x88\x80\x80\x80", false, false) ==
          ids_t{v.space, byte_id(0xf8), byte_id(0x88), byte_id(0x80), byte_id(0x80), byte_id(0x80)});
    // A cut character at the end.
    CHECK(v.tokenizer.encode("a\xe2\x98", false, false) == ids_t{v.space_a, byte_id(0xe2), byte_id(0x98)});
    // A NUL byte (where run.c's C string would end) is a character: its byte token.
    CHECK(v.tokenizer.encode(std::string("a\0b", 3), false, false) == ids_t{v.space_a, byte_id(0), v.b});
}

TEST_CASE("llama_tokenizer: encode agrees with run.c's loop on random vocabularies and texts", "[text][llama]") {
    std::mt19937 random(20230723);
    // Letters, a two-byte and a three-byte character, a space, and bytes that are not UTF-8.
    const std::vector<std::string> pieces = {"a", "b", "c", " ", "\xc3\xa9", "\xe2\x98\x83", "\x80", "\xff", "\xe2"};
    for (int trial = 0; trial < 80; ++trial) {
        vocabulary words = vocabulary::llama2c_base();
        std::vector<std::string> pool = {"a", "b", "c", "\xc3\xa9", "\xe2\x98\x83"};
        if (trial % 4 != 3) pool.push_back(" ");  // now and then no dummy prefix token
        for (const std::string& piece : pool) words.add(piece, 0);
        // Scores from a few values, so that ties are common, and some at run.c's floor.
        const std::vector<float> scores = {-1e10f, -2.0f, -1.0f, 0.0f, 0.5f, 3.0f};
        const int token_count = 1 + static_cast<int>(random() % 30);
        for (int t = 0; t < token_count; ++t) {
            const std::string joined = pool[random() % pool.size()] + pool[random() % pool.size()];
            if (joined.size() > 12 || words.id(joined) != -1) continue;
            words.add(joined, scores[random() % scores.size()]);
            pool.push_back(joined);
        }
        const llama_tokenizer tokenizer = load(words);
        for (int w = 0; w < 30; ++w) {
            std::string text;
            const std::size_t length = random() % 20;
            for (std::size_t i = 0; i < length; ++i) text += pieces[random() % pieces.size()];
            const bool bos = random() % 2 == 0, eos = random() % 2 == 0;
            INFO("trial " << trial << ", text \"" << text << "\", bos " << bos << ", eos " << eos);
            REQUIRE(tokenizer.encode(text, bos, eos) == llama_reference::encode(words, text, bos, eos));
        }
    }
}

// ---- decode ----------------------------------------------------------------------------------

TEST_CASE("llama_tokenizer: decode(previous, id) strips the space after BOS and gives <0xXX> as its byte",
          "[text][llama]") {
    const designed_vocabulary& v = designed();
    CHECK(v.tokenizer.decode(1, v.space_a) == "a");
    CHECK(v.tokenizer.decode(v.abc, v.space_a) == " a");
    CHECK(v.tokenizer.decode(-1, v.space_a) == " a");  // `previous` is only compared with BOS
    CHECK(v.tokenizer.decode(1, v.space).empty());
    CHECK(v.tokenizer.decode(v.a, v.space) == " ");
    CHECK(v.tokenizer.decode(v.a, v.abc) == "abc");

    CHECK(v.tokenizer.decode(v.a, byte_id('A')) == "A");
    CHECK(v.tokenizer.decode(v.a, byte_id(0xe2)) == "\xe2");
    CHECK(v.tokenizer.decode(v.a, byte_id(0)) == std::string(1, '\0'));
    // The strip looks at the token's own bytes: <0x20> after BOS is still a space.
    CHECK(v.tokenizer.decode(1, byte_id(' ')) == " ");
    // ... and comes first, as in run.c: " <0x41>" after BOS is the byte.
    CHECK(v.tokenizer.decode(1, v.spaced_byte) == "A");
    CHECK(v.tokenizer.decode(v.a, v.spaced_byte) == " <0x41>");
    // Two hex digits in either case; anything else is text.
    CHECK(v.tokenizer.decode(v.a, v.lower_case_byte) == "J");
    CHECK(v.tokenizer.decode(v.a, v.one_digit) == "<0x4>");
    // BOS and EOS alone are their tokens' text.
    CHECK(v.tokenizer.decode(v.a, 1) == "\n<s>\n");
    CHECK(v.tokenizer.decode(v.a, 2) == "\n</s>\n");
}

TEST_CASE("llama_tokenizer: decode of a sequence joins the pieces, BOS and EOS giving none", "[text][llama]") {
    const designed_vocabulary& v = designed();
    CHECK(v.tokenizer.decode(ids_t{1, v.space, v.abc, 2}) == "abc");
    CHECK(v.tokenizer.decode(ids_t{v.space, v.abc}) == " abc");
    CHECK(v.tokenizer.decode(ids_t{1, v.space_a, 1, v.space_a, 2}) == "aa");
    CHECK(v.tokenizer.decode(ids_t{1, byte_id(0xe2), byte_id(0x98), byte_id(0x83)}) == "\xe2\x98\x83");
    CHECK(v.tokenizer.decode(ids_t{}).empty());

    // decode(encode(text, true, eos)) is the text, whatever its bytes.
    for (const std::string& text : {std::string("abc pqr"), std::string(" a  b"), std::string("\xc3\xa9\xe2\x98\x83!"),
                                   std::string("a\x80\xff\xe2"), std::string("x\0y", 3), std::string("<0x41>")}) {
        INFO("text \"" << text << "\"");
        CHECK(v.tokenizer.decode(v.tokenizer.encode(text, true, true)) == text);
        CHECK(v.tokenizer.decode(v.tokenizer.encode(text, true, false)) == text);
    }
}

TEST_CASE("llama_tokenizer: an id outside the vocabulary is a text_error naming it and the size", "[text][llama]") {
    const designed_vocabulary& v = designed();
    const auto size = std::to_string(v.words.tokens.size());
    const auto past_the_end = static_cast<token_id>(v.words.tokens.size());
    CHECK_THAT(error_message<text_error>([&] { (void)v.tokenizer.decode(1, past_the_end); }),
               Contains("shaped::text::llama_tokenizer::decode: id " + std::to_string(past_the_end) +
                        " is outside the vocabulary of " + size + " tokens (ids 0 to " + std::to_string(past_the_end - 1) + ")"));
    CHECK_THAT(error_message<text_error>([&] { (void)v.tokenizer.decode(ids_t{1, v.a, -1}); }),
               Contains("id -1 (at position 2) is outside the vocabulary of " + size + " tokens"));
    CHECK_THAT(error_message<text_error>([&] { (void)v.tokenizer.token(past_the_end); }),
               Contains("shaped::text::llama_tokenizer::token: id " + std::to_string(past_the_end)));
    CHECK_THAT(error_message<text_error>([&] { (void)v.tokenizer.score(-5); }),
               Contains("shaped::text::llama_tokenizer::score: id -5"));
}

// ---- the file --------------------------------------------------------------------------------

TEST_CASE("llama_tokenizer: a file reads back its tokens and scores", "[text][llama]") {
    const designed_vocabulary& v = designed();
    scratch_dir directory;
    write_bytes(directory / "tokenizer.bin", llama_reference::file_bytes(v.words));
    const llama_tokenizer from_file(directory / "tokenizer.bin", v.words.tokens.size());
    REQUIRE(from_file.vocab_size() == v.words.tokens.size());
    for (std::size_t id = 0; id < v.words.tokens.size(); ++id) {
        CHECK(from_file.token(static_cast<token_id>(id)) == v.words.tokens[id]);
        CHECK(from_file.score(static_cast<token_id>(id)) == v.words.scores[id]);
    }
    CHECK(from_file.encode("abc", true, false) == v.tokenizer.encode("abc", true, false));
    // A max_token_length above the longest token's is harmless.
    CHECK(llama_tokenizer::from_contents(llama_reference::file_bytes(v.words, 1000), v.words.tokens.size()).vocab_size() ==
          v.words.tokens.size());
}

TEST_CASE("llama_tokenizer: every damaged tokenizer.bin is an io_error naming the file and what is wrong",
          "[text][llama]") {
    vocabulary words = vocabulary::llama2c_base();
    words.add(" ", 0);
    words.add("ab", -1.5f);
    const std::size_t size = words.tokens.size();  // 261
    const std::string valid = llama_reference::file_bytes(words);
    const std::size_t last = offset_of_token(words, size - 1);  // token 260, "ab"
    REQUIRE(valid.size() == last + 8 + 2);

    struct damage {
        std::string what;
        std::string file;
        std::size_t vocab_size;
        std::vector<std::string> words;
    };
    const auto with = [&](auto change) {
        std::string file = valid;
        change(file);
        return file;
    };
    const std::vector<damage> cases = {
        {"empty", "", size, {"is 0 bytes long, too short for the int32 max_token_length it begins with"}},
        {"a negative max_token_length", with([](std::string& f) { put_u32(f, 0, 0xfffffffbu); }), size,
         {"its max_token_length is -5, a negative length"}},
        {"cut inside a score", valid.substr(0, last + 3), size,
         {"ends inside token 260 (at byte " + std::to_string(last) + "): its score and length take 8 bytes, and the file has only 3 more bytes"}},
        {"cut inside a token's bytes", valid.substr(0, valid.size() - 1), size,
         {"token 260 (at byte " + std::to_string(last) + "): its length, 2, runs past the file's end (the file has only 1 more byte)"}},
        {"fewer tokens than the model's vocabulary", valid, size + 5,
         {"holds 261 tokens, but the model's vocabulary has 266", "cut short, or is another model's tokenizer"}},
        {"more tokens than the model's vocabulary", valid, size - 1,
         {"goes on for 10 bytes after token 259, the last of the model's vocabulary of 260 tokens",
          "they hold 1 more token, so it is another model's tokenizer"}},
        {"bytes after the last token", valid + "xyz", size,
         {"goes on for 3 bytes after token 260, the last of the model's vocabulary of 261 tokens"}},
        {"a negative length", with([&](std::string& f) { put_u32(f, last + 4, 0xffffffffu); }), size,
         {"token 260 (at byte " + std::to_string(last) + "): its length is -1, a negative length"}},
        {"an empty token", with([&](std::string& f) { put_u32(f, last + 4, 0); f.resize(last + 8); }), size,
         {"token 260 (at byte " + std::to_string(last) + ") is empty"}},
        {"a token longer than max_token_length", with([](std::string& f) { put_u32(f, 0, 5); }), size,
         {"token 2 (at byte 30): its length, 6, is more than the file's max_token_length, 5"}},
        {"a NaN score", with([&](std::string& f) { put_f32(f, last, std::numeric_limits<float>::quiet_NaN()); }), size,
         {"token 260 (at byte " + std::to_string(last) + "): its score is NaN"}},
        {"an infinite score", with([&](std::string& f) { put_f32(f, last, -std::numeric_limits<float>::infinity()); }),
         size, {"token 260 (at byte " + std::to_string(last) + "): its score is -infinity"}},
        {"a NUL byte", with([&](std::string& f) { f[last + 9] = '\0'; }), size,
         {"token 260 (at byte " + std::to_string(last) + ") holds a NUL byte (its byte 1 of 2)", "C strings"}},
        {"two tokens alike", with([&](std::string& f) { f.replace(last + 8, 2, "  "); put_u32(f, last + 4, 1); f.resize(last + 9); }),
         size, {"tokens 259 and 260 are both \" \": a token's bytes must name one id"}},
        {"a byte token out of place", with([](std::string& f) { f.replace(offset_of_token(vocabulary::llama2c_base(), 3 + 0x41) + 8, 6, "<0xZZ>"); }),
         size, {"token 68 is \"<0xZZ>\", expected <0x41>", "ids 3 to 258 are the byte-fallback tokens"}},
        {"a vocabulary too small for the byte tokens", valid, 258,
         {"the model's vocabulary of 258 tokens has no room for the byte-fallback tokens <0x00> to <0xFF> at ids 3 to 258"}},
        {"a vocab_size past the largest id", valid, std::size_t{1} << 31,
         {"the model's vocab_size, 2147483648, is past the largest token id, 2147483647"}},
    };
    for (const damage& broken : cases) {
        INFO(broken.what);
        const damage& each = broken;  // clang 14 cannot capture a structured binding; keep one name
        const std::string message = error_message<io_error>(
            [&] { (void)llama_tokenizer::from_contents(each.file, each.vocab_size, "models/tok261.bin"); });
        CHECK_THAT(message, Contains("shaped::text::llama_tokenizer: 'models/tok261.bin': "));
        for (const std::string& word : broken.words) CHECK_THAT(message, Contains(word));
    }

    SECTION("a missing file, a directory") {
        scratch_dir directory;
        CHECK_THAT(error_message<io_error>([&] { llama_tokenizer tokenizer(directory / "tokenizer.bin", size); }),
                   Contains((directory / "tokenizer.bin").string()) && Contains("file not found"));
        CHECK_THAT(error_message<io_error>([&] { llama_tokenizer tokenizer(directory / "", size); }),
                   Contains("is a directory, not a tokenizer.bin"));
    }
}

// ---- a GGUF's vocabulary ---------------------------------------------------------------------

TEST_CASE("llama_tokenizer: a GGUF's vocabulary gives the ids and text of the tokenizer.bin it was made from",
          "[text][llama][gguf]") {
    // llama.cpp's llama2.c converter wrote the GGUF from this tokenizer.bin (its README).
    const std::filesystem::path fixtures = std::filesystem::path(SHAPED_TEST_DATA_DIR) / "../../parity/fixtures/llama_cpp";
    const shaped::io::gguf_file file(fixtures / "stories260K.f32.gguf");
    const llama_tokenizer from_gguf = llama_tokenizer::from_gguf(file, 512);
    const llama_tokenizer from_bin(fixtures / "tokenizer.bin", 512);
    REQUIRE(from_gguf.vocab_size() == 512);
    REQUIRE(file.get_array<std::string>("tokenizer.ggml.tokens")[300] == "\xE2\x96\x81w300");  // "▁w300" in the GGUF
    for (token_id id = 0; id < 512; ++id) {
        INFO("token " << id);
        CHECK(from_gguf.token(id) == from_bin.token(id));
        CHECK(from_gguf.score(id) == from_bin.score(id));
        for (const token_id previous : {token_id{-1}, llama_tokenizer::bos_id, token_id{300}})
            CHECK(from_gguf.decode(previous, id) == from_bin.decode(previous, id));
    }
    // ASCII, words of the vocabulary and spaces, characters that are no token (their bytes'
    // tokens), bytes that are not UTF-8, a NUL, and nothing.
    const std::vector<std::string> texts = {"Once upon a time", " w259 w300  w511", "w300w301", "h\xC3\xA9llo \xE2\x98\x83 w400",
                                            "\xFF\xFE w259", std::string("a\0b", 3), "\n", ""};
    for (const std::string& text : texts) {
        INFO(Catch::Detail::stringify(text));
        for (const bool bos : {true, false})
            for (const bool eos : {true, false}) {
                const ids_t ids = from_gguf.encode(text, bos, eos);
                CHECK(ids == from_bin.encode(text, bos, eos));
                CHECK(from_gguf.decode(ids) == from_bin.decode(ids));
            }
    }
    CHECK(from_gguf.encode("", true, true) == ids_t{llama_tokenizer::bos_id, llama_tokenizer::eos_id});
}

namespace {

// The keys of a small GGUF vocabulary, as llama.cpp's converter writes one: <unk>, <s>, </s>,
// the byte tokens, then "▁", "a", "b", "ab" and "▁ab" (ids 259 to 263).
std::vector<shaped::io::gguf_kv> gguf_vocabulary() {
    std::vector<std::string> tokens{"<unk>", "<s>", "</s>"};
    std::vector<std::int32_t> types{2, 3, 3};
    for (unsigned byte = 0; byte < 256; ++byte) {
        constexpr char hex[] = "0123456789ABCDEF";
        tokens.push_back(std::string("<0x") + hex[byte >> 4] + hex[byte & 0xf] + ">");
        types.push_back(6);
    }
    for (const char* word : {"\xE2\x96\x81", "a", "b", "ab", "\xE2\x96\x81" "ab"}) {
        tokens.push_back(word);
        types.push_back(1);
    }
    std::vector<float> scores(tokens.size(), 0.0f);
    scores.back() = -1.5f;
    using shaped::io::gguf_array;
    return {{"general.architecture", std::string("llama")},
            {"tokenizer.ggml.model", std::string("llama")},
            {"tokenizer.ggml.tokens", gguf_array(tokens)},
            {"tokenizer.ggml.scores", gguf_array(scores)},
            {"tokenizer.ggml.token_type", gguf_array(types)},
            {"tokenizer.ggml.bos_token_id", std::uint32_t{1}},
            {"tokenizer.ggml.eos_token_id", std::uint32_t{2}}};
}

shaped::io::gguf_value& value_of(std::vector<shaped::io::gguf_kv>& metadata, std::string_view key) {
    const auto found = std::find_if(metadata.begin(), metadata.end(), [&](const shaped::io::gguf_kv& kv) { return kv.key == key; });
    REQUIRE(found != metadata.end());
    return found->value;
}

template <class T>
std::vector<T>& array_of(std::vector<shaped::io::gguf_kv>& metadata, std::string_view key) {
    return std::get<std::vector<T>>(std::get<shaped::io::gguf_array>(value_of(metadata, key)).values);
}

// A GGUF file of `metadata` (and no tensors) at `path`, opened.
shaped::io::gguf_file gguf_of(const std::filesystem::path& path, const std::vector<shaped::io::gguf_kv>& metadata) {
    shaped::io::gguf_writer out;
    for (const shaped::io::gguf_kv& kv : metadata) out.add(kv.key, kv.value);
    out.save(path);
    return shaped::io::gguf_file(path);
}

}  // namespace

TEST_CASE("llama_tokenizer: a GGUF's vocabulary is read as llama2.c's export spells it", "[text][llama][gguf]") {
    scratch_dir directory;
    const llama_tokenizer tokenizer = llama_tokenizer::from_gguf(gguf_of(directory / "vocab.gguf", gguf_vocabulary()), 264);
    CHECK(tokenizer.token(1) == "\n<s>\n");
    CHECK(tokenizer.token(2) == "\n</s>\n");
    CHECK(tokenizer.token(259) == " ");
    CHECK(tokenizer.token(263) == " ab");
    CHECK(tokenizer.score(263) == -1.5f);
    CHECK(tokenizer.encode("ab", true, true) == ids_t{1, 263, 2});
    CHECK(tokenizer.decode(ids_t{1, 263, 2}) == "ab");

    // Without token types and BOS and EOS ids, llama.cpp's defaults: the same tokenizer.
    std::vector<shaped::io::gguf_kv> bare = gguf_vocabulary();
    std::erase_if(bare, [](const shaped::io::gguf_kv& kv) {
        return kv.key == "tokenizer.ggml.token_type" || kv.key.ends_with("_token_id");
    });
    const llama_tokenizer from_bare = llama_tokenizer::from_gguf(gguf_of(directory / "bare.gguf", bare), 264);
    for (token_id id = 0; id < 264; ++id) CHECK(from_bare.token(id) == tokenizer.token(id));
}

TEST_CASE("llama_tokenizer: every damaged tokenizer.ggml key is an io_error naming the file and the key", "[text][llama][gguf]") {
    using metadata = std::vector<shaped::io::gguf_kv>;
    struct damage {
        std::string what;
        std::function<void(metadata&)> change;
        std::vector<std::string> words;
        std::size_t vocab_size = 264;
    };
    const std::vector<damage> cases = {
        {"another tokenizer's model", [](metadata& m) { value_of(m, "tokenizer.ggml.model") = std::string("gpt2"); },
         {"key \"tokenizer.ggml.model\" is \"gpt2\", expected \"llama\"", "byte-level BPE"}},
        {"no model", [](metadata& m) { std::erase_if(m, [](const auto& kv) { return kv.key == "tokenizer.ggml.model"; }); },
         {"no key \"tokenizer.ggml.model\" (expected string)"}},
        {"tokens of another type", [](metadata& m) { value_of(m, "tokenizer.ggml.tokens") = shaped::io::gguf_array(std::vector<std::int32_t>(264)); },
         {"key \"tokenizer.ggml.tokens\" is array of int32, expected array of string"}},
        {"fewer tokens than the model's vocabulary", [](metadata&) {},
         {"key \"tokenizer.ggml.tokens\" holds 264 tokens, but the model's vocabulary (token_embd.weight's rows) has 265"}, 265},
        {"fewer scores than tokens", [](metadata& m) { array_of<float>(m, "tokenizer.ggml.scores").pop_back(); },
         {"key \"tokenizer.ggml.scores\" holds 263 scores, but key \"tokenizer.ggml.tokens\" 264 tokens"}},
        {"scores of another type", [](metadata& m) { value_of(m, "tokenizer.ggml.scores") = shaped::io::gguf_array(std::vector<double>(264)); },
         {"key \"tokenizer.ggml.scores\" is array of float64, expected array of float32"}},
        {"a NaN score", [](metadata& m) { array_of<float>(m, "tokenizer.ggml.scores")[263] = std::numeric_limits<float>::quiet_NaN(); },
         {"key \"tokenizer.ggml.tokens\": token 263: its score is NaN"}},
        {"a byte token out of place", [](metadata& m) { array_of<std::string>(m, "tokenizer.ggml.tokens")[3 + 0x41] = "<0xZZ>"; },
         {"key \"tokenizer.ggml.tokens\": token 68 is \"<0xZZ>\", expected <0x41>"}},
        {"an empty token", [](metadata& m) { array_of<std::string>(m, "tokenizer.ggml.tokens")[263].clear(); },
         {"key \"tokenizer.ggml.tokens\": token 263 is empty"}},
        {"a NUL byte", [](metadata& m) { array_of<std::string>(m, "tokenizer.ggml.tokens")[263] = std::string("a\0b", 3); },
         {"key \"tokenizer.ggml.tokens\": token 263 holds a NUL byte (its byte 1 of 3)"}},
        {"two tokens alike once U+2581 is a space", [](metadata& m) { array_of<std::string>(m, "tokenizer.ggml.tokens")[263] = " "; },
         {"key \"tokenizer.ggml.tokens\": tokens 259 and 263 are both \" \""}},
        {"fewer token types than tokens", [](metadata& m) { array_of<std::int32_t>(m, "tokenizer.ggml.token_type").resize(10); },
         {"key \"tokenizer.ggml.token_type\" holds 10 types, but key \"tokenizer.ggml.tokens\" 264 tokens"}},
        {"a byte token of another type", [](metadata& m) { array_of<std::int32_t>(m, "tokenizer.ggml.token_type")[3 + 0x41] = 1; },
         {"key \"tokenizer.ggml.token_type\" says token 68 (\"<0x41>\") is of type 1, expected 6 (byte)"}},
        {"a BOS id outside the vocabulary", [](metadata& m) { value_of(m, "tokenizer.ggml.bos_token_id") = std::uint32_t{600}; },
         {"key \"tokenizer.ggml.bos_token_id\" is 600, outside the vocabulary of 264 tokens (ids 0 to 263)"}},
        {"a BOS id that is not llama2.c's", [](metadata& m) { value_of(m, "tokenizer.ggml.bos_token_id") = std::uint32_t{0}; },
         {"key \"tokenizer.ggml.bos_token_id\" is 0, expected 1"}},
        {"an EOS id that is not llama2.c's", [](metadata& m) { value_of(m, "tokenizer.ggml.eos_token_id") = std::uint32_t{263}; },
         {"key \"tokenizer.ggml.eos_token_id\" is 263, expected 2"}},
        {"an EOS id of another type", [](metadata& m) { value_of(m, "tokenizer.ggml.eos_token_id") = std::int32_t{2}; },
         {"key \"tokenizer.ggml.eos_token_id\" is int32, expected uint32"}},
        {"a vocabulary too small for the byte tokens", [](metadata&) {},
         {"the model's vocabulary of 258 tokens has no room for the byte-fallback tokens"}, 258},
    };
    scratch_dir directory;
    for (const damage& broken : cases) {
        INFO(broken.what);
        metadata changed = gguf_vocabulary();
        broken.change(changed);
        const std::filesystem::path path = directory / "vocab.gguf";
        const shaped::io::gguf_file file = gguf_of(path, changed);
        const std::string message = error_message<io_error>([&] { (void)llama_tokenizer::from_gguf(file, broken.vocab_size); });
        CHECK_THAT(message, Contains(path.string()));
        for (const std::string& word : broken.words) CHECK_THAT(message, Contains(word));
    }
}
