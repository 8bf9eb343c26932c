// The storage pool (tensor/storage.hpp): while one is open on a thread, a freed heap block of
// 64 KiB or more is kept and handed to the next tensor of its size (zero-filled again where the
// tensor starts so); smaller blocks are malloc's; the last pool to close gives the blocks back.
#include <shaped/shaped.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>

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
