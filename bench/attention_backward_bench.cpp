// The fused causal attention backward alone (kernels::attention_backward) over contiguous
// (B, NH, T, HS) queries, keys and values, given the forward's out and log-sum-exp (one
// kernels::attention keeping the log-sum-exp, outside the timing) and a random gradient of out:
// dq, dk and dv.
//
// Its flops are five products over the causal half, T(T+1)/2 query-key pairs per head of HS
// multiply-adds (2 flops) each: the scores q k^T again, dP = dout v^T, dv = P^T dout,
// dq = dS k and dk = dS^T q (the forward is two: q k^T and P v). report.py compares them with the
// sgemm ceiling.
//
// The baseline is the same backward from the same inputs as one writes it without a fused
// kernel: per head, a T x T matrix of probabilities P = exp(scale q k^T - lse) (cblas, masked),
// dP = dout v^T, dS = P (dP - rowsum(dout * out)), then dv = P^T dout, dq = scale dS k,
// dk = scale dS^T q, each one cblas_sgemm over the whole square. Before timing each side's
// dq, dk and dv must equal the other's.
#include "bench_support.hpp"

#include <shaped/shaped.hpp>

#include <cblas.h>

#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

namespace {

template <std::size_t Batch, std::size_t Heads, std::size_t Time, std::size_t HeadSize>
struct backward_case {
    static constexpr std::size_t heads = Batch * Heads, t = Time, hs = HeadSize, n = heads * t * hs;

    static std::string name() {
        return "attention_backward/B" + std::to_string(Batch) + "_NH" + std::to_string(Heads) + "_T" +
               std::to_string(Time) + "_HS" + std::to_string(HeadSize);
    }
    // Five products over the causal half, per head.
    static double flops() { return heads * 5.0 * 2.0 * hs * t * (t + 1) / 2; }

    const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
    const std::vector<float> q = bench::random_floats(n, 11), k = bench::random_floats(n, 12),
                             v = bench::random_floats(n, 13), dout = bench::random_floats(n, 14);
    std::vector<float> out = std::vector<float>(n), lse = std::vector<float>(heads * t);

    // Every head its own (B, NH, T, HS), contiguous.
    template <class P>
    static shaped::kernels::batched_matrices<P> heads_of(P* data) {
        constexpr auto time = static_cast<std::ptrdiff_t>(t), size = static_cast<std::ptrdiff_t>(hs);
        constexpr shaped::kernels::heads_layout contiguous{static_cast<std::ptrdiff_t>(Heads) * time * size, time * size,
                                                           size};
        return shaped::kernels::grouped_heads(data, contiguous, t, hs, 1, false);
    }

    // The forward's problem, its out and lse filled once.
    const shaped::kernels::attention_problem<float> problem = [this] {
        const shaped::kernels::attention_problem<float> p{
            .q = heads_of(q.data()), .k = heads_of(k.data()), .v = heads_of(v.data()), .out = heads_of(out.data()),
            .lse = lse.data(), .scale = scale, .sees = {true, 0}, .batch_rank = 3, .batch_extents = {Batch, Heads, 1}};
        shaped::kernels::attention(p);
        return p;
    }();

    // dq, dk, dv (each n) += the gradients.
    void shaped_backward(float* dq, float* dk, float* dv) const {
        shaped::kernels::attention_backward(problem, dout.data(), {heads_of(dq), heads_of(dk), heads_of(dv)});
    }

