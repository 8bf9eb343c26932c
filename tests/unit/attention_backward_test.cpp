// Attention for training (the one attention kernel keeping each query's log-sum-exp, the
// flash-style backward) against a naive reference in double that holds the whole T x T scores:
// sizes around the kernels' 64-wide blocks and tiles, grouped heads, sliding windows, heads read
// in place from one fused (B, T, 3C) projection. The backward also against central finite
// differences of the forward, and serial runs against parallel ones.

#include "threads_for_test.hpp"

#include <shaped/kernels/attention_backward.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <optional>
#include <random>
#include <vector>

namespace {

using shaped::kernels::attention_gradients;
using shaped::kernels::attention_problem;
using shaped::kernels::heads_layout;

struct sizes {
    std::size_t batch, heads, kv_heads, time, head_size;
    std::optional<std::size_t> window;
    // q, k and v as parts of one (B, T, (heads + 2 kv_heads) * head_size) projection, out and
    // dout as merged heads (B, T, heads * head_size); otherwise each (B, heads, T, head_size).
    bool fused;
};

// Where q, k, v and out (and their gradients, laid out alike) lie, and how long each buffer is.
struct layouts {
    heads_layout q, k, v, out;
    std::ptrdiff_t k_offset, v_offset;  // into the projection's buffer, when fused
    std::size_t projection_size, q_size, kv_size, out_size;
};

layouts layouts_of(const sizes& s) {
    const auto B = static_cast<std::ptrdiff_t>(s.batch), H = static_cast<std::ptrdiff_t>(s.heads),
               KV = static_cast<std::ptrdiff_t>(s.kv_heads), T = static_cast<std::ptrdiff_t>(s.time),
               HS = static_cast<std::ptrdiff_t>(s.head_size);
    layouts l{};
    if (s.fused) {
        const std::ptrdiff_t width = (H + 2 * KV) * HS;
        l.q = l.k = l.v = {T * width, HS, width};
        l.k_offset = H * HS;
        l.v_offset = (H + KV) * HS;
        l.projection_size = static_cast<std::size_t>(B * T * width);
        l.out = {T * H * HS, HS, H * HS};
    } else {
        l.q = l.out = {H * T * HS, T * HS, HS};
        l.k = l.v = {KV * T * HS, T * HS, HS};
        l.q_size = static_cast<std::size_t>(B * H * T * HS);
        l.kv_size = static_cast<std::size_t>(B * KV * T * HS);
    }
    l.out_size = static_cast<std::size_t>(B * H * T * HS);
    return l;
}

std::ptrdiff_t at(const heads_layout& l, std::size_t b, std::size_t h, std::size_t t, std::size_t i) {
    return static_cast<std::ptrdiff_t>(b) * l.batch + static_cast<std::ptrdiff_t>(h) * l.head +
           static_cast<std::ptrdiff_t>(t) * l.time + static_cast<std::ptrdiff_t>(i);
}

bool sees(const sizes& s, std::size_t i, std::size_t j) { return j <= i && (!s.window || j + *s.window > i); }

// An operand's elements as the reference reads them, in double: element (b, h, t, i).
struct operand {
    const std::vector<double>* data;
    std::ptrdiff_t offset;
    heads_layout layout;
    double operator()(std::size_t b, std::size_t h, std::size_t t, std::size_t i) const {
        return (*data)[static_cast<std::size_t>(offset + at(layout, b, h, t, i))];
    }
};

// The naive reference's results: out and the gradients (B, heads or kv_heads, T, head_size) and
// lse (B, heads, T), row-major.
struct reference {
    std::vector<double> out, lse, dq, dk, dv;
};

// The whole T x T scores of each head, its softmax, and out = P v; with dout, the gradients
// written plainly: dP = dout v^T, dv = P^T dout, dS = P (dP - rowsum(P dP)), dq = scale dS k,
// dk = scale dS^T q.
reference naive_attention(const sizes& s, double scale, operand q, operand k, operand v, const operand* dout) {
    const std::size_t T = s.time, HS = s.head_size, group = s.heads / s.kv_heads;
    reference r;
    r.out.assign(s.batch * s.heads * T * HS, 0);
    r.lse.assign(s.batch * s.heads * T, 0);
    r.dq.assign(s.batch * s.heads * T * HS, 0);
    r.dk.assign(s.batch * s.kv_heads * T * HS, 0);
    r.dv.assign(s.batch * s.kv_heads * T * HS, 0);
    std::vector<double> P(T * T), dP(T * T);
    for (std::size_t b = 0; b < s.batch; ++b)
        for (std::size_t h = 0; h < s.heads; ++h) {
            const std::size_t kv = h / group;
            for (std::size_t i = 0; i < T; ++i) {
                double max = -std::numeric_limits<double>::infinity();
                for (std::size_t j = 0; j < T; ++j) {
                    double dot = 0;
                    for (std::size_t c = 0; c < HS; ++c) dot += q(b, h, i, c) * k(b, kv, j, c);
                    P[i * T + j] = sees(s, i, j) ? scale * dot : -std::numeric_limits<double>::infinity();
                    max = std::max(max, P[i * T + j]);
                }
                double sum = 0;
                for (std::size_t j = 0; j < T; ++j) sum += P[i * T + j] = std::exp(P[i * T + j] - max);
                for (std::size_t j = 0; j < T; ++j) P[i * T + j] /= sum;
                r.lse[(b * s.heads + h) * T + i] = max + std::log(sum);
                for (std::size_t c = 0; c < HS; ++c) {
                    double acc = 0;
                    for (std::size_t j = 0; j < T; ++j) acc += P[i * T + j] * v(b, kv, j, c);
                    r.out[((b * s.heads + h) * T + i) * HS + c] = acc;
                }
            }
            if (!dout) continue;
            for (std::size_t i = 0; i < T; ++i) {
                double rowsum = 0;
                for (std::size_t j = 0; j < T; ++j) {
                    double dot = 0;
                    for (std::size_t c = 0; c < HS; ++c) dot += (*dout)(b, h, i, c) * v(b, kv, j, c);
                    dP[i * T + j] = dot;
                    rowsum += P[i * T + j] * dot;
                }
                for (std::size_t j = 0; j < T; ++j) {
                    const double dS = P[i * T + j] * (dP[i * T + j] - rowsum);
                    for (std::size_t c = 0; c < HS; ++c) {
                        r.dv[((b * s.kv_heads + kv) * T + j) * HS + c] += P[i * T + j] * (*dout)(b, h, i, c);
                        r.dq[((b * s.heads + h) * T + i) * HS + c] += scale * dS * k(b, kv, j, c);
                        r.dk[((b * s.kv_heads + kv) * T + j) * HS + c] += scale * dS * q(b, h, i, c);
                    }
                }
            }
        }
    return r;
}

std::vector<double> random_values(std::size_t n, unsigned seed) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<double> uniform(-1, 1);
    std::vector<double> x(n);
    for (auto& e : x) e = uniform(gen);
    return x;
}

