// Modules (nn/module.hpp): a plain struct of layers declared with BOOST_HANA_DEFINE_STRUCT gets
// its parameters named, counted, summarised, saved and loaded from the declaration alone; a
// Stack of blocks runs them in order, forward and decoding, with its caches kept in step.
#include "file_support.hpp"
#include "parameter_names.hpp"
#include "reference.hpp"

#include <shaped/shaped.hpp>

#include <catch2/catch.hpp>

#include <cstddef>
#include <string>
#include <string_view>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

using B = shaped::dim<"B", 2>;
using C = shaped::dim<"C", 8>;
using NH = shaped::dim<"NH", 2>;
using HS = shaped::dim<"HS", 4>;
using V = shaped::dim<"V", 5>;
using S = shaped::dim<"S", 6>;
using Td = shaped::dim<"T">;

using Block = shaped::nn::Block<C, NH, HS>;

// A small model as a user declares one: a sub-module, a stack, a layer without bias.
struct TinyModel {
    TinyModel() = default;
    explicit TinyModel(shaped::Generator& gen) : ln(gen), h(gen), head(gen) {}
    BOOST_HANA_DEFINE_STRUCT(TinyModel,
        (shaped::nn::LayerNorm<C>, ln),
        (shaped::nn::Stack<Block, 2>, h),
        (shaped::nn::Linear<C, V, false>, head));
};

// Counted by visiting: every parameter's size, and its bytes.
std::size_t visited_count(const auto& module) {
    std::size_t total = 0;
    shaped::nn::for_each_parameter(module, [&](std::string_view, const auto& p) { total += p.size(); });
    return total;
}

std::vector<float> values_of(const auto& module) {
    std::vector<float> values;
    shaped::nn::for_each_parameter(module, [&](std::string_view, const auto& p) { values.insert(values.end(), p.data(), p.data() + p.size()); });
    return values;
}

}  // namespace

