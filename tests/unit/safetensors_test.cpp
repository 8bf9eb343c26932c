// safetensors reading and writing, and layers' parameters loaded and saved by their state_dict
// names. Files are built here byte by byte from the format's description, so the reader is
// checked against the format and not only against shaped's own writer; every malformed file
// must be an io_error (or a shape_error) whose message names the problem.

#include <shaped/io.hpp>
#include <shaped/nn.hpp>

#include "file_support.hpp"
#include "parameter_names.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <sys/stat.h>

namespace {

namespace fs = std::filesystem;
using namespace file_support;
namespace io = shaped::io;
using Catch::Matchers::Contains;

using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 4>;
using C = shaped::dim<"C", 6>;
using Tdyn = shaped::dim<"T">;

// A safetensors image: the header length (the header's own, unless given), the header, the data.
std::vector<std::byte> make_file(std::string_view header, std::span<const std::byte> data,
                                 std::optional<std::uint64_t> length = std::nullopt) {
    const std::uint64_t n = length.value_or(header.size());
    std::vector<std::byte> bytes;
    for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<std::byte>((n >> (8 * i)) & 0xff));
    for (const char c : header) bytes.push_back(static_cast<std::byte>(c));
    bytes.insert(bytes.end(), data.begin(), data.end());
    return bytes;
}

std::vector<std::byte> zeros(std::size_t n) { return std::vector<std::byte>(n, std::byte{0}); }

template <class A, class Bt>
void require_same_elements(const A& actual, const Bt& expected) {
    REQUIRE(actual.extents() == expected.extents());
    for (std::size_t i = 0; i < actual.size(); ++i) {
        INFO("element " << i);
        REQUIRE(actual.data()[i] == expected.data()[i]);
    }
}

}  // namespace

TEST_CASE("safetensors: a file built by hand from the format loads", "[io][safetensors]") {
    scratch_dir dir;
    // "a": F32 (2, 3) = 1..6 at [0, 24); "b": F64 0-d = 2.5 at [24, 32); padded with spaces.
    const std::string header =
        R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
        R"("b":{"dtype":"F64","shape":[],"data_offsets":[24,32]}}   )";
    std::vector<std::byte> data = to_bytes(std::vector<float>{1, 2, 3, 4, 5, 6});
    const auto b = to_bytes(std::vector<double>{2.5});
    data.insert(data.end(), b.begin(), b.end());
    write_file(dir / "hand.safetensors", make_file(header, data));

    const io::safetensors_file file(dir / "hand.safetensors");
    CHECK(file.names() == std::vector<std::string>{"a", "b"});
    CHECK(file.contains("a"));
    CHECK_FALSE(file.contains("c"));
    CHECK(file.metadata() == io::safetensors_metadata{{"format", "pt"}});
    CHECK(file.info("a").dtype == "F32");
    CHECK(file.info("a").shape == std::vector<std::size_t>{2, 3});
    CHECK(file.info("b").shape.empty());

    using R = shaped::dim<"R", 2>;
    using K = shaped::dim<"K", 3>;
    const auto a = file.load<float, R, K>("a");
    for (std::size_t i = 0; i < 2; ++i)
        for (std::size_t j = 0; j < 3; ++j) CHECK(a(i, j) == static_cast<float>(1 + 3 * i + j));
    CHECK(file.load<double>("b").item() == 2.5);
    // Dynamic extents come from the file.
    const auto dynamic = file.load<float, shaped::dim<"R">, K>("a");
    CHECK(dynamic.extents() == std::array<std::size_t, 2>{2, 3});
}

TEST_CASE("safetensors: the writer writes what the reference implementation writes", "[io][safetensors]") {
    scratch_dir dir;
    // Names sorted, "__metadata__" first, compact JSON with each entry's fields in the order
    // dtype, shape, data_offsets, and the header padded with spaces to a multiple of 8.
    io::safetensors_writer out;
    out.add("z", shaped::tensor<float, shaped::dim<"N", 2>>({1.0f, -2.0f}));
    out.add("a", shaped::tensor<double, shaped::dim<"N", 1>>({0.5}));
    out.add_metadata("format", "pt");
    out.save(dir / "w.safetensors");

    const std::string header =
        R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]},)"
        R"("z":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})";
    std::string padded = header;
    while (padded.size() % 8 != 0) padded += ' ';
    std::vector<std::byte> data = to_bytes(std::vector<double>{0.5});
    const auto z = to_bytes(std::vector<float>{1.0f, -2.0f});
    data.insert(data.end(), z.begin(), z.end());
    CHECK(file_bytes(dir / "w.safetensors") == make_file(padded, data));
    CHECK(dir.entry_count() == 1);  // no temporary file left behind
}

