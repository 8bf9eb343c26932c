#pragma once
// The backward passes of the row kernels, compiled once for float and double in
// src/rows_backward.cpp, as llm.c writes its layer backwards: every backward ADDS its gradients
// into the buffers it is given (input gradients and parameter gradients alike), so that a
// residual stream's two paths and a batch's micro-batches accumulate without a copy; or, told
// gradient_write::overwrite, writes the input's gradient into storage that holds none yet (the
// first gradient a value receives, with no zero-fill before it). All rows are contiguous: `rows`
// rows of n elements, one after the other.
//
//   layer_norm_rows_saving    layer_norm_rows's forward, keeping each row's mean and 1/std
//   layer_norm_rows_backward  its backward (LayerNorm, or RMSNorm when not centered)
//   activation_backward       GELU (exact or tanh) and SiLU: din += dout * f'(x)
//   cross_entropy_rows        F.cross_entropy's losses and softmax - one-hot, fused
//   adamw_update              torch.optim.AdamW's update of one parameter, after the backward
//   sum_of_squares            what a gradient adds to the squared norm clipping reads
//   add_broadcast             acc += g over strided extents: a gradient summed where it broadcast

#include <cstddef>
#include <cstdint>
#include <span>

namespace shaped::kernels {

// Whether a backward adds the input's gradient to what its buffer holds, or writes it over
// whatever the buffer holds (unfilled storage).
enum class gradient_write { add, overwrite };

// out[r, :] as layer_norm_rows computes it (the same values, bit for bit), and mean[r] and
// rstd[r] = 1 / sqrt(var + eps) of each row as the backward needs them. Not centered (RMSNorm),
// the mean is 0 and `mean` may be null. bias may be null.
void layer_norm_rows_saving(const float* in, float* out, std::size_t rows, std::size_t n, const float* weight,
                            const float* bias, double eps, bool centered, float* mean, float* rstd);
void layer_norm_rows_saving(const double* in, double* out, std::size_t rows, std::size_t n, const double* weight,
                            const double* bias, double eps, bool centered, double* mean, double* rstd);

// Given dout, the gradient of the loss with respect to out, and the forward's in, mean and
// rstd: din += d loss / d in (din = ... when overwriting), dweight += d loss / d weight, dbias +=
// d loss / d bias (dbias may be null: no bias). Not centered, mean may be null.
void layer_norm_rows_backward(const float* dout, const float* in, std::size_t rows, std::size_t n,
                              const float* weight, const float* mean, const float* rstd, bool centered,
                              float* din, float* dweight, float* dbias, gradient_write write = gradient_write::add);
void layer_norm_rows_backward(const double* dout, const double* in, std::size_t rows, std::size_t n,
                              const double* weight, const double* mean, const double* rstd, bool centered,
                              double* din, double* dweight, double* dbias, gradient_write write = gradient_write::add);

// Elementwise activations, as the forward computes them: torch.nn.GELU() (erf), GELU's tanh
// approximation (torch.nn.GELU(approximate="tanh"), GPT-2's gelu_new), and SiLU (x sigmoid(x)).
enum class activation_kind { gelu, gelu_tanh, silu };

// din[i] += dout[i] * f'(x[i]) (= when overwriting) for n elements; x is the activation's input.
void activation_backward(activation_kind f, const float* x, const float* dout, float* din, std::size_t n,
                         gradient_write write = gradient_write::add);
void activation_backward(activation_kind f, const double* x, const double* dout, double* din, std::size_t n,
                         gradient_write write = gradient_write::add);

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

// One AdamW step's constants (train/adamw.hpp computes them): decay = 1 - lr * weight_decay
// (1 for a parameter that does not decay), step_size = lr / (1 - beta1^t), correction =
// sqrt(1 - beta2^t).
struct adamw_constants {
    double decay, beta1, beta2, eps, step_size, correction;
};
// For n elements, in PyTorch's single-tensor order and in T: p *= decay; m = beta1 m + (1 -
// beta1) g; v = beta2 v + (1 - beta2) g g; p -= step_size m / (sqrt(v) / correction + eps).
void adamw_update(float* p, const float* g, float* m, float* v, std::size_t n, const adamw_constants& c);
void adamw_update(double* p, const double* g, double* m, double* v, std::size_t n, const adamw_constants& c);

// The sum of x[i]^2 over n elements, accumulated in double.
double sum_of_squares(const float* x, std::size_t n);
double sum_of_squares(const double* x, std::size_t n);

// acc += g over `extents` (at most max_add_rank of them), each read through its own strides, 0
// along a dim it broadcasts: a gradient added into its value's, summed over the dims the value
// was broadcast along. Compiled once here, not once per pair of tensor types.
inline constexpr std::size_t max_add_rank = 16;
void add_broadcast(float* acc, const float* g, std::span<const std::size_t> extents,
                   std::span<const std::ptrdiff_t> acc_strides, std::span<const std::ptrdiff_t> g_strides);
void add_broadcast(double* acc, const double* g, std::span<const std::size_t> extents,
                   std::span<const std::ptrdiff_t> acc_strides, std::span<const std::ptrdiff_t> g_strides);

}  // namespace shaped::kernels
