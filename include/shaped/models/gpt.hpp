#pragma once
// models::GPT<Config, T, BlockAs>: nanoGPT's GPT, top to bottom:
//
//   x = wte(idx) + wpe(positions)     (B, T, C): token and position embeddings
//   x = h(x)                          the n_layer blocks, in order
//   logits = ln_f(x) @ wte.weight^T   (B, T, V): lm_head is tied to wte, as in nanoGPT and GPT-2
//
// Its configuration is a type (gpt_config; GPT-2's sizes are named below), so every dim is
// static but T, the number of positions, which is at most the context (checked). Its
// parameters are named as nanoGPT's named_parameters() names them ("transformer.wte.weight",
// "transformer.h.0.attn.c_attn.weight", ...); the tied lm_head has none of its own. It runs as
// every decoder of models/decoder.hpp does: model(idx), model(idx, caches, counts) through every
// block's cache (cache_type<B>), model.next_logits(idx, caches).
//
//   cross_entropy(logits, targets)   F.cross_entropy's mean, ignore_index -1
//
// BlockAs wraps each block's type: as it is by default; GPT<Config, T, train::recomputed> trains
// with each block recomputed in the backward instead of kept (train/recomputed.hpp), the same
// parameters under the same names.

#include <shaped/models/decoder.hpp>
#include <shaped/nn.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace shaped::models {

// nanoGPT's GPTConfig, as a type. Activation is the MLP's: nanoGPT's exact GELU, or GPT-2's
// tanh approximation (Hugging Face's "gelu_new").
template <std::size_t Vocab, std::size_t Context, std::size_t Layers, std::size_t Heads, std::size_t Channels,
          class Activation = nn::activation::gelu, bool Bias = true>
struct gpt_config {
    static_assert(Channels % Heads == 0, "shaped::models::gpt_config: the heads must divide the channels");
    static constexpr std::size_t vocab_size = Vocab;
    static constexpr std::size_t block_size = Context;
    static constexpr std::size_t n_layer = Layers;
    static constexpr std::size_t n_head = Heads;
    static constexpr std::size_t n_embd = Channels;
    static constexpr bool bias = Bias;
    using activation = Activation;
};

// GPT-2's sizes, with its activation, as OpenAI's and Hugging Face's checkpoints have them.
using gpt2_124m = gpt_config<50257, 1024, 12, 12, 768, nn::activation::gelu_tanh>;
using gpt2_355m = gpt_config<50257, 1024, 24, 16, 1024, nn::activation::gelu_tanh>;
using gpt2_774m = gpt_config<50257, 1024, 36, 20, 1280, nn::activation::gelu_tanh>;

template <class Config, class T = float, template <class> class BlockAs = std::type_identity_t>
class GPT : public decoder<GPT<Config, T, BlockAs>, Config::n_layer> {
public:
    static constexpr std::string_view name = "shaped::models::GPT";
    using config = Config;
    using value_type = T;
    using vocab_dim = dim<"V", Config::vocab_size>;
    using context_dim = dim<"P", Config::block_size>;
    using channel_dim = dim<"C", Config::n_embd>;
    using heads_dim = dim<"NH", Config::n_head>;
    using head_size_dim = dim<"HS", Config::n_embd / Config::n_head>;
    using block_type = nn::Block<channel_dim, heads_dim, head_size_dim, Config::bias, T, typename Config::activation>;
    using blocks_type = nn::Stack<BlockAs<block_type>, Config::n_layer>;
    // The caches a batch of B rows decodes with, one per block, each as long as the context.
    template <StaticDim B>
    using cache_type = typename blocks_type::template cache_type<B, context_dim>;

    // nanoGPT's transformer ModuleDict.
    struct Transformer {
        BOOST_HANA_DEFINE_STRUCT(Transformer,
            (nn::Embedding<vocab_dim, channel_dim, T>, wte),
            (nn::Embedding<context_dim, channel_dim, T>, wpe),
            (blocks_type, h),
            (nn::LayerNorm<channel_dim, Config::bias, T>, ln_f));
    };

    // Parameters zero-filled, to be loaded.
    GPT() = default;
    // nanoGPT's initialisation: every matrix N(0, 0.02), the residual projections (c_proj)
    // N(0, 0.02 / sqrt(2 n_layer)), biases 0, LayerNorm weights 1.
    explicit GPT(Generator& gen);

    BOOST_HANA_DEFINE_STRUCT(GPT,
        (Transformer, transformer));

private:
    friend class decoder<GPT, Config::n_layer>;

    const blocks_type& blocks() const { return transformer.h; }

    // wte(ids) + wpe(starts[b] + t) for the first counts[b] positions of row b; 0 after.
    template <class Ids, std::size_t Batch>
    auto embed(const Ids& ids, const std::array<std::size_t, Batch>& starts, const std::array<std::size_t, Batch>& counts) const;

