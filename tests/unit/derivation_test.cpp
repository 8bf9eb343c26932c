// Gradients derived from the forward (train/value_and_grad.hpp): each op's and layer's
// derivative against central differences in double, through a loss written as a user writes it.
#include <shaped/shaped.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>
#include <cstddef>
#include <string>
#include <string_view>
#include <tuple>

namespace {

using namespace shaped;

using B = dim<"B", 2>;
using T = dim<"T", 3>;
using C = dim<"C", 4>;
using H = dim<"H", 5>;

// Some parameters of every shape the cases read, as a module declares them.
struct Parameters {
    BOOST_HANA_DEFINE_STRUCT(Parameters,
        (Tensor<double, C>, w),
        (Tensor<double, B, T, C>, v),
        (Tensor<double, T, T>, s),
        (nn::Linear<C, H, true, double>, fc),
        (nn::Linear<H, C, false, double>, proj),
        (nn::LayerNorm<C, true, double>, ln),
        (nn::RMSNorm<C, double>, rms));
};

Parameters random_parameters(std::uint64_t seed) {
    Generator gen(seed);
    Parameters p;
    nn::for_each_parameter(p, [&](std::string_view, auto& tensor) { gen.fill_normal(tensor.elements()); });
    return p;
}

// The sum of every element of a traced or plain value, as a 0-d value of the same kind.
template <class E>
auto total(const E& e) {
    if constexpr (rank_of<E> == 0) return eval(e);
    else return total(eval(sum<-1>(e)));
}

// The gradients value_and_grad derives for model, against (f(p + h) - f(p - h)) / 2h for every
// element of every parameter, within margin; and the loss against the plain forward's. Returns
// how many elements have a gradient above 1e-3 (that the case reaches its parameters).
template <class Model, class Loss, class... Args>
std::size_t check_model_gradients(Model& model, double margin, const Loss& loss, const Args&... args) {
    const auto [value, grads] = train::value_and_grad(loss, model, args...);
    REQUIRE(value == Approx(loss(model, args...).item()).epsilon(1e-12));
    std::size_t reached = 0;
    train::for_each_gradient(model, grads, [&](std::string_view name, auto& parameter, auto& gradient) {
        for (std::size_t i = 0; i < parameter.size(); ++i) {
            double& x = parameter.data()[i];
            const double kept = x, h = 1e-6;
            x = kept + h;
            const double up = loss(model, args...).item();
            x = kept - h;
            const double down = loss(model, args...).item();
            x = kept;
            const double numeric = (up - down) / (2 * h);
            INFO(std::string(name) << "[" << i << "]");
            REQUIRE(gradient.data()[i] == Approx(numeric).margin(margin).epsilon(1e-6));
            if (std::abs(numeric) > 1e-3) ++reached;
        }
    });
    return reached;
}

// check_model_gradients on the cases' Parameters.
template <class Loss, class... Args>
void check_gradients(const Loss& loss, const Args&... args) {
    Parameters model = random_parameters(7);
    REQUIRE(check_model_gradients(model, 1e-6, loss, args...) > 0);  // the case reaches its parameters
}

Tensor<double, B, T, C> random_input(std::uint64_t seed) {
    Generator gen(seed);
    return randn<double, B, T, C>(gen);
}

}  // namespace

TEST_CASE("derivation: arithmetic, broadcasting and unary ops", "[train][derivation]") {
    const auto x = random_input(1);
    check_gradients(
        [](const auto& m, const auto& x) {
            const auto h = eval(x * m.w + m.v - m.w / (square(m.v) + 2.0));
            return total(tanh(h) * exp(m.w * 0.5) + sigmoid(h) * sqrt(square(m.w) + 1.0) - log(square(h) + 1.0) +
                         rsqrt(abs(m.v) + 1.0) * relu(h) - (-h) * 0.25);
        },
        x);
}

TEST_CASE("derivation: activations, maximum, minimum, where and masked_fill", "[train][derivation]") {
    const auto x = random_input(2);
    check_gradients(
        [](const auto& m, const auto& x) {
            const auto h = eval(x * m.w + m.v);
            return total(gelu(h) + gelu_tanh(h * 0.5) + silu(h) + maximum(h, m.v) * 0.5 - minimum(m.w, h) +
                         where(h > 0.0, h * m.w, m.v) + masked_fill(h * 2.0, x > 0.5, 0.0));
        },
        x);
}

