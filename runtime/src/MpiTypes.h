// What the runtime knows of MPI datatypes without calling MPI on the PT.
//
// The PT never calls MPI (the program may not have asked for MPI_THREAD_MULTIPLE), yet its
// MPI-IO prefetches need the byte size of a datatype. Two tables answer:
//  - the predefined contiguous types, measured by the MT once (mpi_type_sizes_init, when
//    the PT starts, or at the first MPI-IO read);
//  - the program's derived types, measured by the MT as it commits them: a ppios-cc link
//    routes the program's MPI_Type_commit and MPI_Type_free through the runtime
//    (ppios/interpose.def), which calls mpi_type_committed / mpi_type_freed.
// Only contiguous types are kept: their bytes lie one after another from 0, no holes, so
// `count` items are `count * size` bytes of the file. Any other type is unknown (-1), and
// reads with it are neither prefetched nor served from the cache.
//
// A freed handle may come back for a new type. The MT's own lookups are always current
// (it commits and frees in program order). The PT runs ahead of the MT: a handle it holds
// may name, when the MT gets there, a type committed after the PT looked it up. Such a
// prefetch fetches the wrong bytes, which the MT never takes (the cache is keyed by file
// bytes, and the MT computes its own with its own type): it costs bandwidth, never a
// wrong result.
//
// Locking: the predefined table is written once before g_ready and then only read; the
// derived table has a mutex of its own, a leaf (nothing else is locked under it).
#pragma once

#include <mpi.h>

#include <cstdint>

namespace ppios {

// Also measures MPI_COMM_WORLD's rank and size (mpi_comm_known answers from them).
void mpi_type_sizes_init();
// Size in bytes of a contiguous datatype the runtime knows (predefined, or derived and
// committed through the runtime), or -1.
int64_t mpi_type_size(MPI_Datatype datatype);
// Basic elements in one item of a known contiguous datatype (what MPI_Get_elements counts
// per whole item: 1 for a predefined type, n for n doubles), or -1.
int64_t mpi_type_elements(MPI_Datatype datatype);

// The MT measures a type it has just committed (MPI calls: never on the PT).
void mpi_type_committed(MPI_Datatype datatype);
// The MT is about to free `datatype`: forget it.
void mpi_type_freed(MPI_Datatype datatype);

// This process's rank in and the size of `comm`, for the communicators the PT can know
// without calling MPI: MPI_COMM_WORLD (measured by mpi_type_sizes_init) and MPI_COMM_SELF.
// False for any other (or before the measure).
bool mpi_comm_known(MPI_Comm comm, int *rank, int *size);

// Size in bytes of `t` if it is contiguous (bytes one after another from 0, no holes, in
// memory order: packing an item gives it back unchanged), else -1. Calls MPI: the MT only.
int64_t mpi_contiguous_size(MPI_Datatype t);

}  // namespace ppios
