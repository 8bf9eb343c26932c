#pragma once
// causal_attention(q, k, v, scale): softmax(q @ k^T * scale, causal) @ v as one operation, the
// same numbers as the chapter's
//     matmul(softmax<-1>(masked_fill(matmul(q, k.mT()) * scale, tril(ones) == 0, -inf)), v)
// which the kernels layer also recognises and lowers to the same fused kernel.
//
// q is (..., Tq, D), k is (..., Tk, D), v is (..., Tk, Dv); the result is (..., Tq, Dv). The
// queries are the last Tq of the Tk positions, so a query sees the keys at its own position and
// before: with Tq == Tk that is the chapter's tril mask, and with one query against a cache's
// filled prefix it is every key (a decoding step).
//
// causal_attention(q, k, v, scale, window<W>{}) is the same with a sliding window of W
// positions: a query sees its own position and the W - 1 before it, and no earlier ones.
//
// causal_attention(q, k, v, scale, attention_modifiers{score, keeps}) modifies each score and
// masks keys further (expr/attention_modifiers.hpp), in the same fused kernel; a window is one
// such mask, alone or with others: attention_modifiers{score, and_masks(window<W>{}, keeps)}.

#include <shaped/expr/attention_modifiers.hpp>
#include <shaped/expr/matmul.hpp>
#include <shaped/expr/window.hpp>

#include <cstddef>
#include <optional>
#include <string_view>
#include <utility>

namespace shaped {

namespace op {
struct causal_attention {};
}  // namespace op

template <class Q, class K, class V>
struct attention_dims {
    static constexpr std::size_t qr = dims_of<Q>::rank, kr = dims_of<K>::rank, vr = dims_of<V>::rank;
    using query_pos = dim_at<qr - 2, dims_of<Q>>;
    using query_width = dim_at<qr - 1, dims_of<Q>>;
    using key_pos = dim_at<kr - 2, dims_of<K>>;
    using key_width = dim_at<kr - 1, dims_of<K>>;
    using value_pos = dim_at<vr - 2, dims_of<V>>;
    using value_width = dim_at<vr - 1, dims_of<V>>;
    using qk_batch = broadcast_dims<slice_dims<0, qr - 2, dims_of<Q>>, slice_dims<0, kr - 2, dims_of<K>>>;
    using batch = broadcast_dims<qk_batch, slice_dims<0, vr - 2, dims_of<V>>>;
    using type = concat_dims<batch, dims<query_pos, value_width>>;

    static constexpr bool valid() {
        if constexpr (!can_meet<query_width, key_width> || !can_meet<key_pos, value_pos>) return false;
        else if constexpr (!broadcastable<slice_dims<0, qr - 2, dims_of<Q>>, slice_dims<0, kr - 2, dims_of<K>>>)
            return false;
        else return broadcastable<qk_batch, slice_dims<0, vr - 2, dims_of<V>>>;
    }
};

// Mods: no_modifiers, or the attention_modifiers its scores are modified and masked by.
template <class Q, class K, class V, class Mods = no_modifiers>
class attention_node : public expression_base {
public:
    using value_type = std::common_type_t<value_type_of<Q>, value_type_of<K>, value_type_of<V>>;
    using dims_type = typename attention_dims<Q, K, V>::type;
    using op_type = op::causal_attention;
    static constexpr bool owns_storage = false;
    static constexpr std::size_t rank = dims_type::rank;

