#pragma once
// train::trainer<models::Llama<Config, T>, B, Time>: the Llama's training passes (see
// train/step.hpp for the calls). A block, forward (x its input, every buffer (B, T, ...)):
//
//   an = RMSNorm(x)                           keeping each row's 1/rms
//   q, k, v = an @ wq^T, an @ wk^T, an @ wv^T (B, T, NH x HS), (B, T, NKV x HS) twice
//   q, k = rotary(q, k)                       at positions 0 .. T-1, in place
//   atty = attention(q, k, v)                 grouped heads read in place, keeping each
//                                             query's logsumexp
//   residual = x + atty @ wo^T
//   fn = RMSNorm(residual)
//   h1, h3 = fn @ w1^T, fn @ w3^T,  gate = silu(h1) * h3
//   out = residual + gate @ w2^T
//
// and back, d_residual flowing through every block as in the GPT's (train/gpt.hpp); the rotary
// gradients turn back by their angles.

#include <shaped/kernels/attention_backward.hpp>
#include <shaped/kernels/rows_backward.hpp>
#include <shaped/models/llama.hpp>
#include <shaped/train/layers.hpp>
#include <shaped/train/step.hpp>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace shaped::train {

template <class Config, class T, StaticDim B, StaticDim Time>
class trainer<models::Llama<Config, T>, B, Time> : public trainer_base<trainer<models::Llama<Config, T>, B, Time>,
                                                                       models::Llama<Config, T>, B, Time> {
    using Model = models::Llama<Config, T>;
    using Base = trainer_base<trainer, Model, B, Time>;
    static_assert(detail::batch_fits_context<Time, typename Model::context_dim>,
                  "shaped::train::trainer: " SHAPED_RULE_BATCH_FITS_CONTEXT);
    using Block = typename Model::block_type;
    using Attention = typename Block::attention_type;
    using FeedForward = typename Block::feed_forward_type;
    using C = typename Model::channel_dim;
    using V = typename Model::vocab_dim;
    using NH = typename Model::heads_dim;
    using NKV = typename Model::kv_heads_dim;
    using HS = typename Model::head_size_dim;
    using Q = typename Attention::queries_dim;
    using KV = typename Attention::kv_dim;
    using FF = typename Model::hidden_dim;
    static constexpr std::size_t rows = Base::rows;

public:
    // What one block keeps, each (B, T, ...).
    struct block_activations {
        Tensor<T, B, Time, C> an, residual, fn, out;
        Tensor<T, B, Time> an_rstd, fn_rstd;
        Tensor<T, B, Time, Q> q, atty;
        Tensor<T, B, Time, KV> k, v;
        Tensor<T, B, NH, Time> lse;
        Tensor<T, B, Time, FF> h1, h3, gate;
        static constexpr std::size_t elements =
            rows * (4 * C::extent + 2 + 2 * Q::extent + 2 * KV::extent + NH::extent + 3 * FF::extent);
    };

    // The forward's activations, the logits (in the base) among them.
    Tensor<T, B, Time, C> encoded, normed;
    Tensor<T, B, Time> normed_rstd;
    std::array<block_activations, Config::n_layers> blocks;
    // The backward's gradients of activations, reused block after block.
    Tensor<T, B, Time, C> d_residual, d_norm;
    Tensor<T, B, Time, Q> d_q, d_atty;
    Tensor<T, B, Time, KV> d_k, d_v;
    Tensor<T, B, Time, FF> d_h1, d_h3, d_gate;

    // The bytes of the activations, and of the backward's buffers: constants of the config, B and T.
    static constexpr std::size_t activation_bytes =
        sizeof(T) * (rows * (2 * C::extent + 1 + V::extent) + Config::n_layers * block_activations::elements);
    static constexpr std::size_t gradient_scratch_bytes =
        sizeof(T) * rows * (2 * C::extent + 2 * Q::extent + 2 * KV::extent + 3 * FF::extent);

private:
    friend Base;

    void forward(const Model& model, const batch_ids<B, Time>& idx) {
        for (std::size_t r = 0; r < rows; ++r)
            std::copy_n(model.tok_embeddings.row(idx.data()[r], r), C::extent, encoded.data() + r * C::extent);
        const T* x = encoded.data();
        for (std::size_t l = 0; l < Config::n_layers; ++l) {
            block_forward(model.layers[l], x, blocks[l]);
            x = blocks[l].out.data();
        }
        detail::norm_forward(model.norm, x, normed.data(), static_cast<T*>(nullptr), normed_rstd.data(), rows);
        if constexpr (Config::tied_classifier)
            kernels::blas::gemm(false, true, rows, V::extent, C::extent, T(1), normed.data(), C::extent,
                                model.tok_embeddings.weight.data(), C::extent, T(0), this->logits.data(), V::extent);
        else
            linear_forward(model.output, normed.data(), this->logits.data(), rows);
    }

    void backward(const Model& model, gradient_ref<Model> g, const batch_ids<B, Time>& idx) {
        using Embedding = std::remove_cvref_t<decltype(model.tok_embeddings)>;
        const T* dlogits = this->logits.data();
        if constexpr (Config::tied_classifier) {
            kernels::blas::gemm(false, false, rows, C::extent, V::extent, T(1), dlogits, V::extent,
                                model.tok_embeddings.weight.data(), C::extent, T(0), d_norm.data(), C::extent);
            kernels::blas::gemm(true, false, V::extent, C::extent, rows, T(1), dlogits, V::extent, normed.data(),
                                C::extent, T(1), g.of(&Model::tok_embeddings).of(&Embedding::weight).data(), C::extent);
        } else {
            linear_backward(model.output, g.of(&Model::output), normed.data(), dlogits, detail::zeroed(d_norm), rows);
        }
        const T* last = blocks[Config::n_layers - 1].out.data();
        detail::norm_backward(model.norm, g.of(&Model::norm), d_norm.data(), last, static_cast<const T*>(nullptr),
                              normed_rstd.data(), detail::zeroed(d_residual), rows);
        for (std::size_t l = Config::n_layers; l-- > 0;)
            block_backward(model.layers[l], g.of(&Model::layers)[l], l == 0 ? encoded.data() : blocks[l - 1].out.data(),
                           blocks[l]);
        embedding_backward(g.of(&Model::tok_embeddings), idx.data(), d_residual.data(), rows);
    }

    // Attention over a block's q (B, T, NH x HS), k and v (B, T, NKV x HS) into atty (B, T, NH x HS).
    static kernels::attention_training_problem<T> attention_problem(const T* q, const T* k, const T* v) {
        constexpr auto hs = static_cast<std::ptrdiff_t>(HS::extent);
        constexpr auto t = static_cast<std::ptrdiff_t>(Time::extent);
        constexpr auto qs = static_cast<std::ptrdiff_t>(Q::extent), kvs = static_cast<std::ptrdiff_t>(KV::extent);
        constexpr kernels::heads_layout queries{t * qs, hs, qs}, keys{t * kvs, hs, kvs};
        return {.batch = B::extent, .heads = NH::extent, .kv_heads = NKV::extent, .time = Time::extent,
                .head_size = HS::extent, .scale = nn::attention_scale<HS, T>, .window = std::nullopt,
                .q = q, .q_layout = queries, .k = k, .k_layout = keys, .v = v, .v_layout = keys,
                .out_layout = queries};
    }

    // q (B, T, NH x HS) and k (B, T, NKV x HS) as (B, heads, T, HS) views, turned by the layer's
    // rotary encoding (back, for their gradients) at positions 0 .. T-1.
    static void turn(const Attention& attention, Tensor<T, B, Time, Q>& q, Tensor<T, B, Time, KV>& k, bool back) {
        const auto qh = Attention::heads_of(q);
        const auto kh = view_of(transpose<1, 2>(split<KV, NKV, HS>(k)));
        const std::array<std::size_t, B::extent> starts{};
        if (back) attention.position().backward(qh, kh, starts);
        else attention.position()(qh, kh, starts);
    }

    static void block_forward(const Block& block, const T* x, block_activations& a) {
        const auto& attention = block.attention;
        const auto& ff = block.feed_forward;
        detail::norm_forward(block.attention_norm, x, a.an.data(), static_cast<T*>(nullptr), a.an_rstd.data(), rows);
        linear_forward(attention.wq, a.an.data(), a.q.data(), rows);
        linear_forward(attention.wk, a.an.data(), a.k.data(), rows);
        linear_forward(attention.wv, a.an.data(), a.v.data(), rows);
        turn(attention, a.q, a.k, false);
        kernels::attention_forward(attention_problem(a.q.data(), a.k.data(), a.v.data()), a.atty.data(), a.lse.data());
        linear_forward(attention.wo, a.atty.data(), a.residual.data(), rows);
        detail::add_rows(a.residual.data(), x, rows * C::extent);
        detail::norm_forward(block.ffn_norm, a.residual.data(), a.fn.data(), static_cast<T*>(nullptr), a.fn_rstd.data(), rows);
        linear_forward(ff.w1, a.fn.data(), a.h1.data(), rows);
        linear_forward(ff.w3, a.fn.data(), a.h3.data(), rows);
        for (std::size_t i = 0; i < a.gate.size(); ++i)
            a.gate.data()[i] = detail::activation_of(kernels::activation_kind::silu, a.h1.data()[i]) * a.h3.data()[i];
        linear_forward(ff.w2, a.gate.data(), a.out.data(), rows);
        detail::add_rows(a.out.data(), a.residual.data(), rows * C::extent);
    }

    // d_residual holds the gradient of the block's output on entry, of its input x on return.
    void block_backward(const Block& block, gradient_ref<Block> g, const T* x, const block_activations& a) {
        const auto& attention = block.attention;
        const auto& ff = block.feed_forward;
        const auto ga = g.of(&Block::attention);
        const auto gf = g.of(&Block::feed_forward);
        // out = residual + w2(silu(w1 fn) * w3 fn), fn = RMSNorm(residual).
        linear_backward(ff.w2, gf.of(&FeedForward::w2), a.gate.data(), d_residual.data(), detail::zeroed(d_gate), rows);
        kernels::swiglu_backward(a.h1.data(), a.h3.data(), d_gate.data(), detail::zeroed(d_h1), detail::zeroed(d_h3),
                                 a.gate.size());
        T* d_fn = detail::zeroed(d_norm);
        linear_backward(ff.w1, gf.of(&FeedForward::w1), a.fn.data(), d_h1.data(), d_fn, rows);
        linear_backward(ff.w3, gf.of(&FeedForward::w3), a.fn.data(), d_h3.data(), d_fn, rows);
        detail::norm_backward(block.ffn_norm, g.of(&Block::ffn_norm), d_fn, a.residual.data(),
                              static_cast<const T*>(nullptr), a.fn_rstd.data(), d_residual.data(), rows);
        // residual = x + wo(attention(rotary(wq an), rotary(wk an), wv an)), an = RMSNorm(x).
        linear_backward(attention.wo, ga.of(&Attention::wo), a.atty.data(), d_residual.data(), detail::zeroed(d_atty), rows);
        const auto problem = attention_problem(a.q.data(), a.k.data(), a.v.data());
        kernels::attention_backward(problem, a.atty.data(), a.lse.data(), d_atty.data(),
                                    {detail::zeroed(d_q), problem.q_layout, detail::zeroed(d_k), problem.k_layout,
                                     detail::zeroed(d_v), problem.v_layout});
        turn(attention, d_q, d_k, true);
        T* d_an = detail::zeroed(d_norm);
        linear_backward(attention.wq, ga.of(&Attention::wq), a.an.data(), d_q.data(), d_an, rows);
        linear_backward(attention.wk, ga.of(&Attention::wk), a.an.data(), d_k.data(), d_an, rows);
        linear_backward(attention.wv, ga.of(&Attention::wv), a.an.data(), d_v.data(), d_an, rows);
        detail::norm_backward(block.attention_norm, g.of(&Block::attention_norm), d_an, x, static_cast<const T*>(nullptr),
                              a.an_rstd.data(), d_residual.data(), rows);
    }
};

}  // namespace shaped::train