TEST_CASE("derivation: matmul and the Linear layer, batched and broadcast", "[train][derivation]") {
    const auto x = random_input(3);
    check_gradients(
        [](const auto& m, const auto& x) {
            const auto hidden = eval(gelu(m.fc(x)));                  // (B, T, H)
            const auto out = eval(m.proj(hidden) + x);                // (B, T, C)
            const auto mixed = eval(matmul(m.s, out));                // (T, T) @ (B, T, C): broadcast over B
            return eval(total(square(mixed) * 0.1) + total(matmul(out, mT(out)) * 0.01));
        },
        x);
}

TEST_CASE("derivation: softmax, log_softmax, tril and reductions along a dim", "[train][derivation]") {
    const auto x = random_input(4);
    check_gradients(
        [](const auto& m, const auto& x) {
            const auto h = eval(x * m.w + m.v);
            const auto scores = eval(matmul(h, h.mT()) * 0.5);       // (B, T, T)
            const auto wei = eval(softmax<-1>(masked_fill(scores, tril(ones<bool, T, T>()) == false,
                                                          -std::numeric_limits<double>::infinity())));
            const auto logp = eval(log_softmax<-1>(h));
            return eval(total(matmul(wei, h) * m.w + logp * 0.3) + total(tril(scores) * 0.1) +
                        total(mean<-1>(h) * 2.0) + total(var<-2>(h)) + total(max<-1>(h)) - total(min<T>(h) * 0.5));
        },
        x);
}

TEST_CASE("derivation: keepdim reductions, unsqueeze and squeeze", "[train][derivation]") {
    using U = dim<"U", 1>;
    const auto x = random_input(14);
    // A norm written by hand, each keepdim reduction, and a dim inserted and dropped, over a
    // traced value (a View of it) and over expressions (lazy nodes).
    const auto loss = [](const auto& m, const auto& x) {
        const auto h = eval(x * m.w + m.v);                                                   // (B, T, C)
        const auto normed = eval((h - mean<C, keepdim>(h)) / sqrt(var<-1, keepdim>(h) + 1e-5) * m.w);
        const auto extremes = eval(h * max<T, keepdim>(h) - min<0, keepdim>(h) + sum<B, keepdim>(h * m.w) * 0.5);
        const auto lifted = unsqueeze<1, U>(h);                                               // (B, U, T, C), a view of h
        const auto node = unsqueeze<-1, U>(square(h) * m.w);                                  // (B, T, C, U), a node
        return eval(total(normed * m.v) + total(extremes) * 0.1 + total(lifted * 0.3) +
                    total(squeeze<U>(node) * m.v) + total(squeeze<-1>(sum<-1, keepdim>(h * m.v))));
    };
    check_gradients(loss, x);
    // A dynamic dim: T as a run-time extent, its keepdim dim T(1).
    Generator gen(15);
    const auto xd = randn<double, B, dim<"T">, C>(gen, dim<"T">{3});
    check_gradients(
        [](const auto& m, const auto& x) {
            const auto h = eval(x * m.w + m.v);                                               // (B, T, C)
            return eval(total(square(h - mean<dim<"T">, keepdim>(h)) * m.v) + total(unsqueeze<0, U>(h) * m.w));
        },
        xd);
}

TEST_CASE("derivation: causal_attention as an op, on the fused backward and off it", "[train][derivation]") {
    const auto x = random_input(12);
    check_gradients(
        [](const auto& m, const auto& x) {
            const auto h = eval(m.fc(x));                                    // (B, T, H)
            const auto keys = eval(m.fc(sum<B>(x * m.v) * 0.5));             // (T, H): shared by the batch
            const auto values = eval(gelu(keys));
            // T queries over their own T keys: the one kernel's flash backward (keys and values
            // broadcast along B; a sliding window).
            const auto shared = eval(causal_attention(h, keys, values, 0.4));
            const auto windowed = eval(causal_attention(h, h * 0.5, h, 0.3, window<2>{}));
            // Off that kernel, the derivative of the chapter's expression: fewer queries than
            // keys, values of another width than the keys, queries broadcast along B.
            const auto later = eval(causal_attention(slice<T>(h, 1, 3), h, h, 0.5));
            const auto wide = eval(causal_attention(h, h, m.v, 0.5));
            const auto broadcast = eval(causal_attention(keys, h, h * 0.25, 0.5));
            return eval(total(shared * h) + total(windowed * keys) + total(square(later)) + total(wide * x) +
                        total(broadcast * h));
        },
        x);
}