    // window: the sliding window's size, none for every earlier position.
    template <operand_for<Q> A, operand_for<K> B, operand_for<V> C>
    attention_node(A&& q, B&& k, C&& v, value_type scale, std::optional<std::size_t> window = std::nullopt,
                   Mods modifiers = {})
        : q_(std::forward<A>(q)),
          k_(std::forward<B>(k)),
          v_(std::forward<C>(v)),
          scale_(scale),
          window_(window),
          modifiers_(std::move(modifiers)) {
        using shape = attention_dims<Q, K, V>;
        const auto qe = q_.extents();
        const auto ke = k_.extents();
        const auto ve = v_.extents();
        constexpr std::size_t qr = shape::qr, kr = shape::kr, vr = shape::vr;
        if (qe[qr - 1] != ke[kr - 1])
            detail::throw_dims_do_not_meet("causal_attention", SHAPED_RULE_ATTENTION_DIMS, "q",
                                           shape::query_width::name.view(), qe[qr - 1], "k",
                                           shape::key_width::name.view(), ke[kr - 1]);
        if (ke[kr - 2] != ve[vr - 2])
            detail::throw_dims_do_not_meet("causal_attention", SHAPED_RULE_ATTENTION_DIMS, "k",
                                           shape::key_pos::name.view(), ke[kr - 2], "v",
                                           shape::value_pos::name.view(), ve[vr - 2]);
        if (qe[qr - 2] > ke[kr - 2])
            throw shape_error(detail::message({"shaped::causal_attention: ",
                                               detail::message_part::dim_extent{shape::query_pos::name.view(), qe[qr - 2]},
                                               " queries are more than the ",
                                               detail::message_part::dim_extent{shape::key_pos::name.view(), ke[kr - 2]},
                                               " keys they follow"}));
        constexpr std::size_t batch = rank - 2;
        extents_.fill(1);
        // Batch dims align from the right, as matmul's; a mismatch names both operands' dims.
        std::array<std::string_view, batch> names{}, roles{};
        const auto spread = [&](const auto& e, const auto& own_names, std::size_t own, std::string_view role) {
            for (std::size_t i = 0; i < own; ++i) {
                const std::size_t at = batch - own + i;
                if (e[i] == 1 && !names[at].empty()) continue;  // spreads
                if (extents_[at] != 1 && e[i] != extents_[at])
                    detail::throw_dims_do_not_meet("causal_attention", SHAPED_RULE_ATTENTION_DIMS, roles[at],
                                                   names[at], extents_[at], role, own_names[i], e[i]);
                if (e[i] != 1) extents_[at] = e[i];
                names[at] = own_names[i];
                roles[at] = role;
            }
        };
        spread(qe, detail::names_of<Q>(), qr - 2, "q's");
        spread(ke, detail::names_of<K>(), kr - 2, "k's");
        spread(ve, detail::names_of<V>(), vr - 2, "v's");
        extents_[rank - 2] = qe[qr - 2];
        extents_[rank - 1] = ve[vr - 1];
    }

