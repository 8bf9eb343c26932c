#pragma once
// nn::Embedding<V, C, T, Format>: torch.nn.Embedding(V, C), a table of V rows of C values;
// weight is (V, C), as PyTorch stores it, initialised N(0, 1) as PyTorch does.
//
//   table(ids)                  ids (...) integers -> (..., C), lazy: row ids[i] of the table for
//                               each id (shaped::gather). An id outside [0, V) is a shape_error
//                               naming it, its place and V, when the rows are read.
//   table.row(id)               row id itself, read in place, checked the same way.
//   table.copy_row(id, at, out) row id's C floats into out (dequantized, for a quantized table).
//   table.unembed(x)            x (..., C) -> (..., V), x @ weight^T: the table as a tied
//                               classifier, lazy.
//
// Format is the weight's storage (nn::Linear's, nn/linear.hpp): f32 a Tensor; another format a
// QuantizedMatrix, whose rows copy_row dequantizes one at a time (a quantized table has no
// table(ids) and no row(id), which would need its floats in memory).

#include <shaped/nn/linear.hpp>
#include <shaped/nn/module.hpp>
#include <shaped/tensor.hpp>

#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <string>
#include <utility>

namespace shaped::nn {

template <StaticDim V, StaticDim C, class T = float, StorageFormat Format = shaped::f32>
class Embedding {
public:
    using value_type = T;
    using vocab_dim = V;
    using channel_dim = C;
    using weight_format = Format;
    static constexpr bool quantized = !std::is_same_v<Format, shaped::f32>;
    using weight_type = typename detail::stored_weight<Format, T, V, C>::type;

    // Parameters zero-filled, to be loaded.
    Embedding() = default;
    // A quantized table is drawn in floats, then quantized.
    explicit Embedding(Generator& gen) {
        if constexpr (quantized) {
            Tensor<float, V, C> drawn;
            gen.fill_normal(drawn.elements());
            weight = quantize<Format>(drawn);
        } else {
            gen.fill_normal(weight.elements());
        }
    }

    // The rows of ids: (..., C).
    template <Expression Ids>
        requires(std::integral<value_type_of<Ids>> && !quantized)
    auto operator()(Ids&& ids) const {
        return gather(weight, std::forward<Ids>(ids), "shaped::nn::Embedding");
    }

    // Row id's C values, contiguous; `at` is the id's place among the ids, for the message.
    template <std::integral Id>
        requires(!quantized)
    const T* row(Id id, std::size_t at = 0) const {
        check_id(id, at);
        return weight.data() + static_cast<std::size_t>(id) * C::extent;
    }

    // Row id's C values into out, checked as row(id) checks them.
    template <std::integral Id>
    void copy_row(Id id, std::size_t at, T* out) const {
        check_id(id, at);
        if constexpr (quantized) weight.dequantize_row(static_cast<std::size_t>(id), std::span<float>(out, C::extent));
        else std::copy_n(weight.data() + static_cast<std::size_t>(id) * C::extent, C::extent, out);
    }

    // x (..., C) -> (..., V): x @ weight^T, the table as a tied classifier.
    template <Expression X>
    auto unembed(X&& x) const {
        if constexpr (quantized) return linear(std::forward<X>(x), weight);
        else return matmul(std::forward<X>(x), weight.mT());
    }

    BOOST_HANA_DEFINE_STRUCT(Embedding,
        (weight_type, weight));

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
