#pragma once
// An attention layer's heads, attended while a loss is differentiated: one recorded operation,
// whose forward is the one fused attention kernel (kernels/attention.hpp) keeping each query's
// log-sum-exp, and whose derivative is the flash-style backward that recomputes the scores tile
// by tile from it (kernels/attention_backward.hpp): no T x T matrix in either pass. nn's
// attention routine reaches it (nn/causal_self_attention.hpp) when its input is a traced value,
// by argument-dependent lookup:
//
//   attended_heads(layer, q, k, v, scale, x)    the merged heads (B, T, M), traced
//
// q, k and v are the layer's heads (B, [NH,] T, HS): views of its traced projections, or traced
// values of their own (q and k as a layer's encode_positions returns them, contiguous); the
// result is laid out as the layer merges its heads (Layer::heads_of), and the gradients of q, k
// and v add straight into the gradients of what they are or view. A layer's score and mask
// modifiers (nn/causal_self_attention.hpp) run in both passes, the score modifier's derivative
// taken over dual numbers or given by it; a learned one's table gets its gradient.

#include <shaped/kernels/attention_backward.hpp>
#include <shaped/nn/causal_self_attention.hpp>
#include <shaped/train/derivatives.hpp>

#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace shaped::train {

namespace detail {

// Where a (B, [NH,] T, HS) operand's heads lie; a single head's (B, T, HS) as one head of many.
template <class S>
kernels::heads_layout heads_layout_of(const S& s) {
    constexpr std::size_t r = rank_of<S>;
    static_assert(r == 3 || r == 4, "shaped::train: attention heads are (B, [NH,] T, HS)");
    const auto strides = s.strides();
    if (s.extents()[r - 1] > 1 && strides[r - 1] != 1)
        throw std::invalid_argument("shaped::train: attention reads each head's positions contiguously");
    if constexpr (r == 4) return {strides[0], strides[1], strides[2]};
    else return {strides[0], 0, strides[1]};
}

template <class S>
std::size_t heads_of_operand(const S& s) {
    if constexpr (rank_of<S> == 4) return s.extents()[1];
    else return 1;
}

// A (B, [NH,] T, HS) operand at data, laid out as layout, as the kernels' batch of matrices over
// (B, kv heads, group).
template <class S, class P>
kernels::batched_matrices<P> grouped_heads_of(const S& s, P* data, const kernels::heads_layout& layout,
                                              std::size_t group, bool shared_by_group) {
    const auto e = s.extents();
    return kernels::grouped_heads(data, layout, e[rank_of<S> - 2], e[rank_of<S> - 1], group, shared_by_group);
}

template <class Layer, class T>
std::optional<std::size_t> window_of() {
    if constexpr (nn::detail::windowed_layer<Layer>) return nn::detail::layer_window_t<Layer>::size;
    else return std::nullopt;
}

// A layer's modifiers as its attention runs them (none: no_modifiers), and what a learned score
// modifier's table is read as on the tape (none: nothing).
template <class Layer>
struct layer_modifiers {
    using type = no_modifiers;
};
template <nn::detail::modifying_layer Layer>
struct layer_modifiers<Layer> {
    using type = decltype(nn::detail::modifiers_of(std::declval<const Layer&>(), 0, 0));
};
template <class Mods>
struct learned_table {
    using read = std::nullptr_t;
    using gradient = std::nullptr_t;
    static read watch(const Mods&, tape*) { return nullptr; }
};
template <class Mods>
    requires learned_score_modifier<decltype(Mods::score)>
struct learned_table<Mods> {
    using table = std::remove_cvref_t<decltype(std::declval<const Mods&>().score.table())>;
    using read = decltype(saved(watched(std::declval<const table&>()), nullptr));
    using gradient = table;
    static read watch(const Mods& mods, tape* t) { return saved(watched(mods.score.table()), t); }
};

// The merged heads of a layer's attention, and what its backward reads: q, k and v (saved with
// their places on the tape), each query's log-sum-exp, and the layer's modifiers.
template <class Layer, class Q, class K, class V, class T, Dim B, Dim Time, Dim M>
class recorded_attention final : public recorded_value<T, B, Time, M> {
    using Mods = typename layer_modifiers<Layer>::type;
    using learned = learned_table<Mods>;

public:
    recorded_attention(Tensor<T, B, Time, M> merged, Q q, K k, V v, T scale, Mods modifiers, tape* t)
        : recorded_value<T, B, Time, M>(std::move(merged)),
          q_(std::move(q)),
          k_(std::move(k)),
          v_(std::move(v)),
          modifiers_(std::move(modifiers)),
          table_(learned::watch(modifiers_, t)) {
        const std::size_t kv_heads = heads_of_operand(k_);
        group_ = heads_of_operand(q_) / kv_heads;
        lse_.resize(q_.size() / q_.extents()[rank_of<Q> - 1]);
        const auto input = [&](const auto& x, bool shared_by_group) {
            return grouped_heads_of(x, static_cast<const T*>(x.data()), heads_layout_of(x), group_, shared_by_group);
        };
        problem_ = {.q = input(q_, false),
                    .k = input(k_, true),
                    .v = input(v_, true),
                    .out = out_heads(),
                    .lse = lse_.data(),
                    .scale = scale,
                    .sees = {true, 0, window_of<Layer, T>()},
                    .batch_rank = 3,
                    .batch_extents = {q_.extents()[0], kv_heads, group_}};
        if constexpr (!std::is_same_v<Mods, no_modifiers>) {
            frame_ = {&modifiers_, heads_of_operand(q_), 0, nullptr, &lock_};
            problem_.sees.causal = Mods::causal;
            problem_.modifiers = kernels::differentiated_modifiers_over<T>(frame_);
        }
        kernels::attention(problem_);
    }

