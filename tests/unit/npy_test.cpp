// The .npy reader and writer: files written by numpy (tests/unit/data, from make_npy_cases.py),
// round trips through write_npy, and every kind of damaged file a reader can be handed.

#include "shaped/io/npy.hpp"
#include "shaped/io/npy_format.hpp"
#include "shaped/tensor/factories.hpp"

#include "file_support.hpp"

#include <catch2/catch.hpp>

#include <array>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <sys/stat.h>

#ifndef SHAPED_TEST_DATA_DIR
#error "SHAPED_TEST_DATA_DIR must name the tests/unit/data directory"
#endif

namespace {

namespace fs = std::filesystem;
using namespace file_support;
using Catch::Matchers::Contains;
using shaped::io::dtype;
using shaped::io::io_error;
using shaped::io::npy_array;
using shaped::io::parse_npy;
using shaped::io::read_npy;
using shaped::io::write_npy;
using shape_t = std::vector<std::size_t>;

fs::path data_file(const std::string& name) {
    return fs::path(SHAPED_TEST_DATA_DIR) / name;
}

template <class T>
std::vector<T> elements(const npy_array& array) {
    REQUIRE(array.data.size() % sizeof(T) == 0);
    std::vector<T> values(array.data.size() / sizeof(T));
    if (!values.empty()) std::memcpy(values.data(), array.data.data(), array.data.size());
    return values;
}

std::vector<std::byte> text_bytes(std::string_view text) {
    std::vector<std::byte> bytes(text.size());
    std::memcpy(bytes.data(), text.data(), text.size());
    return bytes;
}

// A .npy image with the given header text (padded as numpy pads it) followed by `data`.
std::vector<std::byte> make_npy(std::string_view header, std::span<const std::byte> data,
                                unsigned major_version = 1) {
    const std::size_t length_size = major_version == 1 ? 2 : 4;
    std::string text(header);
    while ((6 + 2 + length_size + text.size() + 1) % 64 != 0) text += ' ';
    text += '\n';
    std::vector<std::byte> bytes = text_bytes("\x93NUMPY");
    bytes.push_back(std::byte{static_cast<unsigned char>(major_version)});
    bytes.push_back(std::byte{0});
    for (std::size_t i = 0; i < length_size; ++i) {
        bytes.push_back(std::byte{static_cast<unsigned char>((text.size() >> (8 * i)) & 0xff)});
    }
    const auto header_bytes = text_bytes(text);
    bytes.insert(bytes.end(), header_bytes.begin(), header_bytes.end());
    bytes.insert(bytes.end(), data.begin(), data.end());
    return bytes;
}

std::string parse_error(std::span<const std::byte> bytes) {
    return error_message<io_error>([&] { parse_npy(bytes, "test bytes"); });
}

// The values make_npy_cases.py writes.
const std::vector<float> f32_values = {-1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 1.5f};
const std::vector<std::int32_t> i32_values = {INT32_MIN, -1, 0, 1, INT32_MAX};
const std::vector<std::int64_t> i64_values = {INT64_MIN, -1, 0, 1, INT64_MAX,
                                              std::int64_t{1} << 40};
const std::vector<std::uint8_t> u8_values = {0, 1, 127, 128, 254, 255};
const std::vector<std::uint8_t> b1_values = {1, 0, 1, 0, 0, 1};

std::vector<double> f64_values() {
    std::vector<double> values;
    for (int i = 0; i < 24; ++i) values.push_back(i / 4.0);
    return values;
}

const std::string f32_header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";

}  // namespace

TEST_CASE("dtype names and sizes follow numpy", "[io][npy]") {
    CHECK(shaped::io::dtype_name(dtype::f32) == "float32");
    CHECK(shaped::io::dtype_name(dtype::f64) == "float64");
    CHECK(shaped::io::dtype_name(dtype::i32) == "int32");
    CHECK(shaped::io::dtype_name(dtype::i64) == "int64");
    CHECK(shaped::io::dtype_name(dtype::u8) == "uint8");
    CHECK(shaped::io::dtype_name(dtype::b1) == "bool");
    CHECK(shaped::io::dtype_size(dtype::f32) == 4);
    CHECK(shaped::io::dtype_size(dtype::f64) == 8);
    CHECK(shaped::io::dtype_size(dtype::i32) == 4);
    CHECK(shaped::io::dtype_size(dtype::i64) == 8);
    CHECK(shaped::io::dtype_size(dtype::u8) == 1);
    CHECK(shaped::io::dtype_size(dtype::b1) == 1);
}

