#include "MpiTypes.h"

#include <atomic>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "Immortal.h"

namespace ppios {
namespace {

Immortal<std::vector<std::pair<MPI_Datatype, int64_t>>> g_sizes;  // written once, before g_ready
int g_world_rank = -1, g_world_size = -1;               // likewise
std::atomic<bool> g_ready{false};

struct TypeFacts {
  int64_t size;
  int64_t elements;  // basic elements per item, -1 unknown
};
std::mutex g_derived_mu;
Immortal<std::unordered_map<MPI_Datatype, TypeFacts>> g_derived;

bool mpi_usable() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

// What the runtime knows of `datatype`: a predefined contiguous type is one basic element
// per item; a derived one as measured at its commit. {-1, -1} if it knows nothing.
TypeFacts known(MPI_Datatype datatype) {
  if (g_ready.load(std::memory_order_acquire))
    for (const auto &[t, size] : *g_sizes)
      if (t == datatype) return {size, 1};
  std::lock_guard<std::mutex> lock(g_derived_mu);
  auto it = g_derived->find(datatype);
  return it == g_derived->end() ? TypeFacts{-1, -1} : it->second;
}

}  // namespace

namespace {
// The largest type whose byte order is checked (two buffers of it at each commit); a
// larger one is taken as not contiguous: its reads go to storage as written.
constexpr int kMaxCheckedType = 64 << 20;

// Whether one item of `t` (size bytes, no holes, from 0) holds its bytes in memory order:
// packing it must give its memory back unchanged. Extent and size alone do not tell (an
// indexed type may list its elements in any order); four packs whose bytes number each
// byte of the item (by its 8-bit digits) do.
bool packs_in_order(MPI_Datatype t, int size) {
  std::vector<unsigned char> item(static_cast<size_t>(size)), packed(static_cast<size_t>(size));
  for (int digit = 0; digit < 4 && (digit == 0 || (size - 1) >> (8 * digit) != 0); ++digit) {
    for (int i = 0; i < size; ++i) item[static_cast<size_t>(i)] = static_cast<unsigned char>(i >> (8 * digit));
    int position = 0;
    if (MPI_Pack(item.data(), 1, t, packed.data(), size, &position, MPI_COMM_SELF) != MPI_SUCCESS ||
        position != size || packed != item)
      return false;
  }
  return true;
}
}  // namespace

int64_t mpi_contiguous_size(MPI_Datatype t) {
  int size = 0;
  MPI_Aint lb = 0, extent = 0, true_lb = 0, true_extent = 0;
  if (MPI_Type_size(t, &size) != MPI_SUCCESS || MPI_Type_get_extent(t, &lb, &extent) != MPI_SUCCESS ||
      MPI_Type_get_true_extent(t, &true_lb, &true_extent) != MPI_SUCCESS)
    return -1;
  bool plain = size > 0 && lb == 0 && true_lb == 0 && extent == size && true_extent == size;
  if (!plain || size > kMaxCheckedType || !packs_in_order(t, size)) return -1;
  return size;
}

void mpi_type_sizes_init() {
  static std::mutex init_mu;
  std::lock_guard<std::mutex> lock(init_mu);
  if (g_ready.load(std::memory_order_acquire) || !mpi_usable()) return;
  const MPI_Datatype types[] = {
      MPI_BYTE,     MPI_CHAR,          MPI_SIGNED_CHAR,    MPI_UNSIGNED_CHAR, MPI_SHORT,
      MPI_UNSIGNED_SHORT, MPI_INT,     MPI_UNSIGNED,       MPI_LONG,          MPI_UNSIGNED_LONG,
      MPI_LONG_LONG, MPI_UNSIGNED_LONG_LONG, MPI_FLOAT,    MPI_DOUBLE,        MPI_LONG_DOUBLE,
      MPI_INT8_T,   MPI_INT16_T,       MPI_INT32_T,        MPI_INT64_T,       MPI_UINT8_T,
      MPI_UINT16_T, MPI_UINT32_T,      MPI_UINT64_T,       MPI_C_BOOL,        MPI_WCHAR,
      MPI_AINT,     MPI_OFFSET,        MPI_COUNT};
  for (MPI_Datatype t : types) {
    int64_t size = mpi_contiguous_size(t);
    if (size > 0) g_sizes->emplace_back(t, size);
  }
  if (MPI_Comm_rank(MPI_COMM_WORLD, &g_world_rank) != MPI_SUCCESS ||
      MPI_Comm_size(MPI_COMM_WORLD, &g_world_size) != MPI_SUCCESS)
    g_world_rank = g_world_size = -1;
  g_ready.store(true, std::memory_order_release);
}

int64_t mpi_type_size(MPI_Datatype datatype) { return known(datatype).size; }

int64_t mpi_type_elements(MPI_Datatype datatype) { return known(datatype).elements; }

bool mpi_comm_known(MPI_Comm comm, int *rank, int *size) {
  if (comm == MPI_COMM_SELF) {
    *rank = 0;
    *size = 1;
    return true;
  }
  if (comm != MPI_COMM_WORLD || !g_ready.load(std::memory_order_acquire) || g_world_rank < 0)
    return false;
  *rank = g_world_rank;
  *size = g_world_size;
  return true;
}

void mpi_type_committed(MPI_Datatype datatype) {
  if (!mpi_usable()) return;
  TypeFacts d{mpi_contiguous_size(datatype), -1};
  if (d.size > 0) {
    // The basic elements of one item: what MPI_Get_elements says of a status that
    // recorded exactly one item's bytes.
    MPI_Status status;
    MPI_Count elements = MPI_UNDEFINED;
    if (MPI_Status_set_elements_x(&status, MPI_BYTE, d.size) == MPI_SUCCESS &&
        MPI_Get_elements_x(&status, datatype, &elements) == MPI_SUCCESS && elements > 0)
      d.elements = elements;
  }
  std::lock_guard<std::mutex> lock(g_derived_mu);
  if (d.size > 0) (*g_derived)[datatype] = d;
  else g_derived->erase(datatype);
}

void mpi_type_freed(MPI_Datatype datatype) {
  std::lock_guard<std::mutex> lock(g_derived_mu);
  g_derived->erase(datatype);
}

}  // namespace ppios
