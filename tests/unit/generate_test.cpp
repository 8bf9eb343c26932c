// models::GPT's checks, sampling (greedy, temperature, top-k, top-p) against its definition, and
// generate with the caches against generation by full recompute at every step.
#include "file_support.hpp"

#include <shaped/shaped.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <numeric>
#include <span>
#include <stdexcept>
#include <vector>

namespace {

using models_token = shaped::models::token_id;
// vocab 23, context 24, 2 layers, 2 heads, 8 channels.
using Tiny = shaped::models::GPT<shaped::models::gpt_config<23, 24, 2, 2, 8>>;
using B1 = shaped::dim<"B", 1>;
using Td = shaped::dim<"T">;

std::unique_ptr<Tiny> tiny_model(std::uint64_t seed) {
    shaped::Generator gen(seed);
    auto model = std::make_unique<Tiny>(gen);
    // nanoGPT's init makes nearly uniform logits; sharper ones make greedy ids well separated.
    shaped::nn::for_each_parameter(*model, [](std::string_view, auto& p) {
        for (float& v : p.elements()) v *= 8;
    });
    return model;
}

// Row b of a logits tensor's last position.
std::vector<float> last_row(const auto& logits) {
    const std::size_t t = logits.extents()[1] - 1;
    std::vector<float> row(logits.extents()[2]);
    for (std::size_t v = 0; v < row.size(); ++v) row[v] = logits(0, t, v);
    return row;
}

// Generation by full recompute: the whole sequence through the model for every new id.
std::vector<models_token> recompute(const Tiny& model, std::vector<models_token> sequence, std::size_t steps,
                                    const shaped::models::sampling& how, shaped::Generator& gen) {
    std::vector<models_token> out;
    for (std::size_t s = 0; s < steps; ++s) {
        shaped::Tensor<models_token, B1, Td> ids(Td{sequence.size()});
        std::copy(sequence.begin(), sequence.end(), ids.data());
        const auto row = last_row(model(ids));
        const auto id = static_cast<models_token>(shaped::models::sample(std::span<const float>(row), how, gen));
        out.push_back(id);
        sequence.push_back(id);
    }
    return out;
}

std::vector<float> softmax(const std::vector<float>& logits, double temperature) {
    std::vector<float> p(logits.size());
    const float top = *std::max_element(logits.begin(), logits.end());
    double sum = 0;
    for (std::size_t i = 0; i < p.size(); ++i) sum += p[i] = static_cast<float>(std::exp((logits[i] - top) / temperature));
    for (float& x : p) x = static_cast<float>(x / sum);
    return p;
}

}  // namespace

TEST_CASE("sample: greedy is the argmax, as are top_k 1 and top_p 0", "[generate][sample]") {
    shaped::Generator gen(1);
    std::vector<float> logits(17);
    for (int trial = 0; trial < 20; ++trial) {
        gen.fill_normal(std::span<float>(logits));
        const auto best = static_cast<std::size_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
        CHECK(shaped::models::sample(std::span<const float>(logits), {.temperature = 0}, gen) == best);
        CHECK(shaped::models::sample(std::span<const float>(logits), {.temperature = 1.3, .top_k = 1}, gen) == best);
        CHECK(shaped::models::sample(std::span<const float>(logits), {.temperature = 0.7, .top_p = 0}, gen) == best);
    }
}

TEST_CASE("sample draws from softmax(logits / temperature), cut to top-k and to the nucleus", "[generate][sample]") {
    const std::vector<float> logits{1.0f, -0.5f, 2.0f, 0.3f, 1.7f, -2.0f};
    const double temperature = 0.8;
    const auto p = softmax(logits, temperature);
    const auto draw_counts = [&](const shaped::models::sampling& how) {
        shaped::Generator gen(42);
        std::vector<double> counts(logits.size());
        constexpr int draws = 40000;
        for (int i = 0; i < draws; ++i) counts[shaped::models::sample(std::span<const float>(logits), how, gen)] += 1.0 / draws;
        return counts;
    };
    // The whole softmax.
    const auto all = draw_counts({.temperature = temperature});
    for (std::size_t i = 0; i < p.size(); ++i) CHECK(std::abs(all[i] - p[i]) < 0.01);
    // Top 2: ids 2 and 4, renormalised.
    const auto top2 = draw_counts({.temperature = temperature, .top_k = 2});
    for (std::size_t i : {0, 1, 3, 5}) CHECK(top2[i] == 0);
    CHECK(std::abs(top2[2] - p[2] / (p[2] + p[4])) < 0.01);
    // The nucleus of p >= 0.8: the fewest most likely ids reaching it.
    std::vector<std::size_t> order(p.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return p[a] > p[b]; });
    double reached = 0;
    std::size_t keep = 0;
    while (reached < 0.8) reached += p[order[keep++]];
    const auto nucleus = draw_counts({.temperature = temperature, .top_p = 0.8});
    for (std::size_t k = 0; k < order.size(); ++k) {
        INFO("rank " << k);
        if (k < keep) CHECK(std::abs(nucleus[order[k]] - p[order[k]] / reached) < 0.01);
        else CHECK(nucleus[order[k]] == 0);
    }
    // The same seed, the same draws.
    CHECK(draw_counts({.temperature = temperature, .top_p = 0.8}) == nucleus);
}

