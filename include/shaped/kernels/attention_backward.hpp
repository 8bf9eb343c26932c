#pragma once
// Causal attention for training, compiled once for float and double in
// src/attention_backward.cpp: a forward that keeps each query's log-sum-exp, and a backward
// that recomputes the scores tile by tile from it, as flash attention does, so that neither
// pass holds a T x T matrix. Heads are read in place through their strides, so that q, k and v
// can be the three parts of one fused projection (B, T, 3C) and out the merged heads (B, T, C).
// Grouped heads: query head h reads key/value head h / (heads / kv_heads), and the gradients
// of a key/value head add up over its group.
//
//   attention_forward(p, out, lse)                   out = softmax(q k^T scale, causal[, window]) v
//   attention_backward(p, out, lse, dout, grads)     dq, dk, dv += the gradients of the loss

#include <cstddef>
#include <optional>

namespace shaped::kernels {

// Where one operand's heads lie: its element (b, h, t, i) is data[b * batch + h * head +
// t * time + i]; the head_size elements of one position of one head are contiguous.
struct heads_layout {
    std::ptrdiff_t batch, head, time;
};

template <class T>
struct attention_training_problem {
    std::size_t batch, heads, kv_heads, time, head_size;  // heads a multiple of kv_heads
    T scale;
    // Query i sees key j when j <= i, and with a window W only when j > i - W as well.
    std::optional<std::size_t> window;
    const T* q;
    heads_layout q_layout;  // (batch, heads, time, head_size)
    const T* k;
    heads_layout k_layout;  // (batch, kv_heads, time, head_size)
    const T* v;
    heads_layout v_layout;  // (batch, kv_heads, time, head_size)
    heads_layout out_layout;  // out and dout: (batch, heads, time, head_size)
};

// out = the attention of p (written); lse[(b * heads + h) * time + i] = log sum_j exp(scale *
// q_i . k_j) over the keys query i sees (written).
void attention_forward(const attention_training_problem<float>& p, float* out, float* lse);
void attention_forward(const attention_training_problem<double>& p, double* out, double* lse);

// The gradients' buffers, laid out as q, k and v are (their own layouts).
template <class T>
struct attention_gradients {
    T* dq;
    heads_layout dq_layout;
    T* dk;
    heads_layout dk_layout;
    T* dv;
    heads_layout dv_layout;
};

// Given the forward's out and lse and dout, the gradient of the loss with respect to out (laid
// out as out): dq, dk and dv += the gradients of the loss with respect to q, k and v.
void attention_backward(const attention_training_problem<float>& p, const float* out, const float* lse,
                        const float* dout, const attention_gradients<float>& grads);
void attention_backward(const attention_training_problem<double>& p, const double* out, const double* lse,
                        const double* dout, const attention_gradients<double>& grads);

}  // namespace shaped::kernels