TEST_CASE("safetensors: static and dynamic tensors, float and double, round trip", "[io][safetensors]") {
    scratch_dir dir;
    shaped::Generator gen(7);
    const auto x = shaped::randn<float, B, T, C>(gen);
    const auto y = shaped::randn<double, Tdyn, C>(gen, Tdyn{9});
    const auto s = shaped::full<float>(3.5f);
    const auto empty = shaped::zeros<float, Tdyn, C>(Tdyn{0});
    io::safetensors_writer out;
    out.add("x", x);
    out.add("y", y);
    out.add("x_doubled", x * 2.0f);  // an expression is evaluated
    out.add("s", s);
    out.add("empty", empty);
    out.save(dir / "t.safetensors");

    const io::safetensors_file file(dir / "t.safetensors");
    CHECK(file.names() == std::vector<std::string>{"empty", "s", "x", "x_doubled", "y"});
    CHECK(file.metadata().empty());
    require_same_elements(file.load<float, B, T, C>("x"), x);
    require_same_elements(file.load<float, B, Tdyn, C>("x"), x);
    require_same_elements(file.load<double, Tdyn, C>("y"), y);
    const auto doubled = file.load<float, B, T, C>("x_doubled");
    for (std::size_t i = 0; i < x.size(); ++i) CHECK(doubled.data()[i] == x.data()[i] * 2.0f);
    CHECK(file.load<float>("s").item() == 3.5f);
    CHECK(file.load<float, Tdyn, C>("empty").size() == 0);
    CHECK(file.info("y").dtype == "F64");
    CHECK(file.info("y").shape == std::vector<std::size_t>{9, 6});
}

TEST_CASE("safetensors: metadata round trips", "[io][safetensors]") {
    scratch_dir dir;
    io::safetensors_writer out;
    out.add("w", shaped::ones<float, C>());
    out.add_metadata("format", "pt");
    out.add_metadata("note", "quotes \" and \\ and \xc3\xa9");
    out.save(dir / "m.safetensors");
    const io::safetensors_file file(dir / "m.safetensors");
    CHECK(file.metadata() == io::safetensors_metadata{{"format", "pt"}, {"note", "quotes \" and \\ and \xc3\xa9"}});
}

