#pragma once
// The backward passes of the row kernels, compiled once for float and double in
// src/rows_backward.cpp, as llm.c writes its layer backwards: every backward ADDS its gradients
// into the buffers it is given (input gradients and parameter gradients alike), so that a
// residual stream's two paths and a batch's micro-batches accumulate without a copy. All rows
// are contiguous: `rows` rows of n elements, one after the other.
//
//   layer_norm_rows_saving    layer_norm_rows's forward, keeping each row's mean and 1/std
//   layer_norm_rows_backward  its backward (LayerNorm, or RMSNorm when not centered)
//   activation_backward       GELU (exact or tanh) and SiLU: din += dout * f'(x)
//   cross_entropy_rows        F.cross_entropy's losses and softmax - one-hot, fused

#include <cstddef>
#include <cstdint>

namespace shaped::kernels {

// out[r, :] as layer_norm_rows computes it (the same values, bit for bit), and mean[r] and
// rstd[r] = 1 / sqrt(var + eps) of each row as the backward needs them. Not centered (RMSNorm),
// the mean is 0 and `mean` may be null. bias may be null.
void layer_norm_rows_saving(const float* in, float* out, std::size_t rows, std::size_t n, const float* weight,
                            const float* bias, double eps, bool centered, float* mean, float* rstd);
void layer_norm_rows_saving(const double* in, double* out, std::size_t rows, std::size_t n, const double* weight,
                            const double* bias, double eps, bool centered, double* mean, double* rstd);

// Given dout, the gradient of the loss with respect to out, and the forward's in, mean and
// rstd: din += d loss / d in, dweight += d loss / d weight, dbias += d loss / d bias (dbias may
// be null: no bias). Not centered, mean may be null.
void layer_norm_rows_backward(const float* dout, const float* in, std::size_t rows, std::size_t n,
                              const float* weight, const float* mean, const float* rstd, bool centered,
                              float* din, float* dweight, float* dbias);
void layer_norm_rows_backward(const double* dout, const double* in, std::size_t rows, std::size_t n,
                              const double* weight, const double* mean, const double* rstd, bool centered,
                              double* din, double* dweight, double* dbias);

// Elementwise activations, as the forward computes them: torch.nn.GELU() (erf), GELU's tanh
// approximation (torch.nn.GELU(approximate="tanh"), GPT-2's gelu_new), and SiLU (x sigmoid(x)).
enum class activation_kind { gelu, gelu_tanh, silu };

// din[i] += dout[i] * f'(x[i]) for n elements; x is the activation's input.
void activation_backward(activation_kind f, const float* x, const float* dout, float* din, std::size_t n);
void activation_backward(activation_kind f, const double* x, const double* dout, double* din, std::size_t n);

// The summed cross-entropy of `rows` rows of logits over a vocabulary of `vocab`, and how many
// rows counted: row r adds logsumexp(logits[r, :]) - logits[r, targets[r]], except a row whose
// target is -1 (ignored, as F.cross_entropy's ignore_index). Every target must be -1 or in
// [0, vocab): the caller checks them. When dlogits is not null, it is WRITTEN (not added):
// dlogits[r, :] = (softmax(logits[r, :]) - onehot(targets[r])) * grad_scale, and 0 for an
// ignored row; dlogits may be logits itself (the logits are then overwritten row by row, each
// read before it is written). The sum is accumulated in double.
struct cross_entropy_sum {
    double loss;
    std::size_t counted;
};
cross_entropy_sum cross_entropy_rows(const float* logits, const std::int64_t* targets, std::size_t rows,
                                     std::size_t vocab, float* dlogits, double grad_scale);
cross_entropy_sum cross_entropy_rows(const double* logits, const std::int64_t* targets, std::size_t rows,
                                     std::size_t vocab, double* dlogits, double grad_scale);

}  // namespace shaped::kernels
