// The elementwise machine (kernels/elementwise_machine.hpp): a program's instructions run over
// the target one block of a row at a time. A load of adjacent elements is read in place; every
// other value lives in a block buffer of its own, on the stack. The dims every operand walks
// contiguously are merged first, so that a contiguous chain is one long row.

#include <shaped/kernels/elementwise_machine.hpp>
#include <shaped/kernels/elementwise_ops.hpp>

#include <xsimd/xsimd.hpp>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

namespace shaped::kernels::machine {
namespace {

namespace ops = elementwise_ops;

// Elements per block: 2 KiB of doubles, so that a chain's blocks stay in L1.
constexpr std::size_t block = 256;
constexpr std::size_t block_bytes = block * sizeof(double);
// Programs up to this many instructions keep their blocks on the stack.
constexpr std::size_t stack_blocks = 24;

std::size_t size_of(dtype t) {
    switch (t) {
    case dtype::f32: return sizeof(float);
    case dtype::f64: return sizeof(double);
    case dtype::boolean: return sizeof(bool);
    }
    return 1;
}

// Calls f with a value of the element type t names.
template <class F>
decltype(auto) with_type(dtype t, F&& f) {
    switch (t) {
    case dtype::f32: return f(float{});
    case dtype::f64: return f(double{});
    case dtype::boolean: break;
    }
    return f(bool{});
}

// ---- the operations, on n elements -------------------------------------------------------------

template <class T, class F>
void unary(const T* a, T* out, std::size_t n, F f) {
    using vec = xsimd::batch<T>;
    std::size_t i = 0;
    for (; i + vec::size <= n; i += vec::size) f(vec::load_unaligned(a + i)).store_unaligned(out + i);
    for (; i < n; ++i) out[i] = f(a[i]);
}

template <class T, class F>
void binary(const T* a, const T* b, T* out, std::size_t n, F f) {
    using vec = xsimd::batch<T>;
    std::size_t i = 0;
    for (; i + vec::size <= n; i += vec::size) f(vec::load_unaligned(a + i), vec::load_unaligned(b + i)).store_unaligned(out + i);
    for (; i < n; ++i) out[i] = f(a[i], b[i]);
}

// The same loop over plain elements, for results of another type (comparisons) and bools.
template <class T, class R, class F>
void elementwise_loop(const T* a, const T* b, R* out, std::size_t n, F f) {
    for (std::size_t i = 0; i < n; ++i) out[i] = f(a[i], b[i]);
}

template <class T>
void floating_unary(opcode code, const T* a, T* out, std::size_t n) {
    switch (code) {
    case opcode::negate: return unary(a, out, n, [](const auto& x) { return -x; });
    case opcode::exp: return unary(a, out, n, [](const auto& x) { using std::exp; return exp(x); });
    case opcode::log: return unary(a, out, n, [](const auto& x) { using std::log; return log(x); });
    case opcode::sqrt: return unary(a, out, n, [](const auto& x) { using std::sqrt; return sqrt(x); });
    case opcode::rsqrt: return unary(a, out, n, [](const auto& x) { return ops::rsqrt(x); });
    case opcode::tanh: return unary(a, out, n, [](const auto& x) { using std::tanh; return tanh(x); });
    case opcode::abs: return unary(a, out, n, [](const auto& x) { using std::abs; return abs(x); });
    case opcode::sigmoid: return unary(a, out, n, [](const auto& x) { return ops::sigmoid(x); });
    case opcode::relu:
        return unary(a, out, n, [](const auto& x) {
            using X = std::decay_t<decltype(x)>;
            if constexpr (std::is_arithmetic_v<X>) return x < X{} ? X{} : x;
            else return xsimd::select(x < X(T{}), X(T{}), x);  // NaN stays NaN
        });
    case opcode::square: return unary(a, out, n, [](const auto& x) { return x * x; });
    case opcode::gelu: return unary(a, out, n, [](const auto& x) { return ops::gelu(x); });
    case opcode::gelu_tanh: return unary(a, out, n, [](const auto& x) { return ops::gelu_tanh(x); });
    case opcode::silu: return unary(a, out, n, [](const auto& x) { return ops::silu(x); });
    default: return;
    }
}

template <class T>
void floating_binary(opcode code, const T* a, const T* b, T* out, std::size_t n) {
    switch (code) {
    case opcode::add: return binary(a, b, out, n, [](const auto& x, const auto& y) { return x + y; });
    case opcode::subtract: return binary(a, b, out, n, [](const auto& x, const auto& y) { return x - y; });
    case opcode::multiply: return binary(a, b, out, n, [](const auto& x, const auto& y) { return x * y; });
    case opcode::divide: return binary(a, b, out, n, [](const auto& x, const auto& y) { return x / y; });
    // NaN wins either way, as torch.maximum and torch.minimum. (xsimd's x != x is an ordered
    // compare under AVX-512, false for NaN: isnan says it.)
    case opcode::maximum:
        return binary(a, b, out, n, [](const auto& x, const auto& y) {
            if constexpr (std::is_arithmetic_v<std::decay_t<decltype(x)>>) return ops::scalar<op::maximum>::apply(x, y);
            else return xsimd::select(xsimd::isnan(x) | (x > y), x, y);
        });
    case opcode::minimum:
        return binary(a, b, out, n, [](const auto& x, const auto& y) {
            if constexpr (std::is_arithmetic_v<std::decay_t<decltype(x)>>) return ops::scalar<op::minimum>::apply(x, y);
            else return xsimd::select(xsimd::isnan(x) | (x < y), x, y);
        });
    default: return;
    }
}

template <class T>
void compare(opcode code, const T* a, const T* b, bool* out, std::size_t n) {
    switch (code) {
    case opcode::equal: return elementwise_loop(a, b, out, n, [](T x, T y) { return x == y; });
    case opcode::not_equal: return elementwise_loop(a, b, out, n, [](T x, T y) { return x != y; });
    case opcode::less: return elementwise_loop(a, b, out, n, [](T x, T y) { return x < y; });
    case opcode::less_equal: return elementwise_loop(a, b, out, n, [](T x, T y) { return x <= y; });
    case opcode::greater: return elementwise_loop(a, b, out, n, [](T x, T y) { return x > y; });
    case opcode::greater_equal: return elementwise_loop(a, b, out, n, [](T x, T y) { return x >= y; });
    case opcode::logical_and: return elementwise_loop(a, b, out, n, [](T x, T y) { return x && y; });
    case opcode::logical_or: return elementwise_loop(a, b, out, n, [](T x, T y) { return x || y; });
    default: return;
    }
}

template <class To, class From>
void convert(const From* a, To* out, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<To>(a[i]);
}

// ---- one instruction on one block --------------------------------------------------------------

void execute(const instruction& in, const void* const* value, void* out, std::size_t n) {
    const auto operand = [&](std::size_t i) { return value[in.operands[i]]; };
    switch (in.code) {
    case opcode::load:
    case opcode::constant: return;  // the caller's
    case opcode::cast:
        return with_type(in.type, [&](auto to) {
            with_type(in.operand_type, [&](auto from) {
                using To = decltype(to);
                using From = decltype(from);
                convert(static_cast<const From*>(operand(0)), static_cast<To*>(out), n);
            });
        });
    case opcode::logical_not: {
        const bool* a = static_cast<const bool*>(operand(0));
        bool* o = static_cast<bool*>(out);
        for (std::size_t i = 0; i < n; ++i) o[i] = !a[i];
        return;
    }
    case opcode::where:
        return with_type(in.operand_type, [&](auto t) {
            using T = decltype(t);
            const bool* c = static_cast<const bool*>(operand(0));
            const T* a = static_cast<const T*>(operand(1));
            const T* b = static_cast<const T*>(operand(2));
            T* o = static_cast<T*>(out);
            for (std::size_t i = 0; i < n; ++i) o[i] = c[i] ? a[i] : b[i];
        });
    default: break;
    }
    if (in.code >= opcode::equal) {
        return with_type(in.operand_type, [&](auto t) {
            using T = decltype(t);
            compare(in.code, static_cast<const T*>(operand(0)), static_cast<const T*>(operand(1)), static_cast<bool*>(out), n);
        });
    }
    const auto floating = [&](auto t) {
        using T = decltype(t);
        if (in.code >= opcode::add)
            floating_binary(in.code, static_cast<const T*>(operand(0)), static_cast<const T*>(operand(1)), static_cast<T*>(out), n);
        else floating_unary(in.code, static_cast<const T*>(operand(0)), static_cast<T*>(out), n);
    };
    if (in.type == dtype::f32) floating(float{});
    else floating(double{});
}

// n elements of type t, read with a stride (0: one element repeated), into a block.
void gather(dtype t, const std::byte* from, std::ptrdiff_t stride, void* to, std::size_t n) {
    with_type(t, [&](auto v) {
        using T = decltype(v);
        const T* f = reinterpret_cast<const T*>(from);
        T* o = static_cast<T*>(to);
        if (stride == 0) std::fill_n(o, n, f[0]);
        else
            for (std::size_t i = 0; i < n; ++i) o[i] = f[static_cast<std::ptrdiff_t>(i) * stride];
    });
}

void scatter(dtype t, const void* from, std::byte* to, std::ptrdiff_t stride, std::size_t n) {
    if (stride == 1) {
        std::memmove(to, from, n * size_of(t));
        return;
    }
    with_type(t, [&](auto v) {
        using T = decltype(v);
        const T* f = static_cast<const T*>(from);
        T* o = reinterpret_cast<T*>(to);
        for (std::size_t i = 0; i < n; ++i) o[static_cast<std::ptrdiff_t>(i) * stride] = f[i];
    });
}

void fill_constant(const instruction& in, void* to) {
    with_type(in.type, [&](auto v) {
        using T = decltype(v);
        std::fill_n(static_cast<T*>(to), block, static_cast<T>(in.constant));
    });
}

// ---- the walk over the target ------------------------------------------------------------------

// N elements on the stack, or on the heap where more are asked for: a chain runs without
// allocating unless it is longer than any written by hand.
template <class T, std::size_t N>
class scratch {
public:
    explicit scratch(std::size_t n) {
        if (n > N) {
            heap_.resize(n);
            data_ = heap_.data();
        }
    }
    T& operator[](std::size_t i) { return data_[i]; }
    T* data() { return data_; }

private:
    T local_[N];
    std::vector<T> heap_;
    T* data_ = local_;
};

using stride_list = std::array<std::ptrdiff_t, max_rank>;
constexpr std::size_t stack_operands = 32;

// The extents and every operand's strides (the target's first) after dims of extent 1 are
// dropped and dims that every operand walks contiguously are merged; at least one dim.
std::size_t plan(const program& p, std::array<std::size_t, max_rank>& extents, stride_list* strides) {
    const std::size_t operands = p.arrays.size() + 1;
    const auto stride_of = [&](std::size_t operand, std::size_t d) {
        return operand == 0 ? p.target_strides[d] : p.arrays[operand - 1].strides[d];
    };
    std::size_t rank = 0;
    for (std::size_t d = 0; d < p.rank; ++d) {
        if (p.extents[d] == 1) continue;
        bool merges = rank > 0;
        for (std::size_t o = 0; merges && o < operands; ++o)
            merges = strides[o][rank - 1] == stride_of(o, d) * static_cast<std::ptrdiff_t>(p.extents[d]);
        if (merges) {
            extents[rank - 1] *= p.extents[d];
        } else {
            extents[rank] = p.extents[d];
            ++rank;
        }
        for (std::size_t o = 0; o < operands; ++o) strides[o][rank - 1] = stride_of(o, d);
    }
    if (rank == 0) {
        extents[0] = 1;
        for (std::size_t o = 0; o < operands; ++o) strides[o][0] = 0;
        rank = 1;
    }
    return rank;
}

}  // namespace

void run(const program& p) {
    for (std::size_t d = 0; d < p.rank; ++d)
        if (p.extents[d] == 0) return;
    const std::size_t operands = p.arrays.size() + 1;
    std::array<std::size_t, max_rank> extents{};
    scratch<stride_list, stack_operands> strides(operands);
    const std::size_t rank = plan(p, extents, strides.data());
    const std::size_t inner = extents[rank - 1];
    const std::size_t steps = p.code.size();
    const instruction& last = p.code.back();

    // A block for every instruction; value[i] points at instruction i's result for this block.
    struct alignas(64) block_buffer {
        std::byte bytes[block_bytes];
    };
    scratch<block_buffer, stack_blocks> blocks(steps);
    scratch<const void*, stack_blocks> value(steps);
    const auto block_of = [&](std::size_t i) { return static_cast<void*>(blocks[i].bytes); };
    for (std::size_t i = 0; i < steps; ++i)
        if (p.code[i].code == opcode::constant) {
            fill_constant(p.code[i], block_of(i));
            value[i] = block_of(i);
        }

    scratch<std::ptrdiff_t, stack_operands> offset(operands);
    std::fill_n(offset.data(), operands, 0);
    std::array<std::size_t, max_rank> index{};
    const auto target_size = static_cast<std::ptrdiff_t>(size_of(p.target_type));
    const std::ptrdiff_t target_step = strides[0][rank - 1];
    const bool write_in_place = target_step == 1 && last.code != opcode::load && last.code != opcode::constant;

    for (;;) {
        std::byte* target_row = static_cast<std::byte*>(p.target) + offset[0] * target_size;
        for (std::size_t start = 0; start < inner; start += block) {
            const std::size_t n = std::min(block, inner - start);
            std::byte* target_block = target_row + static_cast<std::ptrdiff_t>(start) * target_step * target_size;
            for (std::size_t i = 0; i < steps; ++i) {
                const instruction& in = p.code[i];
                if (in.code == opcode::constant) continue;
                if (in.code == opcode::load) {
                    const std::size_t a = in.operands[0];
                    const std::ptrdiff_t step = strides[a + 1][rank - 1];
                    const auto element = static_cast<std::ptrdiff_t>(size_of(in.type));
                    const std::byte* at = static_cast<const std::byte*>(p.arrays[a].data) +
                                          (offset[a + 1] + static_cast<std::ptrdiff_t>(start) * step) * element;
                    if (step == 1) {
                        value[i] = at;
                    } else {
                        gather(in.type, at, step, block_of(i), n);
                        value[i] = block_of(i);
                    }
                    continue;
                }
                void* out = (i + 1 == steps && write_in_place) ? static_cast<void*>(target_block) : block_of(i);
                execute(in, value.data(), out, n);
                value[i] = out;
            }
            if (!write_in_place) scatter(p.target_type, value[steps - 1], target_block, target_step, n);
        }
        // The next row: the odometer over every dim but the last.
        std::size_t d = rank - 1;
        for (;;) {
            if (d == 0) return;
            --d;
            for (std::size_t o = 0; o < operands; ++o) offset[o] += strides[o][d];
            if (++index[d] < extents[d]) break;
            for (std::size_t o = 0; o < operands; ++o) offset[o] -= strides[o][d] * static_cast<std::ptrdiff_t>(extents[d]);
            index[d] = 0;
        }
    }
}

}  // namespace shaped::kernels::machine