TEST_CASE("safetensors: every malformed header or layout is an io_error naming the problem", "[io][safetensors]") {
    scratch_dir dir;
    const fs::path path = dir / "model.safetensors";
    const auto open_error = [&](std::span<const std::byte> bytes) {
        write_file(path, bytes);
        const std::string message = error_message<io::io_error>([&] { io::safetensors_file file(path); });
        CHECK_THAT(message, Contains("model.safetensors"));
        return message;
    };
    const auto header_error = [&](std::string_view header, std::size_t data_size) {
        return open_error(make_file(header, zeros(data_size)));
    };

    SECTION("the file is too short for the header length") {
        CHECK_THAT(open_error(zeros(5)), Contains("too short"));
        CHECK_THAT(open_error({}), Contains("too short"));
    }
    SECTION("the header length is past the limit") {
        CHECK_THAT(open_error(make_file("{}", {}, 100'000'001)), Contains("exceeds the limit"));
        CHECK_THAT(open_error(make_file("{}", {}, ~std::uint64_t{0})), Contains("exceeds the limit"));
    }
    SECTION("the header length is larger than the file") {
        CHECK_THAT(open_error(make_file("{}", {}, 3)), Contains("header length 3 runs past the end of the file"));
    }
    SECTION("the header is empty") { CHECK_THAT(open_error(make_file("", {})), Contains("empty")); }
    SECTION("the header is not a JSON object") {
        CHECK_THAT(header_error("[1, 2]", 0), Contains("does not start with '{'"));
        CHECK_THAT(header_error(" {}", 0), Contains("does not start with '{'"));
        CHECK_THAT(header_error("{\"a\": ", 0), Contains("not valid JSON"));
        CHECK_THAT(header_error("{} x", 0), Contains("not valid JSON"));
        CHECK_THAT(header_error("{\"\xff\": {}}", 0), Contains("not valid JSON"));  // not UTF-8
        CHECK_THAT(header_error(std::string_view("{}\0\0\0", 5), 0), Contains("a NUL byte at header byte 2"));
        CHECK_THAT(header_error(std::string_view("{}\0 \"x\"", 6), 0), Contains("a NUL byte"));
    }
    SECTION("an entry is not an object") {
        CHECK_THAT(header_error(R"({"w": 5})", 0), Contains(R"(tensor "w": its entry is a non-negative integer, expected an object)"));
        CHECK_THAT(header_error(R"({"w": [0, 4]})", 0), Contains(R"(tensor "w": its entry is an array)"));
        CHECK_THAT(header_error(R"({"w": "F32"})", 0), Contains(R"(tensor "w": its entry is a string, expected an object)"));
    }
    SECTION("an entry lacks a field") {
        CHECK_THAT(header_error(R"({"w":{"shape":[1],"data_offsets":[0,4]}})", 4), Contains(R"(tensor "w": its entry has no "dtype")"));
        CHECK_THAT(header_error(R"({"w":{"dtype":"F32","data_offsets":[0,4]}})", 4), Contains(R"(has no "shape")"));
        CHECK_THAT(header_error(R"({"w":{"dtype":"F32","shape":[1]}})", 4), Contains(R"(has no "data_offsets")"));
    }
    SECTION("a field has the wrong type") {
        CHECK_THAT(header_error(R"({"w":{"dtype":4,"shape":[1],"data_offsets":[0,4]}})", 4), Contains(R"("dtype" is a non-negative integer, expected a string)"));
        CHECK_THAT(header_error(R"({"w":{"dtype":"F32","shape":1,"data_offsets":[0,4]}})", 4), Contains(R"("shape" is a non-negative integer, expected an array)"));
        CHECK_THAT(header_error(R"({"w":{"dtype":"F32","shape":[2,-1],"data_offsets":[0,4]}})", 4), Contains(R"("shape"[1] is a negative integer)"));
        CHECK_THAT(header_error(R"({"w":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", 4), Contains(R"("shape"[0] is a non-integer number)"));
        CHECK_THAT(header_error(R"({"w":{"dtype":"F32","shape":["1"],"data_offsets":[0,4]}})", 4), Contains(R"("shape"[0] is a string, expected a non-negative integer)"));
        CHECK_THAT(header_error(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}})", 4), Contains(R"("data_offsets" is an array of 3 values, expected [begin, end])"));
        CHECK_THAT(header_error(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":{"begin":0}}})", 4), Contains(R"("data_offsets" is an object, expected [begin, end])"));
        CHECK_THAT(header_error(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,18446744073709551616]}})", 4), Contains(R"("data_offsets"[1] is a non-integer number)"));
    }
    SECTION("an unknown dtype") {
        CHECK_THAT(header_error(R"({"w":{"dtype":"F31","shape":[1],"data_offsets":[0,4]}})", 4), Contains(R"(tensor "w": unknown dtype "F31")"));
        CHECK_THAT(header_error(R"({"w":{"dtype":"f32","shape":[1],"data_offsets":[0,4]}})", 4), Contains(R"(unknown dtype "f32")"));
        CHECK_THAT(header_error(R"({"w":{"dtype":"F4","shape":[2],"data_offsets":[0,1]}})", 1), Contains("dtype F4 packs elements in fewer than 8 bits"));
    }
    SECTION("the byte count does not match dtype x shape") {
        CHECK_THAT(header_error(R"({"c_attn.weight":{"dtype":"F32","shape":[8,6],"data_offsets":[0,100]}})", 100),
                   Contains(R"(tensor "c_attn.weight": data_offsets [0, 100] hold 100 bytes, but F32 (8, 6) needs 192)"));
        CHECK_THAT(header_error(R"({"w":{"dtype":"BF16","shape":[3],"data_offsets":[0,4]}})", 4), Contains("hold 4 bytes, but BF16 (3,) needs 6"));
        CHECK_THAT(header_error(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", 4), Contains("overflows"));
        // Empty, yet its strides would overflow.
        CHECK_THAT(header_error(R"({"w":{"dtype":"F32","shape":[0,2,8831398157261209593],"data_offsets":[0,0]}})", 0),
                   Contains(R"(tensor "w": F32 (0, 2, 8831398157261209593) overflows)"));
        CHECK_THAT(header_error(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", 8), Contains("data_offsets [8, 4] end before they begin"));
    }
    SECTION("offsets past the end of the data buffer") {
        CHECK_THAT(header_error(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}})", 8),
                   Contains(R"(tensor "w": data_offsets [0, 12] reach past the end of the data buffer, which holds 8 bytes)"));
        CHECK_THAT(header_error(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[18446744073709551612,18446744073709551615]}})", 8),
                   Contains("hold 3 bytes, but F32 (1,) needs 4"));
    }
    SECTION("entries that overlap, leave a hole, or leave bytes over") {
        CHECK_THAT(header_error(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12),
                   Contains(R"(tensor "a" [0, 8] and tensor "b" [4, 12] overlap)"));
        CHECK_THAT(header_error(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8),
                   Contains("overlap"));
        CHECK_THAT(header_error(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})", 12),
                   Contains(R"(bytes [4, 8) of the data buffer belong to no tensor (a hole before tensor "b"))"));
        CHECK_THAT(header_error(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8), Contains("bytes [0, 4)"));
        CHECK_THAT(header_error(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 12),
                   Contains("the data buffer holds 12 bytes, but its tensors end at byte 4: bytes [4, 12) belong to no tensor"));
        CHECK_THAT(header_error("{}", 1), Contains("bytes [0, 1) belong to no tensor"));
    }
    SECTION("a name or a key given twice") {
        CHECK_THAT(header_error(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8),
                   Contains(R"(tensor "a" appears twice)"));
        CHECK_THAT(header_error(R"({"a":{"dtype":"F32","dtype":"F64","shape":[1],"data_offsets":[0,4]}})", 4),
                   Contains(R"(key "dtype" appears twice (in tensor "a"))"));
        CHECK_THAT(header_error(R"({"__metadata__":{"k":"v","k":"w"}})", 0), Contains(R"(key "k" appears twice)"));
    }
    SECTION("nesting deeper than a header's") {
        CHECK_THAT(header_error(R"({"a":{"dtype":"F32","shape":[[1]],"data_offsets":[0,4]}})", 4), Contains("nested deeper"));
        CHECK_THAT(header_error(R"({"a":{"x":{"y":{}}}})", 0), Contains("nested deeper"));
    }
    SECTION("metadata that is not an object of strings") {
        CHECK_THAT(header_error(R"({"__metadata__":{"k":1}})", 0), Contains(R"("__metadata__"["k"] is a non-negative integer, expected a string)"));
        CHECK_THAT(header_error(R"({"__metadata__":"pt"})", 0), Contains(R"("__metadata__" is a string, expected an object of strings)"));
        CHECK_THAT(header_error(R"({"__metadata__":["pt"]})", 0), Contains(R"("__metadata__" is an array)"));
    }
    SECTION("names from the file are shown escaped") {
        CHECK_THAT(header_error("{\"a\\u0001\\\"b\": 1}", 0), Contains(R"(tensor "a\x01\"b")"));
    }
}

