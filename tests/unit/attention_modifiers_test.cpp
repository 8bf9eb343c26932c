// Score and mask modifiers in the fused attention kernel against a dense naive reference in
// double (the scores, the modifier, the mask, the softmax, the values): ALiBi, soft-capping and a
// document mask over sizes that take the kernel's one-vector, row and block paths, with windows,
// grouped heads, a mask that replaces causality (prefix-LM) and key blocks skipped; then a layer
// of the user's with modifiers, whose cached decoding (chunks, ragged batches, a ring cache)
// equals its full forward.

#include "dense_attention.hpp"
#include "reference.hpp"
#include "../user_programs/variant_attention.hpp"

#include <shaped/shaped.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <random>
#include <vector>

namespace {

using B = shaped::dim<"B", 2>;
using NH = shaped::dim<"NH", 3>;
using Td = shaped::dim<"T">;
using Sd = shaped::dim<"S">;
using Hd = shaped::dim<"H">;
using Dd = shaped::dim<"D">;

// ALiBi's bias: each head's slope times how far back the key is (Press et al.; slopes 2^-(h+1)).
struct alibi {
    template <class T>
    T operator()(T s, shaped::batch_index, shaped::head_index h, shaped::query_position q,
                 shaped::key_position kv) const {
        return s - std::ldexp(T{1}, -static_cast<int>(h.value + 1)) * static_cast<T>(q - kv);
    }
};
// Gemma 2's soft-capping: c tanh(s / c), plus the batch row, so that a wrong row is seen.
struct soft_cap {
    double c;
    template <class T>
    T operator()(T s, shaped::batch_index b, shaped::head_index, shaped::query_position, shaped::key_position) const {
        return static_cast<T>(c) * std::tanh(s / static_cast<T>(c)) + static_cast<T>(b.value) * T{0.25};
    }
};
// Documents packed in one row: row b's documents are `length + b` positions long each, and a
// query sees only its own document's keys.
struct same_document {
    std::size_t length;
    std::size_t document(shaped::batch_index b, std::size_t position) const { return position / (length + b.value); }
    bool operator()(shaped::batch_index b, shaped::head_index, shaped::query_position q, shaped::key_position kv) const {
        return document(b, q.value) == document(b, kv.value);
    }
};
// A prefix-LM: the first `prefix` positions see one another whole, the rest causally.
struct prefix_lm {
    static constexpr bool causal = false;
    std::size_t prefix;
    bool operator()(shaped::batch_index, shaped::head_index, shaped::query_position q, shaped::key_position kv) const {
        return kv.value <= q.value || kv.value < prefix;
    }
};

// out = softmax(score(q k^T scale), masked) v, dense, for matrices laid out one after another
// (q tq x d, k tk x d, v tk x dv each); matrix m is batch row m / heads + batch_origin and head
// m % heads; queries are the last tq of the tk positions, key j at key_origin + j.
template <class Mods>
std::vector<double> naive_modified(const std::vector<double>& q, const std::vector<double>& k,
                                   const std::vector<double>& v, std::size_t tq, std::size_t tk, std::size_t d,
                                   std::size_t dv, double scale, const Mods& mods, std::size_t heads,
                                   std::optional<std::size_t> window = std::nullopt) {
    return ref::dense_attention(q, k, v, tq, tk, d, dv, [&](std::size_t m, std::size_t i, std::size_t j, double product) {
        const shaped::batch_index b{m / heads + mods.batch_origin};
        const shaped::head_index h{m % heads};
        const shaped::query_position qpos{mods.key_origin + tk - tq + i};
        const shaped::key_position kpos{mods.key_origin + j};
        const double s = mods.score(product * scale, b, h, qpos, kpos);
        bool seen = mods.keeps(b, h, qpos, kpos);
        if (Mods::causal) seen = seen && kpos.value <= qpos.value;
        if (window) seen = seen && kpos.value + *window > qpos.value;
        return seen ? s : ref::unseen;
    });
}

template <class V>
double tolerance() {
    return std::is_same_v<V, float> ? 3e-5 : 1e-12;
}

// causal_attention with modifiers of the last tq of tk positions, (B, NH, T, H) heads, fused,
// against the dense reference; then held in a variable first, the same numbers.
template <class V, class Mods>
void check_modified(std::size_t tk, std::size_t tq, std::size_t h, const Mods& mods,
                    std::optional<std::size_t> window = std::nullopt) {
    CAPTURE(tk, tq, h, mods.batch_origin, mods.key_origin, window.value_or(0));
    shaped::Generator gen(tk * 7 + tq + h);
    const auto q_all = shaped::randn<V, B, NH, Td, Hd>(gen, Td{tk}, Hd{h});
    const auto k = shaped::randn<V, B, NH, Sd, Hd>(gen, Sd{tk}, Hd{h});
    const auto v = shaped::randn<V, B, NH, Sd, Dd>(gen, Sd{tk}, Dd{24});
    const auto q = shaped::slice<Td>(q_all, tk - tq, tk);
    shaped::Tensor<V, B, NH, Td, Dd> out = shaped::zeros<V, B, NH, Td, Dd>(Td{tq}, Dd{24});
    if (window) {
        REQUIRE(*window == 5);
        // The window is one more mask, the others' conjunction with it.
        if constexpr (Mods::causal) {
            using Windowed = shaped::attention_modifiers<decltype(mods.score),
                                                         decltype(shaped::and_masks(shaped::window<5>{}, mods.keeps))>;
            out = shaped::causal_attention(
                q, k, v, V{0.3},
                Windowed{mods.score, shaped::and_masks(shaped::window<5>{}, mods.keeps), mods.heads, mods.batch_origin,
                         mods.key_origin});
        }
    } else {
        const auto held = shaped::causal_attention(q, k, v, V{0.3}, mods);
        out = held;
    }
    const auto want = naive_modified(ref::values(q), ref::values(k), ref::values(v), tq, tk, h, 24, 0.3, mods,
                                     NH::extent, window);
    ref::require_close(ref::values(out), want, tolerance<V>());
}

}  // namespace