TEST_CASE("derivation: a parameter read by no recorded expression is an error, and train::watched reads it so",
          "[train][derivation]") {
    const auto x = random_input(13);
    // total(square(m.v)) reads no differentiated value: unrecorded, it would give v no gradient.
    Parameters model = random_parameters(7);
    const auto lost = [](const auto& m, const auto& x) { return eval(total(x * m.w) + total(square(m.v))); };
    REQUIRE_THROWS_WITH(train::value_and_grad(lost, model, x),
                        Catch::Contains("the parameter `v` is read by an expression that reads no differentiated value") &&
                            Catch::Contains("train::watched(parameter)"));
    // Read as a differentiated value, it takes its gradient; a plain forward gives the same loss.
    check_gradients(
        [](const auto& m, const auto& x) { return eval(total(x * m.w) + total(square(train::watched(m.v)))); }, x);
    // Held in a variable first, and read twice: both reads' gradients reach v.
    check_gradients(
        [](const auto& m, const auto& x) {
            const auto v = train::watched(m.v);
            const auto penalty = square(v);
            return eval(total(x * m.w) + total(penalty) + total(v * x));
        },
        x);
}

TEST_CASE("derivation: LayerNorm and RMSNorm", "[train][derivation]") {
    const auto x = random_input(9);
    check_gradients(
        [](const auto& m, const auto& x) {
            const auto h = eval(x * m.w + m.v);
            const auto normed = eval(m.ln(h));
            return eval(total(square(normed) * m.v) + total(m.rms(normed * 2.0 + x) * m.w));
        },
        x);
}

TEST_CASE("derivation: transpose, permute and rename", "[train][derivation]") {
    const auto x = random_input(5);
    check_gradients(
        [](const auto& m, const auto& x) {
            const auto h = eval(x * m.w + m.v);
            const auto p = eval(permute<2, 0, 1>(h) * 2.0);                        // (C, B, T)
            const auto r = eval(rename<C, dim<"K", 4>>(h));                        // (B, T, K)
            return eval(total(permute<1, 2, 0>(p) * m.v) + total(square(r) * 0.5) + total(transpose<T, C>(h) * transpose<T, C>(m.v)));
        },
        x);
}

TEST_CASE("derivation: masks computed from traced values take no gradient", "[train][derivation]") {
    const auto x = random_input(10);
    check_gradients(
        [](const auto& m, const auto& x) {
            const auto h = eval(x * m.w + m.v);
            const auto positive = eval(h > 0.0);                        // bool: not recorded
            return eval(total(where(positive, h * m.w, square(h))) + total(masked_fill(h, positive, 1.0)));
        },
        x);
}

TEST_CASE("derivation: sum, mean, var, max and min of every element", "[train][derivation]") {
    const auto x = random_input(11);
    check_gradients(
        [](const auto& m, const auto& x) {
            const auto h = eval(x * m.w + m.v);
            return eval(sum(square(h)) * 0.5 + mean(m.fc(x)) + var(h) + max(h) * 2.0 - min(h * m.w));
        },
        x);
}

TEST_CASE("derivation: the loss is the forward's, recorded once per eval", "[train][derivation]") {
    const auto x = random_input(6);
    Parameters model = random_parameters(8);
    const auto loss = [](const auto& m, const auto& x) { return total(square(m.fc(x))); };
    const auto [value, grads] = train::value_and_grad(loss, model, x);
    REQUIRE(value == Approx(loss(model, x).item()).epsilon(1e-14));
    // Parameters the loss does not read keep zero gradients.
    for (const double g : grads.storage().proj.weight.elements()) REQUIRE(g == 0);
    for (const double g : grads.storage().w.elements()) REQUIRE(g == 0);
    // Adding into given gradients accumulates, as micro-batches do.
    train::gradients<Parameters> twice;
    train::value_and_grad(loss, model, twice, x);
    train::value_and_grad(loss, model, twice, x);
    const auto& once = grads.storage().fc.weight;
    for (std::size_t i = 0; i < once.size(); ++i)
        REQUIRE(twice.storage().fc.weight.data()[i] == Approx(2 * once.data()[i]).epsilon(1e-14));
}