TEST_CASE("a module's parameters are named as PyTorch's state_dict names them, stacks by index", "[module]") {
    const TinyModel model;
    const std::vector<std::string> block_names{"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
                                               "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
                                               "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"};
    std::vector<std::string> want{"ln.weight", "ln.bias"};
    for (const char* layer : {"h.0.", "h.1."})
        for (const std::string& name : block_names) want.push_back(layer + name);
    want.push_back("head.weight");
    CHECK(ref::parameter_names(model) == want);

    // A stack on its own is named from its indices.
    const shaped::nn::Stack<shaped::nn::Linear<C, C>, 2> stack;
    CHECK(ref::parameter_names(stack) == std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias"});
}

TEST_CASE("parameter_count and parameter_bytes are constants equal to what a visit counts", "[module]") {
    const TinyModel model;
    // Hand count: LayerNorm 2C; a block 2 x 2C (norms) + 3C x C + 3C (c_attn) + C x C + C (c_proj)
    // + 4C x C + 4C (c_fc) + C x 4C + C (c_proj); head C x V.
    constexpr std::size_t c = C::extent;
    constexpr std::size_t block = 4 * c + (3 * c * c + 3 * c) + (c * c + c) + (4 * c * c + 4 * c) + (4 * c * c + c);
    static_assert(shaped::nn::parameter_count<TinyModel> == 2 * c + 2 * block + c * V::extent);
    static_assert(shaped::nn::parameter_bytes<TinyModel> == 4 * shaped::nn::parameter_count<TinyModel>);
    static_assert(shaped::nn::parameter_count<shaped::nn::Stack<Block, 2>> == 2 * block);
    static_assert(shaped::nn::parameter_bytes<shaped::nn::Linear<C, V, true, double>> == 8 * (c * V::extent + V::extent));
    CHECK(visited_count(model) == shaped::nn::parameter_count<TinyModel>);
}

TEST_CASE("parameter_list gives the visit's parameters as slots: names, ranks, extents, elements", "[module]") {
    shaped::Generator gen(5);
    TinyModel model(gen);
    const auto slots = shaped::nn::parameter_list(model);
    std::vector<std::string> names;
    std::size_t count = 0;
    std::vector<float> values;
    for (const shaped::nn::parameter_slot& p : slots) {
        names.emplace_back(p.name);
        count += p.size;
        std::size_t product = 1;
        for (std::size_t e : p.extents) product *= e;
        CHECK(p.extents.size() == p.rank);
        CHECK(product == p.size);
        const auto elements = p.elements<float>();
        values.insert(values.end(), elements.begin(), elements.end());
    }
    CHECK(names == ref::parameter_names(model));
    CHECK(count == shaped::nn::parameter_count<TinyModel>);
    CHECK(values == values_of(model));
    // head.weight, (V, C): its slot points at the tensor itself and its elements.
    const auto& head = slots[slots.size() - 1];
    CHECK(head.rank == 2);
    CHECK(head.extents[0] == V::extent);
    CHECK(head.extents[1] == C::extent);
    CHECK(head.tensor == &model.head.weight);
    CHECK(head.tensor_type == typeid(model.head.weight));
    // Written through a slot, read through the module.
    head.elements<float>()[3] = 42.0f;
    CHECK(model.head.weight.data()[3] == 42.0f);
    // Elements read as another type: an error naming the parameter, not a reinterpretation.
    CHECK_THROWS_WITH(head.elements<double>(), Catch::Contains("`head.weight` holds float elements, read as double"));
    // A const module's slots are const, and a mutable slot reads as a const one.
    const auto read_only = shaped::nn::parameter_list(std::as_const(model));
    static_assert(std::is_same_v<decltype(read_only[0].elements<float>()), std::span<const float>>);
    const shaped::nn::const_parameter_slot as_const = slots[0];
    CHECK(as_const.name == "ln.weight");
    CHECK(as_const.data == read_only[0].data);
}

TEST_CASE("summary prints the module tree with shapes and counts, a stack's module once", "[module]") {
    const std::string text = shaped::nn::summary(TinyModel{});
    INFO(text);
    std::vector<std::string> lines;
    for (std::size_t start = 0, end; start < text.size(); start = end + 1) {
        end = text.find('\n', start);
        lines.push_back(text.substr(start, end - start));
    }
    REQUIRE(lines.size() == 19);
    CHECK(lines[0].starts_with("TinyModel("));
    CHECK(lines[0].ends_with("1,800 parameters"));
    CHECK(lines[1] == "  (ln): LayerNorm(weight (C=8), bias (C=8))");
    CHECK(lines[2].starts_with("  (h): Stack("));
    CHECK(lines[2].ends_with("1,744 parameters"));
    CHECK(lines[3].starts_with("    (0-1): 2 x Block("));
    CHECK(lines[3].ends_with("872 parameters"));
    CHECK(lines[4] == "      (ln_1): LayerNorm(weight (C=8), bias (C=8))");
    CHECK(lines[5].starts_with("      (attn): MultiHeadAttention("));
    CHECK(lines[6] == "        (c_attn): Linear(weight (QKV=24, C=8), bias (QKV=24))");
    CHECK(lines[7] == "        (c_proj): Linear(weight (C=8, C=8), bias (C=8))");
    CHECK(lines[8] == "      )");
    CHECK(lines[10].starts_with("      (mlp): MLP("));
    CHECK(lines[11] == "        (c_fc): Linear(weight (FF=32, C=8), bias (FF=32))");
    CHECK(lines[13] == "      )");
    CHECK(lines[14] == "    )");
    CHECK(lines[15] == "  )");
    CHECK(lines[16] == "  (head): Linear(weight (V=5, C=8))");
    CHECK(lines[17] == ")");
    CHECK(lines[18] == "1,800 parameters, 7,200 bytes");
    static_assert(shaped::nn::parameter_count<TinyModel> == 1800);
}

TEST_CASE("a whole module saves and loads by its names, and a file that does not fit changes nothing", "[module][io]") {
    file_support::scratch_dir dir;
    shaped::Generator gen(7);
    const TinyModel saved(gen);
    shaped::io::save_parameters(dir / "tiny.safetensors", saved);
    TinyModel loaded;
    shaped::io::load_parameters(loaded, dir / "tiny.safetensors");
    CHECK(values_of(loaded) == values_of(saved));

    // A file of another model whose names match but whose last tensor's shape does not.
    struct Wider {
        BOOST_HANA_DEFINE_STRUCT(Wider,
            (shaped::nn::LayerNorm<C>, ln),
            (shaped::nn::Stack<Block, 2>, h),
            (shaped::nn::Linear<C, shaped::dim<"V", 6>, false>, head));
    };
    shaped::io::save_parameters(dir / "wider.safetensors", Wider{});
    const auto before = values_of(loaded);
    CHECK_THROWS_AS(shaped::io::load_parameters(loaded, dir / "wider.safetensors"), shaped::shape_error);
    CHECK(values_of(loaded) == before);
}

TEST_CASE("a stack runs its modules in order, forward and decoding alike", "[module][decode]") {
    shaped::Generator gen(3);
    const shaped::nn::Stack<Block, 3> stack(gen);
    const std::size_t total = 5;
    auto x = shaped::randn<float, B, Td, C>(gen, Td{total});

    // Forward: the same as calling each block on the last one's output.
    const auto full = stack(x);
    shaped::Tensor<float, B, Td, C> by_hand = stack[0](x);
    by_hand = stack[1](by_hand);
    by_hand = stack[2](by_hand);
    CHECK(ref::values(full) == ref::values(by_hand));

    // Decoding a token at a time through every block's cache meets the full forward.
    shaped::nn::Stack<Block, 3>::cache_type<B, S> caches;
    for (std::size_t pos = 0; pos < total; ++pos) {
        const auto y = stack(shaped::slice<Td>(x, pos, pos + 1), caches);
        ref::require_rows_match(y, full, pos);
    }
    for (const auto& cache : caches) CHECK(cache.length() == total);
}

TEST_CASE("a stack refuses a step one cache cannot take before any cache changes", "[module][decode]") {
    shaped::Generator gen(4);
    const shaped::nn::Stack<Block, 2> stack(gen);
    shaped::nn::Stack<Block, 2>::cache_type<B, S> caches;
    // Block 1's cache fuller than block 0's: a step that fits block 0 but not block 1.
    auto x = shaped::randn<float, B, Td, C>(gen, Td{2});
    (void)stack[0](x, caches[0]);
    (void)stack[1](shaped::randn<float, B, Td, C>(gen, Td{5}), caches[1]);
    REQUIRE(caches[0].length() == 2);
    REQUIRE(caches[1].length() == 5);
    CHECK(file_support::error_message<shaped::nn::cache_overflow>([&] { (void)stack(x, caches); }) ==
          "shaped::nn::KVCache::append: 2 new positions after the 5 held in batch row 0 would exceed the capacity S(6)");
    CHECK(caches[0].length() == 2);
    CHECK(caches[1].length() == 5);
}
