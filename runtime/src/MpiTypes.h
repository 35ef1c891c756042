#pragma once

#include <mpi.h>

#include <cstdint>

namespace ppios {

// Sizes of the predefined, contiguous MPI datatypes, measured by the MT when the PT
// starts, so that the PT never calls MPI itself (the program may not have asked for
// MPI_THREAD_MULTIPLE).
void mpi_type_sizes_init();
// Size in bytes of a datatype measured by mpi_type_sizes_init, or -1.
int64_t mpi_type_size(MPI_Datatype datatype);

}  // namespace ppios