TEST_CASE("read_npy reads numpy's files of every dtype", "[io][npy]") {
    SECTION("float32") {
        const npy_array array = read_npy(data_file("f32_c.npy"));
        CHECK(array.type == dtype::f32);
        CHECK(array.shape == shape_t{2, 3});
        CHECK(elements<float>(array) == f32_values);
    }
    SECTION("float64") {
        const npy_array array = read_npy(data_file("f64_c.npy"));
        CHECK(array.type == dtype::f64);
        CHECK(array.shape == shape_t{2, 3, 4});
        CHECK(elements<double>(array) == f64_values());
    }
    SECTION("int32") {
        const npy_array array = read_npy(data_file("i32_c.npy"));
        CHECK(array.type == dtype::i32);
        CHECK(array.shape == shape_t{5});
        CHECK(elements<std::int32_t>(array) == i32_values);
    }
    SECTION("int64") {
        const npy_array array = read_npy(data_file("i64_c.npy"));
        CHECK(array.type == dtype::i64);
        CHECK(array.shape == shape_t{6});
        CHECK(elements<std::int64_t>(array) == i64_values);
    }
    SECTION("uint8") {
        const npy_array array = read_npy(data_file("u8_c.npy"));
        CHECK(array.type == dtype::u8);
        CHECK(array.shape == shape_t{2, 3});
        CHECK(elements<std::uint8_t>(array) == u8_values);
    }
    SECTION("bool") {
        const npy_array array = read_npy(data_file("b1_c.npy"));
        CHECK(array.type == dtype::b1);
        CHECK(array.shape == shape_t{2, 3});
        CHECK(elements<std::uint8_t>(array) == b1_values);
    }
    SECTION("0-d") {
        const npy_array array = read_npy(data_file("f64_0d.npy"));
        CHECK(array.type == dtype::f64);
        CHECK(array.shape.empty());
        CHECK(elements<double>(array) == std::vector<double>{3.25});
    }
    SECTION("empty") {
        const npy_array array = read_npy(data_file("f32_empty.npy"));
        CHECK(array.type == dtype::f32);
        CHECK(array.shape == shape_t{0, 3});
        CHECK(array.data.empty());
    }
    SECTION("format versions 2.0 and 3.0") {
        for (const char* name : {"f32_v2.npy", "f32_v3.npy"}) {
            INFO(name);
            const npy_array array = read_npy(data_file(name));
            CHECK(array.type == dtype::f32);
            CHECK(array.shape == shape_t{2, 3});
            CHECK(elements<float>(array) == f32_values);
        }
    }
}

TEST_CASE("read_npy byte-swaps big-endian files", "[io][npy]") {
    const npy_array f32 = read_npy(data_file("f32_be.npy"));
    CHECK(f32.type == dtype::f32);
    CHECK(f32.shape == shape_t{2, 3});
    CHECK(elements<float>(f32) == f32_values);

    const npy_array f64 = read_npy(data_file("f64_be.npy"));
    CHECK(f64.shape == shape_t{2, 3, 4});
    CHECK(elements<double>(f64) == f64_values());

    const npy_array i32 = read_npy(data_file("i32_be.npy"));
    CHECK(i32.type == dtype::i32);
    CHECK(elements<std::int32_t>(i32) == i32_values);

    const npy_array i64 = read_npy(data_file("i64_be.npy"));
    CHECK(i64.type == dtype::i64);
    CHECK(elements<std::int64_t>(i64) == i64_values);
}