    const std::array<std::size_t, rank>& extents() const { return extents_; }
    const Q& query() const { return q_; }
    const K& key() const { return k_; }
    const V& value() const { return v_; }
    value_type scale() const { return scale_; }
    const std::optional<std::size_t>& window() const { return window_; }
    const Mods& modifiers() const { return modifiers_; }

private:
    Q q_;
    K k_;
    V v_;
    value_type scale_;
    std::optional<std::size_t> window_;
    Mods modifiers_;
    std::array<std::size_t, rank> extents_;
};

namespace detail {
template <class Q, class K, class V>
consteval auto causal_attention_misfit() {
    // An operand that is no expression (a failed one) picks no overload of these: nothing to show.
    if constexpr (!Expression<Q> || !Expression<K> || !Expression<V>)
        return std::type_identity<failed>{};
    else if constexpr (rank_of<Q> < 2 || rank_of<K> < 2 || rank_of<V> < 2)
        return std::type_identity<diag::attention_rank<dims_of<Q>, dims_of<K>, dims_of<V>>>{};
    else if constexpr (!attention_dims<Q, K, V>::valid())
        return std::type_identity<diag::attention_dims<dims_of<Q>, dims_of<K>, dims_of<V>>>{};
    else
        return std::type_identity<void>{};
}
template <class Q, class K, class V>
using causal_attention_misfit_t = typename decltype(causal_attention_misfit<Q, K, V>())::type;

// The node of attention under modifiers: a window in the mask is attended as the band it is
// (the node's window), and what is left of the mask and the score modifier (nothing, for a
// window alone: the plain node) through the kernel's modifier calls.
template <class Q, class K, class V, class S, class Score, class Mask>
auto modified_attention(Q&& q, K&& k, V&& v, S scale, attention_modifiers<Score, Mask> modifiers) {
    using T = value_type_of<Q>;
    static_assert(std::is_same_v<T, value_type_of<K>> && std::is_same_v<value_type_of<K>, value_type_of<V>>,
                  "shaped::causal_attention: q, k and v must have one element type");
    static_assert(score_modifier_for<Score, T>,
                  "shaped::causal_attention: a score modifier is called as score(T s, batch_index, head_index, "
                  "query_position, key_position) and returns the modified score, a T");
    static_assert(key_mask<Mask>,
                  "shaped::causal_attention: a mask is called as keeps(batch_index, head_index, query_position, "
                  "key_position) and returns whether the query sees the key, a bool");
    constexpr std::size_t W = window_in<Mask>;  // masks_and holds no window under a non-causal mask
    const std::optional<std::size_t> window = W == 0 ? std::nullopt : std::optional<std::size_t>(W);
    auto rest = beyond_band(modifiers.keeps);
    using Rest = decltype(rest);
    if constexpr (std::is_same_v<Score, unmodified_scores> && std::is_same_v<Rest, keep_every_key>) {
        using node = attention_node<operand_t<Q&&>, operand_t<K&&>, operand_t<V&&>>;
        return node(std::forward<Q>(q), std::forward<K>(k), std::forward<V>(v), static_cast<T>(scale), window);
    } else {
        using Mods = attention_modifiers<Score, Rest>;
        using node = attention_node<operand_t<Q&&>, operand_t<K&&>, operand_t<V&&>, Mods>;
        return node(std::forward<Q>(q), std::forward<K>(k), std::forward<V>(v), static_cast<T>(scale), window,
                    Mods{std::move(modifiers.score), std::move(rest), modifiers.heads, modifiers.batch_origin,
                         modifiers.key_origin});
    }
}
}  // namespace detail

// A misfit picks the overload only declared, whose return type is the failed check (instantiated
// at the caller's line).
template <Expression Q, Expression K, Expression V, Scalar S>
    requires std::is_void_v<detail::causal_attention_misfit_t<Q, K, V>>
auto causal_attention(Q&& q, K&& k, V&& v, S scale) {
    static_assert(std::is_same_v<value_type_of<Q>, value_type_of<K>> && std::is_same_v<value_type_of<K>, value_type_of<V>>,
                  "shaped::causal_attention: q, k and v must have one element type");
    using node = attention_node<operand_t<Q&&>, operand_t<K&&>, operand_t<V&&>>;
    return node(std::forward<Q>(q), std::forward<K>(k), std::forward<V>(v), static_cast<typename node::value_type>(scale));
}
template <Expression Q, Expression K, Expression V, Scalar S>
    requires(!std::is_void_v<detail::causal_attention_misfit_t<Q, K, V>>)
detail::causal_attention_misfit_t<Q, K, V> causal_attention(Q&&, K&&, V&&, S);
template <class Q, class K, class V, Scalar S>
    requires any_failed<Q, K, V>
failed causal_attention(Q&&, K&&, V&&, S);

// With a sliding window of W positions: the window as the mask, no score modifier.
template <Expression Q, Expression K, Expression V, Scalar S, std::size_t W>
    requires std::is_void_v<detail::causal_attention_misfit_t<Q, K, V>>
auto causal_attention(Q&& q, K&& k, V&& v, S scale, window<W> mask) {
    return detail::modified_attention(std::forward<Q>(q), std::forward<K>(k), std::forward<V>(v), scale,
                                      attention_modifiers<unmodified_scores, window<W>>{{}, mask});
}
template <Expression Q, Expression K, Expression V, Scalar S, std::size_t W>
    requires(!std::is_void_v<detail::causal_attention_misfit_t<Q, K, V>>)
detail::causal_attention_misfit_t<Q, K, V> causal_attention(Q&&, K&&, V&&, S, window<W>);
template <class Q, class K, class V, Scalar S, std::size_t W>
    requires any_failed<Q, K, V>
failed causal_attention(Q&&, K&&, V&&, S, window<W>);

// With score and mask modifiers (a window among them: and_masks(window<W>{}, keeps)). Modifiers of
// the wrong signature are one error naming what the kernel calls them with.
template <Expression Q, Expression K, Expression V, Scalar S, class Score, class Mask>
    requires std::is_void_v<detail::causal_attention_misfit_t<Q, K, V>>
auto causal_attention(Q&& q, K&& k, V&& v, S scale, attention_modifiers<Score, Mask> modifiers) {
    return detail::modified_attention(std::forward<Q>(q), std::forward<K>(k), std::forward<V>(v), scale,
                                      std::move(modifiers));
}
template <Expression Q, Expression K, Expression V, Scalar S, class Score, class Mask>
    requires(!std::is_void_v<detail::causal_attention_misfit_t<Q, K, V>>)
detail::causal_attention_misfit_t<Q, K, V> causal_attention(Q&&, K&&, V&&, S, attention_modifiers<Score, Mask>);
template <class Q, class K, class V, Scalar S, class Score, class Mask>
    requires any_failed<Q, K, V>
failed causal_attention(Q&&, K&&, V&&, S, attention_modifiers<Score, Mask>);

}  // namespace shaped
