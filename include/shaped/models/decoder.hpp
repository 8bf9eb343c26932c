#pragma once
// models::decoder<Model, Layers>: what every decoder-only model (GPT, Llama) runs the same way,
// given its own embedding and its own head. A model derives from it and provides, for it alone
// (it is a friend):
//
//   static constexpr std::string_view name          the model's name in messages
//   context_dim                                     the positions it can see, P
//   blocks()                                        its stack of blocks (nn::Stack)
//   embed(ids, starts, counts)                      the blocks' input (B, n, C): row b's first
//                                                   counts[b] ids at positions starts[b] + t, 0 after
//   logits(x)                                       (..., C) -> (..., V)
//
// and gets:
//
//   model(idx)                        logits (B, T, V) for ids (B, T), T at most the context
//   model(idx, caches, counts)        decoding: the next n ids of every row through every
//                                     block's cache, logits (B, n, V); with counts, row b takes
//                                     only its first counts[b] ids (a ragged batch; the logits at
//                                     its padding positions are those of a zero input)
//   model.next_logits(idx, caches)    the same step, only each row's last new logits (B, V): what
//                                     sampling the next id needs (the head over one position a row)

#include <shaped/tensor.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <optional>
#include <string_view>
#include <utility>

namespace shaped::models {

namespace detail {
[[noreturn]] void throw_past_context(std::string_view where, std::size_t positions, std::string_view context_name,
                                     std::size_t context);
}  // namespace detail

template <class Model, std::size_t Layers>
class decoder {
public:
    template <Expression Ids>
    auto operator()(const Ids& idx) const {
        static_assert(rank_of<Ids> == 2, "shaped::models: a model's ids are (B, T)");
        using B = dim_at<0, dims_of<Ids>>;
        using P = typename Model::context_dim;
        const auto ids = eval(idx);
        const std::size_t positions = ids.extents()[1];
        if (positions > P::extent) detail::throw_past_context(Model::name, positions, P::name.view(), P::extent);
        std::array<std::size_t, B::extent> starts{}, counts{};
        counts.fill(positions);
        return model().logits(model().blocks()(model().embed(ids, starts, counts)));
    }

    template <Expression Ids, class Cache>
    auto operator()(const Ids& idx, std::array<Cache, Layers>& caches,
                    std::optional<typename Cache::lengths_type> counts = std::nullopt) const {
        static_assert(rank_of<Ids> == 2, "shaped::models: a decoding step's ids are (B, n)");
        return model().logits(step(eval(idx), caches, counts).first);
    }

    template <Expression Ids, class Cache>
    auto next_logits(const Ids& idx, std::array<Cache, Layers>& caches,
                     std::optional<typename Cache::lengths_type> counts = std::nullopt) const {
        static_assert(rank_of<Ids> == 2, "shaped::models: a decoding step's ids are (B, n)");
        const auto [x, taken] = step(eval(idx), caches, counts);
        return model().logits(last_taken(x, taken));
    }

private:
    const Model& model() const { return static_cast<const Model&>(*this); }

    // A decoding step through every block: the last block's output (B, n, C), and the positions
    // each row took. The positions must exist before they are embedded: the caches hold the
    // whole context.
    template <class Ids, class Cache>
    auto step(const Ids& ids, std::array<Cache, Layers>& caches,
              const std::optional<typename Cache::lengths_type>& counts) const {
        using Blocks = std::remove_cvref_t<decltype(model().blocks())>;
        const auto taken = Blocks::check_room(caches, ids.extents()[1], counts);
        return std::pair(model().blocks()(model().embed(ids, caches[0].lengths(), taken), caches, counts), taken);
    }

    // x (B, n, C) at each row's last new position, taken[b] - 1 (position 0 for a row that took
    // none): (B, C).
    template <class X, std::size_t Batch>
    static auto last_taken(const X& x, const std::array<std::size_t, Batch>& taken) {
        using B = dim_at<0, dims_of<X>>;
        using C = dim_at<2, dims_of<X>>;
        const std::size_t n = x.extents()[1];
        Tensor<value_type_of<X>, B, C> last{Shape<B, C>({Batch, C::extent})};
        for (std::size_t b = 0; b < Batch; ++b) {
            const std::size_t t = taken[b] > 0 ? taken[b] - 1 : 0;
            std::copy_n(x.data() + (b * n + t) * C::extent, C::extent, last.data() + b * C::extent);
        }
        return last;
    }
};

}  // namespace shaped::models
