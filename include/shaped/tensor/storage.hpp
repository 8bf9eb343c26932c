#pragma once
// A Tensor's elements: inline for a small static tensor, one aligned heap block otherwise. Both
// start zero-filled (value-initialised) and copy deeply; a moved-from heap block is empty.

#include <algorithm>
#include <cstddef>
#include <memory>
#include <new>
#include <utility>

namespace shaped::detail {

// Whole cache lines and the widest SIMD registers: kernels may read a row from its start with
// aligned loads.
inline constexpr std::size_t storage_alignment = 64;

template <class T, std::size_t N>
struct inline_storage {
    static constexpr std::size_t size() { return N; }
    T* data() { return elements; }
    const T* data() const { return elements; }

    alignas(storage_alignment) T elements[N == 0 ? 1 : N]{};
};

template <class T>
class heap_storage {
public:
    heap_storage() = default;
    explicit heap_storage(std::size_t size) : data_(allocate(size)), size_(size) {
        std::uninitialized_value_construct_n(data_, size_);
    }
    heap_storage(const heap_storage& other) : data_(allocate(other.size_)), size_(other.size_) {
        std::uninitialized_copy_n(other.data_, size_, data_);
    }
    heap_storage(heap_storage&& other) noexcept
        : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
    heap_storage& operator=(const heap_storage& other) {
        if (this != &other) *this = heap_storage(other);
        return *this;
    }
    heap_storage& operator=(heap_storage&& other) noexcept {
        std::swap(data_, other.data_);
        std::swap(size_, other.size_);
        return *this;
    }
    ~heap_storage() {
        if (!data_) return;
        std::destroy_n(data_, size_);
        ::operator delete(data_, std::align_val_t{storage_alignment});
    }

    std::size_t size() const { return size_; }
    T* data() { return data_; }
    const T* data() const { return data_; }

private:
    // No block for no elements, as an empty std::vector.
    static T* allocate(std::size_t size) {
        if (size == 0) return nullptr;
        return static_cast<T*>(::operator new(size * sizeof(T), std::align_val_t{storage_alignment}));
    }

    T* data_ = nullptr;
    std::size_t size_ = 0;
};

}  // namespace shaped::detail