TEMPLATE_TEST_CASE("score and mask modifiers meet the dense reference: one-vector, row and block paths",
                   "[attention][modifiers]", float, double) {
    using V = TestType;
    const std::size_t tk = GENERATE(1, 5, 9, 64, 65, 130, 200);
    const std::size_t tq = GENERATE(1, 3, 9, 70, 200);
    const std::size_t h = GENERATE(5, 16);
    if (tq > tk) return;
    check_modified<V>(tk, tq, h, shaped::attention_modifiers<alibi>{});
    check_modified<V>(tk, tq, h, shaped::attention_modifiers<soft_cap>{{2.0}});
    check_modified<V>(tk, tq, h, shaped::attention_modifiers<shaped::unmodified_scores, same_document>{{}, {7}});
    // Both, told that the problem's first batch row and key are further on.
    check_modified<V>(tk, tq, h, shaped::attention_modifiers<alibi, same_document>{{}, {20}, 0, 1, 33});
    check_modified<V>(tk, tq, h, shaped::attention_modifiers<soft_cap, same_document>{{1.5}, {9}}, 5);
}

TEMPLATE_TEST_CASE("a mask that replaces causality: a prefix-LM's prefix sees itself whole", "[attention][modifiers]",
                   float, double) {
    using V = TestType;
    const std::size_t t = GENERATE(1, 6, 9, 64, 100, 200);
    const std::size_t prefix = GENERATE(0, 1, 5, 70);
    check_modified<V>(t, t, 16, shaped::attention_modifiers<alibi, prefix_lm>{{}, {prefix}});
    // Prefix-LM's first query sees the prefix's later keys: not causal.
    if (prefix > 1 && t > prefix) {
        shaped::Generator gen(3);
        const auto q = shaped::randn<V, Td, Hd>(gen, Td{t}, Hd{4});
        const auto k = shaped::randn<V, Td, Hd>(gen, Td{t}, Hd{4});
        const auto v = shaped::randn<V, Td, Dd>(gen, Td{t}, Dd{4});
        const shaped::Tensor<V, Td, Dd> lm = shaped::causal_attention(q, k, v, V{1}, shaped::attention_modifiers<shaped::unmodified_scores, prefix_lm>{{}, {prefix}});
        const shaped::Tensor<V, Td, Dd> causal = shaped::causal_attention(q, k, v, V{1});
        REQUIRE(std::abs(lm(0, 0) - causal(0, 0)) > 1e-6);
        REQUIRE(lm(prefix, 0) == Approx(causal(prefix, 0)).margin(tolerance<V>()));
    }
}

