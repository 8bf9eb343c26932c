// io/core.hpp: what the formats share. The same tensor that does not fit reads the same from a
// .npy file and from a safetensors file, and load_parameters serves any source of named
// tensors (here a directory of .npy files) with the same strong guarantee.

#include <shaped/io.hpp>
#include <shaped/nn.hpp>

#include "file_support.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using namespace file_support;
namespace io = shaped::io;
using Catch::Matchers::Contains;

using C = shaped::dim<"C", 6>;
using H = shaped::dim<"H", 4>;

// What a message says after the place it names ("...: tensor \"w\": ").
std::string after_place(const std::string& message, const std::string& place) {
    const auto at = message.find(place);
    REQUIRE(at != std::string::npos);
    return message.substr(at + place.size());
}

template <class Layer>
std::vector<std::vector<float>> parameter_values(const Layer& layer) {
    std::vector<std::vector<float>> values;
    shaped::nn::for_each_parameter(layer, [&](std::string_view, const auto& p) { values.emplace_back(p.data(), p.data() + p.size()); });
    return values;
}

}  // namespace

TEST_CASE("io: a shape that does not fit reads the same from .npy and from safetensors", "[io][npy][safetensors]") {
    scratch_dir dir;
    const auto weight = shaped::ones<float, C, H>();
    io::save_npy(dir / "w.npy", weight);
    io::safetensors_writer out;
    out.add("w", weight);
    out.save(dir / "w.safetensors");
    const io::safetensors_file file(dir / "w.safetensors");

    const auto npy = error_message<shaped::shape_error>([&] { (void)io::load_npy<float, H, C>(dir / "w.npy"); });
    const auto safetensors = error_message<shaped::shape_error>([&] { (void)file.load<float, H, C>("w"); });
    const std::string problem = "the file's shape (6, 4) does not fit the declared shape (H=4, C=6): it is the declared shape transposed";
    CHECK(after_place(npy, "w.npy: ") == problem);
    CHECK(after_place(safetensors, "w.safetensors: tensor \"w\": ") == problem);

    const auto npy_dtype = error_message<io::io_error>([&] { (void)io::load_npy<std::int32_t, C, H>(dir / "w.npy"); });
    const auto safetensors_dtype = error_message<io::io_error>([&] { (void)file.load<std::int32_t, C, H>("w"); });
    CHECK(after_place(npy_dtype, "w.npy: ") == "holds float32, but the tensor's elements are int32; no conversion is done");
    CHECK(after_place(safetensors_dtype, "w.safetensors: tensor \"w\": ") ==
          "holds F32 (float32), but the tensor's elements are int32; no conversion is done");
}

TEST_CASE("io: load_parameters takes a layer's tensors from a directory of .npy files", "[io][npy][nn]") {
    scratch_dir dir;
    shaped::Generator gen(21);
    const shaped::nn::Linear<C, H> saved(gen);
    const fs::path weights = dir / "weights";
    fs::create_directories(weights);
    for (const io::tensor_bytes& parameter : io::parameter_bytes(saved, "proj."))
        io::write_npy(weights / (parameter.name + ".npy"), parameter.type, parameter.shape, parameter.data);

    shaped::nn::Linear<C, H> loaded;
    io::load_parameters(loaded, io::npy_directory(weights), "proj.");
    CHECK(parameter_values(loaded) == parameter_values(saved));

    SECTION("a file that does not fit leaves the layer as it was") {
        io::save_npy(weights / "proj.bias.npy", shaped::ones<float, shaped::dim<"H", 5>>());
        shaped::nn::Linear<C, H> layer = loaded;
        const shaped::nn::Linear<C, H> before = layer;
        const auto message = error_message<shaped::shape_error>([&] { io::load_parameters(layer, io::npy_directory(weights), "proj."); });
        CHECK_THAT(message, Contains("proj.bias.npy: the file's shape (5,) does not fit the declared shape (H=4): H is 5 in the file, not 4"));
        CHECK(parameter_values(layer) == parameter_values(before));
    }
    SECTION("a missing file names it") {
        shaped::nn::Linear<C, H> layer;
        CHECK_THAT(error_message<io::io_error>([&] { io::load_parameters(layer, io::npy_directory(weights), "other."); }),
                   Contains("other.weight.npy") && Contains("file not found"));
    }
}
