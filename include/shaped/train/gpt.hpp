#pragma once
// train::trainer<models::GPT<Config, T>, B, Time>: nanoGPT's GPT's training passes (see
// train/step.hpp for the calls), as llm.c's train_gpt2.c writes them. A block, forward (x its
// input, every buffer (B, T, ...)):
//
//   ln_1 = LayerNorm(x)                  keeping each row's mean and 1/std
//   qkv = ln_1 @ c_attn^T + b            (B, T, 3C): the heads are read in place from it
//   atty = attention(q, k, v)            (B, T, C) merged heads, keeping each query's logsumexp
//   residual = x + atty @ c_proj^T + b
//   ln_2 = LayerNorm(residual)
//   fc = ln_2 @ c_fc^T + b,  act = GELU(fc)
//   out = residual + act @ mlp.c_proj^T + b
//
// and back: the gradient of the residual stream, d_residual, flows through every block, each
// branch adding its input's gradient into it.

#include <shaped/kernels/attention_backward.hpp>
#include <shaped/kernels/rows_backward.hpp>
#include <shaped/models/gpt.hpp>
#include <shaped/train/layers.hpp>
#include <shaped/train/step.hpp>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace shaped::train {

namespace detail {

template <class Activation>
constexpr kernels::activation_kind activation_kind_of() {
    if constexpr (std::is_same_v<Activation, nn::activation::gelu_tanh>) return kernels::activation_kind::gelu_tanh;
    else return kernels::activation_kind::gelu;
}

}  // namespace detail