TEST_CASE("read_npy converts Fortran-order files to C order", "[io][npy]") {
    SECTION("int32 (2, 3, 4)") {
        const npy_array array = read_npy(data_file("i32_fortran.npy"));
        CHECK(array.type == dtype::i32);
        CHECK(array.shape == shape_t{2, 3, 4});
        std::vector<std::int32_t> expected(24);
        for (std::int32_t i = 0; i < 24; ++i) expected[static_cast<std::size_t>(i)] = i;
        CHECK(elements<std::int32_t>(array) == expected);
    }
    SECTION("big-endian float64 (3, 5)") {
        const npy_array array = read_npy(data_file("f64_fortran_be.npy"));
        CHECK(array.type == dtype::f64);
        CHECK(array.shape == shape_t{3, 5});
        std::vector<double> expected;
        for (int i = 0; i < 15; ++i) expected.push_back(i / 2.0);
        CHECK(elements<double>(array) == expected);
    }
    SECTION("Fortran order is the same as C order in 0-d, 1-d and empty arrays") {
        const auto values = to_bytes(std::vector<float>{1.0f, 2.0f, 3.0f});
        const npy_array vector = parse_npy(
            make_npy("{'descr': '<f4', 'fortran_order': True, 'shape': (3,), }", values), "1-d");
        CHECK(elements<float>(vector) == std::vector<float>{1.0f, 2.0f, 3.0f});
        const npy_array empty = parse_npy(
            make_npy("{'descr': '<f4', 'fortran_order': True, 'shape': (0, 4), }", {}), "empty");
        CHECK(empty.shape == shape_t{0, 4});
        CHECK(empty.data.empty());
    }
}

TEST_CASE("write_npy writes the same bytes numpy.save does", "[io][npy]") {
    scratch_dir dir;
    for (const char* name : {"f32_c.npy", "f64_c.npy", "i32_c.npy", "i64_c.npy", "u8_c.npy",
                             "b1_c.npy", "f64_0d.npy", "f32_empty.npy"}) {
        INFO(name);
        const npy_array array = read_npy(data_file(name));
        write_npy(dir / name, array.type, array.shape, array.data);
        CHECK(file_bytes(dir / name) == file_bytes(data_file(name)));
    }
}

TEST_CASE("write_npy then read_npy round-trips every dtype and shape", "[io][npy]") {
    scratch_dir dir;
    const std::vector<shape_t> shapes = {{}, {0}, {0, 3}, {3, 0, 2}, {1},
                                         {7}, {2, 3}, {2, 1, 3}, {2, 3, 4, 5}};
    for (const dtype type :
         {dtype::f32, dtype::f64, dtype::i32, dtype::i64, dtype::u8, dtype::b1}) {
        for (const shape_t& shape : shapes) {
            std::size_t count = 1;
            for (const std::size_t extent : shape) count *= extent;
            const std::size_t item_size = shaped::io::dtype_size(type);
            std::vector<std::byte> data(count * item_size);
            for (std::size_t i = 0; i < data.size(); ++i) {
                data[i] = type == dtype::b1 ? std::byte{static_cast<unsigned char>(i % 2)}
                                            : std::byte{static_cast<unsigned char>(i * 37 + 11)};
            }
            INFO(shaped::io::dtype_name(type)
                 << " with " << shape.size() << " dims, " << count << " elements");
            const fs::path path = dir / "round_trip.npy";
            write_npy(path, type, shape, data);
            const npy_array back = read_npy(path);
            CHECK(back.type == type);
            CHECK(back.shape == shape);
            CHECK(back.data == data);
        }
    }
    CHECK(dir.entry_count() == 1);
}

TEST_CASE("write_npy switches to format 2.0 when the header outgrows 1.0", "[io][npy]") {
    scratch_dir dir;
    const shape_t many_dims(30000, 1);  // ~90 kB of "1, 1, ..." does not fit a 16-bit length
    const auto data = to_bytes(std::vector<float>{42.0f});
    write_npy(dir / "wide.npy", dtype::f32, many_dims, data);
    const auto bytes = file_bytes(dir / "wide.npy");
    REQUIRE(bytes.size() > 8);
    CHECK(bytes[6] == std::byte{2});
    CHECK(bytes.size() % 64 == 4);  // the header ends on a 64-byte boundary, then one float
    const npy_array back = read_npy(dir / "wide.npy");
    CHECK(back.shape == many_dims);
    CHECK(elements<float>(back) == std::vector<float>{42.0f});
}