TEST_CASE("safetensors: what is not a regular file is refused before it is opened", "[io][safetensors]") {
    const auto open_error = [](const fs::path& path) {
        return error_message<io::io_error>([&] { io::safetensors_file file(path); });
    };
    CHECK_THAT(open_error("/dev/zero"), Contains("/dev/zero: is not a regular file"));
    scratch_dir dir;
    const auto fifo = dir / "pipe.safetensors";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    CHECK_THAT(open_error(fifo), Contains("is not a regular file"));
    CHECK_THAT(open_error(dir / "missing.safetensors"), Contains("file not found"));
}

TEST_CASE("safetensors: valid edge cases are accepted", "[io][safetensors]") {
    scratch_dir dir;
    const fs::path path = dir / "edge.safetensors";
    SECTION("no tensors at all") {
        write_file(path, make_file("{}", {}));
        const io::safetensors_file file(path);
        CHECK(file.names().empty());
        CHECK_THAT(error_message<io::io_error>([&] { (void)file.info("w"); }), Contains("no tensor named \"w\"; the file holds no tensors"));
    }
    SECTION("a zero-sized tensor beside another, and extra fields ignored as the reference does") {
        write_file(path, make_file(R"({"e":{"dtype":"F32","shape":[0,3],"data_offsets":[4,4],"extra":[1]},"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}        )",
                                   to_bytes(std::vector<float>{7.0f})));
        const io::safetensors_file file(path);
        CHECK(file.load<float, Tdyn, shaped::dim<"K", 3>>("e").size() == 0);
        CHECK(file.load<float, shaped::dim<"K", 1>>("w")(0) == 7.0f);
    }
    SECTION("BOOL is read as 0 or 1") {
        write_file(path, make_file(R"({"m":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})",
                                   std::vector<std::byte>{std::byte{0}, std::byte{1}, std::byte{7}}));
        std::array<std::byte, 3> raw{};
        io::safetensors_file(path).read("m", raw);
        CHECK(raw == std::array<std::byte, 3>{std::byte{0}, std::byte{1}, std::byte{1}});
    }
}