template <class Config, class T, StaticDim B, StaticDim Time>
class trainer<models::GPT<Config, T>, B, Time> : public trainer_base<trainer<models::GPT<Config, T>, B, Time>,
                                                                     models::GPT<Config, T>, B, Time> {
    using Model = models::GPT<Config, T>;
    using Base = trainer_base<trainer, Model, B, Time>;
    static_assert(detail::batch_fits_context<Time, typename Model::context_dim>,
                  "shaped::train::trainer: " SHAPED_RULE_BATCH_FITS_CONTEXT);
    using Transformer = typename Model::Transformer;
    using Block = typename Model::block_type;
    using Attention = typename Block::attention_type;
    using MLP = typename Block::mlp_type;
    using C = typename Model::channel_dim;
    using V = typename Model::vocab_dim;
    using NH = typename Model::heads_dim;
    using QKV = typename Attention::fused_dim;
    using FF = nn::mlp_hidden<C>;
    static constexpr std::size_t rows = Base::rows;
    static constexpr auto activation = detail::activation_kind_of<typename Config::activation>();

public:
    // What one block keeps, each (B, T, ...).
    struct block_activations {
        Tensor<T, B, Time, C> ln_1, atty, residual, ln_2, out;
        Tensor<T, B, Time> ln_1_mean, ln_1_rstd, ln_2_mean, ln_2_rstd;
        Tensor<T, B, Time, QKV> qkv;
        Tensor<T, B, NH, Time> lse;
        Tensor<T, B, Time, FF> fc, act;
        static constexpr std::size_t elements = rows * (5 * C::extent + 4 + QKV::extent + NH::extent + 2 * FF::extent);
    };

    // The forward's activations, the logits (in the base) among them.
    Tensor<T, B, Time, C> encoded, ln_f;
    Tensor<T, B, Time> ln_f_mean, ln_f_rstd;
    std::array<block_activations, Config::n_layer> blocks;
    // The backward's gradients of activations, reused block after block.
    Tensor<T, B, Time, C> d_residual, d_ln, d_atty;
    Tensor<T, B, Time, QKV> d_qkv;
    Tensor<T, B, Time, FF> d_fc, d_act;

    // The bytes of the activations, and of the backward's buffers: constants of the config, B and T.
    static constexpr std::size_t activation_bytes =
        sizeof(T) * (rows * (2 * C::extent + 2 + V::extent) + Config::n_layer * block_activations::elements);
    static constexpr std::size_t gradient_scratch_bytes = sizeof(T) * rows * (3 * C::extent + QKV::extent + 2 * FF::extent);

private:
    friend Base;

    void forward(const Model& model, const batch_ids<B, Time>& idx) {
        const auto& tr = model.transformer;
        for (std::size_t r = 0; r < rows; ++r) {
            const T* token = tr.wte.row(idx.data()[r], r);
            const T* position = tr.wpe.row(r % Time::extent);
            T* out = encoded.data() + r * C::extent;
            for (std::size_t i = 0; i < C::extent; ++i) out[i] = token[i] + position[i];
        }
        const T* x = encoded.data();
        for (std::size_t l = 0; l < Config::n_layer; ++l) {
            block_forward(tr.h[l], x, blocks[l]);
            x = blocks[l].out.data();
        }
        detail::norm_forward(tr.ln_f, x, ln_f.data(), ln_f_mean.data(), ln_f_rstd.data(), rows);
        // The head is tied to wte: logits = ln_f @ wte^T.
        kernels::blas::gemm(false, true, rows, V::extent, C::extent, T(1), ln_f.data(), C::extent,
                            tr.wte.weight.data(), C::extent, T(0), this->logits.data(), V::extent);
    }

    void backward(const Model& model, gradient_ref<Model> grads, const batch_ids<B, Time>& idx) {
        using WTE = std::remove_cvref_t<decltype(model.transformer.wte)>;
        using WPE = std::remove_cvref_t<decltype(model.transformer.wpe)>;
        const auto& tr = model.transformer;
        const auto g = grads.of(&Model::transformer);
        const T* dlogits = this->logits.data();
        // logits = ln_f @ wte^T: d ln_f = d logits @ wte, d wte += d logits^T ln_f.
        kernels::blas::gemm(false, false, rows, C::extent, V::extent, T(1), dlogits, V::extent, tr.wte.weight.data(),
                            C::extent, T(0), d_ln.data(), C::extent);
        kernels::blas::gemm(true, false, V::extent, C::extent, rows, T(1), dlogits, V::extent, ln_f.data(), C::extent,
                            T(1), g.of(&Transformer::wte).of(&WTE::weight).data(), C::extent);
        const T* last = blocks[Config::n_layer - 1].out.data();
        detail::norm_backward(tr.ln_f, g.of(&Transformer::ln_f), d_ln.data(), last, ln_f_mean.data(), ln_f_rstd.data(),
                              detail::zeroed(d_residual), rows);
        for (std::size_t l = Config::n_layer; l-- > 0;)
            block_backward(tr.h[l], g.of(&Transformer::h)[l], l == 0 ? encoded.data() : blocks[l - 1].out.data(), blocks[l]);
        // x = wte[idx] + wpe[t].
        embedding_backward(g.of(&Transformer::wte), idx.data(), d_residual.data(), rows);
        T* dwpe = g.of(&Transformer::wpe).of(&WPE::weight).data();
        for (std::size_t r = 0; r < rows; ++r)
            detail::add_rows(dwpe + (r % Time::extent) * C::extent, d_residual.data() + r * C::extent, C::extent);
    }

    // The attention of a block's fused qkv (B, T, 3C) into the merged heads (B, T, C).
    static kernels::attention_training_problem<T> attention_problem(const T* qkv) {
        constexpr auto c = static_cast<std::ptrdiff_t>(C::extent);
        constexpr auto hs = static_cast<std::ptrdiff_t>(Block::head_size_dim::extent);
        constexpr auto t = static_cast<std::ptrdiff_t>(Time::extent);
        constexpr kernels::heads_layout parts{t * 3 * c, hs, 3 * c};
        return {.batch = B::extent, .heads = NH::extent, .kv_heads = NH::extent, .time = Time::extent,
                .head_size = Block::head_size_dim::extent, .scale = nn::attention_scale<typename Block::head_size_dim, T>,
                .window = std::nullopt, .q = qkv, .q_layout = parts, .k = qkv + c, .k_layout = parts, .v = qkv + 2 * c,
                .v_layout = parts, .out_layout = {t * c, hs, c}};
    }

    static void block_forward(const Block& block, const T* x, block_activations& a) {
        detail::norm_forward(block.ln_1, x, a.ln_1.data(), a.ln_1_mean.data(), a.ln_1_rstd.data(), rows);
        linear_forward(block.attn.c_attn, a.ln_1.data(), a.qkv.data(), rows);
        kernels::attention_forward(attention_problem(a.qkv.data()), a.atty.data(), a.lse.data());
        linear_forward(block.attn.c_proj, a.atty.data(), a.residual.data(), rows);
        detail::add_rows(a.residual.data(), x, rows * C::extent);
        detail::norm_forward(block.ln_2, a.residual.data(), a.ln_2.data(), a.ln_2_mean.data(), a.ln_2_rstd.data(), rows);
        linear_forward(block.mlp.c_fc, a.ln_2.data(), a.fc.data(), rows);
        for (std::size_t i = 0; i < a.fc.size(); ++i) a.act.data()[i] = detail::activation_of(activation, a.fc.data()[i]);
        linear_forward(block.mlp.c_proj, a.act.data(), a.out.data(), rows);
        detail::add_rows(a.out.data(), a.residual.data(), rows * C::extent);
    }

    // d_residual holds the gradient of the block's output on entry, of its input x on return.
    void block_backward(const Block& block, gradient_ref<Block> g, const T* x, const block_activations& a) {
        const auto mlp = g.of(&Block::mlp);
        const auto attn = g.of(&Block::attn);
        // out = residual + mlp(ln_2(residual)): the residual's gradient is d_residual, plus the MLP's.
        linear_backward(block.mlp.c_proj, mlp.of(&MLP::c_proj), a.act.data(), d_residual.data(), detail::zeroed(d_act), rows);
        kernels::activation_backward(activation, a.fc.data(), d_act.data(), detail::zeroed(d_fc), a.fc.size());
        linear_backward(block.mlp.c_fc, mlp.of(&MLP::c_fc), a.ln_2.data(), d_fc.data(), detail::zeroed(d_ln), rows);
        detail::norm_backward(block.ln_2, g.of(&Block::ln_2), d_ln.data(), a.residual.data(), a.ln_2_mean.data(),
                              a.ln_2_rstd.data(), d_residual.data(), rows);
        // residual = x + attn(ln_1(x)).
        linear_backward(block.attn.c_proj, attn.of(&Attention::c_proj), a.atty.data(), d_residual.data(),
                        detail::zeroed(d_atty), rows);
        const auto problem = attention_problem(a.qkv.data());
        T* dqkv = detail::zeroed(d_qkv);
        kernels::attention_backward(problem, a.atty.data(), a.lse.data(), d_atty.data(),
                                    {dqkv, problem.q_layout, dqkv + C::extent, problem.k_layout, dqkv + 2 * C::extent,
                                     problem.v_layout});
        linear_backward(block.attn.c_attn, attn.of(&Attention::c_attn), a.ln_1.data(), dqkv, detail::zeroed(d_ln), rows);
        detail::norm_backward(block.ln_1, g.of(&Block::ln_1), d_ln.data(), x, a.ln_1_mean.data(), a.ln_1_rstd.data(),
                              d_residual.data(), rows);
    }
};

}  // namespace shaped::train