TEST_CASE("modifiers with grouped heads: a query head is kv_head * G + g", "[attention][modifiers]") {
    using NKV = shaped::dim<"NKV", 2>;
    using G = shaped::dim<"G", 3>;
    using G1 = shaped::dim<"G", 1>;
    const std::size_t t = GENERATE(3, 70);
    shaped::Generator gen(t);
    const auto q = shaped::randn<double, B, NKV, G, Td, Hd>(gen, Td{t}, Hd{8});
    const auto k = shaped::randn<double, B, NKV, G1, Sd, Hd>(gen, Sd{t}, Hd{8});
    const auto v = shaped::randn<double, B, NKV, G1, Sd, Hd>(gen, Sd{t}, Hd{8});
    const shaped::attention_modifiers<alibi, same_document> mods{{}, {4}};
    const shaped::Tensor<double, B, NKV, G, Td, Hd> out = shaped::causal_attention(q, k, v, 0.5, mods);
    // The reference per key/value head: its G query heads against its keys, heads numbered on.
    const auto qs = ref::values(q), ks = ref::values(k), vs = ref::values(v), got = ref::values(out);
    for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t kv = 0; kv < 2; ++kv) {
            const std::size_t qm = (b * 2 + kv) * 3, km = b * 2 + kv, n = t * 8;
            const std::vector<double> qg(qs.begin() + qm * n, qs.begin() + (qm + 3) * n);
            const std::vector<double> kg(ks.begin() + km * n, ks.begin() + (km + 1) * n);
            const std::vector<double> vg(vs.begin() + km * n, vs.begin() + (km + 1) * n);
            std::vector<double> want(3 * n);
            for (std::size_t g = 0; g < 3; ++g) {
                for (std::size_t i = 0; i < t; ++i) {
                    // Dense, straight from the definition, with head kv * 3 + g.
                    const shaped::head_index head{kv * 3 + g};
                    double max = -INFINITY;
                    std::vector<double> w(t);
                    for (std::size_t j = 0; j < t; ++j) {
                        double s = 0;
                        for (std::size_t c = 0; c < 8; ++c) s += qg[g * n + i * 8 + c] * kg[j * 8 + c];
                        s = alibi{}(s * 0.5, {b}, head, {i}, {j});
                        const bool seen = j <= i && mods.keeps({b}, head, {i}, {j});
                        w[j] = seen ? s : -INFINITY;
                        max = std::max(max, w[j]);
                    }
                    double sum = 0;
                    for (double& e : w) sum += e = std::exp(e - max);
                    for (std::size_t c = 0; c < 8; ++c) {
                        double acc = 0;
                        for (std::size_t j = 0; j < t; ++j) acc += w[j] * vg[j * 8 + c];
                        want[g * n + i * 8 + c] = acc / sum;
                    }
                }
            }
            const std::vector<double> got_group(got.begin() + qm * n, got.begin() + (qm + 3) * n);
            ref::require_close(got_group, want, 1e-12);
        }
}

