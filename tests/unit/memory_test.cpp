// What an assignment allocates, and assignments whose source reads the target.
//
// Allocations are counted by replacing the global operator new/delete, the aligned forms that
// tensor storage takes included, and by interposing posix_memalign. They are counted only
// inside a counting scope, so the rest of the suite runs unaffected.

#include "reference.hpp"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <limits>
#include <new>
#include <optional>
#include <vector>

namespace {

struct allocation_log {
    std::atomic<bool> on{false};
    std::atomic<std::size_t> count{0};
    std::atomic<std::size_t> bytes{0};
    std::size_t sizes[64]{};  // the first sizes seen, for the messages

    void record(std::size_t size) {
        if (!on.load(std::memory_order_relaxed)) return;
        const std::size_t i = count.fetch_add(1);
        bytes += size;
        if (i < 64) sizes[i] = size;
    }
};
allocation_log log_;

// Counts what is allocated while it lives.
class counting {
public:
    counting() {
        log_.count = 0;
        log_.bytes = 0;
        log_.on = true;
    }
    ~counting() { log_.on = false; }
    counting(const counting&) = delete;
    counting& operator=(const counting&) = delete;

    std::size_t count() const { return log_.count; }
    std::size_t bytes() const { return log_.bytes; }
    std::size_t size(std::size_t i) const { return log_.sizes[i]; }
};

}  // namespace

// Every unaligned form goes through malloc and free, every aligned form through aligned_alloc
// and free, so that each new meets its own delete (AddressSanitizer checks that they match).
namespace {
void* counted_malloc(std::size_t size) noexcept {
    log_.record(size);
    return std::malloc(size ? size : 1);
}
void* counted_new(std::size_t size) {
    if (void* p = counted_malloc(size)) return p;
    throw std::bad_alloc();
}

void* counted_aligned_new(std::size_t size, std::align_val_t alignment) {
    log_.record(size);
    const auto a = static_cast<std::size_t>(alignment);
    if (void* p = std::aligned_alloc(a, (size + a - 1) / a * a + (size == 0 ? a : 0))) return p;
    throw std::bad_alloc();
}
}  // namespace