template <class V>
std::vector<V> converted(const std::vector<double>& x) {
    return std::vector<V>(x.begin(), x.end());
}

// One problem's buffers in V, filled from random doubles that the reference reads as they are
// (so that the inputs of both are the same numbers: doubles rounded to V first).
template <class V>
struct problem_data {
    sizes s;
    layouts l;
    double scale;
    // When fused, projection holds q, k and v (and dprojection their gradients); otherwise q,
    // k and v are their own buffers.
    std::vector<double> projection, q, k, v, dout, dprojection, dq, dk, dv;

    problem_data(const sizes& s_, unsigned seed)
        : s(s_), l(layouts_of(s_)), scale(1 / std::sqrt(static_cast<double>(s_.head_size))) {
        const auto rounded = [](std::vector<double> x) {
            for (auto& e : x) e = static_cast<double>(static_cast<V>(e));
            return x;
        };
        if (s.fused) {
            projection = rounded(random_values(l.projection_size, seed));
            dprojection = rounded(random_values(l.projection_size, seed + 1));
        } else {
            q = rounded(random_values(l.q_size, seed));
            k = rounded(random_values(l.kv_size, seed + 2));
            v = rounded(random_values(l.kv_size, seed + 3));
            dq = rounded(random_values(l.q_size, seed + 4));
            dk = rounded(random_values(l.kv_size, seed + 5));
            dv = rounded(random_values(l.kv_size, seed + 6));
        }
        dout = rounded(random_values(l.out_size, seed + 7));
    }

