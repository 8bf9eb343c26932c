#pragma once
// What the vectorised kernels of src/ share (a private header): xsimd's vectors of the widest
// instruction set the build targets, the largest of a vector's lanes, and aligned working memory
// kept per thread between calls, so that a steady state allocates nothing.

#include <xsimd/xsimd.hpp>

#include <algorithm>
#include <cstddef>
#include <vector>

namespace shaped::kernels::simd {

template <class T>
using vec = xsimd::batch<T>;
template <class T>
inline constexpr std::size_t lanes = vec<T>::size;

// The largest of v's lanes (xsimd 8 has no reduction for it).
template <class T>
T largest_lane(const vec<T>& v) {
    alignas(64) T lane[lanes<T>];
    v.store_aligned(lane);
    return *std::max_element(lane, lane + lanes<T>);
}

constexpr std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

template <class T>
using buffer = std::vector<T, xsimd::aligned_allocator<T>>;

// b's first n elements, b grown to hold them first.
template <class T>
T* sized(buffer<T>& b, std::size_t n) {
    if (b.size() < n) b.resize(n);
    return b.data();
}

// The calling thread's own Scratch (a struct of buffers), one for each kind.
template <class Scratch>
Scratch& thread_scratch() {
    thread_local Scratch s;
    return s;
}

}  // namespace shaped::kernels::simd