TEST_CASE("write_npy replaces a file only once the new one is complete", "[io][npy]") {
    scratch_dir dir;
    const fs::path path = dir / "weights.npy";
    const shape_t shape = {2, 3};
    write_npy(path, dtype::f32, shape, to_bytes(f32_values));
    const auto original = file_bytes(path);

    SECTION("overwriting succeeds and leaves no temporary file") {
        const std::vector<float> doubled = {-2.0f, -1.0f, 0.0f, 1.0f, 2.0f, 3.0f};
        write_npy(path, dtype::f32, shape, to_bytes(doubled));
        CHECK(elements<float>(read_npy(path)) == doubled);
        CHECK(dir.entry_count() == 1);
    }
    SECTION("data that does not match the shape is refused before anything is written") {
        const auto message = error_message<io_error>([&] {
            write_npy(path, dtype::f32, shape, to_bytes(std::vector<float>{1.0f, 2.0f}));
        });
        CHECK_THAT(message, Contains("write_npy") && Contains("weights.npy") &&
                                Contains("data has 8 bytes but shape (2, 3) of float32 needs 24"));
        CHECK(file_bytes(path) == original);
        CHECK(dir.entry_count() == 1);
    }
    SECTION("a shape whose size overflows is refused") {
        const shape_t huge = {std::size_t{1} << 40, std::size_t{1} << 40};
        CHECK_THAT(error_message<io_error>([&] { write_npy(path, dtype::f32, huge, {}); }),
                   Contains("overflows"));
        CHECK(file_bytes(path) == original);
    }
    SECTION("a failed rename removes the temporary file") {
        fs::create_directory(dir / "occupied");
        write_file(dir / "occupied" / "keep", text_bytes("x"));
        const auto message = error_message<io_error>(
            [&] { write_npy(dir / "occupied", dtype::f32, shape, to_bytes(f32_values)); });
        CHECK_THAT(message, Contains("cannot replace"));
        CHECK(fs::is_directory(dir / "occupied"));
        CHECK(dir.entry_count() == 2);
    }
    SECTION("a missing directory is reported") {
        const auto message = error_message<io_error>([&] {
            write_npy(dir / "no_such_dir" / "x.npy", dtype::f32, shape, to_bytes(f32_values));
        });
        CHECK_THAT(message, Contains("cannot create temporary file") && Contains("No such file"));
    }
}

TEST_CASE("read_npy reports files it cannot open", "[io][npy]") {
    scratch_dir dir;
    CHECK_THAT(error_message<io_error>([&] { read_npy(dir / "missing.npy"); }),
               Contains("read_npy") && Contains("missing.npy") && Contains("file not found"));
    fs::create_directory(dir / "folder.npy");
    CHECK_THAT(error_message<io_error>([&] { read_npy(dir / "folder.npy"); }), Contains("is a directory"));
}

TEST_CASE("read_npy refuses what is not a regular file, which could never end or block", "[io][npy]") {
    CHECK_THAT(error_message<io_error>([&] { read_npy("/dev/zero"); }),
               Contains("'/dev/zero': is not a regular file"));
    scratch_dir dir;
    const auto fifo = dir / "pipe.npy";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    CHECK_THAT(error_message<io_error>([&] { read_npy(fifo); }), Contains("is not a regular file"));
}

TEST_CASE("errors name the file or the byte source", "[io][npy]") {
    scratch_dir dir;
    write_file(dir / "junk.npy", text_bytes("PK\x03\x04 this is a zip file"));
    CHECK_THAT(error_message<io_error>([&] { read_npy(dir / "junk.npy"); }),
               Contains("read_npy: '") && Contains("junk.npy': bad magic string"));
    CHECK_THAT(error_message<io_error>([&] { parse_npy(text_bytes("junk"), "layer0.weight"); }),
               Contains("parse_npy: layer0.weight: bad magic string"));
}

