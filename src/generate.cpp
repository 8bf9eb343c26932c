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
    if (how.temperature == 0 || how.top_k == 1 || how.top_p == 0) return best;

    // Ids by descending logit (ties by id), cut to the top k.
    std::vector<std::size_t> order(logits.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return logits[a] > logits[b]; });
    if (how.top_k > 0 && how.top_k < order.size()) order.resize(how.top_k);

    // softmax(logits / temperature) over them, in double.
    std::vector<double> p(order.size());
    const double top = static_cast<double>(logits[order[0]]);
    double sum = 0;
    for (std::size_t i = 0; i < order.size(); ++i) sum += p[i] = std::exp((static_cast<double>(logits[order[i]]) - top) / how.temperature);
    for (double& x : p) x /= sum;

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
