// The storage pool (tensor/storage.hpp): while one is open on a thread, a freed heap block of
// 64 KiB or more is kept and handed to the next tensor of its size (zero-filled again where the
// tensor starts so); smaller blocks are malloc's; the last pool to close gives the blocks back.
// And the storage plan, below.
#include <shaped/shaped.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <thread>

namespace {
using namespace shaped;
using Pooled = dim<"Pooled", 1 << 14>;  // 16384 floats: 64 KiB, the least the pool keeps
using Wider = dim<"Wider", 3 << 13>;    // 96 KiB
using Below = dim<"Below", 1 << 13>;    // 32 KiB: on the heap, not pooled
constexpr std::size_t pooled_bytes = std::size_t{64} << 10;
}  // namespace

TEST_CASE("storage pool: a freed block is the next block of its size, zero-filled again", "[storage]") {
    const std::size_t before = storage_pool::kept_bytes();
    {
        const storage_pool pool;
        const float* first = nullptr;
        {
            Tensor<float, Pooled> a;
            a.fill(1.0f);
            first = a.data();
        }
        REQUIRE(storage_pool::kept_bytes() == before + pooled_bytes);
        const Tensor<float, Wider> other;  // another size: a block of its own
        REQUIRE(static_cast<const void*>(other.data()) != static_cast<const void*>(first));
        REQUIRE(storage_pool::kept_bytes() == before + pooled_bytes);
        const Tensor<float, Pooled> b;
        REQUIRE(b.data() == first);
        REQUIRE(storage_pool::kept_bytes() == before);
        REQUIRE(std::all_of(b.data(), b.data() + b.size(), [](float v) { return v == 0.0f; }));
        {
            const Tensor<float, Below> small;  // freed to malloc, not kept
        }
        REQUIRE(storage_pool::kept_bytes() == before);
    }
    REQUIRE(storage_pool::kept_bytes() == 0);  // the last pool closed: every block given back
}

TEST_CASE("storage pool: pools nest, and the blocks are kept until the outermost closes", "[storage]") {
    const storage_pool outer;
    {
        const storage_pool inner;
        const Tensor<float, Pooled> a;
    }
    REQUIRE(storage_pool::kept_bytes() >= pooled_bytes);
}

TEST_CASE("storage pool: without a pool nothing is kept", "[storage]") {
    {
        const Tensor<float, Pooled> a;
    }
    REQUIRE(storage_pool::kept_bytes() == 0);
}

// ---- the storage plan --------------------------------------------------------------------------
// A run of a region records its large blocks; the runs after it place them in one arena laid out
// from their lifetimes (tensor/storage.hpp).

namespace {
constexpr std::size_t wider_bytes = std::size_t{96} << 10;

// Whether the 64 KiB blocks at x and y share bytes.
bool overlap(const float* x, const float* y) {
    const auto a = reinterpret_cast<std::uintptr_t>(x), b = reinterpret_cast<std::uintptr_t>(y);
    return a < b + pooled_bytes && b < a + pooled_bytes;
}

bool all_equal(const float* data, std::size_t n, float value) {
    return std::all_of(data, data + n, [&](float v) { return v == value; });
}

// The addresses of a run's three blocks, and whether each held its values while it lived.
struct step_blocks {
    const float* a = nullptr;
    const float* b = nullptr;
    const float* c = nullptr;
    bool zero_filled = true;
    bool kept_values = true;
};

// a and b alive together, then b and c: a and c are never alive together.
step_blocks step(storage_plan& plan) {
    const auto run = plan.run();
    step_blocks seen;
    std::optional<Tensor<float, Pooled>> a(std::in_place);
    Tensor<float, Wider> b;
    seen.zero_filled = all_equal(a->data(), a->size(), 0.0f) && all_equal(b.data(), b.size(), 0.0f);
    a->fill(1.0f);
    b.fill(2.0f);
    seen.a = a->data();
    seen.b = b.data();
    seen.kept_values = all_equal(a->data(), a->size(), 1.0f);
    a.reset();
    Tensor<float, Pooled> c;
    seen.zero_filled = seen.zero_filled && all_equal(c.data(), c.size(), 0.0f);
    c.fill(3.0f);
    seen.c = c.data();
    seen.kept_values = seen.kept_values && all_equal(b.data(), b.size(), 2.0f) && all_equal(c.data(), c.size(), 3.0f);
    return seen;
}
}  // namespace

TEST_CASE("storage plan: from the second run each block lies where the layout puts it, in the live peak", "[storage]") {
    storage_plan plan;
    const step_blocks recorded = step(plan);
    REQUIRE(plan.stats().recorded_runs == 1);
    REQUIRE(plan.stats().placed_blocks == 0);
    // a and c share bytes; b lies beside them: about 160 KiB, the most ever alive at once.
    REQUIRE(plan.stats().arena_bytes >= wider_bytes + pooled_bytes);
    REQUIRE(plan.stats().arena_bytes < wider_bytes + 2 * pooled_bytes);
    REQUIRE(recorded.kept_values);

    const step_blocks second = step(plan);
    REQUIRE(plan.stats().placed_blocks == 3);
    REQUIRE(plan.stats().unplaced_blocks == 0);
    REQUIRE(overlap(second.a, second.c));
    REQUIRE(!overlap(second.a, second.b));
    REQUIRE(second.zero_filled);  // c over a's ones: zero-filled again, as a tensor starts
    REQUIRE(second.kept_values);

    const step_blocks third = step(plan);
    REQUIRE(plan.stats().recorded_runs == 1);
    REQUIRE(plan.stats().placed_blocks == 6);
    REQUIRE(third.a == second.a);
    REQUIRE(third.b == second.b);
    REQUIRE(third.zero_filled);
    REQUIRE(third.kept_values);
}

