#pragma once
// nn::Embedding<V, C, T>: torch.nn.Embedding(V, C), a table of V rows of C values; weight is
// (V, C), as PyTorch stores it, initialised N(0, 1) as PyTorch does.
//
//   table(ids)       ids (...) integers -> (..., C), lazy: row ids[i] of the table for each id
//                    (shaped::gather). An id outside [0, V) is a shape_error naming it, its
//                    place and V, when the rows are read.
//   table.row(id)    row id itself, read in place, checked the same way.

#include <shaped/nn/module.hpp>
#include <shaped/tensor.hpp>

#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <string>
#include <utility>

namespace shaped::nn {

template <StaticDim V, StaticDim C, class T = float>
class Embedding {
public:
    using value_type = T;
    using vocab_dim = V;
    using channel_dim = C;

    // Parameters zero-filled, to be loaded.
    Embedding() = default;
    explicit Embedding(Generator& gen) { gen.fill_normal(weight.elements()); }

    // The rows of ids: (..., C).
    template <Expression Ids>
        requires std::integral<value_type_of<Ids>>
    auto operator()(Ids&& ids) const {
        return gather(weight, std::forward<Ids>(ids), "shaped::nn::Embedding");
    }

    // Row id's C values, contiguous; `at` is the id's place among the ids, for the message.
    template <std::integral Id>
    const T* row(Id id, std::size_t at = 0) const {
        check_id(id, at);
        return weight.data() + static_cast<std::size_t>(id) * C::extent;
    }

    BOOST_HANA_DEFINE_STRUCT(Embedding,
        (Tensor<T, V, C>, weight));

private:
    template <class Id>
    static void check_id(Id id, std::size_t at) {
        if (std::cmp_less(id, 0) || std::cmp_greater_equal(id, V::extent))
            throw shape_error(shaped::detail::message({"shaped::nn::Embedding: id ",
                                                       std::is_signed_v<Id> ? shaped::detail::message_part(static_cast<long long>(id))
                                                                            : shaped::detail::message_part(static_cast<unsigned long long>(id)),
                                                       " (element ", at,
                                                       " of the ids) is outside the table's ",
                                                       shaped::detail::message_part::dim_extent{V::name.view(), V::extent}, " rows"}));
    }
};

}  // namespace shaped::nn