    // (..., C) -> (..., V)
    template <class X>
    auto logits(const X& x) const {
        return eval(matmul(transformer.ln_f(x), transformer.wte.weight.mT()));
    }
};

// F.cross_entropy(logits.view(-1, V), targets.view(-1), ignore_index=-1): the mean over every
// position whose target is not -1 of -log softmax(logits)[target]. logits (..., V), targets
// (...) integers; a target outside [0, V) other than -1 is a shape_error.
template <Expression Logits, Expression Targets>
double cross_entropy(const Logits& logits, const Targets& targets);

// ---- implementation ------------------------------------------------------------------------

namespace detail {
[[noreturn]] void throw_bad_target(long long target, std::size_t at, std::string_view vocab_name, std::size_t vocab);

// How many targets count (are not -1, F.cross_entropy's ignore_index); a shape_error for the
// first that is neither -1 nor an id of the vocabulary of `vocab` named vocab_name.
template <class Id>
std::size_t counted_targets(std::span<const Id> targets, std::string_view vocab_name, std::size_t vocab) {
    std::size_t counted = 0;
    for (std::size_t i = 0; i < targets.size(); ++i) {
        if (std::cmp_equal(targets[i], -1)) continue;
        if (std::cmp_less(targets[i], 0) || std::cmp_greater_equal(targets[i], vocab))
            throw_bad_target(static_cast<long long>(targets[i]), i, vocab_name, vocab);
        ++counted;
    }
    return counted;
}
}  // namespace detail

template <class Config, class T, template <class> class BlockAs>
GPT<Config, T, BlockAs>::GPT(Generator& gen) {
    const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(Config::n_layer));
    for (const nn::parameter_slot& parameter : nn::parameter_list(*this)) {
        const std::span<T> elements = parameter.elements<T>();
        if (parameter.rank == 2) {
            gen.fill_normal(elements);
            const T scale = static_cast<T>(parameter.name.ends_with("c_proj.weight") ? residual_std : 0.02);
            for (T& value : elements) value *= scale;
        } else if (parameter.name.ends_with(".weight")) {
            std::fill(elements.begin(), elements.end(), T(1));
        }
    }
}

template <class Config, class T, template <class> class BlockAs>
template <class Ids, std::size_t Batch>
auto GPT<Config, T, BlockAs>::embed(const Ids& ids, const std::array<std::size_t, Batch>& starts,
                           const std::array<std::size_t, Batch>& counts) const {
    using B = dim_at<0, dims_of<Ids>>;
    using Time = dim_at<1, dims_of<Ids>>;
    constexpr std::size_t channels = Config::n_embd;
    const std::size_t n = ids.extents()[1];
    if constexpr (!Ids::owns_storage) {
        // Ids being differentiated (train/traced.hpp), in the full forward: the same sum as an
        // expression, recorded, whose derivative adds into both tables' rows.
        (void)counts;
        const auto positions =
            rename<context_dim, Time>(slice<context_dim>(transformer.wpe.weight, starts[0], starts[0] + n));
        return eval(transformer.wte(ids) + positions);
    } else {
        Tensor<T, B, Time, channel_dim> x{Shape<B, Time, channel_dim>({Batch, n, channels})};
        for (std::size_t b = 0; b < Batch; ++b)
            for (std::size_t t = 0; t < n; ++t) {
                T* out = x.data() + (b * n + t) * channels;
                // The ids at padding positions may be anything: they are not read.
                if (t >= counts[b]) {
                    std::fill_n(out, channels, T(0));
                    continue;
                }
                const T* token = transformer.wte.row(ids(b, t), b * n + t);
                const T* position = transformer.wpe.row(starts[b] + t);
                for (std::size_t c = 0; c < channels; ++c) out[c] = token[c] + position[c];
            }
        return x;
    }
}

template <Expression Logits, Expression Targets>
double cross_entropy(const Logits& logits, const Targets& targets) {
    using V = dim_at<rank_of<Logits> - 1, dims_of<Logits>>;
    static_assert(rank_of<Targets> + 1 == rank_of<Logits>, "shaped::models::cross_entropy: logits are (..., V), targets (...)");
    const auto scores = eval(logits);
    const auto wanted = eval(targets);
    const std::size_t vocab = scores.extents()[rank_of<Logits> - 1];
    const std::size_t counted = detail::counted_targets(std::span(wanted.data(), wanted.size()), V::name.view(), vocab);
    double total = 0;
    for (std::size_t i = 0; i < wanted.size(); ++i) {
        const auto target = wanted.data()[i];
        if (std::cmp_equal(target, -1)) continue;
        const auto* row = scores.data() + i * vocab;
        const double top = *std::max_element(row, row + vocab);
        double sum = 0;
        for (std::size_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(row[v]) - top);
        total += top + std::log(sum) - static_cast<double>(row[target]);
    }
    return total / static_cast<double>(counted);
}

}  // namespace shaped::models
