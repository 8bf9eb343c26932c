#pragma once
// shaped's own parallel loops (over batch x heads, over blocks of queries), compiled once in
// src/parallel.cpp. They use as many threads as OpenBLAS does (OPENBLAS_NUM_THREADS, or
// openblas_set_num_threads), and never call BLAS from inside a loop: the two pools take turns,
// so the cores are never asked for more threads than they have.

#include <cstddef>

namespace shaped::kernels {

// The number of threads a parallel loop uses, the calling thread included.
std::size_t thread_count();

// Runs task(context, i) for every i in [0, n), spread over the threads; the calling thread
// takes part and returns when all are done. Tasks are handed out in order of i, one at a time,
// so put the longest first. Called from inside a task (or from two threads at once), it runs
// the loop on the calling thread alone.
void parallel_for(std::size_t n, void (*task)(void* context, std::size_t i), void* context);

template <class F>
void parallel_for(std::size_t n, F& task) {
    parallel_for(n, [](void* context, std::size_t i) { (*static_cast<F*>(context))(i); }, &task);
}

}  // namespace shaped::kernels
