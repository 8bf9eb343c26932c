// The MPI calls shaped-train makes, as its MPI module (mpi_module.cpp) gives them. shaped-train
// loads the module only under mpirun: a run in one process then neither maps Open MPI's
// libraries nor needs them installed.
#pragma once

#include <cstddef>

namespace shaped_train {

struct mpi_calls {
    // MPI_Init; this process's rank and how many processes there are.
    void (*start)(int* argc, char*** argv, int* rank, int* size);
    // Every process's n floats (single) or doubles, summed in place on every process.
    void (*sum)(void* data, std::size_t n, bool single);
    // Ends every process.
    void (*abort)();
    // MPI_Finalize.
    void (*finish)();
};

// The one symbol the module exports: a function returning its calls.
inline constexpr const char* mpi_calls_symbol = "shaped_train_mpi_calls";

}  // namespace shaped_train