    void backward() override {
        if (!this->gradient) return;
        // out read where the value is now, as the forward wrote it.
        kernels::attention_problem<T> p = problem_;
        p.out = out_heads();
        const auto dout = Layer::heads_of(*this->gradient);
        // Each operand's gradient where it lies (a view of its projection's), or aside for one
        // that takes none.
        std::vector<std::vector<T>> aside;
        const auto target = [&](const auto& operand, bool shared_by_group) {
            if (auto g = gradient_view(operand))
                return grouped_heads_of(*g, g->data(), heads_layout_of(*g), group_, shared_by_group);
            const auto e = operand.extents();
            aside.emplace_back(operand.size(), T(0));
            const auto hs = static_cast<std::ptrdiff_t>(e[e.size() - 1]);
            const auto time = static_cast<std::ptrdiff_t>(e[e.size() - 2]);
            const auto heads = e.size() == 4 ? static_cast<std::ptrdiff_t>(e[1]) : 1;
            return grouped_heads_of(operand, aside.back().data(),
                                    {heads * time * hs, e.size() == 4 ? time * hs : 0, hs}, group_, shared_by_group);
        };
        if constexpr (!std::is_same_v<typename learned::gradient, std::nullptr_t>) {
            if (wants_gradient(table_)) {
                auto table_gradient = tensor_for<T, dims_of<typename learned::gradient>>(
                    typename tensor_for<T, dims_of<typename learned::gradient>>::shape_type(table_.extents()));
                frame_.table_gradient = &table_gradient;
                kernels::attention_backward(p, dout.data(), {target(q_, false), target(k_, true), target(v_, true)});
                frame_.table_gradient = nullptr;
                back(table_, table_gradient);
                return;
            }
            p.modifiers.learn = nullptr;  // nothing to learn into
        }
        kernels::attention_backward(p, dout.data(), {target(q_, false), target(k_, true), target(v_, true)});
    }

private:
    kernels::batched_matrices<T> out_heads() {
        const auto out = Layer::heads_of(this->value);
        return grouped_heads_of(out, out.data(), heads_layout_of(out), group_, false);
    }

