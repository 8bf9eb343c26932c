// shaped-train's MPI calls (mpi_calls.hpp), in a module of their own that shaped-train loads
// under mpirun only.
#include "mpi_calls.hpp"

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstddef>

namespace {

void start(int* argc, char*** argv, int* rank, int* size) {
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
}

// In pieces of at most INT_MAX values: MPI counts in int.
void sum(void* data, std::size_t n, bool single) {
    const std::size_t width = single ? sizeof(float) : sizeof(double);
    auto* bytes = static_cast<char*>(data);
    for (std::size_t done = 0; done < n;) {
        const std::size_t piece = std::min<std::size_t>(n - done, INT_MAX);
        MPI_Allreduce(MPI_IN_PLACE, bytes + done * width, static_cast<int>(piece), single ? MPI_FLOAT : MPI_DOUBLE, MPI_SUM,
                      MPI_COMM_WORLD);
        done += piece;
    }
}

void abort_all() { MPI_Abort(MPI_COMM_WORLD, 1); }

void finish() { MPI_Finalize(); }

constexpr shaped_train::mpi_calls calls{start, sum, abort_all, finish};

}  // namespace

extern "C" const shaped_train::mpi_calls* shaped_train_mpi_calls() { return &calls; }