TEST_CASE("derivation: a value held anew, as a layer rebinds h = f(h)", "[train][derivation]") {
    const auto x = random_input(12);
    check_gradients(
        [](const auto& m, const auto& x) {
            auto h = eval(x * m.w + m.v);
            h = h * h + m.v;
            h = silu(h);
            return total(h);
        },
        x);
}

TEST_CASE("derivation: a cast hands the gradient back in its operand's type", "[train][derivation]") {
    const auto x = random_input(14);
    Parameters model = random_parameters(15);
    // Through float and back: the derivative of a cast is the identity, cast.
    const auto direct = [](const auto& m, const auto& x) { return total(x * m.w * m.v); };
    const auto narrowed = [](const auto& m, const auto& x) {
        const auto narrow = eval(cast<float>(x * m.w));
        return total(cast<double>(narrow) * m.v);
    };
    const auto [a, expected] = train::value_and_grad(direct, model, x);
    const auto [b, through_float] = train::value_and_grad(narrowed, model, x);
    REQUIRE(b == Approx(a).epsilon(1e-6));
    const auto& gw = through_float.storage().w;
    const auto& gv = through_float.storage().v;
    for (std::size_t i = 0; i < gw.size(); ++i) REQUIRE(gw.data()[i] == Approx(expected.storage().w.data()[i]).epsilon(1e-6));
    for (std::size_t i = 0; i < gv.size(); ++i) REQUIRE(gv.data()[i] == Approx(expected.storage().v.data()[i]).epsilon(1e-6));
    REQUIRE(std::abs(gw.data()[0]) > 1e-3);
}

TEST_CASE("derivation: views of traced values and of parameters", "[train][derivation]") {
    const auto x = random_input(13);
    check_gradients(
        [](const auto& m, const auto& x) {
            const auto h = eval(x * m.w + m.v);                              // (B, T, C)
            const auto row = select<B>(h, 1);                                 // (T, C), a view of h
            const auto halves = split<C, dim<"P", 2>, dim<"Q", 2>>(h);        // (B, T, P, Q)
            const auto part = slice<C>(m.v, 1, 3);                            // a view of a parameter
            const auto heads = view_of(transpose<1, 2>(halves));              // (B, P, T, Q)
            return eval(total(square(row) * m.w) + total(select<dim<"P", 2>>(halves, 0) * 2.0) +
                        total(part * slice<C>(h, 0, 2)) + total(heads * heads) * 0.1);
        },
        x);
}

namespace {
using V = dim<"V", 7>;
using Ids = Tensor<std::int64_t, B, T>;

struct Embedded {
    BOOST_HANA_DEFINE_STRUCT(Embedded,
        (nn::Embedding<V, C, double>, emb),
        (nn::Linear<C, V, true, double>, head));
};
}  // namespace

TEST_CASE("derivation: an embedding's rows and cross-entropy", "[train][derivation]") {
    Ids ids, targets;
    for (std::size_t i = 0; i < ids.size(); ++i) {
        ids.data()[i] = static_cast<std::int64_t>((3 * i + 1) % V::extent);  // some ids twice
        targets.data()[i] = static_cast<std::int64_t>((5 * i + 2) % V::extent);
    }
    targets.data()[2] = -1;  // ignored
    Generator gen(21);
    Embedded model;
    nn::for_each_parameter(model, [&](std::string_view, auto& p) { gen.fill_normal(p.elements()); });
    // The ids are traced (value_and_grad traces every tensor argument); `shifted` is not, and its
    // rows' gradient reaches the table through the recorded sum all the same.
    const auto loss = [](const auto& m, const auto& ids, const auto& targets) {
        Ids shifted;
        for (std::size_t i = 0; i < shifted.size(); ++i) shifted.data()[i] = static_cast<std::int64_t>(i % V::extent);
        const auto x = eval(m.emb(ids) + m.emb(shifted) * 0.5);
        return train::cross_entropy(m.head(x), targets);
    };
    const std::size_t reached = check_model_gradients(model, 1e-7, loss, ids, targets);
    REQUIRE(reached > V::extent * C::extent);  // the table and the head
}