TEST_CASE("a key block no query of a block keeps is skipped: documents as blocks", "[attention][modifiers]") {
    // Documents of 64 positions (row 0) and 65 (row 1), T 256: the fused result is the dense one,
    // and every query's weights leave its document's keys alone (values one-hot by document).
    using T256 = shaped::dim<"T", 256>;
    using P = shaped::dim<"P", 4>;
    shaped::Generator gen(9);
    const auto q = shaped::randn<double, B, T256, Hd>(gen, Hd{32});
    const auto k = shaped::randn<double, B, T256, Hd>(gen, Hd{32});
    shaped::Tensor<double, B, T256, P> v = shaped::zeros<double, B, T256, P>();
    const same_document docs{64};
    for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t j = 0; j < 256; ++j) v(b, j, docs.document({b}, j)) = 1;
    const shaped::Tensor<double, B, T256, P> out =
        shaped::causal_attention(q, k, v, 0.2, shaped::attention_modifiers<shaped::unmodified_scores, same_document>{{}, docs, 1});
    for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t i = 0; i < 256; ++i)
            for (std::size_t d = 0; d < 4; ++d) {
                CAPTURE(b, i, d);
                REQUIRE(out(b, i, d) == Approx(d == docs.document({b}, i) ? 1.0 : 0.0).margin(1e-12));
            }
}

TEST_CASE("a mask that drops every key of a query gives NaN, as the unfused softmax", "[attention][modifiers]") {
    struct nothing {
        bool operator()(shaped::batch_index, shaped::head_index, shaped::query_position q, shaped::key_position) const {
            return q.value % 2 == 0;  // odd queries see nothing
        }
    };
    const std::size_t t = GENERATE(5, 12, 100);
    shaped::Generator gen(t);
    const auto q = shaped::randn<float, Td, Hd>(gen, Td{t}, Hd{8});
    const auto k = shaped::randn<float, Td, Hd>(gen, Td{t}, Hd{8});
    const auto v = shaped::randn<float, Td, Hd>(gen, Td{t}, Hd{8});
    const shaped::Tensor<float, Td, Hd> out =
        shaped::causal_attention(q, k, v, 1.0f, shaped::attention_modifiers<shaped::unmodified_scores, nothing>{});
    const shaped::Tensor<float, Td, Hd> plain = shaped::causal_attention(q, k, v, 1.0f);
    for (std::size_t i = 0; i < t; ++i) {
        CAPTURE(i);
        if (i % 2) REQUIRE(std::isnan(out(i, 0)));
        else REQUIRE(out(i, 0) == Approx(plain(i, 0)).margin(1e-5));
    }
}

// ---- the derivative: a layer's modifiers through the fused backward --------------------------------

using namespace variant;

namespace {
// value_and_grad's gradients of loss(model, inputs...) against central differences; returns how
// many elements of which parameter reach the loss.
template <class Model, class Loss, class... Inputs>
std::map<std::string, std::size_t> check_central_differences(Model& model, const Loss& loss, const Inputs&... inputs) {
    const auto [value, grads] = shaped::train::value_and_grad(loss, model, inputs...);
    REQUIRE(value == Approx(loss(model, inputs...).item()).epsilon(1e-12));
    std::map<std::string, std::size_t> reached;
    shaped::train::for_each_gradient(model, grads, [&](std::string_view name, auto& parameter, auto& gradient) {
        for (std::size_t i = 0; i < parameter.size(); ++i) {
            double& w = parameter.data()[i];
            const double kept = w;
            w = kept + 1e-6;
            const double up = loss(model, inputs...).item();
            w = kept - 1e-6;
            const double down = loss(model, inputs...).item();
            w = kept;
            const double numeric = (up - down) / 2e-6;
            INFO(std::string(name) << "[" << i << "]");
            REQUIRE(gradient.data()[i] == Approx(numeric).margin(1e-7).epsilon(1e-6));
            if (std::abs(numeric) > 1e-3) ++reached[std::string(name)];
        }
    });
    return reached;
}

// A loss through the layer, sum(layer(x) * x), against central differences.
template <class Layer>
std::map<std::string, std::size_t> check_variant_gradients(std::uint64_t seed) {
    shaped::Generator gen(seed);
    Layer layer;
    shaped::nn::for_each_parameter(layer, [&](std::string_view, auto& p) { gen.fill_normal(p.elements()); });
    const auto x = shaped::randn<double, B2, T7, C8>(gen);
    return check_central_differences(layer, [](const auto& m, const auto& x) { return eval(sum(m(x) * x)); }, x);
}
}  // namespace

