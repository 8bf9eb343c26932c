// storage_plan (tensor/storage.hpp): a region's large blocks, recorded on pages of their own the
// first run, then placed in one arena laid out from their lifetimes.
//
// Every block on a plan's pages is in `page_ranges`, so that a tensor freed anywhere (after its
// run, on another thread, after its plan is gone) finds where it lies. One mutex guards them and
// every plan: a run makes a few hundred large blocks, each taking it once.

#include <shaped/tensor/storage.hpp>

#include <algorithm>
#include <cstddef>
#include <limits>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

#include <sys/mman.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace shaped {
namespace detail {

namespace {

// Pages straight from the system, and back: a block given back is resident no more, where
// malloc would keep the pages of a block freed in the middle of its heap.
std::byte* map_pages(std::size_t bytes) {
    void* pages = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (pages == MAP_FAILED) throw std::bad_alloc();
    return static_cast<std::byte*>(pages);
}
void unmap_pages(std::byte* pages, std::size_t bytes) noexcept { ::munmap(pages, bytes); }

// Under ASan the arena's bytes outside a live block are poisoned, as a freed heap block is.
void poison(std::byte* bytes, std::size_t n) noexcept {
#ifdef SHAPED_ASAN
    ASAN_POISON_MEMORY_REGION(bytes, n);
#else
    (void)bytes, (void)n;
#endif
}
void unpoison(std::byte* bytes, std::size_t n) noexcept {
#ifdef SHAPED_ASAN
    ASAN_UNPOISON_MEMORY_REGION(bytes, n);
#else
    (void)bytes, (void)n;
#endif
}

constexpr std::size_t not_freed = std::numeric_limits<std::size_t>::max();

// Each block's slot is this much longer than the block, which starts a few cache lines into it:
// blocks at page-aligned offsets map their rows onto the same cache sets (and a kernel reading
// one while writing another stalls on 4 KiB aliasing), which slowed a training step by 5-10%.
constexpr std::size_t slot_slack = 1024;
std::size_t stagger(std::size_t k) { return 64 * ((k * 5) % 16); }

// A laid-out plan's pages and the blocks on them now (offset, bytes).
struct arena {
    std::byte* base = nullptr;
    std::size_t bytes = 0;
    std::vector<std::pair<std::size_t, std::size_t>> live;
    // Its plan laid out another or is gone: unmapped when its last block is freed.
    bool abandoned = false;
};

}  // namespace

// One block of a recorded run: its bytes, when it was made and freed (counted in the run's
// blocks made and freed so far), and where the layout puts it.
struct recorded_block {
    std::size_t bytes = 0;
    std::size_t made = 0;
    std::size_t freed = not_freed;  // still alive when the run ended: never placed
    std::size_t offset = 0;
};

class plan_state {
public:
    std::vector<recorded_block> blocks;
    arena* laid_out = nullptr;  // the arena of `blocks`, mapped at the first run after recording
    std::size_t layout_bytes = 0;
    bool recording = false;
    bool record_next = true;
    bool strayed = false;  // the open run made a block the plan did not foresee
    std::size_t next = 0;  // blocks the open run has made
    std::size_t events = 0;  // blocks the open recording has made and freed
    storage_plan::statistics stats;
};

namespace {

// Where a block on a plan's pages lies: in an arena, or on pages of its own (a recorded block).
struct page_range {
    std::byte* begin = nullptr;
    std::size_t bytes = 0;
    arena* in = nullptr;             // null: the block's own pages
    plan_state* recording = nullptr;  // the plan whose open recording made it
    std::size_t index = 0;           // its block there
};

std::mutex plan_mutex;
std::vector<page_range> page_ranges;

void add_range(const page_range& range) {
    page_ranges.push_back(range);
    planned_page_ranges.fetch_add(1, std::memory_order_release);
}
void remove_range(std::vector<page_range>::iterator at) {
    page_ranges.erase(at);
    planned_page_ranges.fetch_sub(1, std::memory_order_release);
}

void free_arena(arena* a) {
    const auto at = std::find_if(page_ranges.begin(), page_ranges.end(), [&](const page_range& r) { return r.in == a; });
    if (at != page_ranges.end()) remove_range(at);
    unpoison(a->base, a->bytes);
    unmap_pages(a->base, a->bytes);
    delete a;
}

// The plan lets go of its arena: unmapped now, or when its last block is freed.
void abandon_arena(plan_state& plan) {
    if (!plan.laid_out) return;
    if (plan.laid_out->live.empty()) free_arena(plan.laid_out);
    else plan.laid_out->abandoned = true;
    plan.laid_out = nullptr;
}

// Greedy by size (as TensorFlow Lite's arena planner): the largest block first, each at the lowest
// offset clear of every block placed before it whose lifetime meets its own. A block still alive
// when the run ended is left out: it is never placed.
std::size_t lay_out(std::vector<recorded_block>& blocks) {
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < blocks.size(); ++i)
        if (blocks[i].freed != not_freed) order.push_back(i);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return blocks[a].bytes > blocks[b].bytes; });
    std::size_t total = 0;
    std::vector<std::pair<std::size_t, std::size_t>> taken;  // offset, end of the blocks alive beside it
    for (std::size_t placed = 0; placed < order.size(); ++placed) {
        recorded_block& block = blocks[order[placed]];
        taken.clear();
        for (std::size_t j = 0; j < placed; ++j) {
            const recorded_block& other = blocks[order[j]];
            if (block.made < other.freed && other.made < block.freed)
                taken.emplace_back(other.offset, other.offset + other.bytes + slot_slack);
        }
        std::sort(taken.begin(), taken.end());
        std::size_t offset = 0;
        for (const auto& [begin, end] : taken) {
            if (offset + block.bytes + slot_slack <= begin) break;
            offset = std::max(offset, end);
        }
        block.offset = offset;
        total = std::max(total, offset + block.bytes + slot_slack);
    }
    return total;
}

