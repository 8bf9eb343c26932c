#pragma once
// A Tensor's elements: inline for a small static tensor, one aligned heap block otherwise. Both
// start zero-filled (value-initialised) and copy deeply; a moved-from heap block is empty. A
// block about to be overwritten whole (a Tensor made from an expression) is left unfilled.
//
// While a storage_pool lives on a thread, large heap blocks freed there are kept and handed to
// the next block of the same size: a training step makes the same tensors every step, and
// without the pool each would be fresh pages from the system, faulted in and zeroed again.
// A storage_plan goes further for such a step: it places each block where a layout of the step's
// own lifetimes puts it, so that the step holds its live peak and nothing besides.

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define SHAPED_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SHAPED_ASAN 1
#endif
#endif
#ifdef SHAPED_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace shaped {

// Keeps freed tensor storage for reuse while it lives (see above). Pools nest: the blocks are
// returned to the system when the thread's last pool closes. train::value_and_grad opens one for
// its step; hold one around a training loop to reuse the blocks from step to step.
class storage_pool {
public:
    storage_pool();
    ~storage_pool();
    storage_pool(const storage_pool&) = delete;
    storage_pool& operator=(const storage_pool&) = delete;

    // Bytes kept on this thread, free for reuse.
    static std::size_t kept_bytes();
};

namespace detail {
class plan_state;
}

// Places the large blocks of a region that makes the same tensors in the same order every time it
// runs (a training step) by a plan laid out from their lifetimes. The first run records when each
// block of 64 KiB or more is made and freed (each on pages of its own, returned when freed); the
// runs after it place each block at its offset in one arena, where blocks never alive together
// share bytes: the region holds its live peak, where a pool would also hold every freed block until
// one of its size is asked for again. A run that makes other blocks than the plan's (another shape,
// another path) takes those as it would without a plan, and the next run records again; a block
// still alive when its run ends keeps its bytes (the next run places nothing over them). Entering
// a region gives the storage_pool's kept blocks back, since none of the region's blocks comes from
// it. One thread runs a plan at a time; a region opened inside another is the outer one's.
//
//   shaped::storage_plan plan;                 held across the steps
//   for (...) { const auto step = plan.run(); ... one step ... }
class storage_plan {
public:
    storage_plan();
    ~storage_plan();
    storage_plan(const storage_plan&) = delete;
    storage_plan& operator=(const storage_plan&) = delete;

    class region {
    public:
        ~region();
        region(const region&) = delete;
        region& operator=(const region&) = delete;

    private:
        friend class storage_plan;
        explicit region(detail::plan_state* entered) : entered_(entered) {}
        detail::plan_state* entered_;  // none for a region inside another
    };
    // Opens a run of the region on this thread, until the returned region is destroyed.
    [[nodiscard]] region run();
    // Gives the arena's pages back to the system until the next run, which maps them again: for
    // other work between runs (an evaluation), which would otherwise hold its own peak beside the
    // arena's. Nothing when a block of the arena is still alive.
    void give_back_pages();

    // What the plan did: the arena's bytes (0 until a run has been recorded), and over all runs
    // so far, the runs recorded and the blocks placed in the arena or not (a run that strayed).
    struct statistics {
        std::size_t arena_bytes = 0;
        std::size_t recorded_runs = 0;
        std::size_t placed_blocks = 0;
        std::size_t unplaced_blocks = 0;
    };
    statistics stats() const;

private:
    detail::plan_state* state_;
};

// The heap storage held on this thread since it was made, now and at most: what a step of
// training holds beyond its model and gradients. One meter at a time on a thread.
class storage_meter {
public:
    storage_meter();
    std::size_t held() const;
    std::size_t peak() const;

private:
    std::size_t before_;
};

namespace detail {

// Whole cache lines and the widest SIMD registers: kernels may read a row from its start with
// aligned loads.
inline constexpr std::size_t storage_alignment = 64;

// Blocks at least this large go through the pool; smaller ones are malloc's business.
inline constexpr std::size_t pooled_block_bytes = std::size_t{64} << 10;

// storage_pools open on this thread. Trivially destructible, so that a tensor freed as the
// thread ends (a static one) still finds it, and no pool.
inline thread_local std::size_t open_storage_pools = 0;

// The plan whose region runs on this thread, if one does (src/storage_plan.cpp).
inline thread_local plan_state* running_storage_plan = nullptr;
// Whether any block lies on a plan's pages: until one does, a freed block asks no plan.
inline std::atomic<std::size_t> planned_page_ranges{0};
// A block of `size` bytes for the running plan: placed or recorded, or null where the run strayed.
void* planned_allocate(plan_state& plan, std::size_t size);
// Whether `block` was on a plan's pages (then it is given back there).
bool planned_deallocate(void* block) noexcept;
// The bytes of heap storage alive on this thread (allocated here less freed here), and their
// most since a storage_meter was made.
inline thread_local std::size_t live_storage_bytes = 0;
inline thread_local std::size_t peak_storage_bytes = 0;

// The thread's free blocks, by size (whole pages, so that near sizes share).
class block_pool {
public:
    static block_pool& of_this_thread() {
        thread_local block_pool pool;
        return pool;
    }
    ~block_pool() { release(); }