    operand q_operand() const { return {s.fused ? &projection : &q, 0, l.q}; }
    operand k_operand() const { return {s.fused ? &projection : &k, s.fused ? l.k_offset : 0, l.k}; }
    operand v_operand() const { return {s.fused ? &projection : &v, s.fused ? l.v_offset : 0, l.v}; }
    operand dout_operand() const { return {&dout, 0, l.out}; }
};

// The kernel's inputs and outputs in V, over problem_data's numbers.
template <class V>
struct kernel_run {
    std::vector<V> projection, q, k, v, dout, out, lse, dprojection, dq, dk, dv;
    attention_problem<V> p;
    attention_gradients<V> grads;

    explicit kernel_run(const problem_data<V>& d)
        : projection(converted<V>(d.projection)),
          q(converted<V>(d.q)),
          k(converted<V>(d.k)),
          v(converted<V>(d.v)),
          dout(converted<V>(d.dout)),
          out(d.l.out_size, std::numeric_limits<V>::quiet_NaN()),
          lse(d.s.batch * d.s.heads * d.s.time, std::numeric_limits<V>::quiet_NaN()),
          dprojection(converted<V>(d.dprojection)),
          dq(converted<V>(d.dq)),
          dk(converted<V>(d.dk)),
          dv(converted<V>(d.dv)) {
        const sizes& s = d.s;
        const V* q_data = s.fused ? projection.data() : q.data();
        const V* k_data = s.fused ? projection.data() + d.l.k_offset : k.data();
        const V* v_data = s.fused ? projection.data() + d.l.v_offset : v.data();
        const std::size_t group = s.heads / s.kv_heads;
        const auto heads = [&](auto* data, const heads_layout& layout, bool shared_by_group) {
            return shaped::kernels::grouped_heads(data, layout, s.time, s.head_size, group, shared_by_group);
        };
        p = {.q = heads(q_data, d.l.q, false),
             .k = heads(k_data, d.l.k, true),
             .v = heads(v_data, d.l.v, true),
             .out = heads(out.data(), d.l.out, false),
             .lse = lse.data(),
             .scale = static_cast<V>(d.scale),
             .sees = {true, 0, s.window},
             .batch_rank = 3,
             .batch_extents = {s.batch, s.kv_heads, group}};
        V* dq_data = s.fused ? dprojection.data() : dq.data();
        V* dk_data = s.fused ? dprojection.data() + d.l.k_offset : dk.data();
        V* dv_data = s.fused ? dprojection.data() + d.l.v_offset : dv.data();
        grads = {heads(dq_data, d.l.q, false), heads(dk_data, d.l.k, true), heads(dv_data, d.l.v, true)};
    }

    void forward() { shaped::kernels::attention(p); }
    void backward() { shaped::kernels::attention_backward(p, dout.data(), grads); }
};

// got[b, h, t, i] (read through its layout) against want (row-major, heads of `heads`), plus
// the value that was there before when the kernel adds to it.
template <class V>
void require_close(const std::vector<V>& got, std::ptrdiff_t offset, const heads_layout& layout,
                   const std::vector<double>* before, const std::vector<double>& want, const sizes& s,
                   std::size_t heads, double tol) {
    std::size_t bad = 0;
    double worst = 0;
    for (std::size_t b = 0; b < s.batch; ++b)
        for (std::size_t h = 0; h < heads; ++h)
            for (std::size_t t = 0; t < s.time; ++t)
                for (std::size_t i = 0; i < s.head_size; ++i) {
                    const auto where = static_cast<std::size_t>(offset + at(layout, b, h, t, i));
                    const double expected = want[((b * heads + h) * s.time + t) * s.head_size + i] +
                                            (before ? (*before)[where] : 0.0);
                    const double err = std::abs(static_cast<double>(got[where]) - expected) / (1 + std::abs(expected));
                    if (!(err <= tol)) ++bad;
                    if (!(err <= worst)) worst = err;
                }
    INFO("worst relative error " << worst << ", tolerance " << tol);
    REQUIRE(bad == 0);
}

