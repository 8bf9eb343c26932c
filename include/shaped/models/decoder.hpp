#pragma once
// What the decoder-only models (GPT, Llama) share: the check that a forward's ids fit the
// context, and each batch row's last new position of a decoding step.

#include <shaped/tensor.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <string_view>

namespace shaped::models::detail {

[[noreturn]] void throw_past_context(std::string_view where, std::size_t positions, std::string_view context_name,
                                     std::size_t context);

// The positions of ids (B, T), T at most the context P; shape_error naming both when more.
template <StaticDim P, class Ids>
std::size_t positions_in_context(std::string_view where, const Ids& ids) {
    const std::size_t positions = ids.extents()[1];
    if (positions > P::extent) throw_past_context(where, positions, P::name.view(), P::extent);
    return positions;
}

// x (B, n, C) at each row's last new position, taken[b] - 1 (position 0 for a row that took
// none): (B, C), what sampling the next id reads.
template <StaticDim B, StaticDim C, class X, std::size_t Batch>
auto last_taken(const X& x, const std::array<std::size_t, Batch>& taken) {
    using T = value_type_of<X>;
    const std::size_t n = x.extents()[1];
    Tensor<T, B, C> last{Shape<B, C>({Batch, C::extent})};
    for (std::size_t b = 0; b < Batch; ++b) {
        const std::size_t t = taken[b] > 0 ? taken[b] - 1 : 0;
        std::copy_n(x.data() + (b * n + t) * C::extent, C::extent, last.data() + b * C::extent);
    }
    return last;
}

}  // namespace shaped::models::detail