TEST_CASE("a damaged preamble is an io_error", "[io][npy]") {
    const auto valid = file_bytes(data_file("f32_c.npy"));
    SECTION("empty") {
        CHECK_THAT(parse_error({}), Contains("empty"));
    }
    SECTION("bad magic") {
        auto bytes = valid;
        bytes[1] = std::byte{'n'};
        CHECK_THAT(parse_error(bytes), Contains("bad magic string"));
    }
    SECTION("ends before the version") {
        CHECK_THAT(parse_error(std::span(valid).first(7)), Contains("truncated preamble"));
    }
    SECTION("ends inside the header length") {
        CHECK_THAT(parse_error(std::span(valid).first(9)), Contains("truncated preamble"));
    }
    SECTION("unsupported versions") {
        auto bytes = valid;
        bytes[6] = std::byte{4};
        CHECK_THAT(parse_error(bytes), Contains("unsupported .npy format version 4.0"));
        bytes[6] = std::byte{0};
        CHECK_THAT(parse_error(bytes), Contains("unsupported .npy format version 0.0"));
        bytes[6] = std::byte{1};
        bytes[7] = std::byte{1};
        CHECK_THAT(parse_error(bytes), Contains("unsupported .npy format version 1.1"));
    }
    SECTION("header longer than the file") {
        CHECK_THAT(parse_error(std::span(valid).first(40)),
                   Contains("truncated header") &&
                       Contains("announces 118 header bytes but only 30 follow"));
    }
    SECTION("a huge announced header is not allocated") {
        auto bytes = make_npy(f32_header, to_bytes(f32_values), 2);
        for (std::size_t i = 8; i < 12; ++i) bytes[i] = std::byte{0xff};
        CHECK_THAT(parse_error(bytes), Contains("truncated header") && Contains("4294967295"));
    }
}

TEST_CASE("a malformed header dictionary is an io_error", "[io][npy]") {
    const auto data = to_bytes(f32_values);
    struct bad_header {
        const char* header;
        const char* problem;
    };
    const std::vector<bad_header> cases = {
        {"", "expected the header dictionary to open with '{'"},
        {"['descr', '<f4']", "expected the header dictionary to open with '{'"},
        {"{'descr': '<f4', 'fortran_order': False}", "missing key 'shape'"},
        {"{'fortran_order': False, 'shape': (2, 3)}", "missing key 'descr'"},
        {"{'descr': '<f4', 'shape': (2, 3)}", "missing key 'fortran_order'"},
        {"{}", "missing key 'descr'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'extra': 1}",
         "unexpected key 'extra'"},
        {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}",
         "duplicate key 'descr'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'shape': (2, 3)}",
         "duplicate key 'shape'"},
        {"{'descr' '<f4', 'fortran_order': False, 'shape': (2, 3)}",
         "expected ':' after key 'descr'"},
        {"{'descr': '<f4' 'fortran_order': False, 'shape': (2, 3)}",
         "expected ',' or '}' after the value of 'descr'"},
        {"{'descr': '<f4", "unterminated string"},
        {"{descr: '<f4', 'fortran_order': False, 'shape': (2, 3)}", "expected a key in quotes"},
        {"{'descr': <f4, 'fortran_order': False, 'shape': (2, 3)}",
         "expected a dtype string for 'descr' in quotes"},
        {"{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2, 3)}", "expected True or False"},
        {"{'descr': '<f4', 'fortran_order': Falsey, 'shape': (2, 3)}", "expected True or False"},
        {"{'descr': '<f4', 'fortran_order': 0, 'shape': (2, 3)}", "expected True or False"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3]}",
         "expected a tuple for 'shape'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (6)}", "'shape' is not a tuple"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3)}", "negative extent"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, x)}",
         "expected a non-negative integer"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2 3)}",
         "expected ',' or ')' in 'shape'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3}",
         "expected ',' or ')' in 'shape'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,)}",
         "overflows size_t"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)} trailing",
         "unexpected text after"},
        {"{'descr': '<f\\x34', 'fortran_order': False, 'shape': (2, 3)}",
         "unsupported escape in string"},
    };
    for (const bad_header& bad : cases) {
        INFO("header: " << bad.header);
        CHECK_THAT(parse_error(make_npy(bad.header, data)),
                   Contains("malformed header") && Contains(bad.problem));
    }
}

TEST_CASE("headers numpy accepts in other spellings are read", "[io][npy]") {
    const auto data = to_bytes(f32_values);
    for (const char* header : {
             "{'shape': (2, 3), 'fortran_order': False, 'descr': '<f4'}",
             "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2,3)}",
             "{ 'descr' : '<f4' ,\n 'fortran_order' : False ,\t'shape' : ( 2 , 3 , ) , }",
             "{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }",
         }) {
        INFO("header: " << header);
        const npy_array array = parse_npy(make_npy(header, data), "spelling");
        CHECK(array.shape == shape_t{2, 3});
        CHECK(elements<float>(array) == f32_values);
    }
}

