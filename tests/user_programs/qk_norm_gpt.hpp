// A user's attention variant and the GPT around it, exactly as docs/guide.md's "Training your
// own variant" writes them: QK-norm attention (each head's queries and keys RMS-normalised over
// the head size, with a learned weight each, before their scores; its encode_positions returns
// them) in nanoGPT's GPT (biases, exact GELU, lm_head tied to wte). Nothing here is written for
// training: train::trainer derives the gradients from these forwards. Shared by the user program
// qk_norm_attention.cpp, the training tests (unit and parity) and bench/train_bench.cpp.
#pragma once

#include <shaped/shaped.hpp>

#include <cstddef>
#include <span>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

// nanoGPT's CausalSelfAttention, with q_norm and k_norm.
template <shaped::StaticDim C, shaped::StaticDim NH, shaped::StaticDim HS, class T = float>
struct QKNormAttention : shaped::nn::causal_layer<QKNormAttention<C, NH, HS, T>> {
    using value_type = T;
    using channel_dim = C;
    using heads_dim = NH;
    using head_size_dim = HS;
    using merged_dim = C;
    using fused_dim = shaped::dim<"QKV", 3 * C::extent>;
    using part_dim = shaped::dim<"QKV", 3>;

    QKNormAttention() = default;
    explicit QKNormAttention(shaped::Generator& gen) : c_attn(gen), c_proj(gen), q_norm(gen), k_norm(gen) {}

    BOOST_HANA_DEFINE_STRUCT(QKNormAttention,
        (shaped::nn::Linear<C, fused_dim, true, T>, c_attn),
        (shaped::nn::Linear<C, C, true, T>, c_proj),
        (shaped::nn::RMSNorm<HS, T>, q_norm),
        (shaped::nn::RMSNorm<HS, T>, k_norm));

    template <class X>
    auto project(const X& x) const { return eval(c_attn(x)); }
    template <class QKV>
    static auto heads(QKV& qkv) {
        auto heads = shaped::split<C, NH, HS>(shaped::split<fused_dim, part_dim, C>(qkv));
        auto part = [&](std::size_t which) {
            return shaped::view_of(shaped::transpose<1, 2>(shaped::select<part_dim>(heads, which)));
        };
        return std::tuple{part(0), part(1), part(2)};
    }
    // The variant: q and k normalised, returned.
    template <class Q, class K>
    auto encode_positions(const Q& q, const K& k, std::span<const std::size_t>) const {
        return std::pair{eval(q_norm(q)), eval(k_norm(k))};
    }
    template <class M>
    static auto heads_of(M& merged) { return shaped::view_of(shaped::transpose<1, 2>(shaped::split<C, NH, HS>(merged))); }
    template <class M>
    auto project_out(const M& merged) const { return eval(c_proj(merged)); }
};

// nanoGPT's GPT (biases, exact GELU, lm_head tied to wte) with QKNormAttention.
template <class Config, class T = float>
struct QKNormGPT {
    using vocab_dim = shaped::dim<"V", Config::vocab_size>;
    using context_dim = shaped::dim<"P", Config::block_size>;   // the trainer checks T against it
    using C = shaped::dim<"C", Config::n_embd>;
    using NH = shaped::dim<"NH", Config::n_head>;
    using HS = shaped::dim<"HS", Config::n_embd / Config::n_head>;

    struct Block {
        Block() = default;
        explicit Block(shaped::Generator& gen) : ln_1(gen), attn(gen), ln_2(gen), mlp(gen) {}
        template <class X>
        auto operator()(const X& x) const {
            auto h = eval(x + attn(ln_1(x)));
            return eval(h + mlp(ln_2(h)));
        }
        BOOST_HANA_DEFINE_STRUCT(Block,
            (shaped::nn::LayerNorm<C, true, T>, ln_1),
            (QKNormAttention<C, NH, HS, T>, attn),
            (shaped::nn::LayerNorm<C, true, T>, ln_2),
            (shaped::nn::MLP<C, shaped::nn::mlp_hidden<C>, true, T>, mlp));
    };
    struct Transformer {
        BOOST_HANA_DEFINE_STRUCT(Transformer,
            (shaped::nn::Embedding<vocab_dim, C, T>, wte),
            (shaped::nn::Embedding<context_dim, C, T>, wpe),
            (shaped::nn::Stack<Block, Config::n_layer>, h),
            (shaped::nn::LayerNorm<C, true, T>, ln_f));
    };

    QKNormGPT() = default;
    explicit QKNormGPT(shaped::Generator& gen) {   // matrices N(0, 0.02), norms 1, biases 0
        shaped::nn::for_each_parameter(*this, [&](std::string_view name, auto& p) {
            if constexpr (shaped::rank_of<std::remove_cvref_t<decltype(p)>> == 2) {
                gen.fill_normal(p.elements());
                for (T& v : p.elements()) v *= T(0.02);
            } else {
                for (T& v : p.elements()) v = name.ends_with(".weight") ? T(1) : T(0);
            }
        });
    }

    // ids (B, T) -> logits (B, T, V)
    template <class Ids>
    auto operator()(const Ids& idx) const {
        using Time = shaped::dim_at<1, shaped::dims_of<Ids>>;
        const auto positions =
            shaped::rename<context_dim, Time>(shaped::slice<context_dim>(transformer.wpe.weight, 0, idx.extents()[1]));
        const auto x = transformer.h(eval(transformer.wte(idx) + positions));
        return eval(matmul(transformer.ln_f(x), transformer.wte.weight.mT()));
    }

    BOOST_HANA_DEFINE_STRUCT(QKNormGPT,
        (Transformer, transformer));
};