TEST_CASE("safetensors: loading checks the dtype, the dims and the name", "[io][safetensors]") {
    scratch_dir dir;
    shaped::Generator gen(3);
    io::safetensors_writer out;
    out.add("x", shaped::randn<float, B, T, C>(gen));
    out.add("transformer.h.0.attn.c_attn.weight", shaped::randn<float, C, C>(gen));
    out.save(dir / "model.safetensors");
    const io::safetensors_file file(dir / "model.safetensors");

    SECTION("a dtype other than the element type's is refused, not converted") {
        const auto message = error_message<io::io_error>([&] { (void)file.load<double, B, T, C>("x"); });
        CHECK_THAT(message, Contains(R"(shaped::io::safetensors_file::load: )" + (dir / "model.safetensors").string() +
                                     R"(: tensor "x": holds F32 (float32), but the tensor's elements are float64; no conversion is done)"));
    }
    SECTION("a static extent that differs") {
        using T5 = shaped::dim<"T", 5>;
        const auto message = error_message<shaped::shape_error>([&] { (void)file.load<float, B, T5, C>("x"); });
        CHECK_THAT(message, Contains(R"(model.safetensors: tensor "x": the file's shape (2, 4, 6) does not fit the declared shape (B=2, T=5, C=6): T is 4 in the file, not 5)"));
        CHECK_THAT(message, !Contains("transposed"));
    }
    SECTION("a rank that differs") {
        const auto message = error_message<shaped::shape_error>([&] { (void)file.load<float, B, T>("x"); });
        CHECK_THAT(message, Contains(R"(tensor "x": the file's shape (2, 4, 6) does not fit the declared shape (B=2, T=4): it has 3 dims, not 2)"));
        const auto dynamic = error_message<shaped::shape_error>([&] { (void)file.load<float, Tdyn, C>("x"); });
        CHECK_THAT(dynamic, Contains(R"(tensor "x": the file's shape (2, 4, 6) does not fit the declared shape (T, C=6): it has 3 dims, not 2)"));
    }
    SECTION("a weight stored transposed") {
        const auto message = error_message<shaped::shape_error>([&] { (void)file.load<float, C, C>("x"); });
        CHECK_THAT(message, Contains("it has 3 dims, not 2") && !Contains("transposed"));
        const auto reversed = error_message<shaped::shape_error>([&] { (void)file.load<float, C, T, B>("x"); });
        CHECK_THAT(reversed, Contains(R"(tensor "x": the file's shape (2, 4, 6) does not fit the declared shape (C=6, T=4, B=2): it is the declared shape transposed)"));
    }
    SECTION("a name the file lacks, with the names it has that are close") {
        const auto message = error_message<io::io_error>([&] { (void)file.load<float, C, C>("c_attn.weight"); });
        CHECK_THAT(message, Contains(R"(no tensor named "c_attn.weight")") && Contains(R"(did you mean "transformer.h.0.attn.c_attn.weight"?)"));
        const auto typo = error_message<io::io_error>([&] { (void)file.load<float, B, T, C>("y"); });
        CHECK_THAT(typo, Contains(R"(no tensor named "y"; the file holds 2 tensors; did you mean "x"?)"));
    }
    SECTION("a destination of the wrong size for raw bytes") {
        std::array<std::byte, 4> small{};
        CHECK_THAT(error_message<io::io_error>([&] { file.read("x", small); }), Contains("the destination has 4"));
    }
}