TEST_CASE("storage plan: a run that strays takes its blocks without the plan, and the next run records again", "[storage]") {
    storage_plan plan;
    step(plan);
    step(plan);
    {
        const auto run = plan.run();
        Tensor<float, Wider> b;  // the plan's first block is 64 KiB
        Tensor<float, Pooled> a;
        b.fill(2.0f);
        a.fill(1.0f);
        REQUIRE(all_equal(b.data(), b.size(), 2.0f));
        REQUIRE(all_equal(a.data(), a.size(), 1.0f));
    }
    REQUIRE(plan.stats().unplaced_blocks >= 1);
    REQUIRE(plan.stats().recorded_runs == 1);
    step(plan);  // records the path it takes now
    REQUIRE(plan.stats().recorded_runs == 2);
    const auto placed = plan.stats().placed_blocks;
    const step_blocks placed_again = step(plan);
    REQUIRE(plan.stats().placed_blocks == placed + 3);
    REQUIRE(overlap(placed_again.a, placed_again.c));
    REQUIRE(placed_again.kept_values);
}

TEST_CASE("storage plan: a block alive when its run ends keeps its bytes through the runs after it", "[storage]") {
    storage_plan plan;
    step(plan);
    std::optional<Tensor<float, Pooled>> kept;
    {
        const auto run = plan.run();  // the plan's blocks, c still alive when the run ends
        std::optional<Tensor<float, Pooled>> a(std::in_place);
        const Tensor<float, Wider> b;
        a.reset();
        kept.emplace();
        kept->fill(7.0f);
    }
    REQUIRE(plan.stats().placed_blocks == 3);
    const step_blocks next = step(plan);  // a's and c's place is c's still: those two stray
    REQUIRE(plan.stats().unplaced_blocks == 2);
    REQUIRE(!overlap(next.a, kept->data()));
    REQUIRE(!overlap(next.c, kept->data()));
    REQUIRE(next.kept_values);
    REQUIRE(all_equal(kept->data(), kept->size(), 7.0f));
    kept.reset();
    step(plan);  // records again
    const step_blocks placed = step(plan);
    REQUIRE(plan.stats().recorded_runs == 2);
    REQUIRE(overlap(placed.a, placed.c));
    REQUIRE(placed.kept_values);
}

TEST_CASE("storage plan: a block made in a recorded run and kept after it is the caller's", "[storage]") {
    storage_plan plan;
    std::optional<Tensor<float, Pooled>> kept;
    {
        const auto run = plan.run();
        kept.emplace();
        kept->fill(5.0f);
    }
    REQUIRE(plan.stats().arena_bytes == 0);  // never freed in its run: never placed
    {
        const auto run = plan.run();
        const Tensor<float, Pooled> again;  // the same block of the plan: taken as without it
        REQUIRE(again.data() != kept->data());
        REQUIRE(all_equal(again.data(), again.size(), 0.0f));
    }
    REQUIRE(all_equal(kept->data(), kept->size(), 5.0f));
    REQUIRE(plan.stats().unplaced_blocks == 1);
}

TEST_CASE("storage plan: a tensor outlives its plan, and is freed on another thread", "[storage]") {
    std::optional<Tensor<float, Pooled>> kept;
    {
        storage_plan plan;
        step(plan);
        const auto run = plan.run();
        kept.emplace();  // the plan's first block, placed: its arena outlives the plan
        kept->fill(4.0f);
    }
    REQUIRE(all_equal(kept->data(), kept->size(), 4.0f));
    bool kept_on_the_other = false;  // checked here: Catch's assertions are this thread's
    std::thread([&kept_on_the_other, moved = std::move(*kept)] {
        kept_on_the_other = all_equal(moved.data(), moved.size(), 4.0f);
    }).join();  // freed there
    REQUIRE(kept_on_the_other);
    kept.reset();
    storage_plan after;
    step(after);
    REQUIRE(step(after).kept_values);
}

TEST_CASE("storage plan: its pages given back between runs are mapped again by the next", "[storage]") {
    storage_plan plan;
    step(plan);
    step(plan);
    plan.give_back_pages();
    const step_blocks next = step(plan);
    REQUIRE(plan.stats().recorded_runs == 1);
    REQUIRE(plan.stats().placed_blocks == 6);
    REQUIRE(next.zero_filled);
    REQUIRE(next.kept_values);
}

TEST_CASE("storage plan: a run gives the pool's blocks back, and a run inside a run is the outer one's", "[storage]") {
    const storage_pool pool;
    {
        const Tensor<float, Pooled> freed;
    }
    REQUIRE(storage_pool::kept_bytes() >= pooled_bytes);
    storage_plan outer, inner;
    {
        const auto run = outer.run();
        REQUIRE(storage_pool::kept_bytes() == 0);
        const auto nested = inner.run();
        const Tensor<float, Pooled> a;
    }
    REQUIRE(inner.stats().recorded_runs == 0);
    REQUIRE(outer.stats().recorded_runs == 1);
    REQUIRE(outer.stats().arena_bytes >= pooled_bytes);
    REQUIRE(outer.stats().arena_bytes < 2 * pooled_bytes);
}