TEST_CASE("modifiers differentiated through the fused backward, against central differences",
          "[attention][modifiers][train]") {
    // ALiBi, soft-capping over dual numbers, documents: the table is read by none.
    auto reached = check_variant_gradients<VariantAttention<false, true, keys::documents>>(31);
    REQUIRE(reached["c_attn.weight"] > 50);
    REQUIRE(reached.count("relative") == 0);
    // A learned bias, then ALiBi and the cap, with and without documents: every bucket learns.
    reached = check_variant_gradients<VariantAttention<true, true, keys::documents>>(32);
    REQUIRE(reached["relative"] >= 6);
    reached = check_variant_gradients<VariantAttention<true, false, keys::causal>>(33);
    REQUIRE(reached["relative"] == NH2::extent * Buckets::extent);
    // A prefix-LM: keys after their query read the table's nearest bucket, 0.
    reached = check_variant_gradients<VariantAttention<true, true, keys::prefix>>(34);
    REQUIRE(reached["relative"] == NH2::extent * Buckets::extent);
    REQUIRE(reached["c_attn.weight"] > 50);
    // Documents within a window of 2, the window one of the layer's masks (attended as a band):
    // a query sees at most its key and the one before, so only buckets 0 and 1 learn.
    STATIC_REQUIRE(std::is_same_v<shaped::nn::detail::layer_window_t<VariantAttention<true, true, keys::windowed_documents>>,
                                  shaped::window<2>>);
    reached = check_variant_gradients<VariantAttention<true, true, keys::windowed_documents>>(35);
    REQUIRE(reached["relative"] == NH2::extent * 2);
    REQUIRE(reached["c_attn.weight"] > 50);
}

namespace {
struct AttentionOperands {
    BOOST_HANA_DEFINE_STRUCT(AttentionOperands,
        (shaped::Tensor<double, B2, NH2, T7, HS4>, q),
        (shaped::Tensor<double, B2, NH2, T7, HS4>, k),
        (shaped::Tensor<double, B2, NH2, T7, HS4>, v));
};
}  // namespace

TEST_CASE("causal_attention with modifiers as an op, differentiated, against central differences",
          "[attention][modifiers][train]") {
    shaped::Generator gen(41);
    AttentionOperands model;
    shaped::nn::for_each_parameter(model, [&](std::string_view, auto& p) { gen.fill_normal(p.elements()); });
    const auto w = shaped::randn<double, B2, NH2, T7, HS4>(gen);
    const auto loss = [&w](const auto& m) {
        const shaped::attention_modifiers<shaped::nn::then_modify<shaped::nn::alibi<NH2>, shaped::nn::soft_cap>,
                                          same_document>
            mods{{{}, {1.2}}, {3}};
        using shaped::train::watched;
        return eval(sum(shaped::causal_attention(watched(m.q), watched(m.k), watched(m.v), 0.5, mods) * w));
    };
    auto reached = check_central_differences(model, loss);
    // Of 336 elements: documents of 3 leave some keys unread by some queries.
    REQUIRE(reached["q"] + reached["k"] + reached["v"] > 250);
}

namespace {
using B1 = shaped::dim<"B", 1>;
using NH1 = shaped::dim<"NH", 1>;
using HS4p = shaped::dim<"H", 4>;
template <std::size_t Time>
struct PrefixOperands {
    using Tt = shaped::dim<"T", Time>;
    BOOST_HANA_DEFINE_STRUCT(PrefixOperands,
        (shaped::Tensor<double, B1, NH1, Tt, HS4p>, q),
        (shaped::Tensor<double, B1, NH1, Tt, HS4p>, k),
        (shaped::Tensor<double, B1, NH1, Tt, HS4p>, v));
};

// A prefix-LM's attention (with ALiBi) of T positions, differentiated as an op: every gradient
// against central differences.
template <std::size_t Time>
void check_prefix_gradients(std::size_t prefix) {
    using Tt = shaped::dim<"T", Time>;
    CAPTURE(Time, prefix);
    shaped::Generator gen(Time + prefix);
    PrefixOperands<Time> model;
    shaped::nn::for_each_parameter(model, [&](std::string_view, auto& p) { gen.fill_normal(p.elements()); });
    const auto w = shaped::randn<double, B1, NH1, Tt, HS4p>(gen);
    const shaped::attention_modifiers<shaped::nn::alibi<NH1>, prefix_lm> mods{{}, {prefix}};
    const auto loss = [&](const auto& m) {
        using shaped::train::watched;
        return eval(sum(shaped::causal_attention(watched(m.q), watched(m.k), watched(m.v), 0.5, mods) * w));
    };
    auto reached = check_central_differences(model, loss);
    REQUIRE(reached["k"] > 0);
}
}  // namespace