TEST_CASE("safetensors: a truncated file is refused when opened", "[io][safetensors]") {
    scratch_dir dir;
    io::safetensors_writer out;
    out.add("x", shaped::ones<float, B, T, C>());
    out.save(dir / "full.safetensors");
    auto bytes = file_bytes(dir / "full.safetensors");
    for (const std::size_t cut : {std::size_t{1}, std::size_t{4}, bytes.size() - 8}) {
        INFO("cut " << cut);
        write_file(dir / "cut.safetensors", std::span(bytes).first(bytes.size() - cut));
        const auto message = error_message<io::io_error>([&] { io::safetensors_file file(dir / "cut.safetensors"); });
        CHECK_THAT(message, Contains("cut.safetensors"));
        CHECK((message.find("is the file truncated?") != std::string::npos || message.find("is it truncated?") != std::string::npos));
    }
}

TEST_CASE("safetensors: the writer refuses what it cannot write, and leaves the old file", "[io][safetensors]") {
    scratch_dir dir;
    const fs::path path = dir / "w.safetensors";
    io::safetensors_writer first;
    first.add("kept", shaped::ones<float, C>());
    first.save(path);
    const auto before = file_bytes(path);

    const auto write_error = [&](auto&& fill) {
        io::safetensors_writer out;
        fill(out);
        return error_message<io::io_error>([&] { out.save(path); });
    };
    CHECK_THAT(write_error([](auto& out) { out.add("a", shaped::ones<float, C>()); out.add("a", shaped::ones<float, C>()); }),
               Contains(R"(tensor "a" is given twice)"));
    CHECK_THAT(write_error([](auto& out) { out.add("__metadata__", shaped::ones<float, C>()); }), Contains("reserved"));
    CHECK_THAT(write_error([](auto& out) { out.add("bad\xff", shaped::ones<float, C>()); }), Contains("not valid UTF-8"));
    CHECK_THAT(write_error([](auto& out) { out.add("a", shaped::ones<float, C>()); out.add_metadata("k", "\xc3"); }), Contains("not valid UTF-8"));
    const std::vector<std::size_t> shape{3};
    const std::array<std::byte, 8> data{};
    const std::vector<io::safetensors_view> views{{"a", "F32", shape, data}};
    CHECK_THAT(error_message<io::io_error>([&] { io::write_safetensors(path, views); }), Contains("8 bytes of data, but F32 (3,) needs 12"));
    const std::vector<io::safetensors_view> unknown{{"a", "F31", shape, data}};
    CHECK_THAT(error_message<io::io_error>([&] { io::write_safetensors(path, unknown); }), Contains(R"(unsupported dtype "F31")"));

    CHECK(file_bytes(path) == before);
    CHECK(dir.entry_count() == 1);
}

// ---- layer parameters ----------------------------------------------------------------------

namespace {

using C12 = shaped::dim<"C", 12>;
using NH = shaped::dim<"NH", 3>;
using HS = shaped::dim<"HS", 4>;
using Attention = shaped::nn::MultiHeadAttention<C12, NH, HS>;

template <class Layer>
void require_same_parameters(const Layer& a, const Layer& b) {
    std::vector<std::vector<float>> values_a, values_b;
    shaped::nn::for_each_parameter(a, [&](std::string_view, const auto& p) { values_a.emplace_back(p.data(), p.data() + p.size()); });
    shaped::nn::for_each_parameter(b, [&](std::string_view, const auto& p) { values_b.emplace_back(p.data(), p.data() + p.size()); });
    REQUIRE(values_a == values_b);
}

}  // namespace

TEST_CASE("layers name their parameters as PyTorch's state_dict does", "[io][safetensors][nn]") {
    shaped::nn::Linear<C, T> linear;
    CHECK(ref::parameter_names(linear) == std::vector<std::string>{"weight", "bias"});
    shaped::nn::Linear<C, T, false> no_bias;
    CHECK(ref::parameter_names(no_bias) == std::vector<std::string>{"weight"});
    const shaped::nn::Head<C, shaped::dim<"H", 16>> head;
    CHECK(ref::parameter_names(head) == std::vector<std::string>{"key.weight", "query.weight", "value.weight"});
    Attention attention;
    CHECK(ref::parameter_names(attention) == std::vector<std::string>{"c_attn.weight", "c_attn.bias", "c_proj.weight", "c_proj.bias"});
    shaped::nn::MultiHeadAttention<C12, NH, HS, false> attention_no_bias;
    CHECK(ref::parameter_names(attention_no_bias) == std::vector<std::string>{"c_attn.weight", "c_proj.weight"});
}