template <class V>
constexpr double forward_tolerance = std::is_same_v<V, float> ? 1e-5 : 1e-12;
template <class V>
constexpr double backward_tolerance = std::is_same_v<V, float> ? 5e-5 : 1e-12;

struct heads_pair {
    std::size_t heads, kv_heads;
};

using ref::threads_for_test;

}  // namespace

TEMPLATE_TEST_CASE("training attention meets the naive reference: out, lse and the accumulated gradients",
                   "[attention_backward]", float, double) {
    using V = TestType;
    const std::size_t time = GENERATE(1, 2, 7, 63, 64, 65, 130, 200);
    const heads_pair hp = GENERATE(heads_pair{1, 1}, heads_pair{4, 4}, heads_pair{6, 2}, heads_pair{4, 1});
    // 0 stands for no window; 1000 is wider than every T; with 127 the first query tile wholly
    // inside a window is one tile before the diagonal, the last key just seen.
    const std::size_t window = GENERATE(0, 1, 3, 64, 127, 1000);
    // Head sizes and layouts taken in turn, so that each meets every T without multiplying the
    // sweep by them.
    constexpr std::size_t head_sizes[] = {1, 3, 8, 16, 64};
    const std::size_t turn = time + hp.heads * 3 + hp.kv_heads + window;
    const sizes s{2, hp.heads, hp.kv_heads, time, head_sizes[turn % 5],
                  window ? std::optional<std::size_t>(window) : std::nullopt, turn % 2 == 0};
    CAPTURE(s.time, s.heads, s.kv_heads, s.head_size, window, s.fused);

    const problem_data<V> d(s, static_cast<unsigned>(turn));
    const operand dout = d.dout_operand();
    const reference want = naive_attention(s, d.scale, d.q_operand(), d.k_operand(), d.v_operand(), &dout);
    kernel_run<V> run(d);
    run.forward();
    require_close(run.out, 0, d.l.out, nullptr, want.out, s, s.heads, forward_tolerance<V>);
    {
        std::size_t bad = 0;
        for (std::size_t i = 0; i < want.lse.size(); ++i)
            if (!(std::abs(run.lse[i] - want.lse[i]) <= forward_tolerance<V> * (1 + std::abs(want.lse[i])))) ++bad;
        REQUIRE(bad == 0);
    }

    // The gradients' buffers start with numbers of their own, which the backward adds to.
    run.backward();
    const std::vector<V>& dq = s.fused ? run.dprojection : run.dq;
    const std::vector<V>& dk = s.fused ? run.dprojection : run.dk;
    const std::vector<V>& dv = s.fused ? run.dprojection : run.dv;
    require_close(dq, 0, d.l.q, s.fused ? &d.dprojection : &d.dq, want.dq, s, s.heads, backward_tolerance<V>);
    require_close(dk, s.fused ? d.l.k_offset : 0, d.l.k, s.fused ? &d.dprojection : &d.dk, want.dk, s, s.kv_heads,
                  backward_tolerance<V>);
    require_close(dv, s.fused ? d.l.v_offset : 0, d.l.v, s.fused ? &d.dprojection : &d.dv, want.dv, s, s.kv_heads,
                  backward_tolerance<V>);
}

