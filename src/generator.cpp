// Generator: platform-independent random samples.
#include <shaped/tensor/random.hpp>

#include <algorithm>
#include <cmath>
#include <numbers>

namespace shaped {

Generator::Generator(std::uint64_t seed) : engine_(seed) {}

double Generator::uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }

namespace {
template <class T>
void normal_into(Generator& gen, std::span<T> out) {
    // Box-Muller makes samples in pairs; 1 - u keeps the logarithm's argument in (0, 1].
    for (std::size_t i = 0; i < out.size(); i += 2) {
        const double radius = std::sqrt(-2.0 * std::log(1.0 - gen.uniform()));
        const double angle = 2.0 * std::numbers::pi * gen.uniform();
        out[i] = static_cast<T>(radius * std::cos(angle));
        if (i + 1 < out.size()) out[i + 1] = static_cast<T>(radius * std::sin(angle));
    }
}

template <class T>
void uniform_into(Generator& gen, std::span<T> out, double low, double high) {
    // Rounding to T can carry a draw just below high up to high itself; keep the range half-open.
    const T top = std::nextafter(static_cast<T>(high), static_cast<T>(low));
    for (auto& x : out) x = std::min(static_cast<T>(low + (high - low) * gen.uniform()), top);
}
}  // namespace

void Generator::fill_normal(std::span<float> out) { normal_into(*this, out); }
void Generator::fill_normal(std::span<double> out) { normal_into(*this, out); }
void Generator::fill_uniform(std::span<float> out, double low, double high) { uniform_into(*this, out, low, high); }
void Generator::fill_uniform(std::span<double> out, double low, double high) { uniform_into(*this, out, low, high); }

}  // namespace shaped
