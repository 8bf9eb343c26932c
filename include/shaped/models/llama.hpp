#pragma once
// models::Llama<Config, T>: the Llama architecture as llama2.c's model.py (Meta's reference)
// defines it, top to bottom:
//
//   x = tok_embeddings(idx)                (B, T, C); positions are rotary, inside attention
//   x = layers(x)                          the n_layers LlamaBlocks: RMSNorm, grouped-query
//                                          attention with rotary q and k, RMSNorm, SwiGLU
//   logits = output(norm(x))               (B, T, V); output tied to tok_embeddings, or its own
//
// Its configuration is a type (llama_config, llama2.c's ModelArgs), so every dim is static but
// T, at most the context (checked). Parameters have Meta's names ("tok_embeddings.weight",
// "layers.0.attention.wq.weight", ..., "norm.weight", "output.weight"); a tied output has none.
// It runs as GPT does, as every decoder of models/decoder.hpp (model(idx), model(idx, caches,
// counts) through every block's cache, cache_type<B> of NKV heads each, model.next_logits), with
// the same generate and shaped-run.

#include <shaped/models/decoder.hpp>
#include <shaped/nn.hpp>

#include <array>
#include <cmath>
#include <cstddef>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>

namespace shaped::models {

// llama2.c's ModelArgs as a type: dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size,
// seq_len; whether the classifier is the embedding (llama2.c's shared_classifier); the rotary
// pairing its checkpoints expect; the RMSNorms' eps as 1 / NormEpsInverse and the rotary base
// theta, whole numbers because a template parameter of clang 14 cannot be a double (1.0 / 100000
// is exactly the double 1e-5, as 1.0 / 1000000 is 1e-6). Hugging Face's rms_norm_eps 1e-6 and
// rope_theta 500000 are llama_config<..., true, rotary_pairing::halves, 1000000, 500000>.
template <std::size_t Vocab, std::size_t Context, std::size_t Layers, std::size_t Heads, std::size_t KVHeads,
          std::size_t Channels, std::size_t Hidden, bool TiedClassifier = true,
          nn::rotary_pairing Pairing = nn::rotary_pairing::adjacent, std::size_t NormEpsInverse = 100000,
          std::size_t RopeTheta = 10000>
struct llama_config {
    static_assert(Channels % Heads == 0, "shaped::models::llama_config: the heads must divide the channels");
    static constexpr std::size_t vocab_size = Vocab;
    static constexpr std::size_t seq_len = Context;
    static constexpr std::size_t n_layers = Layers;
    static constexpr std::size_t n_heads = Heads;
    static constexpr std::size_t n_kv_heads = KVHeads;
    static constexpr std::size_t dim = Channels;
    static constexpr std::size_t hidden_dim = Hidden;
    static constexpr bool tied_classifier = TiedClassifier;
    static constexpr nn::rotary_pairing rotary_pairing = Pairing;
    static_assert(NormEpsInverse > 0 && RopeTheta > 0, "shaped::models::llama_config: eps and theta must be positive");
    static constexpr double norm_eps = 1.0 / static_cast<double>(NormEpsInverse);
    static constexpr double rope_theta = static_cast<double>(RopeTheta);
};

// The TinyStories models of llama2.c (karpathy/tinyllamas).
using stories260k = llama_config<512, 512, 5, 8, 4, 64, 172>;
using stories15m = llama_config<32000, 256, 6, 6, 6, 288, 768>;
using stories110m = llama_config<32000, 1024, 12, 12, 12, 768, 2048>;

namespace detail {
// The config's weight formats (Config::weight_formats, as with_weights gives it), else dense.
template <class Config>
struct weight_formats_of {
    using type = nn::dense_weights;
};
template <class Config>
    requires requires { typename Config::weight_formats; }
struct weight_formats_of<Config> {
    using type = typename Config::weight_formats;
};
}  // namespace detail

// A config whose weights are stored in Formats (nn::dense_weights' members, by name): the
// model's shapes are Config's.
template <class Config, class Formats>
struct with_weights : Config {
    using weight_formats = Formats;
};

// What llama.cpp's llama-quantize gives each weight for a file type of F (no importance matrix):
// F, but a weight whose rows F's blocks do not divide falls back (to Q8_0 for a K-quant when 32
// divides them, else to F16), and the classifier of a Q4_0 or K-quant file is Q6_K (itself
// falling back). stories260K's ffn w2, rows of 172, is F16 in its Q8_0 and Q4_0 files. (Its
// mixes, Q4_K_M and the like, vary a kind's format by layer, which one type per kind cannot say.)
namespace detail {
template <class F, std::size_t Row>
using llama_cpp_fallback = std::conditional_t<
    Row % F::block_width == 0, F,
    std::conditional_t<F::block_width == qk_k && Row % 32 == 0, shaped::q8_0, shaped::f16>>;
}  // namespace detail

template <class Config, StorageFormat F>
struct llama_cpp_weights {
    using tok_embeddings = detail::llama_cpp_fallback<F, Config::dim>;
    using wq = detail::llama_cpp_fallback<F, Config::dim>;
    using wk = detail::llama_cpp_fallback<F, Config::dim>;
    using wv = detail::llama_cpp_fallback<F, Config::dim>;
    using wo = detail::llama_cpp_fallback<F, Config::dim>;
    using w1 = detail::llama_cpp_fallback<F, Config::dim>;
    using w2 = detail::llama_cpp_fallback<F, Config::hidden_dim>;
    using w3 = detail::llama_cpp_fallback<F, Config::dim>;
    using output = detail::llama_cpp_fallback<
        std::conditional_t<std::is_same_v<F, shaped::q4_0> || F::block_width == qk_k, shaped::q6_K, F>, Config::dim>;
};

// Config as llama.cpp's llama-quantize writes it in F. Its converter writes a tied classifier as
// a copy of the embedding, which the quantizer may store in another format: then the classifier
// is its own weight.
template <class Config, StorageFormat F>
struct llama_cpp_quantized : with_weights<Config, llama_cpp_weights<Config, F>> {
    static constexpr bool tied_classifier =
        Config::tied_classifier && std::is_same_v<typename llama_cpp_weights<Config, F>::output,
                                                  typename llama_cpp_weights<Config, F>::tok_embeddings>;
};

template <class Config, class T = float>
class Llama : public decoder<Llama<Config, T>, Config::n_layers> {
public:
    static constexpr std::string_view name = "shaped::models::Llama";
    using config = Config;
    using value_type = T;
    using vocab_dim = dim<"V", Config::vocab_size>;
    using context_dim = dim<"P", Config::seq_len>;
    using channel_dim = dim<"C", Config::dim>;
    using heads_dim = dim<"NH", Config::n_heads>;
    using kv_heads_dim = dim<"NKV", Config::n_kv_heads>;
    using head_size_dim = dim<"HS", Config::dim / Config::n_heads>;
    using hidden_dim = dim<"FF", Config::hidden_dim>;
    using weight_formats = typename detail::weight_formats_of<Config>::type;
    using position_type = nn::rotary_encoding<head_size_dim, Config::rotary_pairing>;
    using block_type = nn::LlamaBlock<channel_dim, heads_dim, kv_heads_dim, head_size_dim, hidden_dim, position_type, T,
                                      nn::no_window, weight_formats>;
    using layers_type = nn::Stack<block_type, Config::n_layers>;
    using output_type =
        std::conditional_t<Config::tied_classifier, nn::absent,
                           nn::Linear<channel_dim, vocab_dim, false, T, typename weight_formats::output>>;
    // The caches a batch of B rows decodes with, one per block, each as long as the context.
    template <StaticDim B>
    using cache_type = typename layers_type::template cache_type<B, context_dim>;

