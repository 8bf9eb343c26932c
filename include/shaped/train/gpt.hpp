#pragma once
// Training nanoGPT's GPT (models::GPT), as llm.c's train_gpt2.c writes it: a forward over a
// batch that keeps every activation its backward needs, then the backward, block by block in
// reverse, adding each parameter's gradient into a train::gradients<GPT>.
//
//   train::step_buffers<Model, B, T> buffers;     activations and their gradients, for B rows
//                                                  of T positions: allocated once, reused by
//                                                  every step (their bytes are a constant,
//                                                  step_buffers::bytes)
//   double loss = train::forward_backward(model, grads, idx, targets, buffers, loss_scale);
//
// loss is F.cross_entropy's mean over the targets that are not -1; the gradients added are
// those of loss * loss_scale (1 / the micro-batches of an accumulated step, as nanoGPT divides
// each micro-batch's loss). train::loss(model, idx, targets, buffers) is the forward alone.
//
// A block, forward (x its input, every buffer (B, T, ...)):
//   ln_1 = LayerNorm(x)                  keeping each row's mean and 1/std
//   qkv = ln_1 @ c_attn^T + b            (B, T, 3C): the heads are read in place from it
//   atty = attention(q, k, v)            (B, T, C) merged heads, keeping each query's logsumexp
//   residual = x + atty @ c_proj^T + b
//   ln_2 = LayerNorm(residual)
//   fc = ln_2 @ c_fc^T + b,  act = GELU(fc)
//   out = residual + act @ mlp.c_proj^T + b
// and back: the gradient of the residual stream, d_residual, flows through every block,
// each branch adding its input's gradient into it.

#include <shaped/kernels/attention_backward.hpp>
#include <shaped/kernels/rows_backward.hpp>
#include <shaped/models/gpt.hpp>
#include <shaped/train/gradients.hpp>
#include <shaped/train/layers.hpp>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <numbers>

namespace shaped::train {

template <class Model, StaticDim B, StaticDim Time>
class step_buffers;

// The ids and targets of a training batch: (B, T) integers.
template <StaticDim B, StaticDim Time>
using batch_ids = Tensor<std::int64_t, B, Time>;

template <class Config, class T, StaticDim B, StaticDim Time>
class step_buffers<models::GPT<Config, T>, B, Time> {
    using Model = models::GPT<Config, T>;
    using C = typename Model::channel_dim;
    using V = typename Model::vocab_dim;
    using NH = typename Model::heads_dim;
    using QKV = typename Model::block_type::attention_type::fused_dim;
    using FF = nn::mlp_hidden<C>;
    static_assert(Time::extent <= Config::block_size, "shaped::train::step_buffers: T is at most the model's context");

public:
    static constexpr std::size_t rows = B::extent * Time::extent;

    // What one block keeps, each (B, T, ...).
    struct block_activations {
        Tensor<T, B, Time, C> ln_1, atty, residual, ln_2, out;
        Tensor<T, B, Time> ln_1_mean, ln_1_rstd, ln_2_mean, ln_2_rstd;
        Tensor<T, B, Time, QKV> qkv;
        Tensor<T, B, NH, Time> lse;
        Tensor<T, B, Time, FF> fc, act;
        static constexpr std::size_t elements = rows * (5 * C::extent + 4 + QKV::extent + NH::extent + 2 * FF::extent);
    };

    // The forward's activations.
    Tensor<T, B, Time, C> encoded, ln_f;
    Tensor<T, B, Time> ln_f_mean, ln_f_rstd;
    std::array<block_activations, Config::n_layer> blocks;
    // The logits, overwritten in place by their gradient.
    Tensor<T, B, Time, V> logits;
    // The backward's gradients of activations, reused block after block.
    Tensor<T, B, Time, C> d_residual, d_ln, d_atty;
    Tensor<T, B, Time, QKV> d_qkv;
    Tensor<T, B, Time, FF> d_fc, d_act;

