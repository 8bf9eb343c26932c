#pragma once
// While a loss is differentiated, an evaluation that reads no traced value is not recorded, so a
// parameter it reads would get no gradient from what it computes: a silent wrong answer. The
// derivation's tape (train/traced.hpp) watches such evaluations while it records: each plain
// evaluation (kernels/evaluate.hpp's assign_expression, the whole-tensor reductions) shows it
// the bytes each tensor it reads lies in, and the tape throws for a parameter's.

namespace shaped::detail {

class read_watch {
public:
    // Throws where [begin, end) meets a watched parameter's elements.
    virtual void check(const void* begin, const void* end) const = 0;

protected:
    ~read_watch() = default;
};

// The watch of this thread's recording tape, or none.
inline thread_local const read_watch* active_read_watch = nullptr;

}  // namespace shaped::detail