namespace {
// A fused function of a user's, with its derivative written beside it: y = tanh(x * w), read
// through value_of, its backward capturing what it reads.
template <class X, class W>
auto scaled_tanh(const X& x, const W& w) {
    const Tensor<double, B, T, C> y = tanh(train::value_of(x) * train::value_of(w));
    return train::with_derivative(
        Tensor<double, B, T, C>(y),
        [y, xs = Tensor<double, B, T, C>(train::value_of(x)), ws = Tensor<double, C>(train::value_of(w))](const auto& g) {
            const Tensor<double, B, T, C> dz = g * (1.0 - square(y));
            return std::tuple{Tensor<double, B, T, C>(dz * ws), Tensor<double, C>(sum<0>(sum<0>(dz * xs)))};
        },
        x, w);
}
}  // namespace

TEST_CASE("derivation: a function with its derivative written by its author", "[train][derivation]") {
    const auto x = random_input(9);
    // Both inputs' gradients reach the loss: x's through h into m.v's product, w's into m.w's.
    check_gradients([](const auto& m, const auto& x) { return total(scaled_tanh(eval(x * 0.5 + m.v), m.w) * m.v); }, x);
    // Called on plain tensors, it is the plain function.
    const Parameters p = random_parameters(3);
    const Tensor<double, B, T, C> plain = scaled_tanh(x, p.w);
    const Tensor<double, B, T, C> expected = tanh(x * p.w);
    for (std::size_t i = 0; i < plain.size(); ++i) REQUIRE(plain.data()[i] == expected.data()[i]);
}

namespace {
using C8 = dim<"C", 8>;
using T6 = dim<"T", 6>;
using HS2 = dim<"HS", 2>;
struct AttentionLayers {
    BOOST_HANA_DEFINE_STRUCT(AttentionLayers,
        (nn::Head<C8, dim<"H", 4>, double>, head),
        (nn::MultiHeadAttention<C8, dim<"NH", 2>, dim<"HS", 4>, true, double>, heads),
        (nn::GroupedQueryAttention<C8, dim<"NH", 4>, dim<"NKV", 2>, HS2, nn::rotary_encoding<HS2>, double, window<3>>, windowed),
        (nn::GroupedQueryAttention<C8, dim<"NH", 4>, dim<"NKV", 1>, HS2, nn::no_position_encoding, double>, shared));
};
}  // namespace

TEST_CASE("derivation: every attention layer: one head, many, grouped, rotary and windowed", "[train][derivation]") {
    Generator gen(17);
    AttentionLayers model;
    nn::for_each_parameter(model, [&](std::string_view, auto& p) { gen.fill_normal(p.elements()); });
    const auto x = randn<double, B, T6, C8>(gen);
    const auto loss = [](const auto& m, const auto& x) {
        const auto one = m.head(x);                                   // (B, T, H)
        const auto mixed = eval(m.heads(x) + m.windowed(x * 0.5));    // (B, T, C)
        return eval(total(square(one)) * 0.1 + total(mixed * x) + total(m.shared(mixed) * x));
    };
    // The loss sums three layers' outputs against x: central differences of it round to about
    // 1e-6 (on an AVX2 host windowed.wv.weight[13] differed by 1.28e-6, the same before and after
    // the kernels' changes), so the margin is 1e-5.
    const std::size_t reached = check_model_gradients(model, 1e-5, loss, x);
    REQUIRE(reached > nn::parameter_count<AttentionLayers> / 2);
}

namespace {
// Two blocks, as a user declares them: each kept whole, or each recomputed in the backward.
template <template <class> class Wrap, StaticDim Ch = C8>
struct TwoBlocks {
    using block = nn::Block<Ch, dim<"NH", 2>, dim<"HS", Ch::extent / 2>, true, double>;
    BOOST_HANA_DEFINE_STRUCT(TwoBlocks,
        (nn::Stack<Wrap<block>, 2>, h),
        (nn::LayerNorm<Ch, true, double>, ln_f));
};
template <class Layer>
using kept_whole = Layer;
}  // namespace