TEST_CASE("dtypes shaped does not store are refused by name", "[io][npy]") {
    CHECK_THAT(error_message<io_error>([] { read_npy(data_file("f16_unsupported.npy")); }),
               Contains("f16_unsupported.npy") && Contains("unsupported dtype '<f2'"));

    const auto data = to_bytes(f32_values);
    for (const char* descr : {"<c8", "|O", "<U3", "|S4", "<i2", "<u4", "|f4", "f4", "<f4x", ""}) {
        INFO("descr: " << descr);
        const std::string header =
            std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (2, 3), }";
        CHECK_THAT(parse_error(make_npy(header, data)),
                   Contains(std::string("unsupported dtype '") + descr + "'"));
    }
    CHECK_THAT(parse_error(make_npy(
                   "{'descr': [('x', '<f4')], 'fortran_order': False, 'shape': (6,), }", data)),
               Contains("unsupported dtype") && Contains("structured"));
}

TEST_CASE("a shape whose size overflows is an io_error", "[io][npy]") {
    SECTION("element count") {
        const auto bytes = make_npy(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 2), }", {});
        CHECK_THAT(parse_error(bytes),
                   Contains("shape (4294967296, 4294967296, 2) of float32 overflows"));
    }
    SECTION("bytes, when the element count alone fits") {
        const auto bytes = make_npy(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904,), }", {});
        CHECK_THAT(parse_error(bytes), Contains("overflows"));
    }
    SECTION("a zero extent in front of huge ones: empty, but its strides would overflow") {
        const auto bytes = make_npy(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 2, 8831398157261209593), }", {});
        CHECK_THAT(parse_error(bytes), Contains("shape (0, 2, 8831398157261209593) of float32 overflows"));
    }
    SECTION("a zero extent beside extents that fit makes an empty array") {
        const auto bytes = make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000, 0, 1000000), }", {});
        const npy_array array = parse_npy(bytes, "empty");
        CHECK(array.shape == shape_t{1000000, 0, 1000000});
        CHECK(array.data.empty());
        const auto t = shaped::io::from_npy<float, shaped::dim<"A">, shaped::dim<"B">, shaped::dim<"C">>(array, "empty");
        CHECK(t.size() == 0);
    }
}

TEST_CASE("data that does not match the shape is an io_error", "[io][npy]") {
    const auto valid = file_bytes(data_file("f32_c.npy"));
    SECTION("truncated") {
        CHECK_THAT(parse_error(std::span(valid).first(valid.size() - 1)),
                   Contains("truncated data") &&
                       Contains("shape (2, 3) of float32 needs 24 data bytes but there are 23"));
    }
    SECTION("no data at all") {
        CHECK_THAT(parse_error(std::span(valid).first(valid.size() - 24)),
                   Contains("truncated data") && Contains("but there are 0"));
    }
    SECTION("trailing bytes") {
        auto bytes = valid;
        bytes.push_back(std::byte{0});
        CHECK_THAT(parse_error(bytes),
                   Contains("does not match the shape") && Contains("1 trailing bytes"));
    }
}

TEST_CASE("bool bytes other than 0 and 1 read as true", "[io][npy]") {
    const std::vector<std::byte> data = {std::byte{0}, std::byte{1}, std::byte{2}, std::byte{0xff}};
    const npy_array array = parse_npy(
        make_npy("{'descr': '|b1', 'fortran_order': False, 'shape': (4,), }", data), "bools");
    CHECK(elements<std::uint8_t>(array) == std::vector<std::uint8_t>{0, 1, 1, 1});
}

TEST_CASE("every truncation and header byte flip of a valid file fails cleanly", "[io][npy]") {
    for (const char* name :
         {"f32_c.npy", "f64_0d.npy", "f32_empty.npy", "i32_fortran.npy", "f32_v2.npy"}) {
        INFO(name);
        const auto valid = file_bytes(data_file(name));
        for (std::size_t length = 0; length < valid.size(); ++length) {
            INFO("truncated to " << length << " bytes");
            CHECK_THROWS_AS(parse_npy(std::span(valid).first(length), name), io_error);
        }
        for (std::size_t at = 0; at < 128 && at < valid.size(); ++at) {
            for (const std::byte flip :
                 {std::byte{0x01}, std::byte{0x20}, std::byte{0x80}, std::byte{0xff}}) {
                auto damaged = valid;
                damaged[at] ^= flip;
                const auto parse_or_io_error = [&] {
                    try {
                        parse_npy(damaged, name);
                    } catch (const io_error&) {
                        // Refusing the damage is as good as reading through it.
                    }
                };
                INFO("byte " << at << " flipped by " << std::to_integer<int>(flip));
                CHECK_NOTHROW(parse_or_io_error());
            }
        }
    }
}

