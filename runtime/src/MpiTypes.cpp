#include "MpiTypes.h"

#include <atomic>
#include <mutex>
#include <utility>
#include <vector>

namespace ppios {
namespace {

std::vector<std::pair<MPI_Datatype, int64_t>> g_sizes;  // written once, before g_ready
std::atomic<bool> g_ready{false};

}  // namespace

void mpi_type_sizes_init() {
  static std::mutex init_mu;
  std::lock_guard<std::mutex> lock(init_mu);
  if (g_ready.load(std::memory_order_acquire)) return;
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return;
  const MPI_Datatype types[] = {
      MPI_BYTE,     MPI_CHAR,          MPI_SIGNED_CHAR,    MPI_UNSIGNED_CHAR, MPI_SHORT,
      MPI_UNSIGNED_SHORT, MPI_INT,     MPI_UNSIGNED,       MPI_LONG,          MPI_UNSIGNED_LONG,
      MPI_LONG_LONG, MPI_UNSIGNED_LONG_LONG, MPI_FLOAT,    MPI_DOUBLE,        MPI_LONG_DOUBLE,
      MPI_INT8_T,   MPI_INT16_T,       MPI_INT32_T,        MPI_INT64_T,       MPI_UINT8_T,
      MPI_UINT16_T, MPI_UINT32_T,      MPI_UINT64_T,       MPI_C_BOOL,        MPI_WCHAR,
      MPI_AINT,     MPI_OFFSET,        MPI_COUNT};
  for (MPI_Datatype t : types) {
    int size = 0;
    MPI_Aint lb = 0, extent = 0;
    if (MPI_Type_size(t, &size) != MPI_SUCCESS || MPI_Type_get_extent(t, &lb, &extent) != MPI_SUCCESS)
      continue;
    if (size > 0 && lb == 0 && extent == size) g_sizes.emplace_back(t, size);
  }
  g_ready.store(true, std::memory_order_release);
}

int64_t mpi_type_size(MPI_Datatype datatype) {
  if (!g_ready.load(std::memory_order_acquire)) return -1;
  for (const auto &[t, size] : g_sizes)
    if (t == datatype) return size;
  return -1;
}

}  // namespace ppios