    static std::size_t rounded(std::size_t bytes) {
        constexpr std::size_t page = 4096;
        return bytes >= pooled_block_bytes && bytes <= std::numeric_limits<std::size_t>::max() - page
                   ? (bytes + page - 1) / page * page
                   : bytes;
    }

    static void* allocate(std::size_t bytes) {
        const std::size_t size = rounded(bytes);
        count(size);
        if (size >= pooled_block_bytes && running_storage_plan)
            if (void* block = planned_allocate(*running_storage_plan, size)) return block;
        if (size >= pooled_block_bytes && open_storage_pools > 0)
            if (void* block = of_this_thread().take(size)) return block;
        return ::operator new(size, std::align_val_t{storage_alignment});
    }

    static void deallocate(void* block, std::size_t bytes) noexcept {
        const std::size_t size = rounded(bytes);
        live_storage_bytes -= std::min(size, live_storage_bytes);  // a block made on another thread
        if (size >= pooled_block_bytes && planned_page_ranges.load(std::memory_order_acquire) > 0 &&
            planned_deallocate(block))
            return;
        if (size >= pooled_block_bytes && open_storage_pools > 0) of_this_thread().keep(block, size);
        else ::operator delete(block, std::align_val_t{storage_alignment});
    }

    void open() { ++open_storage_pools; }
    void close() {
        if (--open_storage_pools == 0) release();
    }
    std::size_t kept() const { return kept_; }
    // Gives the kept blocks back now, pools open or not.
    void give_back() noexcept { release(); }

private:
    static void count(std::size_t size) {
        live_storage_bytes += size;
        peak_storage_bytes = std::max(peak_storage_bytes, live_storage_bytes);
    }
    void* take(std::size_t size) {
        for (auto& [block_size, blocks] : free_) {
            if (block_size != size || blocks.empty()) continue;
            void* block = blocks.back();
            blocks.pop_back();
            kept_ -= size;
#ifdef SHAPED_ASAN
            ASAN_UNPOISON_MEMORY_REGION(block, size);
#endif
            return block;
        }
        return nullptr;
    }
    void keep(void* block, std::size_t size) noexcept {
        try {
            bucket(size).push_back(block);
        } catch (const std::bad_alloc&) {  // no room to note it: give it back
            ::operator delete(block, std::align_val_t{storage_alignment});
            return;
        }
        kept_ += size;
#ifdef SHAPED_ASAN
        ASAN_POISON_MEMORY_REGION(block, size);
#endif
    }
    std::vector<void*>& bucket(std::size_t size) {
        for (auto& [block_size, blocks] : free_)
            if (block_size == size) return blocks;
        return free_.emplace_back(size, std::vector<void*>{}).second;
    }
    void release() noexcept {
        for (auto& [size, blocks] : free_) {
            for (void* block : blocks) {
#ifdef SHAPED_ASAN
                ASAN_UNPOISON_MEMORY_REGION(block, size);
#endif
                ::operator delete(block, std::align_val_t{storage_alignment});
            }
        }
        free_.clear();
        kept_ = 0;
    }

    std::size_t kept_ = 0;
    std::vector<std::pair<std::size_t, std::vector<void*>>> free_;
};

// Set by the test suite: a block left unfilled is filled with NaN (or 0xA5 bytes), so that a
// kernel reading its target before writing it shows in every result.
inline bool poison_unfilled_storage = false;

// Storage for elements that are written before anything reads them.
struct for_overwrite_t {};
inline constexpr for_overwrite_t for_overwrite{};

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
    heap_storage(std::size_t size, for_overwrite_t) : data_(allocate(size)), size_(size) {
        std::uninitialized_default_construct_n(data_, size_);
        if (poison_unfilled_storage && size_ > 0) poison();
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
        block_pool::deallocate(data_, size_ * sizeof(T));
    }

    std::size_t size() const { return size_; }
    T* data() { return data_; }
    const T* data() const { return data_; }

private:
    // No block for no elements, as an empty std::vector.
    static T* allocate(std::size_t size) {
        if (size == 0) return nullptr;
        return static_cast<T*>(block_pool::allocate(size * sizeof(T)));
    }
    void poison() {
        if constexpr (std::is_floating_point_v<T>) std::fill_n(data_, size_, std::numeric_limits<T>::quiet_NaN());
        else if constexpr (std::is_trivially_copyable_v<T>) std::memset(static_cast<void*>(data_), 0xA5, size_ * sizeof(T));
    }

    T* data_ = nullptr;
    std::size_t size_ = 0;
};

}  // namespace detail

inline storage_pool::storage_pool() { detail::block_pool::of_this_thread().open(); }
inline storage_pool::~storage_pool() { detail::block_pool::of_this_thread().close(); }
inline std::size_t storage_pool::kept_bytes() { return detail::block_pool::of_this_thread().kept(); }

inline storage_meter::storage_meter() : before_(detail::live_storage_bytes) {
    detail::peak_storage_bytes = detail::live_storage_bytes;
}
inline std::size_t storage_meter::held() const { return detail::live_storage_bytes - std::min(before_, detail::live_storage_bytes); }
inline std::size_t storage_meter::peak() const { return detail::peak_storage_bytes - std::min(before_, detail::peak_storage_bytes); }

}  // namespace shaped