bool clear_in(const arena& a, std::size_t offset, std::size_t bytes) {
    return std::none_of(a.live.begin(), a.live.end(), [&](const auto& live) {
        return offset < live.first + live.second && live.first < offset + bytes;
    });
}

}  // namespace

void* planned_allocate(plan_state& plan, std::size_t size) {
    const std::lock_guard lock(plan_mutex);
    if (plan.recording) {
        plan.blocks.push_back({.bytes = size, .made = plan.events});
        std::byte* pages = nullptr;
        try {
            pages = map_pages(size);
            add_range({pages, size, nullptr, &plan, plan.blocks.size() - 1});
        } catch (...) {  // nothing recorded, nothing mapped
            plan.blocks.pop_back();
            if (pages) unmap_pages(pages, size);
            throw;
        }
        ++plan.events;
        return pages;
    }
    const std::size_t k = plan.next++;
    arena* const a = plan.laid_out;
    if (k >= plan.blocks.size() || plan.blocks[k].bytes != size) {
        plan.strayed = true;
    } else if (a && plan.blocks[k].freed != not_freed && clear_in(*a, plan.blocks[k].offset, size + slot_slack)) {
        a->live.emplace_back(plan.blocks[k].offset, size + slot_slack);
        ++plan.stats.placed_blocks;
        std::byte* const block = a->base + plan.blocks[k].offset + stagger(k);
        unpoison(block, size);
        return block;
    } else if (plan.blocks[k].freed != not_freed) {
        plan.strayed = true;  // a block of an earlier run still holds its bytes
    }
    ++plan.stats.unplaced_blocks;
    return nullptr;
}

bool planned_deallocate(void* block) noexcept {
    const std::lock_guard lock(plan_mutex);
    auto* const p = static_cast<std::byte*>(block);
    const auto at = std::find_if(page_ranges.begin(), page_ranges.end(),
                                 [&](const page_range& r) { return r.begin <= p && p < r.begin + r.bytes; });
    if (at == page_ranges.end()) return false;
    if (arena* const a = at->in) {
        const auto offset = static_cast<std::size_t>(p - a->base);  // in its slot, a stagger from its start
        const auto live = std::find_if(a->live.begin(), a->live.end(),
                                       [&](const auto& l) { return l.first <= offset && offset < l.first + l.second; });
        if (live != a->live.end()) {
            poison(a->base + live->first, live->second);
            a->live.erase(live);
        }
        if (a->abandoned && a->live.empty()) free_arena(a);
        return true;
    }
    if (plan_state* const plan = at->recording) plan->blocks[at->index].freed = plan->events++;
    unmap_pages(at->begin, at->bytes);
    remove_range(at);
    return true;
}

}  // namespace detail

storage_plan::storage_plan() : state_(new detail::plan_state) {}

storage_plan::~storage_plan() {
    const std::lock_guard lock(detail::plan_mutex);
    if (detail::running_storage_plan == state_) detail::running_storage_plan = nullptr;
    for (auto& range : detail::page_ranges)
        if (range.recording == state_) range.recording = nullptr;
    detail::abandon_arena(*state_);
    delete state_;
}

storage_plan::region storage_plan::run() {
    if (detail::running_storage_plan) return region(nullptr);
    // None of the run's large blocks comes from the pool: what it keeps would only add to the
    // run's peak. Given back, and malloc's free pages with them.
    auto& pool = detail::block_pool::of_this_thread();
    if (pool.kept() > 0) {
        pool.give_back();
#if defined(__GLIBC__)
        ::malloc_trim(0);
#endif
    }
    const std::lock_guard lock(detail::plan_mutex);
    detail::plan_state& plan = *state_;
    plan.recording = plan.record_next;
    if (plan.recording) {
        detail::abandon_arena(plan);
        plan.blocks.clear();
        plan.events = 0;
        ++plan.stats.recorded_runs;
    } else if (!plan.laid_out && plan.layout_bytes > 0) {
        auto* const a = new detail::arena;
        try {
            a->base = detail::map_pages(plan.layout_bytes);
            a->bytes = plan.layout_bytes;
            detail::add_range({a->base, a->bytes, a, nullptr, 0});
        } catch (...) {
            if (a->base) detail::unmap_pages(a->base, a->bytes);
            delete a;
            throw;
        }
        detail::poison(a->base, a->bytes);
        plan.laid_out = a;
    }
    plan.next = 0;
    plan.strayed = false;
    detail::running_storage_plan = state_;
    return region(state_);
}

storage_plan::region::~region() {
    if (!entered_) return;
    const std::lock_guard lock(detail::plan_mutex);
    detail::plan_state& plan = *entered_;
    detail::running_storage_plan = nullptr;
    if (plan.recording) {
        // A block still alive is the caller's now: its later free only gives its pages back.
        for (auto& range : detail::page_ranges)
            if (range.recording == &plan) range.recording = nullptr;
        plan.layout_bytes = detail::lay_out(plan.blocks);
        plan.stats.arena_bytes = plan.layout_bytes;
        plan.recording = false;
        plan.record_next = false;
    } else {
        plan.record_next = plan.strayed || plan.next != plan.blocks.size();
    }
}

void storage_plan::give_back_pages() {
    const std::lock_guard lock(detail::plan_mutex);
    if (state_->laid_out && state_->laid_out->live.empty()) detail::abandon_arena(*state_);
}

storage_plan::statistics storage_plan::stats() const {
    const std::lock_guard lock(detail::plan_mutex);
    return state_->stats;
}

}  // namespace shaped
