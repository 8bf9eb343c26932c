#pragma once
// The elementwise machine: an elementwise chain lowered to a short program (kernels/lower.hpp)
// that one compiled routine (src/elementwise.cpp) runs over the target in blocks of a row. Every
// operation is a vectorised loop compiled once, for float and double, instead of being compiled
// again for every chain and pair of shapes in the user's program; the values between operations
// stay in blocks that fit in L1, so a chain still reads each input once and writes the target
// once, with no temporary the size of the target.

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace shaped::kernels::machine {

// The ranks the machine runs; a chain of higher rank runs on the reference evaluator.
inline constexpr std::size_t max_rank = 8;

enum class dtype : std::uint8_t { f32, f64, boolean };

// A constant is one of the operands' (a scalar); a load reads an array, through its strides.
enum class opcode : std::uint8_t {
    load, constant, cast,
    negate, exp, log, sqrt, rsqrt, tanh, abs, sigmoid, relu, square, gelu, gelu_tanh, silu, logical_not,
    add, subtract, multiply, divide, maximum, minimum,
    equal, not_equal, less, less_equal, greater, greater_equal, logical_and, logical_or,
    where,
};

// One step: its result is the value of its index in the program. Operands are earlier steps'
// results, all of operand_type (a cast's operand is of operand_type, its result of type).
struct instruction {
    opcode code;
    dtype type;
    dtype operand_type;
    std::array<std::uint16_t, 3> operands{};  // a load's operands[0]: which array it reads
    double constant = 0;                      // a constant's value, in its type
};

// An array an instruction loads, its strides aligned to the program's extents (0 along a dim it
// broadcasts over).
struct array_operand {
    const void* data;
    std::array<std::ptrdiff_t, max_rank> strides{};
};

struct program {
    std::span<const instruction> code;  // the last one's result, of target_type, is written
    std::span<const array_operand> arrays;
    std::size_t rank;
    std::array<std::size_t, max_rank> extents{};
    void* target;
    dtype target_type;
    std::array<std::ptrdiff_t, max_rank> target_strides{};
};

// Runs the program over every element of the extents. An array may be the target itself, read
// at the same element as it is written (x = x * 2 + 1); any other overlap is the caller's to
// avoid (kernels/overlap.hpp).
void run(const program& p);

}  // namespace shaped::kernels::machine