TEST_CASE("a mask that replaces causality, differentiated: a prefix-LM against central differences",
          "[attention][modifiers][train]") {
    // T over one, two and three of the backward's 64-key tiles; a prefix within the first tile,
    // and one that reaches into the second (query tiles before their key tile then see it). A
    // backward that kept causality would miss what the prefix's queries read after them.
    for (const std::size_t prefix : {3, 100}) {
        check_prefix_gradients<7>(prefix);
        check_prefix_gradients<70>(prefix);
        check_prefix_gradients<150>(prefix);
    }
}

namespace {
// Document ids of each row's positions: runs of lengths 5, 70, 1, 100, ... (packed documents),
// or, shuffled, documents interleaved.
struct document_ids {
    std::vector<std::vector<int>> rows;
    int operator()(std::size_t b, std::size_t position) const { return rows[b][position]; }
};
document_ids packed_documents(std::size_t t, bool interleaved) {
    document_ids ids{std::vector<std::vector<int>>(2, std::vector<int>(t))};
    std::mt19937 rng(static_cast<unsigned>(t));
    for (std::size_t b = 0; b < 2; ++b) {
        int document = 0;
        for (std::size_t p = 0; p < t; ++p) {
            if (rng() % (b ? 37 : 80) == 0) ++document;
            ids.rows[b][p] = interleaved ? static_cast<int>(rng() % 3) : document;
        }
    }
    return ids;
}
}  // namespace

TEST_CASE("nn::same_document: a block at once is what its pairs say, packed or interleaved", "[attention][modifiers]") {
    for (const bool interleaved : {false, true}) {
        const document_ids ids = packed_documents(300, interleaved);
        const shaped::nn::same_document<document_ids> mask{&ids};
        std::mt19937 rng(interleaved);
        for (int trial = 0; trial < 400; ++trial) {
            const std::size_t b = rng() % 2, q0 = rng() % 300, k0 = rng() % 300;
            const std::size_t q1 = std::min<std::size_t>(300, q0 + 1 + rng() % 64), k1 = std::min<std::size_t>(300, k0 + 1 + rng() % 64);
            std::size_t kept = 0;
            for (std::size_t i = q0; i < q1; ++i)
                for (std::size_t j = k0; j < k1; ++j) kept += mask({b}, {0}, {i}, {j});
            const auto block = mask.block({b}, {0}, {q0}, {q1}, {k0}, {k1});
            CAPTURE(interleaved, b, q0, q1, k0, k1, kept);
            if (kept == 0) REQUIRE(block != shaped::keys_kept::all);
            if (kept == (q1 - q0) * (k1 - k0)) REQUIRE(block != shaped::keys_kept::none);
            if (block == shaped::keys_kept::none) REQUIRE(kept == 0);
            if (block == shaped::keys_kept::all) REQUIRE(kept == (q1 - q0) * (k1 - k0));
            if (!interleaved && kept == 0) REQUIRE(block == shaped::keys_kept::none);
        }
    }
}

TEMPLATE_TEST_CASE("nn::same_document in the kernel: blocks skipped, kept whole or masked, as the dense reference",
                   "[attention][modifiers]", float, double) {
    using V = TestType;
    for (const bool interleaved : {false, true}) {
        const std::size_t t = GENERATE(9, 200, 300);
        const document_ids ids = packed_documents(t, interleaved);
        check_modified<V>(t, t, 16,
                          shaped::attention_modifiers<shaped::nn::alibi<NH>, shaped::nn::same_document<document_ids>>{
                              {}, {&ids}});
        check_modified<V>(t, t / 3, 8,
                          shaped::attention_modifiers<shaped::nn::soft_cap, shaped::nn::same_document<document_ids>>{
                              {1.0}, {&ids}});
    }
}