TEST_CASE("derivation: a recomputed layer's gradients are the kept layer's, its activations one tensor",
          "[train][derivation][recomputed]") {
    Generator gen(23);
    TwoBlocks<kept_whole> kept;
    nn::for_each_parameter(kept, [&](std::string_view, auto& p) { gen.fill_normal(p.elements()); });
    TwoBlocks<train::recomputed> recomputed;
    nn::for_each_parameter(recomputed, [&](std::string_view name, auto& p) {
        nn::for_each_parameter(kept, [&](std::string_view kept_name, const auto& q) {
            if constexpr (std::is_same_v<std::remove_cvref_t<decltype(p)>, std::remove_cvref_t<decltype(q)>>)
                if (name == kept_name) p = q;
        });
    });
    const auto x = randn<double, B, T6, C8>(gen);
    const auto loss = [](const auto& m, const auto& x) { return total(m.ln_f(m.h(x)) * x); };

    // The plain forward is the layer's own.
    REQUIRE(loss(recomputed, x).item() == loss(kept, x).item());
    // The same gradients, of every parameter (the same kernels run on the same values).
    const auto [kept_loss, kept_grads] = train::value_and_grad(loss, kept, x);
    const auto [loss_value, grads] = train::value_and_grad(loss, recomputed, x);
    REQUIRE(loss_value == kept_loss);
    std::vector<double> want;
    train::for_each_gradient(kept_grads, [&](std::string_view, const auto& g) { want.insert(want.end(), g.data(), g.data() + g.size()); });
    std::size_t at = 0;
    train::for_each_gradient(grads, [&](std::string_view name, const auto& g) {
        for (std::size_t i = 0; i < g.size(); ++i, ++at) {
            INFO(std::string(name) << "[" << i << "]");
            REQUIRE(g.data()[i] == Approx(want[at]).epsilon(1e-12).margin(1e-14));
        }
    });
    REQUIRE(at == want.size());
    // And central differences, through the recomputation.
    REQUIRE(check_model_gradients(recomputed, 1e-6, loss, x) > nn::parameter_count<decltype(recomputed)> / 2);

    // What the forward keeps for the backward: each recomputed block's output (its input is the
    // one before's), not every value inside it. (Sizes whose tensors live on the heap, which is
    // what the meter reads.)
    using C64 = dim<"C", 64>;
    const auto wide = randn<double, dim<"B", 4>, dim<"T", 32>, C64>(gen);
    const auto kept_after_forward = [&](const auto& model) {
        std::size_t held = 0;
        const auto measured = [&](const auto& m, const auto& input) {
            const storage_meter meter;  // from the forward's start: not the gradients, nor the input
            auto value = loss(m, input);
            held = meter.held();
            return value;
        };
        [[maybe_unused]] const auto result = train::value_and_grad(measured, model, wide);
        return held;
    };
    const auto wide_kept = std::make_unique<TwoBlocks<kept_whole, C64>>();
    const auto wide_recomputed = std::make_unique<TwoBlocks<train::recomputed, C64>>();
    const std::size_t whole = kept_after_forward(*wide_kept), lean = kept_after_forward(*wide_recomputed);
    INFO("kept " << whole << " bytes, recomputed " << lean);
    REQUIRE(lean * 8 < whole);
}

TEST_CASE("derivation: dropout, through the mask it drew", "[train][derivation]") {
    const auto x = random_input(16);
    // A generator of one seed per evaluation draws the same masks each time, so that central
    // differences see one function: the gradient is the upstream one through the mask.
    check_gradients(
        [](const auto& m, const auto& x) {
            Generator gen(5);
            const auto h = eval(x * m.w + m.v);
            return eval(total(square(dropout(h, 0.3, gen)) * 0.5) + total(dropout(x * m.v, 0.5, gen) * m.w));
        },
        x);
}