    // dq, dk, dv (each n) = the gradients; probabilities and dprobabilities are T x T scratch.
    void baseline_backward(float* dq, float* dk, float* dv, std::vector<float>& probabilities,
                           std::vector<float>& dprobabilities) const {
        float* p = probabilities.data();
        float* dp = dprobabilities.data();
        for (std::size_t m = 0; m < heads; ++m) {
            const std::size_t at = m * t * hs;
            const float *qh = q.data() + at, *kh = k.data() + at, *vh = v.data() + at;
            const float *oh = out.data() + at, *doh = dout.data() + at;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, t, t, hs, scale, qh, hs, kh, hs, 0.0f, p, t);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, t, t, hs, 1.0f, doh, hs, vh, hs, 0.0f, dp, t);
            for (std::size_t i = 0; i < t; ++i) {
                float* row = p + i * t;
                float* drow = dp + i * t;
                const float l = lse[m * t + i];
                float d = 0;
                for (std::size_t c = 0; c < hs; ++c) d += doh[i * hs + c] * oh[i * hs + c];
                for (std::size_t j = 0; j <= i; ++j) {
                    row[j] = std::exp(row[j] - l);
                    drow[j] = row[j] * (drow[j] - d);
                }
                std::fill(row + i + 1, row + t, 0.0f);
                std::fill(drow + i + 1, drow + t, 0.0f);
            }
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, t, hs, t, 1.0f, p, t, doh, hs, 0.0f, dv + at, hs);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, t, hs, t, scale, dp, t, kh, hs, 0.0f, dq + at, hs);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, t, hs, t, scale, dp, t, qh, hs, 0.0f, dk + at, hs);
        }
    }
};

// Each of got's three gradients against want's.
bool same_gradients(benchmark::State& state, const std::vector<float> (&got)[3], const std::vector<float> (&want)[3]) {
    for (int i = 0; i < 3; ++i)
        if (!bench::same_numbers(state, got[i].data(), want[i].data(), want[i].size())) return false;
    return true;
}

template <class Case>
void backward_shaped(benchmark::State& state) {
    const Case c;
    std::vector<float> p(Case::t * Case::t), dp(Case::t * Case::t);
    std::vector<float> want[3] = {std::vector<float>(Case::n), std::vector<float>(Case::n), std::vector<float>(Case::n)};
    std::vector<float> got[3] = {std::vector<float>(Case::n), std::vector<float>(Case::n), std::vector<float>(Case::n)};
    c.baseline_backward(want[0].data(), want[1].data(), want[2].data(), p, dp);
    c.shaped_backward(got[0].data(), got[1].data(), got[2].data());
    if (!same_gradients(state, got, want)) return;
    // The gradients add up over the iterations, as a model's do over its layers; what they
    // hold does not change the work.
    for (auto _ : state) {
        c.shaped_backward(got[0].data(), got[1].data(), got[2].data());
        benchmark::DoNotOptimize(got[0].data());
        benchmark::ClobberMemory();
    }
    bench::count_flops(state, Case::flops());
}

template <class Case>
void backward_baseline(benchmark::State& state) {
    const Case c;
    std::vector<float> p(Case::t * Case::t), dp(Case::t * Case::t);
    std::vector<float> want[3] = {std::vector<float>(Case::n), std::vector<float>(Case::n), std::vector<float>(Case::n)};
    std::vector<float> got[3] = {std::vector<float>(Case::n), std::vector<float>(Case::n), std::vector<float>(Case::n)};
    c.shaped_backward(want[0].data(), want[1].data(), want[2].data());
    c.baseline_backward(got[0].data(), got[1].data(), got[2].data(), p, dp);
    if (!same_gradients(state, got, want)) return;
    for (auto _ : state) {
        c.baseline_backward(got[0].data(), got[1].data(), got[2].data(), p, dp);
        benchmark::DoNotOptimize(got[0].data());
        benchmark::ClobberMemory();
    }
    bench::count_flops(state, Case::flops());
}

template <class Case>
void register_case() {
    const std::string name = Case::name();
    benchmark::RegisterBenchmark((name + "/shaped").c_str(), backward_shaped<Case>)
        ->Unit(benchmark::kMillisecond)
        ->MeasureProcessCPUTime();
    benchmark::RegisterBenchmark((name + "/baseline").c_str(), backward_baseline<Case>)
        ->Unit(benchmark::kMillisecond)
        ->MeasureProcessCPUTime();
}

const bool registered = [] {
    register_case<backward_case<1, 12, 1024, 64>>();
    return true;
}();

}  // namespace
