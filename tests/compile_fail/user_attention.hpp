// nanoGPT's attention as a user writes it from the guide, its channels (B, T, C) viewed as heads
// by Heads::of: the compile-fail cases of the heads check each give it a wrong view.
#pragma once

#include <shaped/shaped.hpp>

#include <cstddef>
#include <tuple>

using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 8>;
using C = shaped::dim<"C", 32>;
using NH = shaped::dim<"NH", 4>;
using HS = shaped::dim<"HS", 8>;

// The view the routine expects, (B, NH, T, HS).
struct split_heads {
    template <class X>
    static auto of(X&& x) { return shaped::view_of(shaped::transpose<1, 2>(shaped::split<C, NH, HS>(std::forward<X>(x)))); }
};

template <class Heads>
struct UserAttention : shaped::nn::causal_layer<UserAttention<Heads>> {
    using value_type = float;
    using channel_dim = C;
    using heads_dim = NH;
    using head_size_dim = HS;
    using merged_dim = C;
    using fused_dim = shaped::dim<"QKV", 96>;
    using part_dim = shaped::dim<"QKV", 3>;
    explicit UserAttention(shaped::Generator& gen) : c_attn(gen), c_proj(gen) {}
    BOOST_HANA_DEFINE_STRUCT(UserAttention,
        (shaped::nn::Linear<C, fused_dim>, c_attn),
        (shaped::nn::Linear<C, C>, c_proj));

    template <class X>
    auto project(const X& x) const { return eval(c_attn(x)); }
    template <class QKV>
    static auto heads(QKV& qkv) {
        auto parts = shaped::split<fused_dim, part_dim, C>(qkv);
        auto part = [&](std::size_t which) { return Heads::of(shaped::select<part_dim>(parts, which)); };
        return std::tuple{part(0), part(1), part(2)};
    }
    shaped::nn::no_position_encoding encode_positions;
    template <class M>
    static auto heads_of(M& merged) { return Heads::of(merged); }
    template <class M>
    auto project_out(const M& merged) const { return eval(c_proj(merged)); }
};
