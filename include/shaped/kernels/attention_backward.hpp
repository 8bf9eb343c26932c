#pragma once
// Attention's backward for training, compiled once for float and double in
// src/attention_backward.cpp. The forward is the one attention kernel (kernels/attention.hpp)
// asked to keep each query's log-sum-exp; from it the backward recomputes the scores tile by
// tile, as flash attention does, so that neither pass holds a T x T matrix. Heads are read in
// place through their strides, so that q, k and v can be the three parts of one fused projection
// (B, T, 3C) and out the merged heads (B, T, C). Grouped heads are a batch dim along which k and
// v broadcast; the gradients of a key/value head add up over its group.
//
//   attention_backward(p, dout, grads)            dq, dk, dv += the gradients of the loss
//   grouped_heads(data, layout, ...)              a (B, NH, T, HS) operand as a batch of matrices

#include <shaped/kernels/attention.hpp>

#include <cstddef>

namespace shaped::kernels {

// The gradients' buffers, each a batch of matrices laid out as its own layout says, broadcast
// where its operand is.
template <class T>
struct attention_gradients {
    batched_matrices<T> dq, dk, dv;
};

// Given p as the forward ran it (causal from the diagonal, tq = tk, d = dv; its out and lse
// filled by kernels::attention) and dout, the gradient of the loss with respect to out (laid out
// as out): dq, dk and dv += the gradients of the loss with respect to q, k and v. Matrices that
// share keys and values (a batch dim along which k and v broadcast) are one task, so that one
// thread sums their dk and dv; q and out must not broadcast.
void attention_backward(const attention_problem<float>& p, const float* dout, const attention_gradients<float>& grads);
void attention_backward(const attention_problem<double>& p, const double* dout,
                        const attention_gradients<double>& grads);

// Whether attention_backward covers p (as above); it throws std::invalid_argument where not.
bool attention_backward_covers(const attention_problem<float>& p);
bool attention_backward_covers(const attention_problem<double>& p);

// ---- (B, NH, T, HS) heads as the batches of matrices the kernels read --------------------------

// Where one operand's heads lie: its element (b, h, t, i) is data[b * batch + h * head +
// t * time + i].
struct heads_layout {
    std::ptrdiff_t batch, head, time;
};

// The heads (batch, heads, time, head_size) at data as a batch of matrices over the batch dims
// (batch, kv_heads, group): heads = kv_heads * group for queries, out and their gradients, which
// step a head per member of a group; heads = kv_heads for keys, values and theirs
// (shared_by_group), which broadcast along the group.
template <class P>
batched_matrices<P> grouped_heads(P* data, const heads_layout& layout, std::size_t time, std::size_t head_size,
                                  std::size_t group, bool shared_by_group) {
    if (shared_by_group) return {data, {{time, head_size}, {layout.time, 1}}, {layout.batch, layout.head, 0}};
    return {data,
            {{time, head_size}, {layout.time, 1}},
            {layout.batch, layout.head * static_cast<std::ptrdiff_t>(group), layout.head}};
}

}  // namespace shaped::kernels