TEST_CASE("training attention's gradients meet central finite differences of its forward", "[attention_backward]") {
    const std::size_t window = GENERATE(0, 5);
    const bool fused = GENERATE(false, true);
    const sizes s{2, 4, 2, 70, 8, window ? std::optional<std::size_t>(window) : std::nullopt, fused};
    CAPTURE(window, fused);
    problem_data<double> d(s, 11);
    // loss = sum(out * R), so that dout = R; the gradients start at zero.
    std::fill(d.dprojection.begin(), d.dprojection.end(), 0.0);
    std::fill(d.dq.begin(), d.dq.end(), 0.0);
    std::fill(d.dk.begin(), d.dk.end(), 0.0);
    std::fill(d.dv.begin(), d.dv.end(), 0.0);
    kernel_run<double> analytic(d);
    analytic.forward();
    analytic.backward();

    const auto loss = [&](const problem_data<double>& perturbed) {
        kernel_run<double> run(perturbed);
        run.forward();
        double sum = 0;
        for (std::size_t b = 0; b < s.batch; ++b)
            for (std::size_t h = 0; h < s.heads; ++h)
                for (std::size_t t = 0; t < s.time; ++t)
                    for (std::size_t i = 0; i < s.head_size; ++i) {
                        const auto where = static_cast<std::size_t>(at(d.l.out, b, h, t, i));
                        sum += run.out[where] * d.dout[where];
                    }
        return sum;
    };
    std::mt19937 gen(3);
    constexpr double h = 1e-6;
    for (int operand_index = 0; operand_index < 3; ++operand_index) {
        const std::size_t heads = operand_index == 0 ? s.heads : s.kv_heads;
        const heads_layout& layout = operand_index == 0 ? d.l.q : operand_index == 1 ? d.l.k : d.l.v;
        const std::ptrdiff_t offset = !fused ? 0 : operand_index == 0 ? 0 : operand_index == 1 ? d.l.k_offset : d.l.v_offset;
        std::vector<double> problem_data<double>::*data =
            fused ? &problem_data<double>::projection
                  : operand_index == 0 ? &problem_data<double>::q
                  : operand_index == 1 ? &problem_data<double>::k
                                       : &problem_data<double>::v;
        const std::vector<double>& gradient = fused               ? analytic.dprojection
                                              : operand_index == 0 ? analytic.dq
                                              : operand_index == 1 ? analytic.dk
                                                                   : analytic.dv;
        for (int trial = 0; trial < 6; ++trial) {
            const auto where = static_cast<std::size_t>(
                offset + at(layout, gen() % s.batch, gen() % heads, gen() % s.time, gen() % s.head_size));
            problem_data<double> plus = d, minus = d;
            (plus.*data)[where] += h;
            (minus.*data)[where] -= h;
            const double numeric = (loss(plus) - loss(minus)) / (2 * h);
            CAPTURE(operand_index, where, numeric, gradient[where]);
            REQUIRE(std::abs(numeric - gradient[where]) <= 1e-6 * (1 + std::abs(gradient[where])));
        }
    }
}

TEMPLATE_TEST_CASE("training attention in parallel gives the serial numbers", "[attention_backward]", float, double) {
    using V = TestType;
    // Many heads (a task each), and few (the forward's tasks then chunks of queries, with a
    // window too).
    const sizes s = GENERATE(sizes{2, 4, 2, 300, 64, std::nullopt, true}, sizes{1, 1, 1, 700, 64, std::nullopt, false},
                             sizes{2, 6, 3, 257, 32, std::size_t{100}, false},
                             sizes{1, 2, 1, 700, 32, std::size_t{100}, false});
    CAPTURE(s.batch, s.heads, s.kv_heads, s.time, s.head_size);
    const problem_data<V> d(s, 5);
    kernel_run<V> serial(d), parallel(d);
    {
        threads_for_test one(1);
        serial.forward();
        serial.backward();
    }
    {
        threads_for_test two(2);
        parallel.forward();
        parallel.backward();
    }
    const auto same = [](const std::vector<V>& a, const std::vector<V>& b) { return a == b; };
    REQUIRE(same(serial.out, parallel.out));
    REQUIRE(same(serial.lse, parallel.lse));
    REQUIRE(same(serial.dprojection, parallel.dprojection));
    REQUIRE(same(serial.dq, parallel.dq));
    REQUIRE(same(serial.dk, parallel.dk));
    REQUIRE(same(serial.dv, parallel.dv));
}

TEST_CASE("a window wider than any T is no window", "[attention_backward]") {
    const sizes s{2, 4, 2, 150, 16, std::nullopt, false};
    sizes widest = s;
    widest.window = std::numeric_limits<std::size_t>::max();
    const problem_data<float> d(s, 9);
    problem_data<float> d_widest = d;
    d_widest.s = widest;
    kernel_run<float> plain(d), windowed(d_widest);
    plain.forward();
    plain.backward();
    windowed.forward();
    windowed.backward();
    REQUIRE(plain.out == windowed.out);
    REQUIRE(plain.lse == windowed.lse);
    REQUIRE(plain.dq == windowed.dq);
    REQUIRE(plain.dk == windowed.dk);
    REQUIRE(plain.dv == windowed.dv);
}
