// Quantized weights: decoding and prefill of a stories110M-shaped Llama (dim 768, 12 layers, 12
// heads, hidden 2048, vocab 32000, tied classifier, random weights) in F32, Q8_0 and Q4_0, and
// the matrix-vector products a decoding step is made of.
//
// The quantized models are the F32 one quantized as llama.cpp quantizes it: the random model is
// written as a llama2.c file (models::save_llama2c, into the temporary directory, where
// tools/llama_cpp_bench.sh finds it for llama.cpp's side), then loaded as
// models::llama_cpp_quantized<stories110m, F>, whose loading quantizes each weight by ggml's
// reference quantizer into the formats llama-quantize gives it (the same bytes as llama.cpp's
// files: tests/parity/llama_cpp_parity_test.cpp).
//
//   quantized/stories110m_<format>_N128   from BOS, 128 new ids, greedy, one a step through the
//                                         caches (llama-bench's tg128: a context of 128). Its
//                                         bytes: each pass reads every weight as stored (the
//                                         classifier once: it is the embedding) and the cache
//                                         so far.
//   quantized/stories110m_<format>_pp512  512 ids through the caches in one step, the last
//                                         position's logits (llama-bench's pp512).
//   quantized/matvec_<format>_R2048_C768  one (1, 768) x (768, 2048)^T product, as w1 of a layer;
//                                         f32 is OpenBLAS's sgemv of the same shape.
//
// Before timing, a case's first ids through the caches must be the argmax of a full forward
// (bench::same_as_recompute), and a matvec must equal the dequantized reference.
#include "bench_support.hpp"
#include "generation.hpp"

#include <shaped/kernels/blas.hpp>
#include <shaped/kernels/quantized_matmul.hpp>
#include <shaped/shaped.hpp>

#include <benchmark/benchmark.h>

#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

namespace models = shaped::models;
using models::token_id;
using Stories110M = models::stories110m;

// Where the random model's llama2.c file is written: tools/llama_cpp_bench.sh reads it there.
std::filesystem::path random_checkpoint() {
    return std::filesystem::temp_directory_path() / "shaped_stories110m_random.bin";
}

const models::Llama<Stories110M>& dense_model() {
    static const auto built = [] {
        shaped::Generator gen(2024);
        auto model = std::make_unique<models::Llama<Stories110M>>(gen);
        models::save_llama2c(*model, random_checkpoint());
        return model;
    }();
    return *built;
}

// The model in F: the dense one itself, or its checkpoint quantized on loading.
template <class F>
const auto& model_in() {
    if constexpr (std::is_same_v<F, shaped::f32>) {
        return dense_model();
    } else {
        static const auto built = [] {
            (void)dense_model();  // writes the checkpoint
            return models::load_llama<models::llama_cpp_quantized<Stories110M, F>>(random_checkpoint());
        }();
        return *built;
    }
}

template <class Model>
constexpr double kv_bytes_per_position =
    2.0 * Model::config::n_layers * Model::config::n_kv_heads * (Model::config::dim / Model::config::n_heads) * sizeof(float);

constexpr std::size_t generated = 128, prefilled = 512;

template <class F>
void decode_128(benchmark::State& state) {
    const auto& model = model_in<F>();
    using Model = std::remove_cvref_t<decltype(model)>;
    const std::vector<token_id> prompt{1};
    if (!bench::same_as_recompute(state, model, prompt)) return;
    for (auto _ : state) {
        auto ids = bench::generate_greedy(model, prompt, generated);
        benchmark::DoNotOptimize(ids.data());
    }
    bench::count_bytes(state, bench::generation_bytes(shaped::nn::parameter_bytes<Model>, kv_bytes_per_position<Model>,
                                                      prompt.size(), generated));
    bench::count_tokens(state, generated);
}