void* operator new(std::size_t size) { return counted_new(size); }
void* operator new[](std::size_t size) { return counted_new(size); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept { return counted_malloc(size); }
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept { return counted_malloc(size); }

// GCC takes operator new for the standard one and warns that free() does not match it.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void* operator new(std::size_t size, std::align_val_t a) { return counted_aligned_new(size, a); }
void* operator new[](std::size_t size, std::align_val_t a) { return counted_aligned_new(size, a); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

extern "C" int posix_memalign(void** out, std::size_t alignment, std::size_t size) noexcept {
    using real_t = int (*)(void**, std::size_t, std::size_t);
    static const auto real = reinterpret_cast<real_t>(dlsym(RTLD_NEXT, "posix_memalign"));
    log_.record(size);
    return real(out, alignment, size);
}

namespace {

using Catch::Matchers::Contains;
using B = shaped::dim<"B", 2>;
using Td = shaped::dim<"T">;
using Hd = shaped::dim<"H">;

}  // namespace

TEST_CASE("the counter sees tensor storage and operator new", "[memory]") {
    std::size_t n = 0;
    {
        counting c;
        const shaped::Tensor<float, B, Td> t(Td{100});
        n = c.count();
        CHECK(c.bytes() >= 2 * 100 * sizeof(float));
    }
    CHECK(n == 1);
    counting c;
    // A call of operator new itself: a new-expression may be elided.
    void* volatile p = ::operator new(24);
    ::operator delete(p);
    CHECK(c.count() == 1);
}

TEST_CASE("small static tensors allocate nothing, large ones once", "[memory]") {
    using T = shaped::dim<"T", 4>;
    using C = shaped::dim<"C", 6>;
    counting c;
    {
        const shaped::Tensor<float, B, T, C> small;
        const auto copy = small;
        const shaped::Tensor<float, B, T, C> sum = small + copy;
        (void)sum;
    }
    CHECK(c.count() == 0);
    {
        const shaped::Tensor<float, shaped::dim<"R", 64>, shaped::dim<"K", 65>> large;
        (void)large;
    }
    CHECK(c.count() == 1);
}

TEST_CASE("building an elementwise expression allocates nothing", "[memory]") {
    shaped::Tensor<float, B, Td, Hd> a(Td{8}, Hd{16}), b(Td{8}, Hd{16}), d(Td{8}, Hd{16});
    shaped::Tensor<float, Hd> bias(Hd{16});
    counting c;
    auto e = a * b + d;
    auto f = shaped::exp(a - bias) * 0.5f + shaped::where(a > b, a, b);
    auto g = shaped::matmul(a, b.mT()) * 0.25f;  // a product is an expression too, until assigned
    CHECK(c.count() == 0);
    (void)e;
    (void)f;
    (void)g;
}

TEST_CASE("a scaled matmul is written straight into its one buffer", "[memory]") {
    const std::size_t t = GENERATE(3, 16, 64);
    shaped::Tensor<float, B, Td, Hd> q(Td{t}, Hd{16}), k(Td{t}, Hd{16});
    ref::fill(q, 1);
    ref::fill(k, 2);
    const float s = 0.25f;
    std::optional<shaped::Tensor<float, B, Td, Td>> w;
    std::size_t count = 0, bytes = 0, first = 0;
    {
        counting c;
        w.emplace(shaped::matmul(q, k.mT()) * s);
        count = c.count();
        bytes = c.bytes();
        first = c.size(0);
    }
    INFO("T=" << t << ": " << count << " allocations, " << bytes << " bytes");
    CHECK(count == 1);
    CHECK(first == 2 * t * t * sizeof(float));
    CHECK(bytes == 2 * t * t * sizeof(float));
    const auto kt = ref::transpose(ref::values(k), 2, t, 16);
    auto want = ref::matmul(ref::values(q), kt, 2, t, t, 16, t * 16, 16 * t);
    for (auto& v : want) v *= s;
    ref::require_close(ref::values(*w), want, ref::tolerance<float>(16));
}

TEST_CASE("an expression that must materialise the product allocates more", "[memory]") {
    const std::size_t t = 16;
    shaped::Tensor<float, B, Td, Hd> q(Td{t}, Hd{16}), k(Td{t}, Hd{16});
    ref::fill(q, 3);
    ref::fill(k, 4);
    std::size_t count = 0;
    {
        counting c;
        const shaped::Tensor<float, B, Td, Td> w = shaped::exp(shaped::matmul(q, k.mT()));
        count = c.count();
    }
    CHECK(count > 1);
}

TEST_CASE("assigning into an existing tensor of the same extents allocates nothing", "[memory]") {
    const std::size_t t = 32;
    shaped::Tensor<float, B, Td, Hd> q(Td{t}, Hd{16}), k(Td{t}, Hd{16});
    ref::fill(q, 5);
    ref::fill(k, 6);
    shaped::Tensor<float, B, Td, Td> w(Td{t}, Td{t});
    shaped::Tensor<bool, Td, Td> causal(Td{t}, Td{t});
    causal = shaped::tril(shaped::ones<float, Td, Td>(Td{t}, Td{t})) == 0.0f;
    const float* buffer = w.data();
    counting c;
    w = shaped::matmul(q, k.mT()) * 0.25f;
    w = shaped::masked_fill(w, causal, -std::numeric_limits<float>::infinity());
    w = shaped::softmax<-1>(w);
    w = w * 2.0f + 1.0f;
    CHECK(c.count() == 0);
    CHECK(w.data() == buffer);
}

// ---- aliasing --------------------------------------------------------------------------------

TEMPLATE_TEST_CASE("x = x * 2 + 1 runs in place", "[memory][aliasing]", float, double) {
    using V = TestType;
    shaped::Tensor<V, B, Td, Hd> x(Td{5}, Hd{7});
    ref::fill(x, 7);
    const auto before = ref::values(x);
    const V* buffer = x.data();
    {
        counting c;
        x = x * V{2} + V{1};
        CHECK(c.count() == 0);
    }
    CHECK(x.data() == buffer);
    std::vector<double> want(before.size());
    for (std::size_t i = 0; i < want.size(); ++i) want[i] = static_cast<V>(static_cast<V>(before[i] * 2) + 1);
    ref::require_close(ref::values(x), want, 0.0);
}

TEMPLATE_TEST_CASE("sq = sq.mT() gives the transpose", "[memory][aliasing]", float, double) {
    using V = TestType;
    const std::size_t n = GENERATE(2, 5, 33);
    SECTION("dynamic") {
        shaped::Tensor<V, Td, Td> sq(Td{n}, Td{n});
        ref::fill(sq, n);
        const auto want = ref::transpose(ref::values(sq), 1, n, n);
        sq = sq.mT();
        CHECK(ref::values(sq) == want);
    }
    SECTION("static, batched") {
        using T = shaped::dim<"T", 6>;
        shaped::Tensor<V, B, T, T> sq;
        ref::fill(sq, n + 1);
        const auto want = ref::transpose(ref::values(sq), 2, 6, 6);
        sq = sq.mT();
        CHECK(ref::values(sq) == want);
        // Transposed back, through an elementwise node over the permutation.
        sq = shaped::transpose<-1, -2>(sq) + V{0};
        CHECK(ref::values(sq) == ref::transpose(want, 2, 6, 6));
    }
}

TEMPLATE_TEST_CASE("x = x + x.mT() reads x before writing it", "[memory][aliasing]", float, double) {
    using V = TestType;
    shaped::Tensor<V, Td, Td> x(Td{9}, Td{9});
    ref::fill(x, 8);
    const auto xv = ref::values(x);
    x = x + x.mT();
    for (std::size_t i = 0; i < 9; ++i)
        for (std::size_t j = 0; j < 9; ++j) REQUIRE(x(i, j) == static_cast<V>(xv[i * 9 + j] + xv[j * 9 + i]));
}

TEMPLATE_TEST_CASE("a = matmul(a, b) with square matrices", "[memory][aliasing]", float, double) {
    using V = TestType;
    const std::size_t n = GENERATE(1, 4, 17);
    shaped::Tensor<V, Td, Td> a(Td{n}, Td{n}), b(Td{n}, Td{n});
    ref::fill(a, 9);
    ref::fill(b, 10);
    const auto av = ref::values(a), bv = ref::values(b);
    a = shaped::matmul(a, b);
    ref::require_close(ref::values(a), ref::matmul(av, bv, 1, n, n, n, 0, 0), ref::tolerance<V>(n));
    b = shaped::matmul(a, b) * V{2};
    auto want = ref::matmul(ref::values(a), bv, 1, n, n, n, 0, 0);
    for (auto& v : want) v *= 2;
    ref::require_close(ref::values(b), want, ref::tolerance<V>(n));
    const auto av2 = ref::values(a);
    a = shaped::matmul(a, a.mT());
    ref::require_close(ref::values(a), ref::matmul(av2, ref::transpose(av2, 1, n, n), 1, n, n, n, 0, 0),
                       ref::tolerance<V>(n));
}

TEMPLATE_TEST_CASE("wei = softmax(wei) in place", "[memory][aliasing]", float, double) {
    using V = TestType;
    const std::size_t t = GENERATE(1, 4, 16);
    shaped::Tensor<V, B, Td, Td> wei(Td{t}, Td{t});
    ref::fill(wei, 11);
    const auto before = ref::values(wei);
    SECTION("softmax along the last dim") {
        wei = shaped::softmax<-1>(wei);
        ref::require_close(ref::values(wei), ref::softmax(before, {2 * t, t, 1}), ref::tolerance<V>(t));
    }
    SECTION("log_softmax along the last dim") {
        wei = shaped::log_softmax<-1>(wei);
        ref::require_close(ref::values(wei), ref::softmax(before, {2 * t, t, 1}, true), ref::tolerance<V>(t));
    }
    SECTION("softmax along a middle dim") {
        wei = shaped::softmax<1>(wei);
        ref::require_close(ref::values(wei), ref::softmax(before, {2, t, t}), ref::tolerance<V>(t));
    }
    SECTION("the seed's masked_fill then softmax") {
        const V inf = std::numeric_limits<V>::infinity();
        wei = shaped::masked_fill(wei, shaped::tril(shaped::ones<V, Td, Td>(Td{t}, Td{t})) == V{0}, -inf);
        wei = shaped::softmax<-1>(wei);
        for (std::size_t b = 0; b < 2; ++b)
            for (std::size_t i = 0; i < t; ++i) {
                double z = 0;
                for (std::size_t j = 0; j <= i; ++j) z += std::exp(before[(b * t + i) * t + j]);
                for (std::size_t j = 0; j < t; ++j) {
                    const double want = j <= i ? std::exp(before[(b * t + i) * t + j]) / z : 0.0;
                    REQUIRE(std::abs(wei(b, i, j) - want) <= ref::tolerance<V>(t) * (1 + want));
                }
            }
    }
}

TEST_CASE("overlapping views: x(1 to 3) = x(0 to 2) copies as if through a temporary", "[memory][aliasing]") {
    shaped::Tensor<double, B, Td> x(Td{5});
    ref::fill(x, 12);
    const auto before = ref::values(x);
    shaped::slice<Td>(x, 1, 4) = shaped::slice<Td>(x, 0, 3);
    for (std::size_t b = 0; b < 2; ++b) {
        CHECK(x(b, 0) == before[b * 5 + 0]);
        for (std::size_t t = 1; t < 4; ++t) CHECK(x(b, t) == before[b * 5 + t - 1]);
        CHECK(x(b, 4) == before[b * 5 + 4]);
    }
    // The other direction, through an expression.
    const auto mid = ref::values(x);
    shaped::slice<Td>(x, 0, 3) = shaped::slice<Td>(x, 2, 5) * 2.0;
    for (std::size_t b = 0; b < 2; ++b) {
        for (std::size_t t = 0; t < 3; ++t) CHECK(x(b, t) == 2 * mid[b * 5 + t + 2]);
        for (std::size_t t = 3; t < 5; ++t) CHECK(x(b, t) == mid[b * 5 + t]);
    }
}

TEMPLATE_TEST_CASE("an assignment that changes the target's extents still reads the old values",
                   "[memory][aliasing]", float, double) {
    using V = TestType;
    SECTION("x = slice of x") {
        shaped::Tensor<V, B, Td> x(Td{6});
        ref::fill(x, 13);
        const auto before = ref::values(x);
        x = shaped::slice<Td>(x, 2, 5);
        REQUIRE(x.extents() == std::array<std::size_t, 2>{2, 3});
        for (std::size_t b = 0; b < 2; ++b)
            for (std::size_t t = 0; t < 3; ++t) CHECK(x(b, t) == before[b * 6 + t + 2]);
    }
    SECTION("x = x + y, x broadcast from an extent of one") {
        shaped::Tensor<V, B, Td> x(Td{1}), y(Td{4});
        ref::fill(x, 14);
        ref::fill(y, 15);
        const auto xv = ref::values(x), yv = ref::values(y);
        x = x + y;
        REQUIRE(x.extents() == std::array<std::size_t, 2>{2, 4});
        for (std::size_t b = 0; b < 2; ++b)
            for (std::size_t t = 0; t < 4; ++t) CHECK(x(b, t) == static_cast<V>(xv[b] + yv[b * 4 + t]));
    }
    SECTION("a = matmul(a, b) with a new column count") {
        using R = shaped::dim<"R", 3>;
        using Cd = shaped::dim<"C">;
        shaped::Tensor<V, R, Cd> a(Cd{4});
        shaped::Tensor<V, Cd, Cd> b(Cd{4}, Cd{7});
        ref::fill(a, 16);
        ref::fill(b, 17);
        const auto want = ref::matmul(ref::values(a), ref::values(b), 1, 3, 7, 4, 0, 0);
        a = shaped::matmul(a, b);
        REQUIRE(a.extents() == std::array<std::size_t, 2>{3, 7});
        ref::require_close(ref::values(a), want, ref::tolerance<V>(4));
    }
}
