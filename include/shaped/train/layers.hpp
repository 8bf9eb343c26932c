#pragma once
// The layers' training passes, as llm.c writes them: a forward that keeps what its backward
// needs, and a backward that ADDS the gradients of the loss into the buffers it is given — the
// input's and the layer's parameters' (a gradient_ref of the layer's own type). The rows are
// a batch's positions, flattened: x (rows, In) contiguous, y (rows, Out).
//
//   linear_forward(layer, x, y, rows)                      y = x W^T + b            (written)
//   linear_backward(layer, grads, x, dy, dx, rows)         dx += dy W, dW += dy^T x, db += sum dy
//   embedding_backward(grads, ids, dy, rows)               dW[ids[r]] += dy[r]
//
// The row kernels' backwards (layer norm, RMSNorm, activations, cross-entropy) and attention's
// are in kernels/rows_backward.hpp and kernels/attention_backward.hpp.

#include <shaped/kernels/blas.hpp>
#include <shaped/nn/embedding.hpp>
#include <shaped/nn/linear.hpp>
#include <shaped/train/gradients.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace shaped::train {

template <StaticDim In, StaticDim Out, bool Bias, class T>
void linear_forward(const nn::Linear<In, Out, Bias, T>& layer, const T* x, T* y, std::size_t rows) {
    constexpr std::size_t in = In::extent, out = Out::extent;
    if constexpr (Bias)
        for (std::size_t r = 0; r < rows; ++r) std::copy_n(layer.bias.data(), out, y + r * out);
    kernels::blas::gemm(false, true, rows, out, in, T(1), x, in, layer.weight.data(), in, Bias ? T(1) : T(0), y, out);
}

// dx may be null: the input's gradient is not wanted (the first layer's ids have none).
template <StaticDim In, StaticDim Out, bool Bias, class T>
void linear_backward(const nn::Linear<In, Out, Bias, T>& layer, gradient_ref<nn::Linear<In, Out, Bias, T>> grads,
                     const T* x, const T* dy, T* dx, std::size_t rows) {
    using L = nn::Linear<In, Out, Bias, T>;
    constexpr std::size_t in = In::extent, out = Out::extent;
    if (dx) kernels::blas::gemm(false, false, rows, in, out, T(1), dy, out, layer.weight.data(), in, T(1), dx, in);
    kernels::blas::gemm(true, false, out, in, rows, T(1), dy, out, x, in, T(1), grads.of(&L::weight).data(), in);
    if constexpr (Bias) {
        T* db = grads.of(&L::bias).data();
        for (std::size_t r = 0; r < rows; ++r)
            for (std::size_t o = 0; o < out; ++o) db[o] += dy[r * out + o];
    }
}

// ids are checked (an id outside the table is a shape_error) before any gradient changes.
template <StaticDim V, StaticDim C, class T>
void embedding_backward(gradient_ref<nn::Embedding<V, C, T>> grads, const std::int64_t* ids, const T* dy,
                        std::size_t rows) {
    using E = nn::Embedding<V, C, T>;
    const E& checked = grads.storage();
    for (std::size_t r = 0; r < rows; ++r) (void)checked.row(ids[r], r);
    T* dw = grads.of(&E::weight).data();
    for (std::size_t r = 0; r < rows; ++r) {
        T* row = dw + static_cast<std::size_t>(ids[r]) * C::extent;
        for (std::size_t c = 0; c < C::extent; ++c) row[c] += dy[r * C::extent + c];
    }
}

}  // namespace shaped::train