    // Parameters zero-filled, to be loaded.
    Llama() { configure(); }
    // model.py's initialisation: every matrix N(0, 0.02), w3 and wo N(0, 0.02 / sqrt(2
    // n_layers)), RMSNorm weights 1.
    explicit Llama(Generator& gen);

    BOOST_HANA_DEFINE_STRUCT(Llama,
        (nn::Embedding<vocab_dim, channel_dim, T, typename weight_formats::tok_embeddings>, tok_embeddings),
        (layers_type, layers),
        (nn::RMSNorm<channel_dim, T>, norm),
        (output_type, output));

private:
    friend class decoder<Llama, Config::n_layers>;

    // The config's eps and theta, in every norm and attention.
    void configure();

    const layers_type& blocks() const { return layers; }

    // tok_embeddings(ids) for the first counts[b] positions of row b; 0 after. The positions are
    // rotary, applied in attention: the starts are not needed here.
    template <class Ids, std::size_t Batch>
    auto embed(const Ids& ids, const std::array<std::size_t, Batch>& starts, const std::array<std::size_t, Batch>& counts) const;

    // (..., C) -> (..., V)
    template <class X>
    auto logits(const X& x) const {
        if constexpr (Config::tied_classifier) return eval(tok_embeddings.unembed(norm(x)));
        else return eval(output(norm(x)));
    }
};

// ---- implementation ------------------------------------------------------------------------

template <class Config, class T>
Llama<Config, T>::Llama(Generator& gen) {
    static_assert(std::is_same_v<weight_formats, nn::dense_weights>,
                  "shaped::models::Llama: model.py's initialisation draws float weights; a quantized model is loaded");
    const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(Config::n_layers));
    for (const nn::parameter_slot& parameter : nn::parameter_list(*this)) {
        const std::span<T> elements = parameter.elements<T>();
        if (parameter.rank == 2) {
            gen.fill_normal(elements);
            const bool residual = parameter.name.ends_with("w3.weight") || parameter.name.ends_with("wo.weight");
            const T scale = static_cast<T>(residual ? residual_std : 0.02);
            for (T& value : elements) value *= scale;
        } else {
            std::fill(elements.begin(), elements.end(), T(1));
        }
    }
    configure();
}