template <class F>
void prefill_512(benchmark::State& state) {
    const auto& model = model_in<F>();
    using Model = std::remove_cvref_t<decltype(model)>;
    using B = shaped::dim<"B", 1>;
    using Time = shaped::dim<"T">;
    const auto prompt = bench::spread_prompt(prefilled, Stories110M::vocab_size);
    shaped::Tensor<token_id, B, Time> ids{shaped::Shape<B, Time>({1, prefilled})};
    std::copy(prompt.begin(), prompt.end(), ids.data());
    auto caches = std::make_unique<typename Model::template cache_type<B>>();
    for (auto _ : state) {
        state.PauseTiming();
        for (auto& cache : *caches) cache.reset();
        state.ResumeTiming();
        const auto logits = model.next_logits(ids, *caches);
        benchmark::DoNotOptimize(logits.data());
    }
    // Every weight but the embedding and the classifier once a position; the classifier once.
    const double table = double(Stories110M::vocab_size) * Stories110M::dim;
    const double per_token = 2.0 * (shaped::nn::parameter_count<Model> - (Model::config::tied_classifier ? 1 : 2) * table);
    bench::count_flops(state, per_token * prefilled + 2.0 * Stories110M::vocab_size * Stories110M::dim);
    bench::count_tokens(state, prefilled);
}

// One decoding product of w1's shape.
constexpr std::size_t matvec_rows = 2048, matvec_cols = 768;

template <class F>
void matvec(benchmark::State& state) {
    const auto x = bench::random_floats(matvec_cols, 3);
    std::vector<float> y(matvec_rows), want(matvec_rows);
    if constexpr (std::is_same_v<F, shaped::f32>) {
        const auto w = bench::random_floats(matvec_rows * matvec_cols, 5);
        for (auto _ : state) {
            shaped::kernels::blas::gemv(false, matvec_rows, matvec_cols, 1.0f, w.data(), matvec_cols, x.data(), 1, 0.0f,
                                        y.data(), 1);
            benchmark::DoNotOptimize(y.data());
        }
        bench::count_bytes(state, double(w.size() * sizeof(float)));
    } else {
        const auto floats = bench::random_floats(matvec_rows * matvec_cols, 5);
        std::vector<typename F::block_type> blocks(matvec_rows * matvec_cols / F::block_width);
        F::quantize_row(floats, blocks);
        const shaped::kernels::quantized_weight w{F::type, blocks.data(), matvec_rows, matvec_cols};
        shaped::kernels::quantized_matmul(w, x.data(), 1, y.data());
        shaped::kernels::quantized_matmul_reference(w, x.data(), 1, want.data());
        if (!bench::same_numbers(state, y.data(), want.data(), y.size())) return;
        for (auto _ : state) {
            shaped::kernels::quantized_matmul(w, x.data(), 1, y.data());
            benchmark::DoNotOptimize(y.data());
        }
        bench::count_bytes(state, double(blocks.size() * sizeof(typename F::block_type)));
    }
    bench::count_flops(state, 2.0 * matvec_rows * matvec_cols);
}

template <class F>
void register_format(const std::string& name) {
    const std::string model = "quantized/stories110m_" + name;
    // Seconds a call: three repetitions of one call are enough to take the fastest.
    benchmark::RegisterBenchmark((model + "_N" + std::to_string(generated) + "/shaped").c_str(), decode_128<F>)
        ->Unit(benchmark::kMillisecond)
        ->Iterations(1)
        ->Repetitions(3)
        ->MeasureProcessCPUTime();
    benchmark::RegisterBenchmark((model + "_pp" + std::to_string(prefilled) + "/shaped").c_str(), prefill_512<F>)
        ->Unit(benchmark::kMillisecond)
        ->Iterations(1)
        ->Repetitions(3)
        ->MeasureProcessCPUTime();
}

template <class F>
void register_matvec(const std::string& name) {
    benchmark::RegisterBenchmark(("quantized/matvec_" + name + "_R2048_C768/shaped").c_str(), matvec<F>)
        ->Unit(benchmark::kMicrosecond)
        ->MeasureProcessCPUTime();
}

const bool registered = [] {
    register_format<shaped::f32>("f32");
    register_format<shaped::q8_0>("q8_0");
    register_format<shaped::q4_0>("q4_0");
    register_matvec<shaped::f32>("f32");
    register_matvec<shaped::q8_0>("q8_0");
    register_matvec<shaped::q4_0>("q4_0");
    register_matvec<shaped::q4_K>("q4_K");
    register_matvec<shaped::q6_K>("q6_K");
    register_matvec<shaped::f16>("f16");
    return true;
}();

}  // namespace
