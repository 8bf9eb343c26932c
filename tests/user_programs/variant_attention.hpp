// A user's attention layer with score and mask modifiers, as written from the guide: nanoGPT's
// attention (heads borrowed from nn::MultiHeadAttention) with a learned relative bias (a table of
// 5 distance buckets per head, distances clamped), ALiBi and soft-capping, each switched on or off
// by a template argument, and its keys chosen causally, by documents of 3 positions, as a
// prefix-LM of 4, or by documents within a window of 2. tests/unit/attention_modifiers_test.cpp
// checks its gradients against central differences; tests/parity/attention_variants_parity_test.cpp
// against PyTorch's autograd (make_fixtures.py's variant_attention).
#pragma once

#include <shaped/shaped.hpp>

#include <algorithm>
#include <cstddef>

namespace variant {

using C8 = shaped::dim<"C", 8>;
using NH2 = shaped::dim<"NH", 2>;
using HS4 = shaped::dim<"HS", 4>;
using Buckets = shaped::dim<"K", 5>;
using B2 = shaped::dim<"B", 2>;
using T7 = shaped::dim<"T", 7>;
using Heads = shaped::nn::MultiHeadAttention<C8, NH2, HS4, true, double>;

// nanoGPT's attention with a learned relative bias (a table of 5 distance buckets per head, its
// distances clamped), ALiBi, soft-capping and a mask, as a user writes it: heads borrowed from
// nn::MultiHeadAttention, the modifiers from nn/attention_modifiers.hpp.
struct clamp_to_buckets {
    std::ptrdiff_t operator()(std::ptrdiff_t distance) const { return std::min<std::ptrdiff_t>(distance, 4); }
};
struct three_per_document {
    int operator()(std::size_t, std::size_t position) const { return static_cast<int>(position / 3); }
};
// Which keys a query sees: its past (causal), its past in its own document of 3 positions, the
// first 4 positions whole and its past after them (a prefix-LM, which replaces causality), or
// its own document's within a sliding window of 2 (the window one more mask).
enum class keys { causal, documents, prefix, windowed_documents };
template <bool Learned, bool Capped, keys Keys>
struct VariantAttention : shaped::nn::causal_layer<VariantAttention<Learned, Capped, Keys>> {
    using value_type = double;
    using channel_dim = C8;
    using heads_dim = NH2;
    using head_size_dim = HS4;
    using merged_dim = C8;
    BOOST_HANA_DEFINE_STRUCT(VariantAttention,
        (shaped::nn::Linear<C8, Heads::fused_dim, true, double>, c_attn),
        (shaped::nn::Linear<C8, C8, true, double>, c_proj),
        (shaped::Tensor<double, NH2, Buckets>, relative));

    // ALiBi, then the cap; the learned bias added to the score before both.
    auto score_mod() const {
        const auto after = [] {
            if constexpr (Capped) return shaped::nn::then_modify<shaped::nn::alibi<NH2>, shaped::nn::soft_cap>{{}, {1.5}};
            else return shaped::nn::alibi<NH2>{};
        }();
        if constexpr (Learned)
            return shaped::nn::learned_bias<shaped::Tensor<double, NH2, Buckets>, clamp_to_buckets, decltype(after)>{
                &relative, {}, after};
        else
            return after;
    }
    auto mask_mod() const {
        if constexpr (Keys == keys::documents) return shaped::nn::same_document<three_per_document>{&documents};
        else if constexpr (Keys == keys::prefix) return shaped::nn::prefix_lm{4};
        else if constexpr (Keys == keys::windowed_documents)
            return shaped::and_masks(shaped::window<2>{}, shaped::nn::same_document<three_per_document>{&documents});
        else return shaped::keep_every_key{};
    }
    template <class X>
    auto project(const X& x) const { return eval(c_attn(x)); }
    template <class QKV>
    static auto heads(QKV& qkv) { return Heads::heads(qkv); }
    shaped::nn::no_position_encoding encode_positions;
    template <class M>
    static auto heads_of(M& merged) { return Heads::heads_of(merged); }
    template <class M>
    auto project_out(const M& merged) const { return eval(c_proj(merged)); }
    three_per_document documents;
};

}  // namespace variant