    // The bytes of all the above: a constant of the config, B and T.
    static constexpr std::size_t activation_bytes =
        sizeof(T) * (rows * (2 * C::extent + 2 + V::extent) + Config::n_layer * block_activations::elements);
    static constexpr std::size_t gradient_scratch_bytes =
        sizeof(T) * rows * (3 * C::extent + QKV::extent + 2 * FF::extent);
    static constexpr std::size_t bytes = activation_bytes + gradient_scratch_bytes;
};

// The forward alone: the mean cross-entropy, targets -1 ignored.
template <class Model, StaticDim B, StaticDim Time>
double loss(const Model& model, const batch_ids<B, Time>& idx, const batch_ids<B, Time>& targets,
            step_buffers<Model, B, Time>& buffers);

template <class Model, class G, StaticDim B, StaticDim Time>
    requires detail::gradients_fit<Model, G>
double forward_backward(const Model& model, const G& grads, const batch_ids<B, Time>& idx,
                        const batch_ids<B, Time>& targets, step_buffers<Model, B, Time>& buffers,
                        double loss_scale = 1.0);
template <class Model, class G, StaticDim B, StaticDim Time>
    requires(!detail::gradients_fit<Model, G>)
detail::gradients_misfit<Model, G> forward_backward(const Model&, const G&, const batch_ids<B, Time>&,
                                                    const batch_ids<B, Time>&, step_buffers<Model, B, Time>&,
                                                    double = 1.0);

// ---- implementation ------------------------------------------------------------------------

namespace detail {

template <class T>
T activation_of(kernels::activation_kind f, T x) {
    switch (f) {
    case kernels::activation_kind::gelu:
        return T(0.5) * x * (T(1) + std::erf(x * static_cast<T>(std::numbers::sqrt2 / 2)));
    case kernels::activation_kind::gelu_tanh: {
        const T k = static_cast<T>(std::sqrt(2.0 / std::numbers::pi));
        return T(0.5) * x * (T(1) + std::tanh(k * (x + T(0.044715) * x * x * x)));
    }
    case kernels::activation_kind::silu:
        return x / (T(1) + std::exp(-x));
    }
    return x;
}

template <class Activation>
constexpr kernels::activation_kind activation_kind_of() {
    if constexpr (std::is_same_v<Activation, nn::activation::gelu_tanh>) return kernels::activation_kind::gelu_tanh;
    else return kernels::activation_kind::gelu;
}

// Every target -1 or an id of the vocabulary, else a shape_error naming it, before any work.
template <std::size_t Vocab, class Ids>
void check_targets(const Ids& targets, std::string_view vocab_name) {
    for (std::size_t i = 0; i < targets.size(); ++i) {
        const std::int64_t t = targets.data()[i];
        if (t != -1 && (t < 0 || static_cast<std::size_t>(t) >= Vocab))
            models::detail::throw_bad_target(static_cast<long long>(t), i, vocab_name, Vocab);
    }
}

template <class T>
void add_rows(T* y, const T* x, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) y[i] += x[i];
}

// The attention of a GPT block's fused qkv (B, T, 3C) into the merged heads (B, T, C).
template <class Block, class T>
kernels::attention_training_problem<T> gpt_attention(std::size_t batch, std::size_t time, const T* qkv) {
    constexpr auto c = static_cast<std::ptrdiff_t>(Block::channel_dim::extent);
    constexpr auto hs = static_cast<std::ptrdiff_t>(Block::head_size_dim::extent);
    const auto t = static_cast<std::ptrdiff_t>(time);
    const kernels::heads_layout parts{t * 3 * c, hs, 3 * c};
    return {.batch = batch, .heads = Block::heads_dim::extent, .kv_heads = Block::heads_dim::extent, .time = time,
            .head_size = Block::head_size_dim::extent, .scale = nn::attention_scale<typename Block::head_size_dim, T>,
            .window = std::nullopt, .q = qkv, .q_layout = parts, .k = qkv + c, .k_layout = parts, .v = qkv + 2 * c,
            .v_layout = parts, .out_layout = {t * c, hs, c}};
}

template <class LN, class T>
void layer_norm_forward(const LN& ln, const T* x, T* y, T* mean, T* rstd, std::size_t rows) {
    const T* bias = nullptr;
    if constexpr (LN::has_bias) bias = ln.bias.data();
    kernels::layer_norm_rows_saving(x, y, rows, LN::channel_dim::extent, ln.weight.data(), bias, LN::eps, true, mean, rstd);
}

template <class LN, class T>
void layer_norm_backward(const LN& ln, gradient_ref<LN> grads, const T* dy, const T* x, const T* mean, const T* rstd,
                         T* dx, std::size_t rows) {
    T* dbias = nullptr;
    if constexpr (LN::has_bias) dbias = grads.of(&LN::bias).data();
    kernels::layer_norm_rows_backward(dy, x, rows, LN::channel_dim::extent, ln.weight.data(), mean, rstd, true, dx,
                                      grads.of(&LN::weight).data(), dbias);
}

template <class Block, class Activations>
void block_forward(const Block& block, const typename Block::value_type* x, Activations& a, std::size_t batch,
                   std::size_t time) {
    constexpr std::size_t c = Block::channel_dim::extent;
    const std::size_t rows = batch * time;
    constexpr auto f = activation_kind_of<typename Block::mlp_type::activation_type>();
    layer_norm_forward(block.ln_1, x, a.ln_1.data(), a.ln_1_mean.data(), a.ln_1_rstd.data(), rows);
    linear_forward(block.attn.c_attn, a.ln_1.data(), a.qkv.data(), rows);
    kernels::attention_forward(gpt_attention<Block>(batch, time, a.qkv.data()), a.atty.data(), a.lse.data());
    linear_forward(block.attn.c_proj, a.atty.data(), a.residual.data(), rows);
    add_rows(a.residual.data(), x, rows * c);
    layer_norm_forward(block.ln_2, a.residual.data(), a.ln_2.data(), a.ln_2_mean.data(), a.ln_2_rstd.data(), rows);
    linear_forward(block.mlp.c_fc, a.ln_2.data(), a.fc.data(), rows);
    for (std::size_t i = 0; i < a.fc.size(); ++i) a.act.data()[i] = activation_of(f, a.fc.data()[i]);
    linear_forward(block.mlp.c_proj, a.act.data(), a.out.data(), rows);
    add_rows(a.out.data(), a.residual.data(), rows * c);
}

// d_residual holds the gradient of the block's output on entry, of its input on return.
template <class Block, class Activations, class Buffers>
void block_backward(const Block& block, gradient_ref<Block> grads, const typename Block::value_type* x,
                    const Activations& a, Buffers& s, std::size_t batch, std::size_t time) {
    using T = typename Block::value_type;
    using Attention = typename Block::attention_type;
    using MLP = typename Block::mlp_type;
    const std::size_t rows = batch * time;
    constexpr auto f = activation_kind_of<typename MLP::activation_type>();
    const auto mlp = grads.of(&Block::mlp);
    const auto attn = grads.of(&Block::attn);
    auto zeroed = [](auto& t) { std::fill(t.elements().begin(), t.elements().end(), T(0)); return t.data(); };
    // out = residual + mlp(ln_2(residual)): the residual's gradient is d_residual itself, plus the MLP's.
    linear_backward(block.mlp.c_proj, mlp.of(&MLP::c_proj), a.act.data(), s.d_residual.data(), zeroed(s.d_act), rows);
    kernels::activation_backward(f, a.fc.data(), s.d_act.data(), zeroed(s.d_fc), a.fc.size());
    linear_backward(block.mlp.c_fc, mlp.of(&MLP::c_fc), a.ln_2.data(), s.d_fc.data(), zeroed(s.d_ln), rows);
    layer_norm_backward(block.ln_2, grads.of(&Block::ln_2), s.d_ln.data(), a.residual.data(), a.ln_2_mean.data(),
                        a.ln_2_rstd.data(), s.d_residual.data(), rows);
    // residual = x + attn(ln_1(x)).
    linear_backward(block.attn.c_proj, attn.of(&Attention::c_proj), a.atty.data(), s.d_residual.data(),
                    zeroed(s.d_atty), rows);
    const auto problem = gpt_attention<Block>(batch, time, a.qkv.data());
    T* d_qkv = zeroed(s.d_qkv);
    constexpr std::size_t c = Block::channel_dim::extent;
    kernels::attention_backward(problem, a.atty.data(), a.lse.data(), s.d_atty.data(),
                                {d_qkv, problem.q_layout, d_qkv + c, problem.k_layout, d_qkv + 2 * c, problem.v_layout});
    linear_backward(block.attn.c_attn, attn.of(&Attention::c_attn), a.ln_1.data(), d_qkv, zeroed(s.d_ln), rows);
    layer_norm_backward(block.ln_1, grads.of(&Block::ln_1), s.d_ln.data(), x, a.ln_1_mean.data(), a.ln_1_rstd.data(),
                        s.d_residual.data(), rows);
}

// The forward up to the logits, every activation kept in buffers.
template <class Config, class T, StaticDim B, StaticDim Time>
void gpt_forward(const models::GPT<Config, T>& model, const batch_ids<B, Time>& idx,
                 step_buffers<models::GPT<Config, T>, B, Time>& s) {
    constexpr std::size_t batch = B::extent, time = Time::extent, c = Config::n_embd, v = Config::vocab_size;
    constexpr std::size_t rows = batch * time;
    const auto& tr = model.transformer;
    for (std::size_t r = 0; r < rows; ++r) {
        const T* token = tr.wte.row(idx.data()[r], r);
        const T* position = tr.wpe.row(r % time);
        T* out = s.encoded.data() + r * c;
        for (std::size_t i = 0; i < c; ++i) out[i] = token[i] + position[i];
    }
    const T* x = s.encoded.data();
    for (std::size_t l = 0; l < Config::n_layer; ++l) {
        block_forward(tr.h[l], x, s.blocks[l], batch, time);
        x = s.blocks[l].out.data();
    }
    layer_norm_forward(tr.ln_f, x, s.ln_f.data(), s.ln_f_mean.data(), s.ln_f_rstd.data(), rows);
    // The head is tied to wte: logits = ln_f @ wte^T.
    kernels::blas::gemm(false, true, rows, v, c, T(1), s.ln_f.data(), c, tr.wte.weight.data(), c, T(0),
                        s.logits.data(), v);
}

}  // namespace detail

