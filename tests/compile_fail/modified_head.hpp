// One head of the chapter's kind whose score modifier or mask is Variant's (its score_mod() or
// mask_mod(), inherited): the compile-fail cases of the modifiers' check each give it a wrong one.
#pragma once

#include <shaped/shaped.hpp>

#include <tuple>

using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 8>;
using C = shaped::dim<"C", 16>;

template <class Variant>
struct ModifiedHead : shaped::nn::causal_layer<ModifiedHead<Variant>>, Variant {
    using value_type = float;
    using channel_dim = C;
    using head_size_dim = C;
    using merged_dim = C;
    explicit ModifiedHead(shaped::Generator& gen) : query(gen), key(gen), value(gen) {}
    BOOST_HANA_DEFINE_STRUCT(ModifiedHead,
        (shaped::nn::Linear<C, C, false>, query),
        (shaped::nn::Linear<C, C, false>, key),
        (shaped::nn::Linear<C, C, false>, value));

    template <class X>
    auto project(const X& x) const { return std::tuple{eval(query(x)), eval(key(x)), eval(value(x))}; }
    template <class P>
    static auto heads(P& p) {
        auto& [q, k, v] = p;
        return std::tuple{shaped::view_of(q), shaped::view_of(k), shaped::view_of(v)};
    }
    shaped::nn::no_position_encoding encode_positions;
    template <class M>
    static auto heads_of(M& merged) { return shaped::view_of(merged); }
    template <class M>
    M project_out(M merged) const { return merged; }
};
