#pragma once
// nn::GroupedQueryAttention<C, NH, NKV, HS, Position, T, Window, Weights>: Llama's attention, and with a
// sliding window Mistral's. NH query heads of
// size HS share NKV key/value heads, NH / NKV query heads to a group (Ainslie et al.); NKV = NH
// is multi-head attention, NKV = 1 multi-query attention. NH must be a multiple of NKV, checked
// by the compiler with both dims in the diagnostic.
//
//   wq (NH x HS, C), wk and wv (NKV x HS, C), wo (C, NH x HS), no biases: Meta's names and
//   layouts (Hugging Face's q_proj, k_proj, v_proj, o_proj).
//
// Position is the encoding applied to q and k (rotary_encoding, or no_position_encoding). Like
// the other attention layers it runs two ways, layer(x) and layer(x, cache, counts), through the
// one routine of nn/causal_self_attention.hpp. Its cache holds the NKV key/value heads,
// (B, NKV, S, HS): NH / NKV times smaller than a cache of every query head's, and attention reads
// each group's keys and values there, in place, never repeated in memory.
//
// Window is nn::no_window, or shaped::window<W> for a sliding window of W positions (Mistral's):
// each query sees its own position and the W - 1 before it, in the full forward as in decoding.
// Such a layer decodes with a ring of W positions, RingKVCache (B, NKV, W, HS), which goes on
// past W positions; its cache_type<B, S> is that ring, whatever S's extent (only its name stays).
//
// Weights says each projection's storage format (nn::dense_weights, nn/linear.hpp).

#include <shaped/nn/attention.hpp>
#include <shaped/nn/ring_kv_cache.hpp>
#include <shaped/nn/rotary.hpp>

#include <optional>
#include <tuple>
#include <type_traits>

namespace shaped::nn {

template <StaticDim C, StaticDim NH, StaticDim NKV, StaticDim HS, class Position = no_position_encoding, class T = float,
          class Window = no_window, class Weights = dense_weights>
class GroupedQueryAttention;

namespace detail {
// The query heads fall into groups of equal size, one per key/value head.
template <Dim NH, Dim NKV>
inline constexpr bool query_heads_group = NKV::extent > 0 && NH::extent % NKV::extent == 0;

template <class Window>
inline constexpr bool window_or_none = is_window<Window> || std::is_same_v<Window, no_window>;

template <StaticDim C, StaticDim NH, StaticDim NKV, StaticDim HS, class Position, class T, class Window, class Weights>
inline constexpr bool layer_keeps_rules<GroupedQueryAttention<C, NH, NKV, HS, Position, T, Window, Weights>> =
    query_heads_group<NH, NKV> && window_or_none<Window>;

// The cache a grouped-query layer decodes with: (B, NKV, S, HS), or with a window of W a ring of
// W positions named as S.
template <class Window, class T, StaticDim B, StaticDim NKV, StaticDim S, StaticDim HS>
struct grouped_query_cache {
    using type = KVCache<T, B, NKV, S, HS>;
};
template <std::size_t W, class T, StaticDim B, StaticDim NKV, StaticDim S, StaticDim HS>
struct grouped_query_cache<window<W>, T, B, NKV, S, HS> {
    using type = RingKVCache<T, B, NKV, dim<S::name, W>, HS>;
};
}  // namespace detail

template <StaticDim C, StaticDim NH, StaticDim NKV, StaticDim HS, class Position, class T, class Window, class Weights>
class GroupedQueryAttention : public causal_layer<GroupedQueryAttention<C, NH, NKV, HS, Position, T, Window, Weights>> {
    static_assert(detail::query_heads_group<NH, NKV>, "shaped::nn::GroupedQueryAttention: " SHAPED_RULE_QUERY_GROUPS);
    static_assert(detail::window_or_none<Window>, "shaped::nn::GroupedQueryAttention: " SHAPED_RULE_LAYER_WINDOW);

public:
    using value_type = T;
    using channel_dim = C;
    using heads_dim = NH;
    using kv_heads_dim = NKV;
    using head_size_dim = HS;
    using position_type = Position;
    using window_type = Window;
    // The query heads a key/value head serves.
    using group_dim = dim<"G", NH::extent / (NKV::extent ? NKV::extent : 1)>;
    // The queries of all heads side by side, and the keys' or the values'.
    using queries_dim = dim<"Q", NH::extent * HS::extent>;
    using kv_dim = dim<"KV", NKV::extent * HS::extent>;
    // The cache this layer decodes with: keys and values (B, NKV, S, HS), or with a window of W
    // a RingKVCache (B, NKV, W, HS), its time dim named as S.
    template <StaticDim B, StaticDim S>
    using cache_type = typename detail::grouped_query_cache<Window, T, B, NKV, S, HS>::type;

    // Parameters zero-filled, to be loaded.
    GroupedQueryAttention() = default;
    explicit GroupedQueryAttention(Position position) : position_(position) {}
    // PyTorch's initialisation, drawn for wq, wk, wv, wo in that order.
    explicit GroupedQueryAttention(Generator& gen, Position position = {})
        : wq(gen), wk(gen), wv(gen), wo(gen), position_(position) {}

    // The encoding of positions, and its settings (a rotary's theta).
    const Position& position() const { return position_; }
    Position& position() { return position_; }

    // The projections, named as Meta's Attention names them: "wq.weight", ..., "wo.weight".
    BOOST_HANA_DEFINE_STRUCT(GroupedQueryAttention,
        (Linear<C, queries_dim, false, T, typename Weights::wq>, wq),
        (Linear<C, kv_dim, false, T, typename Weights::wk>, wk),
        (Linear<C, kv_dim, false, T, typename Weights::wv>, wv),
        (Linear<queries_dim, C, false, T, typename Weights::wo>, wo));

    // The parts causal_self_attention runs: three projections of their own, whose channels split
    // into heads, viewed (B, heads, T, HS) in place; the heads' outputs side by side in
    // (B, T, NH x HS), which wo reads as it lies.
    using merged_dim = queries_dim;
    template <class X>
    auto project(const X& x) const { return std::tuple{eval(wq(x)), eval(wk(x)), eval(wv(x))}; }
    template <class P>
    static auto heads(P& p) {
        auto& [queries, keys, values] = p;
        return std::tuple{heads_of(queries), view_of(transpose<1, 2>(split<kv_dim, NKV, HS>(keys))),
                          view_of(transpose<1, 2>(split<kv_dim, NKV, HS>(values)))};
    }
    template <class Q, class K>
    void encode_positions(const Q& q, const K& k, std::span<const std::size_t> starts) const {
        position_(q, k, starts);
    }
    template <class M>
    static auto heads_of(M& merged) { return view_of(transpose<1, 2>(split<queries_dim, NH, HS>(merged))); }
    template <class M>
    auto project_out(const M& merged) const {
        return eval(wo(merged));
    }

private:
    Position position_{};
};

}  // namespace shaped::nn
