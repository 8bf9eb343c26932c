// The backward row kernels (kernels/rows_backward.hpp): every gradient in double against central
// finite differences of a scalar loss sum(out * R), R fixed and random; float against double;
// gradients added into pre-filled buffers (cross-entropy's written), or written over NaN; the saving
// layer norm bit for bit against layer_norm_rows; cross-entropy against a naive log-softmax;
// AdamW's update and the squared norm against naive loops.

#include <shaped/kernels/rows.hpp>
#include <shaped/kernels/rows_backward.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

namespace k = shaped::kernels;

const std::size_t row_lengths[] = {1, 2, 7, 64, 100};

std::vector<double> uniform(std::size_t n, double lo, double hi, std::uint32_t seed) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<double> dist(lo, hi);
    std::vector<double> v(n);
    for (double& x : v) x = dist(gen);
    return v;
}

template <class T>
std::vector<T> as(const std::vector<double>& v) {
    return std::vector<T>(v.begin(), v.end());
}

std::vector<double> minus(const std::vector<double>& a, const std::vector<double>& b) {
    std::vector<double> d(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) d[i] = a[i] - b[i];
    return d;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
    double s = 0;
    for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
    return s;
}

// The worst of |got - want| / max(1, |want|), and where it is.
struct miss {
    double error = 0;
    std::size_t at = 0;
};
miss worst(const std::vector<double>& got, const std::vector<double>& want) {
    REQUIRE(got.size() == want.size());
    miss m;
    for (std::size_t i = 0; i < got.size(); ++i) {
        const double e = std::abs(got[i] - want[i]) / std::max(1.0, std::abs(want[i]));
        if (!(e <= m.error)) m = {e, i};  // a NaN is the worst
    }
    return m;
}

void require_close(const char* what, const std::vector<double>& got, const std::vector<double>& want, double tol) {
    const miss m = worst(got, want);
    INFO(what << ": element " << m.at << " of " << got.size() << ", got " << got[m.at] << ", want " << want[m.at]);
    REQUIRE(m.error <= tol);
}

// The central difference (loss(v + h e_i) - loss(v - h e_i)) / 2h for every element i of v.
std::vector<double> finite_differences(std::vector<double>& v, const std::function<double()>& loss) {
    constexpr double h = 1e-6;
    std::vector<double> g(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) {
        const double kept = v[i];
        v[i] = kept + h;
        const double up = loss();
        v[i] = kept - h;
        const double down = loss();
        v[i] = kept;
        g[i] = (up - down) / (2 * h);
    }
    return g;
}

// Central differences of a double loss of sums of a few hundred terms near 1: good to ~1e-9.
constexpr double fd_tol = 1e-7;
constexpr double float_tol = 5e-6;

// ---- layer norm ----------------------------------------------------------------------------

constexpr double ln_eps = 1e-5;

struct layer_norm_case {
    std::size_t rows, n;
    bool centered, biased;
    std::vector<double> x, weight, bias, dout;
};

layer_norm_case make_layer_norm_case(std::size_t rows, std::size_t n, bool centered, bool biased) {
    const auto seed = static_cast<std::uint32_t>(rows * 1000 + n * 4 + centered * 2 + biased);
    return {rows,
            n,
            centered,
            biased,
            uniform(rows * n, -1.5, 2.5, seed),
            uniform(n, 0.5, 1.5, seed + 1),
            uniform(n, -0.5, 0.5, seed + 2),
            uniform(rows * n, -1, 1, seed + 3)};
}

struct layer_norm_grads {
    std::vector<double> din, dweight, dbias;
};