TEST_CASE("sample's cuts over a large vocabulary keep exactly the ids a full sort keeps", "[generate][sample]") {
    // 3000 logits, spread wide enough that the nucleus is a few dozen ids and most of the
    // vocabulary falls below the cut that spares sorting it.
    constexpr std::size_t vocab = 3000;
    shaped::Generator gen(5);
    const auto drawn = shaped::randn<float, shaped::dim<"V", vocab>>(gen);
    std::vector<float> logits(drawn.data(), drawn.data() + vocab);
    for (float& x : logits) x *= 3.0f;
    logits[17] = logits[18];  // a tie, ordered by id
    const double temperature = 0.9;
    const auto p = softmax(logits, temperature);
    std::vector<std::size_t> order(vocab);
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return logits[a] > logits[b]; });
    const auto draw_counts = [&](const shaped::models::sampling& how) {
        shaped::Generator draws(9);
        std::vector<double> counts(vocab);
        constexpr int n = 20000;
        for (int i = 0; i < n; ++i) counts[shaped::models::sample(std::span<const float>(logits), how, draws)] += 1.0 / n;
        return counts;
    };
    SECTION("the nucleus") {
        double reached = 0;
        std::size_t keep = 0;
        while (reached < 0.9) reached += p[order[keep++]];
        CAPTURE(keep);
        REQUIRE(keep < vocab / 10);
        const auto counts = draw_counts({.temperature = temperature, .top_p = 0.9});
        for (std::size_t k = 0; k < vocab; ++k) {
            INFO("rank " << k);
            if (k < keep) CHECK(std::abs(counts[order[k]] - p[order[k]] / reached) < 0.01);
            else CHECK(counts[order[k]] == 0);
        }
    }
    SECTION("the top 40, then the nucleus within them") {
        const auto counts = draw_counts({.temperature = temperature, .top_k = 40});
        double top = 0;
        for (std::size_t k = 0; k < 40; ++k) top += p[order[k]];
        for (std::size_t k = 0; k < vocab; ++k) {
            INFO("rank " << k);
            if (k < 40) CHECK(std::abs(counts[order[k]] - p[order[k]] / top) < 0.01);
            else CHECK(counts[order[k]] == 0);
        }
    }
}

TEST_CASE("sample refuses what has no meaning", "[generate][sample]") {
    shaped::Generator gen(0);
    const std::vector<float> logits{0.f, 1.f};
    CHECK_THROWS_AS(shaped::models::sample(std::span<const float>(), {}, gen), std::invalid_argument);
    CHECK_THROWS_AS(shaped::models::sample(std::span<const float>(logits), {.temperature = -1}, gen), std::invalid_argument);
    CHECK_THROWS_AS(shaped::models::sample(std::span<const float>(logits), {.top_p = 1.5}, gen), std::invalid_argument);
}

TEST_CASE("generate with the caches gives the ids of full recompute, greedy and sampled", "[generate]") {
    const auto model = tiny_model(5);
    const std::vector<models_token> prompt{3, 14, 1, 7, 7, 20, 0};
    for (const shaped::models::sampling how : {shaped::models::sampling{.temperature = 0},
                                               shaped::models::sampling{.temperature = 0.9, .top_k = 5},
                                               shaped::models::sampling{.temperature = 1.2, .top_p = 0.9}}) {
        for (const std::size_t chunk : {1, 3, 64}) {
            INFO("temperature " << how.temperature << ", prefill chunk " << chunk);
            shaped::Generator a(99), b(99);
            std::vector<models_token> streamed;
            const auto out = shaped::models::generate(*model, {prompt}, {.max_new_tokens = 12, .how = how, .prefill_chunk = chunk}, a,
                                                      [&](std::size_t row, models_token id) {
                                                          CHECK(row == 0);
                                                          streamed.push_back(id);
                                                      });
            CHECK(out[0].ids == recompute(*model, prompt, 12, how, b));
            CHECK(out[0].stopped == shaped::models::stop_reason::max_new_tokens);
            CHECK(streamed == out[0].ids);
        }
    }
}

TEST_CASE("generate runs a batch of ragged prompts as each alone", "[generate]") {
    const auto model = tiny_model(6);
    const std::vector<std::vector<models_token>> prompts{{5, 2, 9}, {1, 1, 4, 22, 8, 0, 13}};
    shaped::Generator gen(0);
    const auto both = shaped::models::generate<2>(*model, prompts, {.max_new_tokens = 9, .how = {.temperature = 0}, .prefill_chunk = 2}, gen);
    for (std::size_t b = 0; b < 2; ++b) {
        const auto alone = shaped::models::generate(*model, {prompts[b]}, {.max_new_tokens = 9, .how = {.temperature = 0}}, gen);
        CHECK(both[b].ids == alone[0].ids);
    }
}