TEST_CASE("load_parameters and save_parameters round trip a layer", "[io][safetensors][nn]") {
    scratch_dir dir;
    shaped::Generator gen(11);
    const Attention saved(gen);
    io::save_parameters(dir / "attn.safetensors", saved, {{"format", "pt"}});
    const io::safetensors_file file(dir / "attn.safetensors");
    CHECK(file.names() == std::vector<std::string>{"c_attn.bias", "c_attn.weight", "c_proj.bias", "c_proj.weight"});
    CHECK(file.info("c_attn.weight").shape == std::vector<std::size_t>{36, 12});  // (out, in)
    CHECK(file.metadata().at("format") == "pt");

    Attention loaded;
    io::load_parameters(loaded, file);
    require_same_parameters(loaded, saved);

    // The loaded layer computes what the saved one does.
    const auto x = shaped::randn<float, B, T, C12>(gen);
    require_same_elements(loaded(x), saved(x));

    // A path works as well as an open file.
    Attention from_path;
    io::load_parameters(from_path, dir / "attn.safetensors");
    require_same_parameters(from_path, saved);
}

TEST_CASE("load_parameters takes a layer's tensors from a whole model's file by prefix", "[io][safetensors][nn]") {
    scratch_dir dir;
    shaped::Generator gen(12);
    const Attention block0(gen), block1(gen);
    // One file for a model: two blocks under their prefixes, and a tensor no layer here names.
    {
        std::vector<io::safetensors_view> views;
        const auto collect = [&](const Attention& layer, std::string prefix) {
            shaped::nn::for_each_parameter(layer, [&](std::string_view name, const auto& p) {
                const auto e = p.extents();
                views.push_back({prefix + std::string(name), "F32", std::vector<std::size_t>(e.begin(), e.end()),
                                 std::as_bytes(std::span<const float>(p.data(), p.size()))});
            });
        };
        collect(block0, "transformer.h.0.attn.");
        collect(block1, "transformer.h.1.attn.");
        const auto wte = shaped::ones<float, shaped::dim<"V", 5>, C12>();
        views.push_back({"transformer.wte.weight", "F32", {5, 12}, std::as_bytes(wte.elements())});
        io::write_safetensors(dir / "model.safetensors", views);
    }
    const io::safetensors_file file(dir / "model.safetensors");
    Attention first, second;
    io::load_parameters(first, file, "transformer.h.0.attn.");
    io::load_parameters(second, file, "transformer.h.1.attn.");
    require_same_parameters(first, block0);
    require_same_parameters(second, block1);

    Attention missing;
    const auto message = error_message<io::io_error>([&] { io::load_parameters(missing, file, "transformer.h.2.attn."); });
    CHECK_THAT(message, Contains(R"(no tensor named "transformer.h.2.attn.c_attn.weight")"));
}

TEST_CASE("load_parameters leaves the layer unchanged when any parameter fails", "[io][safetensors][nn]") {
    scratch_dir dir;
    shaped::Generator gen(13);
    const Attention source(gen);
    const Attention original(gen);
    // The file's first parameters are good; the last one (in the layer's order) is not, so a
    // loader that assigned as it went would have changed c_attn before failing.
    const auto write_with_bad_last = [&](const fs::path& path, auto&& bad_entry) {
        std::vector<io::safetensors_view> views;
        shaped::nn::for_each_parameter(source, [&](std::string_view name, const auto& p) {
            if (name == "c_proj.bias") return;
            const auto e = p.extents();
            views.push_back({std::string(name), "F32", std::vector<std::size_t>(e.begin(), e.end()),
                             std::as_bytes(std::span<const float>(p.data(), p.size()))});
        });
        bad_entry(views);
        io::write_safetensors(path, views);
    };
    const std::array<double, 12> bias64{};
    const std::array<float, 11> bias11{};

    SECTION("a dtype that differs") {
        write_with_bad_last(dir / "bad.safetensors", [&](auto& views) {
            views.push_back({"c_proj.bias", "F64", {12}, std::as_bytes(std::span(bias64))});
        });
        Attention layer = original;
        CHECK_THROWS_AS(io::load_parameters(layer, dir / "bad.safetensors"), io::io_error);
        require_same_parameters(layer, original);
    }
    SECTION("a shape that differs") {
        write_with_bad_last(dir / "bad.safetensors", [&](auto& views) {
            views.push_back({"c_proj.bias", "F32", {11}, std::as_bytes(std::span(bias11))});
        });
        Attention layer = original;
        const auto message = error_message<shaped::shape_error>([&] { io::load_parameters(layer, dir / "bad.safetensors"); });
        CHECK_THAT(message, Contains(R"(tensor "c_proj.bias": the file's shape (11,) does not fit the declared shape (C=12): C is 11 in the file, not 12)"));
        require_same_parameters(layer, original);
    }
    SECTION("a parameter missing") {
        write_with_bad_last(dir / "bad.safetensors", [](auto&) {});
        Attention layer = original;
        const auto message = error_message<io::io_error>([&] { io::load_parameters(layer, dir / "bad.safetensors", ""); });
        CHECK_THAT(message, Contains(R"(no tensor named "c_proj.bias")"));
        require_same_parameters(layer, original);
    }
}

