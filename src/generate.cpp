// Sampling one id from a row of logits (models/generate.hpp), and the checks of generate's
// prompts.

#include <shaped/models/generate.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>

namespace shaped::models {

namespace {

template <class T>
std::size_t sample_from(std::span<const T> logits, const sampling& how, Generator& gen) {
    if (logits.empty()) throw std::invalid_argument("shaped::models::sample: no logits to sample from");
    if (!(how.temperature >= 0)) throw std::invalid_argument("shaped::models::sample: the temperature is negative");
    if (!(how.top_p >= 0 && how.top_p <= 1)) throw std::invalid_argument("shaped::models::sample: top_p is outside [0, 1]");
    // The most likely id; the first of equals, as torch.argmax.
    const auto best = static_cast<std::size_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    if (how.temperature == 0 || how.top_k == 1 || how.top_p == 0 || logits.size() == 1) return best;

    // exp((logit - top) / temperature): softmax's numerators, in double.
    const double top = static_cast<double>(logits[best]);
    const auto weight = [&](std::size_t id) { return std::exp((static_cast<double>(logits[id]) - top) / how.temperature); };
    // The ids the cuts may keep, most likely first (ties by id, as a stable sort by logit would
    // order them), and the softmax's denominator over the ids the cuts start from. Neither cut
    // sorts the whole vocabulary: top-k sorts k ids, and an id below (1 - top_p) / (n - 1) of
    // the probability cannot be in the nucleus (the ids after it sum to less than 1 - top_p),
    // so only the ids above that are sorted (llama2.c's cut). The whole softmax needs no order.
    const std::size_t n = logits.size();
    const auto before = [&](std::size_t a, std::size_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
    std::vector<std::size_t> order;
    double sum = 0;
    if (how.top_k > 0 && how.top_k < n) {
        order.resize(n);
        std::iota(order.begin(), order.end(), std::size_t{0});
        std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(how.top_k), order.end(), before);
        order.resize(how.top_k);
        for (std::size_t id : order) sum += weight(id);
    } else if (how.top_p < 1) {
        std::vector<double> weights(n);
        for (std::size_t id = 0; id < n; ++id) sum += weights[id] = weight(id);
        const double floor = (1 - how.top_p) / static_cast<double>(n - 1) * sum;
        for (std::size_t id = 0; id < n; ++id)
            if (id == best || weights[id] >= floor) order.push_back(id);
        std::sort(order.begin(), order.end(), before);
    } else {
        order.resize(n);
        std::iota(order.begin(), order.end(), std::size_t{0});
        for (std::size_t id : order) sum += weight(id);
    }
    std::vector<double> p(order.size());
    for (std::size_t i = 0; i < order.size(); ++i) p[i] = weight(order[i]) / sum;

    // The nucleus: the fewest ids whose probability reaches top_p.
    if (how.top_p < 1) {
        double reached = 0;
        std::size_t keep = 0;
        while (keep < p.size() && reached < how.top_p) reached += p[keep++];
        p.resize(keep);
        order.resize(keep);
        for (double& x : p) x /= reached;
    }
    const double u = gen.uniform();
    double cumulative = 0;
    for (std::size_t i = 0; i < p.size(); ++i) {
        cumulative += p[i];
        if (u < cumulative) return order[i];
    }
    return order.back();  // u within rounding of 1
}

}  // namespace

std::size_t sample(std::span<const float> logits, const sampling& how, Generator& gen) { return sample_from(logits, how, gen); }
std::size_t sample(std::span<const double> logits, const sampling& how, Generator& gen) { return sample_from(logits, how, gen); }

namespace detail {

void check_prompts(const std::vector<std::vector<token_id>>& prompts, std::size_t batch, std::size_t context) {
    if (prompts.size() != batch)
        throw shape_error("shaped::models::generate: " + std::to_string(prompts.size()) + " prompts for a batch of " +
                          std::to_string(batch));
    for (std::size_t b = 0; b < batch; ++b) {
        if (prompts[b].empty()) throw shape_error("shaped::models::generate: prompt " + std::to_string(b) + " is empty");
        if (prompts[b].size() > context)
            throw shape_error("shaped::models::generate: prompt " + std::to_string(b) + " holds " +
                              std::to_string(prompts[b].size()) + " ids, more than the context's " + std::to_string(context));
    }
}

}  // namespace detail

}  // namespace shaped::models