TEST_CASE("generate stops at the end token and at the context's end, and says which", "[generate]") {
    const auto model = tiny_model(7);
    const std::vector<models_token> prompt{4, 4, 8};
    shaped::Generator gen(0);
    const auto free_run = shaped::models::generate(*model, {prompt}, {.max_new_tokens = 6, .how = {.temperature = 0}}, gen);
    REQUIRE(free_run[0].ids.size() == 6);
    // The third id as the end token: kept, and the last.
    const auto ended = shaped::models::generate(
        *model, {prompt}, {.max_new_tokens = 6, .end_token = free_run[0].ids[2], .how = {.temperature = 0}}, gen);
    const auto first_end = std::find(free_run[0].ids.begin(), free_run[0].ids.end(), free_run[0].ids[2]);
    CHECK(ended[0].ids == std::vector<models_token>(free_run[0].ids.begin(), first_end + 1));
    CHECK(ended[0].stopped == shaped::models::stop_reason::end_token);

    // A prompt 2 short of the context: 2 more ids fit, and the id the last position predicts.
    const std::vector<models_token> long_prompt(Tiny::context_dim::extent - 2, 3);
    const auto full = shaped::models::generate(*model, {long_prompt}, {.max_new_tokens = 50, .how = {.temperature = 0}}, gen);
    CHECK(full[0].ids.size() == 3);
    CHECK(full[0].stopped == shaped::models::stop_reason::context);
}

TEST_CASE("generate and GPT refuse inputs that do not fit, naming them", "[generate]") {
    const auto model = tiny_model(8);
    shaped::Generator gen(0);
    CHECK_THROWS_AS(shaped::models::generate(*model, {{}}, {}, gen), shaped::shape_error);
    CHECK(file_support::error_message<shaped::shape_error>([&] {
              shaped::models::generate(*model, {std::vector<models_token>(25, 1)}, {}, gen);
          }) == "shaped::models::generate: prompt 0 holds 25 ids, more than the context's 24");
    CHECK_THROWS_AS(shaped::models::generate<2>(*model, {{1}}, {}, gen), shaped::shape_error);

    shaped::Tensor<models_token, B1, Td> too_long(Td{25});
    CHECK(file_support::error_message<shaped::shape_error>([&] { (void)(*model)(too_long); }) ==
          "shaped::models::GPT: 25 positions do not fit the context P(24)");
    shaped::Tensor<models_token, B1, Td> bad_id(Td{3});
    bad_id(0, 1) = 23;
    CHECK(file_support::error_message<shaped::shape_error>([&] { (void)(*model)(bad_id); }) ==
          "shaped::nn::Embedding: id 23 (element 1 of the ids) is outside the table's V(23) rows");
    shaped::Tensor<models_token, B1, Td> targets(Td{3});
    targets(0, 2) = 40;
    bad_id(0, 1) = 0;
    CHECK(file_support::error_message<shaped::shape_error>([&] { (void)shaped::models::cross_entropy((*model)(bad_id), targets); }) ==
          "shaped::models::cross_entropy: target 40 (element 2 of the targets) is neither -1 (ignored) nor one of the V(23) classes");

    // Decoding past the context: the caches refuse it before anything changes.
    auto caches = std::make_unique<Tiny::cache_type<B1>>();
    shaped::Tensor<models_token, B1, Td> prompt(Td{20});
    (void)(*model)(prompt, *caches);
    shaped::Tensor<models_token, B1, Td> more(Td{5});
    CHECK_THROWS_AS((*model)(more, *caches), shaped::nn::cache_overflow);
    for (const auto& cache : *caches) CHECK(cache.length() == 20);
}

TEST_CASE("GPT's next_logits are the last logits of each row's decoding step, ragged rows too", "[generate]") {
    const auto model = tiny_model(9);
    using B2 = shaped::dim<"B", 2>;
    auto full = std::make_unique<Tiny::cache_type<B2>>();
    auto next = std::make_unique<Tiny::cache_type<B2>>();
    shaped::Tensor<models_token, B2, Td> ids(Td{5});
    for (std::size_t i = 0; i < ids.size(); ++i) ids.data()[i] = static_cast<models_token>((i * 7) % 23);
    // Row 0 takes 5 positions, row 1 only 3; then row 0 none and row 1 one.
    for (const std::array<std::size_t, 2> counts : {std::array<std::size_t, 2>{5, 3}, std::array<std::size_t, 2>{0, 1}}) {
        const auto logits = (*model)(ids, *full, counts);
        const auto last = model->next_logits(ids, *next, counts);
        REQUIRE(last.extents() == std::array<std::size_t, 2>{2, 23});
        for (std::size_t b = 0; b < 2; ++b) {
            if (counts[b] == 0) continue;
            INFO("row " << b << " of counts " << counts[0] << ", " << counts[1]);
            // lm_head over one position a row sums in another order than over all of them.
            for (std::size_t v = 0; v < 23; ++v) CHECK(last(b, v) == Approx(logits(b, counts[b] - 1, v)).margin(1e-5));
        }
        for (std::size_t layer = 0; layer < 2; ++layer) CHECK((*next)[layer].lengths() == (*full)[layer].lengths());
    }
}
