#pragma once
// nn::LlamaBlock<C, NH, NKV, HS, Hidden, Position, T, Window, Weights>: one decoder layer of the Llama
// family (Meta's TransformerBlock), pre-norm with RMSNorm:
//
//   x = x + attention(attention_norm(x))     grouped-query attention, positions encoded in it
//   x = x + feed_forward(ffn_norm(x))        SwiGLU, each position on its own
//
// Like nn::Block it runs two ways, block(x) the full causal forward and block(x, cache, counts)
// decoding with its attention's KV cache (cache_type, NKV heads); both give the same numbers for
// the same positions. With Window a shaped::window<W>, its attention has that sliding window
// (Mistral's layer), and its cache is a RingKVCache. The output is one buffer: attention's result becomes it, x is added in
// place, and the feed-forward's last GEMM accumulates onto it.

#include <shaped/nn/grouped_query_attention.hpp>
#include <shaped/nn/rms_norm.hpp>
#include <shaped/nn/swiglu.hpp>

#include <optional>
#include <type_traits>

namespace shaped::nn {

template <StaticDim C, StaticDim NH, StaticDim NKV, StaticDim HS, StaticDim Hidden,
          class Position = no_position_encoding, class T = float, class Window = no_window, class Weights = dense_weights>
class LlamaBlock;

namespace detail {
template <StaticDim C, StaticDim NH, StaticDim NKV, StaticDim HS, StaticDim Hidden, class Position, class T, class Window,
          class Weights>
inline constexpr bool layer_keeps_rules<LlamaBlock<C, NH, NKV, HS, Hidden, Position, T, Window, Weights>> =
    query_heads_group<NH, NKV> && window_or_none<Window>;
}  // namespace detail

template <StaticDim C, StaticDim NH, StaticDim NKV, StaticDim HS, StaticDim Hidden, class Position, class T, class Window,
          class Weights>
class LlamaBlock : public causal_layer<LlamaBlock<C, NH, NKV, HS, Hidden, Position, T, Window, Weights>> {
public:
    using value_type = T;
    using channel_dim = C;
    using heads_dim = NH;
    using kv_heads_dim = NKV;
    using head_size_dim = HS;
    using window_type = Window;
    using attention_type = GroupedQueryAttention<C, NH, NKV, HS, Position, T, Window, Weights>;
    using feed_forward_type = SwiGLU<C, Hidden, T, Weights>;
    // The cache this block decodes with, its attention's: keys and values (B, NKV, S, HS), or
    // with a window a RingKVCache.
    template <StaticDim B, StaticDim S>
    using cache_type = typename attention_type::template cache_type<B, S>;

    // Parameters zero-filled, to be loaded.
    LlamaBlock() = default;
    // PyTorch's initialisation, for attention, feed_forward and the norms in that order.
    explicit LlamaBlock(Generator& gen) : attention(gen), feed_forward(gen), attention_norm(gen), ffn_norm(gen) {}

    // What the block's calls (nn::causal_layer's, checked first) run. The full causal forward:
    // x (B, T, C) -> (B, T, C).
    template <class X>
    auto forward(const X& x) const {
        auto out = attention(attention_norm(x));
        residual(out, x);
        return out;
    }
    // Decoding: x (B, n, C) holds the next n positions of every batch row -> (B, n, C); a ragged
    // batch's padding positions are 0.
    template <class X, class Cache>
    auto forward(const X& x, Cache& cache, std::optional<typename Cache::lengths_type> counts) const {
        auto out = attention(attention_norm(x), cache, counts);
        residual(out, x);
        if (counts) detail::zero_padding(out, *counts);
        return out;
    }

    // The sub-layers, named as Meta's TransformerBlock names them: "attention.wq.weight", ...,
    // "feed_forward.w1.weight", ..., "attention_norm.weight", "ffn_norm.weight".
    BOOST_HANA_DEFINE_STRUCT(LlamaBlock,
        (attention_type, attention),
        (feed_forward_type, feed_forward),
        (RMSNorm<C, T>, attention_norm),
        (RMSNorm<C, T>, ffn_norm));

private:
    // out holds attention(attention_norm(x)): x + out, then the feed-forward's half, both in place.
    template <class Out, class X>
    void residual(Out& out, const X& x) const {
        out = out + x;
        feed_forward.add_to(out, ffn_norm(out));
    }
};

}  // namespace shaped::nn