template <class Config, class T>
void Llama<Config, T>::configure() {
    for (block_type& block : layers) {
        block.attention.position().theta = Config::rope_theta;
        block.attention_norm.eps = Config::norm_eps;
        block.ffn_norm.eps = Config::norm_eps;
    }
    norm.eps = Config::norm_eps;
}

template <class Config, class T>
template <class Ids, std::size_t Batch>
auto Llama<Config, T>::embed(const Ids& ids, const std::array<std::size_t, Batch>&,
                             const std::array<std::size_t, Batch>& counts) const {
    using B = dim_at<0, dims_of<Ids>>;
    using Time = dim_at<1, dims_of<Ids>>;
    constexpr std::size_t channels = Config::dim;
    const std::size_t n = ids.extents()[1];
    if constexpr (!Ids::owns_storage) {
        // Ids being differentiated (train/traced.hpp), in the full forward: the rows as an
        // expression, recorded, whose derivative adds into the table's rows.
        (void)counts;
        return eval(tok_embeddings(ids));
    } else {
        Tensor<T, B, Time, channel_dim> x{Shape<B, Time, channel_dim>({Batch, n, channels})};
        for (std::size_t b = 0; b < Batch; ++b)
            for (std::size_t t = 0; t < n; ++t) {
                T* out = x.data() + (b * n + t) * channels;
                // The ids at padding positions may be anything: they are not read.
                if (t >= counts[b]) std::fill_n(out, channels, T(0));
                else tok_embeddings.copy_row(ids(b, t), b * n + t, out);
            }
        return x;
    }
}

}  // namespace shaped::models