    Q q_;
    K k_;
    V v_;
    std::size_t group_;  // query heads per key/value head
    std::vector<T> lse_;
    kernels::attention_problem<T> problem_{};
    Mods modifiers_;
    typename learned::read table_;
    kernels::modifier_frame<Mods, typename learned::gradient> frame_{};
    std::mutex lock_;
};

// x (B, heads, T, HS) with its positions encoded by a rotary encoding: a rotated copy, whose
// derivative turns the gradient back (nn/rotary.hpp keeps both).
template <class Position, class X>
auto rotated(const Position& position, const X& x, std::span<const std::size_t> starts) {
    using T = value_type_of<X>;
    auto value = tensor_for<T, dims_of<X>>(saved(x, nullptr));
    position.rotate(view_of(value), starts);
    return with_derivative(
        std::move(value),
        [position, starts = std::vector<std::size_t>(starts.begin(), starts.end())](const auto& g) {
            auto turned = tensor_for<T, dims_of<X>>(g);
            position.rotate_backward(view_of(turned), starts);
            return turned;
        },
        x);
}

// The object a layer encodes positions with: its position() (a grouped-query layer's), or its
// encode_positions member (GPT's no_position_encoding).
template <class Layer>
const auto& position_encoding_of(const Layer& layer) {
    if constexpr (requires { layer.position(); }) return layer.position();
    else return layer.encode_positions;
}

}  // namespace detail

// q and k with the layer's positions encoded: what the layer returns, for a layer whose
// encode_positions returns them (recorded by the ops it ran, e.g. a QK-norm layer's RMSNorms);
// as they are for a layer that encodes none (GPT's positions are embeddings); rotated copies for
// a rotary layer's (Llama's).
template <class Layer, class Q, class K>
    requires(reads_traced<Q> || reads_traced<K>)
auto encoded_positions(const Layer& layer, const Q& q, const K& k, std::span<const std::size_t> starts) {
    if constexpr (!std::is_void_v<decltype(layer.encode_positions(q, k, starts))>) {
        auto encoded = layer.encode_positions(q, k, starts);
        static_assert(is_traced<std::remove_cvref_t<decltype(std::get<0>(encoded))>> &&
                          is_traced<std::remove_cvref_t<decltype(std::get<1>(encoded))>>,
                      "shaped::train: a layer's encode_positions returns q and k held with eval(...)");
        return encoded;
    } else {
        const auto& encoding = detail::position_encoding_of(layer);
        using Encoding = std::remove_cvref_t<decltype(encoding)>;
        if constexpr (std::is_same_v<Encoding, nn::no_position_encoding>) {
            return std::pair{q, k};
        } else {
            static_assert(requires(tensor_for<value_type_of<Q>, dims_of<Q>>& x) { encoding.rotate_backward(view_of(x), starts); },
                          "shaped::train: this layer's position encoding has no derivative");
            return std::pair{detail::rotated(encoding, q, starts), detail::rotated(encoding, k, starts)};
        }
    }
}

template <class Layer, class X, class Q, class K, class V>
    requires(reads_traced<Q> || reads_traced<K> || reads_traced<V>)
auto attended_heads(const Layer& layer, const Q& q, const K& k, const V& v, typename Layer::value_type scale, const X& x) {
    using T = typename Layer::value_type;
    using B = dim_at<0, dims_of<X>>;
    using Time = dim_at<1, dims_of<X>>;
    using M = typename Layer::merged_dim;
    Tensor<T, B, Time, M> merged{Shape<B, Time, M>({x.extents()[0], x.extents()[1], M::extent})};
    tape* t = tape::active();
    auto sq = detail::saved(q, t);
    auto sk = detail::saved(k, t);
    auto sv = detail::saved(v, t);
    using record_type = detail::recorded_attention<Layer, decltype(sq), decltype(sk), decltype(sv), T, B, Time, M>;
    const auto modifiers = [&] {
        if constexpr (nn::detail::modifying_layer<Layer>) {
            return nn::detail::modifiers_of(layer, 0, 0);
        } else {
            return no_modifiers{};
        }
    };
    return detail::on_tape<T, B, Time, M>(
        std::make_shared<record_type>(std::move(merged), std::move(sq), std::move(sk), std::move(sv), scale, modifiers(), t));
}

}  // namespace shaped::train
