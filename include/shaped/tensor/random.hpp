#pragma once
// A seeded source of random numbers. The same seed gives the same numbers on every platform and
// compiler: the engine is std::mt19937_64 (fully specified by the standard) and the
// distributions are shaped's own, not the standard library's implementation-defined ones.

#include <cstddef>
#include <cstdint>
#include <random>
#include <span>

namespace shaped {

class Generator {
public:
    explicit Generator(std::uint64_t seed);

    // Standard normal samples (Box-Muller).
    void fill_normal(std::span<float> out);
    void fill_normal(std::span<double> out);
    // Uniform samples in [low, high).
    void fill_uniform(std::span<float> out, double low = 0.0, double high = 1.0);
    void fill_uniform(std::span<double> out, double low = 0.0, double high = 1.0);

    // A uniform double in [0, 1) from 53 random bits.
    double uniform();

private:
    std::mt19937_64 engine_;
};

}  // namespace shaped