TEST_CASE("load_parameters says so when a weight is stored transposed, as a Conv1D checkpoint stores it", "[io][safetensors][nn]") {
    scratch_dir dir;
    shaped::Generator gen(14);
    const shaped::nn::Linear<C, T> source(gen);  // weight (T=4, C=6), as torch.nn.Linear stores it
    const auto transposed = shaped::ones<float, C, T>();
    std::vector<io::safetensors_view> views{{"proj.weight", "F32", {6, 4}, std::as_bytes(transposed.elements())},
                                            {"proj.bias", "F32", {4}, std::as_bytes(source.bias.elements())}};
    io::write_safetensors(dir / "conv1d.safetensors", views);

    shaped::nn::Linear<C, T> layer = source;
    const auto message = error_message<shaped::shape_error>([&] { io::load_parameters(layer, dir / "conv1d.safetensors", "proj."); });
    CHECK_THAT(message, Contains("shaped::io::safetensors_file::load: " + (dir / "conv1d.safetensors").string() +
                                 R"(: tensor "proj.weight": the file's shape (6, 4) does not fit the declared shape (T=4, C=6): it is the declared shape transposed)"));
    require_same_parameters(layer, source);
}

TEST_CASE("safetensors: damaged files load or are refused, never crash", "[io][safetensors][mutation]") {
    scratch_dir dir;
    shaped::Generator gen(5);
    io::safetensors_writer out;
    out.add("a", shaped::randn<float, shaped::dim<"R", 2>, shaped::dim<"K", 3>>(gen));
    out.add("b", shaped::randn<double, shaped::dim<"K", 3>>(gen));
    out.add_metadata("format", "pt");
    out.save(dir / "good.safetensors");
    const auto good = file_bytes(dir / "good.safetensors");

    std::size_t loaded = 0, refused = 0;
    const auto attempt = [&](std::span<const std::byte> bytes) {
        // A new file each time: truncating one file over and over is slow on ext4, which
        // flushes a file replaced by truncation.
        const fs::path path = dir / ("mutant" + std::to_string(loaded + refused) + ".safetensors");
        write_file(path, bytes);
        try {
            const io::safetensors_file file(path);
            // Ask for what the good file holds; dims are dynamic where a mutant may differ.
            if (file.contains("a")) (void)file.load<float, shaped::dim<"R">, shaped::dim<"K">>("a");
            if (file.contains("b")) (void)file.load<double, shaped::dim<"K">>("b");
            for (const auto& name : file.names()) (void)file.info(name);
            ++loaded;
        } catch (const io::io_error&) {
            ++refused;
        } catch (const shaped::shape_error&) {
            ++refused;
        }
        // Anything else escapes and fails the test.
        fs::remove(path);
    };

    for (std::size_t i = 0; i < good.size(); ++i) {
        for (const unsigned flip : {0x01u, 0x20u, 0x80u, 0xffu}) {
            auto mutant = good;
            mutant[i] ^= static_cast<std::byte>(flip);
            attempt(mutant);
        }
        for (const char c : {'0', '9', '"', '{', ']', ',', ' ', '-'}) {
            auto mutant = good;
            mutant[i] = static_cast<std::byte>(c);
            attempt(mutant);
        }
        attempt(std::span(good).first(i));  // every truncation
    }
    // Random multi-byte damage, from a fixed seed.
    std::mt19937 rng(2024);
    for (int round = 0; round < 500; ++round) {
        auto mutant = good;
        for (int k = 0; k < 4; ++k) mutant[rng() % mutant.size()] = static_cast<std::byte>(rng() & 0xff);
        attempt(mutant);
    }
    INFO("loaded " << loaded << ", refused " << refused);
    // Damage to the data bytes loads (with other values); damage to the header mostly does not.
    CHECK(loaded > 0);
    CHECK(refused > good.size());
}
