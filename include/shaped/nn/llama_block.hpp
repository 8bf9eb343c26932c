#pragma once
// nn::LlamaBlock<C, NH, NKV, HS, Hidden, Position, T, Window>: one decoder layer of the Llama
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
          class Position = no_position_encoding, class T = float, class Window = no_window>
class LlamaBlock;

namespace detail {
template <StaticDim C, StaticDim NH, StaticDim NKV, StaticDim HS, StaticDim Hidden, class Position, class T, class Window>
inline constexpr bool layer_keeps_rules<LlamaBlock<C, NH, NKV, HS, Hidden, Position, T, Window>> =
    query_heads_group<NH, NKV> && window_or_none<Window>;
}  // namespace detail

template <StaticDim C, StaticDim NH, StaticDim NKV, StaticDim HS, StaticDim Hidden, class Position, class T, class Window>
class LlamaBlock {
public:
    using value_type = T;
    using channel_dim = C;
    using heads_dim = NH;
    using kv_heads_dim = NKV;
    using head_size_dim = HS;
    using window_type = Window;
    using attention_type = GroupedQueryAttention<C, NH, NKV, HS, Position, T, Window>;
    using feed_forward_type = SwiGLU<C, Hidden, T>;
    // The cache this block decodes with, its attention's: keys and values (B, NKV, S, HS), or
    // with a window a RingKVCache.
    template <StaticDim B, StaticDim S>
    using cache_type = typename attention_type::template cache_type<B, S>;

    // Parameters zero-filled, to be loaded.
    LlamaBlock() = default;
    // PyTorch's initialisation, for attention, feed_forward and the norms in that order.
    explicit LlamaBlock(Generator& gen) : attention(gen), feed_forward(gen), attention_norm(gen), ffn_norm(gen) {}

    // The full causal forward: x (B, T, C) -> (B, T, C).
    // A misfit picks the overload only declared, whose return type is the failed check: the compiler
    // instantiates it at the caller's line, with no frame of ours around it.
    template <Expression X>
        requires std::is_void_v<detail::attention_misfit_t<LlamaBlock, C, X, void, HS, NKV>>
    auto operator()(const X& x) const {
        auto out = attention(attention_norm(x));
        residual(out, x);
        return out;
    }
    template <Expression X>
        requires(!std::is_void_v<detail::attention_misfit_t<LlamaBlock, C, X, void, HS, NKV>>)
    detail::attention_misfit_t<LlamaBlock, C, X, void, HS, NKV> operator()(const X&) const;

    // Decoding: x (B, n, C) holds the next n positions of every batch row -> (B, n, C). With
    // counts (a ragged batch), batch row b takes only the first counts[b] positions of x; the
    // output at its padding positions is 0.
    template <Expression X, KeyValueCache Cache>
        requires std::is_void_v<detail::attention_misfit_t<LlamaBlock, C, X, Cache, HS, NKV>>
    auto operator()(const X& x, Cache& cache, std::optional<typename Cache::lengths_type> counts = std::nullopt) const {
        auto out = attention(attention_norm(x), cache, counts);
        residual(out, x);
        if (counts) detail::zero_padding(out, *counts);
        return out;
    }
    template <Expression X, KeyValueCache Cache>
        requires(!std::is_void_v<detail::attention_misfit_t<LlamaBlock, C, X, Cache, HS, NKV>>)
    detail::attention_misfit_t<LlamaBlock, C, X, Cache, HS, NKV> operator()(
        const X&, Cache&, std::optional<typename Cache::lengths_type> = std::nullopt) const;

    // After a failed check (in the input's expression, or a rejected cache type): failed, with no
    // second error.
    template <class... Args>
        requires any_failed<Args...>
    failed operator()(Args&&...) const;

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