// ---- typed loading -------------------------------------------------------------------------

TEST_CASE("load_npy checks the dtype and shows both whole shapes when the dims do not fit", "[io][npy]") {
    using H = shaped::dim<"H", 4>;
    using C = shaped::dim<"C", 6>;
    using Tdyn = shaped::dim<"T">;
    scratch_dir dir;
    const fs::path weight = dir / "key_weight.npy";
    shaped::io::save_npy(weight, shaped::ones<float, C, H>());  // (6, 4): stored (in, out)

    const auto shape_message = [&](auto load) { return error_message<shaped::shape_error>(load); };
    SECTION("a file of the declared shape loads") {
        const auto w = shaped::io::load_npy<float, C, H>(weight);
        CHECK(w.extents() == std::array<std::size_t, 2>{6, 4});
        CHECK(shaped::io::load_npy<float, Tdyn, H>(weight).extents() == std::array<std::size_t, 2>{6, 4});
    }
    SECTION("a weight stored transposed") {
        const auto message = shape_message([&] { (void)shaped::io::load_npy<float, H, C>(weight); });
        CHECK_THAT(message, Contains("shaped::io::load_npy: " + weight.string() +
                                     ": the file's shape (6, 4) does not fit the declared shape (H=4, C=6): "
                                     "it is the declared shape transposed"));
    }
    SECTION("transposed, against a dynamic dim, which shows as its name alone") {
        const auto message = shape_message([&] { (void)shaped::io::load_npy<float, H, Tdyn>(weight); });
        CHECK_THAT(message, Contains("the file's shape (6, 4) does not fit the declared shape (H=4, T): "
                                     "it is the declared shape transposed"));
    }
    SECTION("an extent that differs, not transposed") {
        using H5 = shaped::dim<"H", 5>;
        const auto message = shape_message([&] { (void)shaped::io::load_npy<float, C, H5>(weight); });
        CHECK_THAT(message, Contains("the file's shape (6, 4) does not fit the declared shape (C=6, H=5): "
                                     "H is 4 in the file, not 5"));
        CHECK_THAT(message, !Contains("transposed"));
    }
    SECTION("a square shape that differs is not called transposed") {
        const fs::path square = dir / "square.npy";
        shaped::io::save_npy(square, shaped::ones<float, C, C>());
        const auto message = shape_message([&] { (void)shaped::io::load_npy<float, H, C>(square); });
        CHECK_THAT(message, Contains("the file's shape (6, 6) does not fit the declared shape (H=4, C=6): "
                                     "H is 6 in the file, not 4"));
        CHECK_THAT(message, !Contains("transposed"));
    }
    SECTION("a rank that differs") {
        const auto message = shape_message([&] { (void)shaped::io::load_npy<float, Tdyn, C, H>(weight); });
        CHECK_THAT(message, Contains("the file's shape (6, 4) does not fit the declared shape (T, C=6, H=4): "
                                     "it has 2 dims, not 3"));
        const auto one = shape_message([&] { (void)shaped::io::load_npy<float, H>(weight); });
        CHECK_THAT(one, Contains("the file's shape (6, 4) does not fit the declared shape (H=4): it has 2 dims, not 1"));
    }
    SECTION("a dtype other than the element type's is an io_error") {
        const auto message = error_message<io_error>([&] { (void)shaped::io::load_npy<double, C, H>(weight); });
        CHECK_THAT(message, Contains("shaped::io::load_npy: " + weight.string() +
                                     ": holds float32, but the tensor's elements are float64; no conversion is done"));
    }
    SECTION("an array built by hand with too few bytes for its shape is refused") {
        const npy_array array{dtype::f32, {2}, std::vector<std::byte>(4)};
        CHECK_THAT(error_message<io_error>([&] { (void)shaped::io::from_npy<float, shaped::dim<"K">>(array, "hand-made"); }),
                   Contains("shaped::io::from_npy: hand-made: holds 4 data bytes, but its shape needs 8"));
    }
}