// The saving forward then the backward in T, into buffers that start as `start`.
template <class T>
layer_norm_grads layer_norm_backward_in(const layer_norm_case& c, const layer_norm_grads& start) {
    const auto x = as<T>(c.x), weight = as<T>(c.weight), bias = as<T>(c.bias), dout = as<T>(c.dout);
    std::vector<T> out(c.rows * c.n), mean(c.rows), rstd(c.rows);
    k::layer_norm_rows_saving(x.data(), out.data(), c.rows, c.n, weight.data(), c.biased ? bias.data() : nullptr,
                              ln_eps, c.centered, c.centered ? mean.data() : nullptr, rstd.data());
    auto din = as<T>(start.din), dweight = as<T>(start.dweight), dbias = as<T>(start.dbias);
    k::layer_norm_rows_backward(dout.data(), x.data(), c.rows, c.n, weight.data(),
                                c.centered ? mean.data() : nullptr, rstd.data(), c.centered, din.data(),
                                dweight.data(), c.biased ? dbias.data() : nullptr);
    return {{din.begin(), din.end()}, {dweight.begin(), dweight.end()}, {dbias.begin(), dbias.end()}};
}

layer_norm_grads prefilled(const layer_norm_case& c) {
    return {uniform(c.rows * c.n, -3, 3, 7), uniform(c.n, -3, 3, 8), uniform(c.n, -3, 3, 9)};
}

}  // namespace

TEMPLATE_TEST_CASE("layer_norm_rows_saving gives layer_norm_rows's numbers bit for bit, and each row's statistics",
                   "[rows_backward][layer_norm]", float, double) {
    using T = TestType;
    for (const std::size_t rows : {1, 3, 5})
        for (const std::size_t n : row_lengths)
            for (const bool centered : {true, false})
                for (const bool biased : {true, false}) {
                    INFO("rows " << rows << ", n " << n << ", centered " << centered << ", bias " << biased);
                    const auto c = make_layer_norm_case(rows, n, centered, biased);
                    const auto x = as<T>(c.x), weight = as<T>(c.weight), bias = as<T>(c.bias);
                    const T* b = biased ? bias.data() : nullptr;
                    const auto stride = static_cast<std::ptrdiff_t>(n);
                    std::vector<T> want(rows * n), got(rows * n), mean(rows, T(-7)), rstd(rows);
                    k::layer_norm_rows(x.data(), stride, want.data(), stride, rows, n, weight.data(), b, ln_eps,
                                       centered);
                    k::layer_norm_rows_saving(x.data(), got.data(), rows, n, weight.data(), b, ln_eps, centered,
                                              centered ? mean.data() : nullptr, rstd.data());
                    REQUIRE(got == want);
                    for (std::size_t r = 0; r < rows; ++r) {
                        double m = 0, v = 0;
                        if (centered) {
                            for (std::size_t i = 0; i < n; ++i) m += x[r * n + i];
                            m /= static_cast<double>(n);
                        }
                        for (std::size_t i = 0; i < n; ++i) v += (x[r * n + i] - m) * (x[r * n + i] - m);
                        v /= static_cast<double>(n);
                        if (centered) CHECK(mean[r] == Approx(m).margin(1e-6));
                        CHECK(rstd[r] == Approx(1.0 / std::sqrt(v + ln_eps)).epsilon(1e-6));
                    }
                    if (!centered) CHECK(mean == std::vector<T>(rows, T(-7)));  // null: never written
                }
}

TEST_CASE("layer_norm_rows_backward adds the finite differences' gradients of in, weight and bias",
          "[rows_backward][layer_norm]") {
    for (std::size_t rows = 1; rows <= 5; ++rows)
        for (const std::size_t n : row_lengths)
            for (const bool centered : {true, false})
                for (const bool biased : {true, false}) {
                    INFO("rows " << rows << ", n " << n << ", centered " << centered << ", bias " << biased);
                    auto c = make_layer_norm_case(rows, n, centered, biased);
                    const auto start = prefilled(c);
                    const auto got = layer_norm_backward_in<double>(c, start);
                    // loss = sum(out * dout): its gradient with respect to out is dout.
                    const auto loss = [&c] {
                        std::vector<double> out(c.rows * c.n);
                        const auto stride = static_cast<std::ptrdiff_t>(c.n);
                        k::layer_norm_rows(c.x.data(), stride, out.data(), stride, c.rows, c.n, c.weight.data(),
                                           c.biased ? c.bias.data() : nullptr, ln_eps, c.centered);
                        return dot(out, c.dout);
                    };
                    require_close("din", minus(got.din, start.din), finite_differences(c.x, loss), fd_tol);
                    require_close("dweight", minus(got.dweight, start.dweight), finite_differences(c.weight, loss),
                                  fd_tol);
                    if (biased)
                        require_close("dbias", minus(got.dbias, start.dbias), finite_differences(c.bias, loss),
                                      fd_tol);
                    else
                        REQUIRE(got.dbias == start.dbias);
                }
}