TEST_CASE("nn::Dropout drops while a loss is differentiated, and only then", "[train][derivation][dropout]") {
    const nn::Dropout<double> drop(0.5, 3);
    // Evaluation: x as it is, the same elements.
    const auto x = random_input(17);
    const auto same = drop(x);
    for (std::size_t i = 0; i < x.size(); ++i) REQUIRE(same.data()[i] == x.data()[i]);
    // Training: d/dv of total(drop(x + v)) is the mask, each element 0 or 1 / (1 - p) = 2, and the
    // loss is the kept elements of x + v, doubled.
    const auto dropped_gradient = [&] {
        Parameters model = random_parameters(7);
        const auto [value, grads] = train::value_and_grad(
            [&](const auto& m, const auto& input) { return total(drop(eval(input + m.v))); }, model, x);
        std::vector<double> mask;
        double kept = 0;
        train::for_each_gradient(model, grads, [&](std::string_view name, auto& parameter, auto& gradient) {
            if (name != "v") return;
            for (std::size_t i = 0; i < parameter.size(); ++i) {
                const double g = gradient.data()[i];
                REQUIRE((g == 0.0 || g == 2.0));
                mask.push_back(g);
                kept += g * (x.data()[i] + parameter.data()[i]);
            }
        });
        REQUIRE(value == Approx(kept).epsilon(1e-12));
        return mask;
    };
    const auto first = dropped_gradient();
    const auto zeros = std::count(first.begin(), first.end(), 0.0);
    REQUIRE(first.size() == 24);
    REQUIRE((zeros >= 3 && zeros <= 21));   // Binomial(24, 0.5): outside this once in 50000 seeds
    // The next differentiated call draws a new mask from the layer's generator.
    REQUIRE(dropped_gradient() != first);
}

TEST_CASE("derivation: reshape by names, of a traced value and of an expression", "[train][derivation]") {
    using P = dim<"P", 6>;
    using Q = dim<"Q", 2>;
    const auto x = random_input(18);
    check_gradients(
        [](const auto& m, const auto& x) {
            const auto h = eval(x * m.w + m.v);                               // (B, T, C)
            const auto grid = reshape<dims<T, C>, dims<P, Q>>(h);             // (B, P, Q), a view of h
            const auto rows = reshape<dims<B, P>, dims<dim<"R">>>(square(grid) * 0.5);   // (R=12, Q), recorded
            return eval(total(grid * 0.3) + total(rows * rows) + total(reshape<dims<C>, dims<Q, dim<"K", 2>>>(h * m.w)));
        },
        x);
}

TEST_CASE("derivation: einsum, through the permutes, sums, products and matmuls it lowers to", "[train][derivation]") {
    using S = dim<"S", 3>;  // scores' keys: T's extent
    const auto x = random_input(19);
    check_gradients(
        [](const auto& m, const auto& x) {
            const auto h = eval(x * m.w + m.v);                                                    // (B, T, C)
            const auto scores = einsum<"B T C, B S C -> B T S">(h, rename<T, S>(m.v));             // a batched matmul
            const auto outer = einsum<"C, B T -> B C T">(m.w, sum<C>(h));                          // an outer product
            const auto both = einsum<"B T C, B T C -> C">(h, m.v);                                 // a batched dot product
            const auto w2 = rename<B, dim<"R", 2>>(m.v);                                          // (R, T, C)
            // (T, C) as one: views of h's record and of the parameter; then of a permuted
            // parameter, whose (T, C) still lie together, and a copy of a permuted h, recorded.
            const auto merged = einsum<"B T C, R T C -> B R">(h, w2);
            const auto apart = einsum<"T B C, R C T -> R B">(permute<T, B, C>(h), permute<dim<"R", 2>, C, T>(w2));
            const auto along = einsum<"B T C, C -> T B">(square(h), m.w);                         // a matrix and a vector
            const auto summed = einsum<"B T C, C -> C">(h, m.w);                                   // B, T summed first
            return eval(total(square(scores) * 0.1) + total(outer * 0.2) + total(both * m.w) + total(square(along) * 0.05) +
                        total(summed * summed) + total(einsum<"B T C -> C B">(h) * 0.3) + total(square(merged) * 0.1) + total(apart * 0.2));
        },
        x);
}