// ---- a window is a mask ------------------------------------------------------------------------

TEST_CASE("shaped::window and shaped::causal_mask as masks: a block at once is exactly what its pairs say (and with documents, soundly)",
          "[attention][modifiers][sliding_window]") {
    const shaped::window<7> window;
    const document_ids ids = packed_documents(300, false);
    const auto windowed_documents = shaped::and_masks(window, shaped::nn::same_document<document_ids>{&ids});
    std::mt19937 rng(3);
    for (int trial = 0; trial < 2000; ++trial) {
        const std::size_t b = rng() % 2, q0 = rng() % 300, k0 = rng() % 300;
        const std::size_t q1 = std::min<std::size_t>(300, q0 + 1 + rng() % 16), k1 = std::min<std::size_t>(300, k0 + 1 + rng() % 16);
        std::size_t kept = 0, kept_by_both = 0;
        for (std::size_t i = q0; i < q1; ++i)
            for (std::size_t j = k0; j < k1; ++j) {
                kept += window({b}, {0}, {i}, {j});
                kept_by_both += windowed_documents({b}, {0}, {i}, {j});
            }
        const std::size_t pairs = (q1 - q0) * (k1 - k0);
        CAPTURE(b, q0, q1, k0, k1, kept, kept_by_both);
        const auto block = window.block({b}, {0}, {q0}, {q1}, {k0}, {k1});
        REQUIRE((block == shaped::keys_kept::none) == (kept == 0));
        REQUIRE((block == shaped::keys_kept::all) == (kept == pairs));
        const auto both = windowed_documents.block({b}, {0}, {q0}, {q1}, {k0}, {k1});
        if (both == shaped::keys_kept::none) REQUIRE(kept_by_both == 0);
        if (both == shaped::keys_kept::all) REQUIRE(kept_by_both == pairs);
        if (kept_by_both == 0 && block == shaped::keys_kept::none) REQUIRE(both == shaped::keys_kept::none);
    }
    // Causality as a mask, exactly what its pairs say too.
    const shaped::causal_mask causal;
    for (int trial = 0; trial < 2000; ++trial) {
        const std::size_t q0 = rng() % 300, k0 = rng() % 300;
        const std::size_t q1 = std::min<std::size_t>(300, q0 + 1 + rng() % 16), k1 = std::min<std::size_t>(300, k0 + 1 + rng() % 16);
        std::size_t kept = 0;
        for (std::size_t i = q0; i < q1; ++i)
            for (std::size_t j = k0; j < k1; ++j) kept += causal({0}, {0}, {i}, {j});
        const auto block = causal.block({0}, {0}, {q0}, {q1}, {k0}, {k1});
        CAPTURE(q0, q1, k0, k1, kept);
        REQUIRE((block == shaped::keys_kept::none) == (kept == 0));
        REQUIRE((block == shaped::keys_kept::all) == (kept == (q1 - q0) * (k1 - k0)));
    }
    // and_masks flattens: one mask left is itself, none is every key.
    STATIC_REQUIRE(std::is_same_v<decltype(shaped::and_masks(window, shaped::keep_every_key{})), shaped::window<7>>);
    STATIC_REQUIRE(std::is_same_v<decltype(shaped::and_masks()), shaped::keep_every_key>);
    STATIC_REQUIRE(shaped::window_in<decltype(shaped::and_masks(shaped::window<9>{}, windowed_documents))> == 7);
    STATIC_REQUIRE(std::is_same_v<decltype(shaped::beyond_band(windowed_documents)),
                                  shaped::nn::same_document<document_ids>>);
    // Causality and the window are the kernel's band: nothing of them is left for the modifier calls.
    STATIC_REQUIRE(std::is_same_v<decltype(shaped::beyond_band(shaped::and_masks(shaped::causal_mask{}, window))),
                                  shaped::keep_every_key>);
}