TEST_CASE("layer_norm_rows_backward in float meets double's within float's precision", "[rows_backward][layer_norm]") {
    for (const std::size_t rows : {1, 5, 64})
        for (const std::size_t n : {1, 7, 100, 768})
            for (const bool centered : {true, false}) {
                INFO("rows " << rows << ", n " << n << ", centered " << centered);
                auto c = make_layer_norm_case(rows, n, centered, true);
                // The same inputs for both: rounded to float first.
                for (auto* v : {&c.x, &c.weight, &c.bias, &c.dout})
                    for (double& e : *v) e = static_cast<float>(e);
                const auto start = prefilled(c);
                const auto f = layer_norm_backward_in<float>(c, start);
                const auto d = layer_norm_backward_in<double>(c, start);
                require_close("din", f.din, d.din, float_tol);
                require_close("dweight", f.dweight, d.dweight, float_tol);
                require_close("dbias", f.dbias, d.dbias, float_tol);
            }
}

// ---- activations -----------------------------------------------------------------------------

namespace {

double gelu(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh(double x) {
    return 0.5 * x * (1 + std::tanh(std::sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
}
double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }
double silu(double x) { return x * sigmoid(x); }

struct activation {
    k::activation_kind kind;
    const char* name;
    double (*forward)(double);
};
const activation activations[] = {{k::activation_kind::gelu, "gelu", gelu},
                                  {k::activation_kind::gelu_tanh, "gelu_tanh", gelu_tanh},
                                  {k::activation_kind::silu, "silu", silu}};

template <class T>
std::vector<double> activation_backward_in(k::activation_kind f, const std::vector<double>& x,
                                           const std::vector<double>& dout, const std::vector<double>& start) {
    const auto xt = as<T>(x), doutt = as<T>(dout);
    auto din = as<T>(start);
    k::activation_backward(f, xt.data(), doutt.data(), din.data(), x.size());
    return {din.begin(), din.end()};
}

}  // namespace

TEST_CASE("activation_backward adds dout times the finite differences' derivative", "[rows_backward][activation]") {
    for (const auto& a : activations)
        for (const std::size_t n : row_lengths) {
            INFO(a.name << ", n " << n);
            auto x = uniform(n, -5, 5, static_cast<std::uint32_t>(n));
            const auto dout = uniform(n, -1, 1, static_cast<std::uint32_t>(n + 1));
            const auto start = uniform(n, -3, 3, static_cast<std::uint32_t>(n + 2));
            const auto got = activation_backward_in<double>(a.kind, x, dout, start);
            const auto loss = [&] {
                double s = 0;
                for (std::size_t i = 0; i < n; ++i) s += a.forward(x[i]) * dout[i];
                return s;
            };
            require_close("din", minus(got, start), finite_differences(x, loss), fd_tol);
        }
}

TEST_CASE("activation_backward in float meets double's within float's precision", "[rows_backward][activation]") {
    for (const auto& a : activations)
        for (const std::size_t n : {1, 7, 100, 1000}) {
            INFO(a.name << ", n " << n);
            auto x = uniform(n, -8, 8, 11), dout = uniform(n, -1, 1, 12);
            for (auto* v : {&x, &dout})
                for (double& e : *v) e = static_cast<float>(e);
            const std::vector<double> start(n, 0.5);
            require_close("din", activation_backward_in<float>(a.kind, x, dout, start),
                          activation_backward_in<double>(a.kind, x, dout, start), float_tol);
        }
}

TEMPLATE_TEST_CASE("activation derivatives at known points", "[rows_backward][activation]", float, double) {
    using T = TestType;
    // Enough elements that the points land in vectors and in the scalar tail.
    const std::vector<double> x = {0, 10, -10, 1000, -1000, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10, -10, 0};
    const std::vector<double> dout(x.size(), 1.0), zero(x.size(), 0.0);
    for (const auto& a : activations) {
        INFO(a.name);
        const auto d = activation_backward_in<T>(a.kind, x, dout, zero);
        for (std::size_t i = 0; i < x.size(); ++i) {
            INFO("x = " << x[i]);
            REQUIRE(std::isfinite(d[i]));
            if (x[i] == 0) CHECK(d[i] == Approx(0.5).margin(1e-7));
            if (x[i] >= 10) CHECK(d[i] == Approx(1.0).margin(1e-3));  // silu'(10) = 1 + 4.1e-4
            if (x[i] <= -10) CHECK(d[i] == Approx(0.0).margin(1e-3));
        }
    }
    // silu'(1) = s(1) (1 + 1 - s(1)); gelu'(1) = Phi(1) + phi(1).
    const std::vector<double> one = {1};
    CHECK(activation_backward_in<T>(k::activation_kind::silu, one, one, {0})[0] ==
          Approx(sigmoid(1) * (2 - sigmoid(1))).epsilon(1e-6));
    CHECK(activation_backward_in<T>(k::activation_kind::gelu, one, one, {0})[0] ==
          Approx(0.5 * (1 + std::erf(1 / std::sqrt(2.0))) + std::exp(-0.5) / std::sqrt(2 * 3.14159265358979323846))
              .epsilon(1e-6));
}

// ---- cross-entropy ---------------------------------------------------------------------------

namespace {

// Every third row ignored, the others aimed at a target spread over the vocabulary.
std::vector<std::int64_t> targets_for(std::size_t rows, std::size_t vocab) {
    std::vector<std::int64_t> t(rows);
    for (std::size_t r = 0; r < rows; ++r)
        t[r] = r % 3 == 1 ? -1 : static_cast<std::int64_t>((r * 7919 + 3) % vocab);
    return t;
}

// The naive loss: -log_softmax(row)[target], summed over rows not ignored, with a shift by the
// row's max only so that huge logits stay finite.
double naive_loss(const std::vector<double>& logits, const std::vector<std::int64_t>& targets, std::size_t vocab) {
    double total = 0;
    for (std::size_t r = 0; r < targets.size(); ++r) {
        if (targets[r] == -1) continue;
        const double* x = logits.data() + r * vocab;
        const double max = *std::max_element(x, x + vocab);
        double sum = 0;
        for (std::size_t i = 0; i < vocab; ++i) sum += std::exp(x[i] - max);
        total += -(x[targets[r]] - max - std::log(sum));
    }
    return total;
}

template <class T>
std::pair<k::cross_entropy_sum, std::vector<double>> cross_entropy_in(const std::vector<double>& logits,
                                                                      const std::vector<std::int64_t>& targets,
                                                                      std::size_t vocab, double grad_scale) {
    const auto x = as<T>(logits);
    std::vector<T> d(logits.size(), T(123));  // written, not added to
    const auto sum = k::cross_entropy_rows(x.data(), targets.data(), targets.size(), vocab, d.data(), grad_scale);
    return {sum, {d.begin(), d.end()}};
}

const std::size_t vocabularies[] = {1, 2, 7, 64, 100, 1000};

}  // namespace

TEST_CASE("cross_entropy_rows: the naive log-softmax's loss, and dlogits its finite differences' gradient",
          "[rows_backward][cross_entropy]") {
    for (std::size_t rows = 1; rows <= 5; ++rows)
        for (const std::size_t vocab : vocabularies) {
            INFO("rows " << rows << ", vocab " << vocab);
            auto logits = uniform(rows * vocab, -4, 4, static_cast<std::uint32_t>(rows + vocab));
            const auto targets = targets_for(rows, vocab);
            const double scale = 0.37;
            const auto [sum, dlogits] = cross_entropy_in<double>(logits, targets, vocab, scale);
            const auto counted = static_cast<std::size_t>(
                std::count_if(targets.begin(), targets.end(), [](std::int64_t t) { return t != -1; }));
            REQUIRE(sum.counted == counted);
            REQUIRE(sum.loss == Approx(naive_loss(logits, targets, vocab)).epsilon(1e-13).margin(1e-13));
            const auto loss = [&] { return scale * naive_loss(logits, targets, vocab); };
            // The ignored rows' gradients are written as zeros by the kernel and by the differences.
            require_close("dlogits", dlogits, finite_differences(logits, loss), fd_tol);
        }
}

TEST_CASE("cross_entropy_rows: ignored rows are zero and not counted, and dlogits is written",
          "[rows_backward][cross_entropy]") {
    const std::size_t rows = 6, vocab = 100;
    const auto logits = uniform(rows * vocab, -3, 3, 41);
    const std::vector<std::int64_t> targets = {-1, 5, -1, -1, 99, 0};
    const auto [sum, d] = cross_entropy_in<float>(logits, targets, vocab, 1.0);
    REQUIRE(sum.counted == 3);
    REQUIRE(sum.loss == Approx(naive_loss(logits, targets, vocab)).epsilon(1e-6));
    for (std::size_t r = 0; r < rows; ++r) {
        INFO("row " << r);
        double row_sum = 0;
        for (std::size_t i = 0; i < vocab; ++i) row_sum += d[r * vocab + i];
        if (targets[r] == -1)
            REQUIRE(std::all_of(d.begin() + r * vocab, d.begin() + (r + 1) * vocab, [](double v) { return v == 0; }));
        else
            CHECK(row_sum == Approx(0).margin(1e-6));  // softmax sums to one, less the one-hot's one
    }
    // All ignored: nothing counted, no loss.
    const std::vector<std::int64_t> none(rows, -1);
    const auto [empty, zeros] = cross_entropy_in<double>(logits, none, vocab, 1.0);
    CHECK(empty.counted == 0);
    CHECK(empty.loss == 0);
    CHECK(std::all_of(zeros.begin(), zeros.end(), [](double v) { return v == 0; }));
}

TEMPLATE_TEST_CASE("cross_entropy_rows in place gives what it gives out of place, and the same loss without dlogits",
                   "[rows_backward][cross_entropy]", float, double) {
    using T = TestType;
    for (const std::size_t vocab : {1, 7, 100, 1000, 50257}) {
        INFO("vocab " << vocab);
        const std::size_t rows = 4;
        const auto logits = as<T>(uniform(rows * vocab, -10, 10, 51));
        const auto targets = targets_for(rows, vocab);
        std::vector<T> out(logits.size());
        const auto apart = k::cross_entropy_rows(logits.data(), targets.data(), rows, vocab, out.data(), 0.5);
        auto in_place = logits;
        const auto fused =
            k::cross_entropy_rows(in_place.data(), targets.data(), rows, vocab, in_place.data(), 0.5);
        const auto loss_only = k::cross_entropy_rows(logits.data(), targets.data(), rows, vocab, nullptr, 0.5);
        REQUIRE(in_place == out);
        REQUIRE(fused.loss == apart.loss);
        REQUIRE(loss_only.loss == apart.loss);
        REQUIRE(loss_only.counted == apart.counted);
        const double want = naive_loss({logits.begin(), logits.end()}, targets, vocab);
        REQUIRE(apart.loss == Approx(want).epsilon(std::is_same_v<T, float> ? 1e-6 : 1e-13));
    }
}

TEST_CASE("cross_entropy_rows in float meets double's within float's precision", "[rows_backward][cross_entropy]") {
    for (const std::size_t vocab : {7, 1000, 50257}) {
        INFO("vocab " << vocab);
        const std::size_t rows = 3;
        auto logits = uniform(rows * vocab, -10, 10, 61);
        for (double& e : logits) e = static_cast<float>(e);
        const auto targets = targets_for(rows, vocab);
        const auto f = cross_entropy_in<float>(logits, targets, vocab, 1.0);
        const auto d = cross_entropy_in<double>(logits, targets, vocab, 1.0);
        CHECK(f.first.loss == Approx(d.first.loss).epsilon(1e-6));
        require_close("dlogits", f.second, d.second, 1e-6);
    }
}

TEMPLATE_TEST_CASE("cross_entropy_rows stays finite for huge logits", "[rows_backward][cross_entropy]", float,
                   double) {
    using T = TestType;
    const std::size_t rows = 3, vocab = 100;
    const auto logits = uniform(rows * vocab, -1e4, 1e4, 71);
    const std::vector<std::int64_t> targets = {0, 50, 99};
    const auto [sum, d] = cross_entropy_in<T>(logits, targets, vocab, 1.0);
    REQUIRE(std::isfinite(sum.loss));
    REQUIRE(std::all_of(d.begin(), d.end(), [](double v) { return std::isfinite(v); }));
    const auto rounded = as<T>(logits);
    REQUIRE(sum.loss == Approx(naive_loss({rounded.begin(), rounded.end()}, targets, vocab)).epsilon(1e-6));
    // The target with the largest logit: loss near 0 and its gradient near 0.
    std::vector<double> peaked(vocab, -1e4);
    peaked[3] = 1e4;
    const auto [small, g] = cross_entropy_in<T>(peaked, {3}, vocab, 1.0);
    CHECK(small.loss == Approx(0).margin(1e-6));
    CHECK(g[3] == Approx(0).margin(1e-6));
}

// ---- writing the first gradient -------------------------------------------------------------------

TEMPLATE_TEST_CASE("overwriting backwards write every element of din, as adding into zeros gives", "[rows_backward]",
                   float, double) {
    using T = TestType;
    const T nan = std::numeric_limits<T>::quiet_NaN();
    for (const std::size_t n : row_lengths) {
        INFO("n " << n);
        const auto x = as<T>(uniform(3 * n, -4, 4, static_cast<std::uint32_t>(n + 80)));
        const auto dout = as<T>(uniform(3 * n, -1, 1, static_cast<std::uint32_t>(n + 81)));
        for (const auto& a : activations) {
            INFO(a.name);
            std::vector<T> added(x.size(), T(0)), written(x.size(), nan);
            k::activation_backward(a.kind, x.data(), dout.data(), added.data(), x.size());
            k::activation_backward(a.kind, x.data(), dout.data(), written.data(), x.size(), k::gradient_write::overwrite);
            REQUIRE(written == added);
        }
        const auto weight = as<T>(uniform(n, 0.5, 1.5, 82));
        std::vector<T> out(x.size()), mean(3), rstd(3);
        k::layer_norm_rows_saving(x.data(), out.data(), 3, n, weight.data(), nullptr, ln_eps, true, mean.data(),
                                  rstd.data());
        std::vector<T> added(x.size(), T(0)), written(x.size(), nan), dw_added(n, T(0)), dw_written(n, T(0));
        k::layer_norm_rows_backward(dout.data(), x.data(), 3, n, weight.data(), mean.data(), rstd.data(), true,
                                    added.data(), dw_added.data(), nullptr);
        k::layer_norm_rows_backward(dout.data(), x.data(), 3, n, weight.data(), mean.data(), rstd.data(), true,
                                    written.data(), dw_written.data(), nullptr, k::gradient_write::overwrite);
        REQUIRE(written == added);
        REQUIRE(dw_written == dw_added);  // the parameters' gradients still add
    }
}

// ---- the optimizer's update --------------------------------------------------------------------

TEMPLATE_TEST_CASE("adamw_update is PyTorch's single-tensor update, element by element", "[rows_backward][adamw]",
                   float, double) {
    using T = TestType;
    const k::adamw_constants c{.decay = 1 - 1e-3 * 0.1, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8,
                               .step_size = 1e-3 / (1 - 0.9 * 0.9), .correction = std::sqrt(1 - 0.95 * 0.95)};
    for (const std::size_t n : {std::size_t(1), std::size_t(7), std::size_t(64), std::size_t(1001)}) {
        INFO("n " << n);
        auto p = as<T>(uniform(n, -1, 1, 90)), m = as<T>(uniform(n, -0.1, 0.1, 91)), v = as<T>(uniform(n, 0, 0.01, 92));
        const auto g = as<T>(uniform(n, -1, 1, 93));
        auto want_p = p, want_m = m, want_v = v;
        for (std::size_t i = 0; i < n; ++i) {  // torch.optim.adamw's _single_tensor_adamw, in T
            want_p[i] *= static_cast<T>(c.decay);
            want_m[i] = want_m[i] * static_cast<T>(c.beta1) + g[i] * static_cast<T>(1 - c.beta1);
            want_v[i] = want_v[i] * static_cast<T>(c.beta2) + static_cast<T>(1 - c.beta2) * g[i] * g[i];
            want_p[i] -= static_cast<T>(c.step_size) * want_m[i] /
                         (std::sqrt(want_v[i]) / static_cast<T>(c.correction) + static_cast<T>(c.eps));
        }
        k::adamw_update(p.data(), g.data(), m.data(), v.data(), n, c);
        const double tol = std::is_same_v<T, float> ? 1e-6 : 1e-15;
        require_close("p", {p.begin(), p.end()}, {want_p.begin(), want_p.end()}, tol);
        require_close("m", {m.begin(), m.end()}, {want_m.begin(), want_m.end()}, tol);
        require_close("v", {v.begin(), v.end()}, {want_v.begin(), want_v.end()}, tol);
    }
}

TEMPLATE_TEST_CASE("sum_of_squares is the naive sum in double", "[rows_backward]", float, double) {
    using T = TestType;
    for (const std::size_t n : {std::size_t(0), std::size_t(1), std::size_t(9), std::size_t(1000)}) {
        const auto x = as<T>(uniform(n, -2, 2, static_cast<std::uint32_t>(n + 95)));
        double want = 0;
        for (const T e : x) want += static_cast<double>(e) * static_cast<double>(e);
        CHECK(k::sum_of_squares(x.data(), n) == Approx(want).epsilon(1e-14));
    }
}

TEST_CASE("add_broadcast: acc += g summed over the dims acc broadcasts along, as a naive loop adds",
          "[rows_backward][add_broadcast]") {
    // Over extents (2, 3, 5): acc and g each either hold a dim (row-major over the dims they
    // hold) or broadcast along it (stride 0); every pattern of the two, against a loop over every
    // index adding g's element into acc's.
    const std::vector<std::size_t> extents{2, 3, 5};
    for (unsigned acc_mask = 0; acc_mask < 8; ++acc_mask)
        for (unsigned g_mask = 0; g_mask < 8; ++g_mask) {
            INFO("acc holds dims " << acc_mask << ", g holds dims " << g_mask);
            const auto strides_of = [&](unsigned holds, std::size_t& size) {
                std::vector<std::ptrdiff_t> strides(3, 0);
                std::ptrdiff_t step = 1;
                for (std::size_t d = 3; d-- > 0;)
                    if (holds & (1u << d)) {
                        strides[d] = step;
                        step *= static_cast<std::ptrdiff_t>(extents[d]);
                    }
                size = static_cast<std::size_t>(step);
                return strides;
            };
            std::size_t acc_size = 0, g_size = 0;
            const auto as = strides_of(acc_mask, acc_size);
            const auto gs = strides_of(g_mask, g_size);
            const auto g = uniform(g_size, -1, 1, acc_mask * 8 + g_mask);
            auto got = uniform(acc_size, -1, 1, 100 + acc_mask);
            auto want = got;
            for (std::size_t i = 0; i < 2; ++i)
                for (std::size_t j = 0; j < 3; ++j)
                    for (std::size_t l = 0; l < 5; ++l) {
                        const auto at = [&](const std::vector<std::ptrdiff_t>& s) {
                            return static_cast<std::size_t>(s[0] * static_cast<std::ptrdiff_t>(i) +
                                                            s[1] * static_cast<std::ptrdiff_t>(j) +
                                                            s[2] * static_cast<std::ptrdiff_t>(l));
                        };
                        want[at(as)] += g[at(gs)];
                    }
            k::add_broadcast(got.data(), g.data(), extents, as, gs);
            require_close("acc", got, want, 1e-12);
        }
}
