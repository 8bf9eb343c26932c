// Section 1 of the seed chapter ("Scaled dot-product attention") written on plain xtensor and
// cblas, without shaped: the same computations as the contract program
// ../shared/contract/section1_self_attention.cpp, for tools/compile_times.sh to compile side
// by side with it. The shapes live in comments, as they would without shaped.
#include <cblas.h>
#include <xtensor/xio.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xrandom.hpp>
#include <xtensor/xtensor.hpp>
#include <xtensor/xview.hpp>

#include <array>
#include <cmath>
#include <cstddef>
#include <iostream>
#include <limits>

namespace {

// The sizes of the contract program: batch, time, channels, head size.
constexpr std::size_t B = 2, T = 4, C = 6, H = 16;

// out (rows, n) = a (rows, k) @ b, where b is (k, n), or (n, k) read transposed with CblasTrans
// (a Linear layer without bias, q @ k^T).
void matmul(const float* a, const float* b, CBLAS_TRANSPOSE b_op, float* out, std::size_t rows, std::size_t n,
            std::size_t k) {
    const int ldb = b_op == CblasTrans ? int(k) : int(n);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, b_op, int(rows), int(n), int(k), 1.0f, a, int(k), b, ldb, 0.0f, out,
                int(n));
}

// A weight (out, in) initialised as torch.nn.Linear does: uniform in +-1/sqrt(in).
xt::xtensor<float, 2> linear_weight(std::size_t out, std::size_t in) {
    const float bound = 1.0f / std::sqrt(float(in));
    return xt::random::rand<float>(std::array{out, in}, -bound, bound);
}

}  // namespace

int main() {
    xt::random::seed(1337);
    xt::xtensor<float, 3> x = xt::random::randn<float>(std::array{B, T, C});
    const auto key = linear_weight(H, C);
    const auto query = linear_weight(H, C);
    const auto value = linear_weight(H, C);

    // (B, T, C) @ (H, C)^T -> (B, T, H), all batch rows as one GEMM.
    xt::xtensor<float, 3> k = xt::empty<float>({B, T, H});
    xt::xtensor<float, 3> q = xt::empty<float>({B, T, H});
    xt::xtensor<float, 3> v = xt::empty<float>({B, T, H});
    matmul(x.data(), key.data(), CblasTrans, k.data(), B * T, H, C);
    matmul(x.data(), query.data(), CblasTrans, q.data(), B * T, H, C);

    // (B, T, H) @ (B, H, T) -> (B, T, T), one GEMM per batch row.
    xt::xtensor<float, 3> wei = xt::empty<float>({B, T, T});
    for (std::size_t b = 0; b < B; ++b)
        matmul(q.data() + b * T * H, k.data() + b * T * H, CblasTrans, wei.data() + b * T * T, T, T, H);

    // The causal mask: a position does not attend to its future.
    const xt::xtensor<float, 2> tril = xt::tril(xt::ones<float>({T, T}));
    wei = xt::where(xt::equal(tril, 0.0f), -std::numeric_limits<float>::infinity(), wei);
    // Softmax over the last axis, shifted by each row's maximum. The reductions are evaluated
    // first: lazy, they would read wei while it is being overwritten.
    const xt::xtensor<float, 3> row_max = xt::amax(wei, {2}, xt::keep_dims);
    wei = xt::exp(wei - row_max);
    const xt::xtensor<float, 3> row_sum = xt::sum(wei, {2}, xt::keep_dims);
    wei = wei / row_sum;
    std::cout << "wei[0]=\n" << xt::view(wei, 0) << "\n";

    matmul(x.data(), value.data(), CblasTrans, v.data(), B * T, H, C);
    // (B, T, T) @ (B, T, H) -> (B, T, H).
    xt::xtensor<float, 3> out = xt::empty<float>({B, T, H});
    for (std::size_t b = 0; b < B; ++b)
        matmul(wei.data() + b * T * T, v.data() + b * T * H, CblasNoTrans, out.data() + b * T * H, T, H, T);
    std::cout << "out shape=\n(" << out.shape()[0] << ", " << out.shape()[1] << ", " << out.shape()[2] << ")\n";

    // The causal mask gives future positions exactly zero weight; each row is a distribution.
    int failures = 0;
    for (std::size_t b = 0; b < B; ++b)
        for (std::size_t t = 0; t < T; ++t) {
            float row = 0.0f;
            for (std::size_t s = 0; s < T; ++s) {
                if (s > t && wei(b, t, s) != 0.0f) ++failures;
                row += wei(b, t, s);
            }
            if (std::abs(row - 1.0f) > 1e-6f) ++failures;
        }
    std::cout << "check: sum of out = " << xt::sum(out)() << ", " << failures << " failures\n";
    return failures == 0 ? 0 : 1;
}