namespace {
// A sliding window of 5 written as a user's plain mask: the kernel knows nothing of its band and
// asks it pair by pair.
struct five_back {
    bool operator()(shaped::batch_index, shaped::head_index, shaped::query_position q, shaped::key_position kv) const {
        return kv.value <= q.value && q.value - kv.value < 5;
    }
};
}  // namespace

TEMPLATE_TEST_CASE("a window is a mask: as the kernel's band, as a plain mask, alone or with others, as the dense reference",
                   "[attention][modifiers][sliding_window]", float, double) {
    using V = TestType;
    const std::size_t tk = GENERATE(1, 9, 65, 200);
    const std::size_t tq = GENERATE(1, 9, 70, 200);
    if (tq > tk) return;
    const document_ids ids = packed_documents(tk + 7, false);
    // The band (a window alone lowers to the plain windowed kernel), then the same keys asked pair
    // by pair, then the window with ALiBi and documents, whose origins place the keys later on.
    check_modified<V>(tk, tq, 16, shaped::attention_modifiers<shaped::unmodified_scores, shaped::window<5>>{});
    check_modified<V>(tk, tq, 16, shaped::attention_modifiers<shaped::unmodified_scores, five_back>{});
    // Causality written out as a mask, with the window: the same band.
    check_modified<V>(tk, tq, 16,
                      shaped::attention_modifiers<shaped::unmodified_scores, shaped::masks_and<shaped::causal_mask, shaped::window<5>>>{});
    using Both = decltype(shaped::and_masks(shaped::window<5>{}, shaped::nn::same_document<document_ids>{&ids}));
    check_modified<V>(tk, tq, 8,
                      shaped::attention_modifiers<shaped::nn::alibi<NH>, Both>{
                          {}, shaped::and_masks(shaped::window<5>{}, shaped::nn::same_document<document_ids>{&ids}), 0, 0, 7});
}

TEMPLATE_TEST_CASE("nn::soft_cap's rows in vectors: c tanh(s / c) to a few ulp, +-c past the cap, NaN kept",
                   "[attention][modifiers]", float, double) {
    using V = TestType;
    const shaped::nn::soft_cap cap{2.0};
    // Every row length up to three vectors (the tail as a padded vector), scores across [-40, 40].
    for (std::size_t n = 1; n <= 3 * xsimd::batch<V>::size + 1; ++n) {
        std::vector<V> scores(n), slopes(n), want(n);
        for (std::size_t j = 0; j < n; ++j) scores[j] = static_cast<V>(-40.0 + 80.0 * static_cast<double>(j * 37 % 101) / 100.0);
        scores[0] = static_cast<V>(0.001 * static_cast<double>(n));  // near 0, where tanh is s / c
        for (std::size_t j = 0; j < n; ++j) want[j] = static_cast<V>(2.0 * std::tanh(static_cast<double>(scores[j]) / 2.0));
        std::vector<V> with_slopes = scores;
        cap.row(scores.data(), n, {0}, {0}, {0}, {0});
        cap.row_with_slopes(with_slopes.data(), slopes.data(), n, {0}, {0}, {0}, {0});
        for (std::size_t j = 0; j < n; ++j) {
            CAPTURE(n, j, want[j]);
            REQUIRE(scores[j] == Approx(want[j]).margin(std::is_same_v<V, float> ? 1e-6 : 1e-14));
            REQUIRE(with_slopes[j] == scores[j]);
            const double t = static_cast<double>(scores[j]) / 2.0;
            REQUIRE(slopes[j] == Approx(1.0 - t * t).margin(std::is_same_v<V, float> ? 1e-6 : 1e-14));
        }
    }
    std::vector<V> odd{std::numeric_limits<V>::quiet_NaN(), std::numeric_limits<V>::infinity(),
                       -std::numeric_limits<V>::infinity()};
    cap.row(odd.data(), odd.size(), {0}, {0}, {0}, {0});
    REQUIRE(std::isnan(odd[0]));
    REQUIRE(odd[1] == V{2});
    REQUIRE(odd[2] == V{-2});
}