template <class Model, StaticDim B, StaticDim Time>
double loss(const Model& model, const batch_ids<B, Time>& idx, const batch_ids<B, Time>& targets,
            step_buffers<Model, B, Time>& buffers) {
    using Config = typename Model::config;
    detail::check_targets<Config::vocab_size>(targets, Model::vocab_dim::name.view());
    detail::gpt_forward(model, idx, buffers);
    const auto sum = kernels::cross_entropy_rows(buffers.logits.data(), targets.data(), buffers.rows,
                                                 Config::vocab_size, nullptr, 0.0);
    return sum.loss / static_cast<double>(sum.counted);
}

template <class Model, class G, StaticDim B, StaticDim Time>
    requires detail::gradients_fit<Model, G>
double forward_backward(const Model& model, const G& grads, const batch_ids<B, Time>& idx,
                        const batch_ids<B, Time>& targets, step_buffers<Model, B, Time>& s, double loss_scale) {
    using Config = typename Model::config;
    using T = typename Model::value_type;
    using Transformer = typename Model::Transformer;
    constexpr std::size_t batch = B::extent, time = Time::extent, c = Config::n_embd, v = Config::vocab_size;
    constexpr std::size_t rows = batch * time;
    detail::check_targets<v>(targets, Model::vocab_dim::name.view());
    detail::gpt_forward(model, idx, s);
    const auto& tr = model.transformer;
    const gradient_ref<Transformer> g = gradient_ref<Model>(grads.storage()).of(&Model::transformer);

    // The loss, and its gradient with respect to the logits, in place of them.
    const auto counted = [&] {
        std::size_t n = 0;
        for (std::size_t i = 0; i < targets.size(); ++i) n += targets.data()[i] != -1;
        return n;
    }();
    const auto sum = kernels::cross_entropy_rows(s.logits.data(), targets.data(), rows, v, s.logits.data(),
                                                 loss_scale / static_cast<double>(counted));
    // logits = ln_f @ wte^T: d ln_f = d logits @ wte, d wte += d logits^T ln_f.
    std::fill(s.d_ln.elements().begin(), s.d_ln.elements().end(), T(0));
    kernels::blas::gemm(false, false, rows, c, v, T(1), s.logits.data(), v, tr.wte.weight.data(), c, T(0), s.d_ln.data(), c);
    using WTE = std::remove_cvref_t<decltype(tr.wte)>;
    kernels::blas::gemm(true, false, v, c, rows, T(1), s.logits.data(), v, s.ln_f.data(), c, T(1),
                        g.of(&Transformer::wte).of(&WTE::weight).data(), c);
    std::fill(s.d_residual.elements().begin(), s.d_residual.elements().end(), T(0));
    const T* last = Config::n_layer ? s.blocks[Config::n_layer - 1].out.data() : s.encoded.data();
    detail::layer_norm_backward(tr.ln_f, g.of(&Transformer::ln_f), s.d_ln.data(), last, s.ln_f_mean.data(),
                                s.ln_f_rstd.data(), s.d_residual.data(), rows);
    const auto blocks = g.of(&Transformer::h);
    for (std::size_t l = Config::n_layer; l-- > 0;) {
        const T* x = l == 0 ? s.encoded.data() : s.blocks[l - 1].out.data();
        detail::block_backward(tr.h[l], blocks[l], x, s.blocks[l], s, batch, time);
    }
    // x = wte[idx] + wpe[t].
    embedding_backward(g.of(&Transformer::wte), idx.data(), s.d_residual.data(), rows);
    using WPE = std::remove_cvref_t<decltype(tr.wpe)>;
    T* dwpe = g.of(&Transformer::wpe).of(&WPE::weight).data();
    for (std::size_t r = 0; r < rows; ++r) detail::add_rows(dwpe + (r % time) * c, s.d_residual.data() + r * c, c);
    return sum.loss / static_cast<double>(sum.counted);
}

}  // namespace shaped::train
