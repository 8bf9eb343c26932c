#pragma once
// cross_entropy(logits, targets) of differentiated logits: F.cross_entropy's mean over the
// targets that are not -1, as models::cross_entropy computes it, recorded as one operation whose
// derivative is the fused row kernel's softmax - one-hot (kernels::cross_entropy_rows): the
// logits' gradient is written row by row, with no log-softmax held in between.
//
//   auto loss = cross_entropy(model(idx), targets);    a 0-d traced value

#include <shaped/kernels/rows_backward.hpp>
#include <shaped/models/gpt.hpp>
#include <shaped/train/derivatives.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

namespace shaped::train {

namespace detail {

// The loss, and what its derivative reads: the logits (rows x vocab, on the tape) and targets.
template <class Logits, class T>
class recorded_cross_entropy final : public recorded_value<T> {
public:
    recorded_cross_entropy(Tensor<T> loss, Logits logits, std::vector<std::int64_t> targets, std::size_t counted)
        : recorded_value<T>(std::move(loss)), logits_(std::move(logits)), targets_(std::move(targets)),
          counted_(counted) {}

    void backward() override {
        if (!this->gradient || counted_ == 0 || !wants_gradient(logits_)) return;
        const std::size_t vocab = logits_.extents()[rank_of<Logits> - 1];
        const double scale = static_cast<double>(this->gradient->item()) / static_cast<double>(counted_);
        const auto write = [&](T* dlogits) {
            kernels::cross_entropy_rows(logits_.data(), targets_.data(), targets_.size(), vocab, dlogits, scale);
        };
        if constexpr (is_saved_traced<Logits>) {
            // The logits' first gradient (as a language model's are): written straight into it.
            if (const auto target = logits_.record().gradient_to_cover(); target.unfilled) {
                write(target.data);
                return;
            }
        }
        std::vector<T> dlogits(targets_.size() * vocab);
        write(dlogits.data());
        using G = view_for<const T, dims_of<Logits>>;
        add_gradient(*gradient_view(logits_), G(dlogits.data(), logits_.extents(), row_major_strides(logits_.extents())));
    }

private:
    Logits logits_;
    std::vector<std::int64_t> targets_;
    std::size_t counted_;
};

}  // namespace detail

// logits (..., V), targets (...) integers: -1 is ignored, and any other target outside [0, V)
// is a shape_error, before any work. A 0-d value: traced (recorded) where the logits are being
// differentiated, a Tensor otherwise, so that one loss serves both.
template <Expression Logits, Expression Targets>
    requires std::integral<value_type_of<Targets>>
auto cross_entropy(const Logits& logits, const Targets& targets) {
    using T = value_type_of<Logits>;
    using V = dim_at<rank_of<Logits> - 1, dims_of<Logits>>;
    static_assert(rank_of<Targets> + 1 == rank_of<Logits>, "shaped::train::cross_entropy: logits are (..., V), targets (...)");
    tape* t = tape::active();
    // The logits as stored rows: a traced value as it is, anything else evaluated (recorded).
    const auto scores = [&] {
        if constexpr (is_traced<Logits>) return logits;
        else return eval(logits);
    }();
    const auto ids = tensor_for<std::int64_t, dims_of<Targets>>(detail::saved(targets, nullptr));
    std::vector<std::int64_t> wanted(ids.data(), ids.data() + ids.size());
    const std::size_t vocab = scores.extents()[rank_of<Logits> - 1];
    const std::size_t counted = models::detail::counted_targets(std::span<const std::int64_t>(wanted), V::name.view(), vocab);
    const auto sum = kernels::cross_entropy_rows(scores.data(), wanted.data(), wanted.size(), vocab, nullptr, 0.0);
    Tensor<T> loss;
    loss.fill(static_cast<T>(sum.loss / static_cast<double>(counted)));  // NaN with none counted, as torch's
    if constexpr (!reads_traced<Logits>) {
        return loss;
    } else {
        auto saved_scores = detail::saved(scores, t);
        using record_type = detail::recorded_cross_entropy<decltype(saved_scores), T>;
        return detail::on_tape<T>(
            std::make_shared<record_type>(std::move(loss), std::move(saved_scores), std::move(wanted), counted));
    }
}

}  // namespace shaped::train
