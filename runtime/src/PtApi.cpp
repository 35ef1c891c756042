// The PT's safety calls of the C ABI: ppios_pt_exit, ppios_pt_poll, ppios_pt_malloc and
// friends, and the escape of ppios_pt_index. See PtThread.h.
#include <cstdint>
#include <cstring>

#include "PtThread.h"
#include "Runtime.h"
#include "ThreadState.h"
#include "ppios/ppios.h"

using ppios::PtResources;
using ppios::PtStop;
using ppios::Runtime;

namespace {

// Escapes on failure: the slice never sees NULL (it would take a path the program never
// takes). Called outside any runtime lock.
void *or_escape(void *block) {
  if (block == nullptr) ppios::pt_escape(PtStop::Budget);
  return block;
}

}  // namespace

extern "C" {

void ppios_pt_exit(void) { ppios::pt_escape(PtStop::Exit); }

void ppios_pt_out_of_bounds(void) { ppios::pt_escape(PtStop::Bounds); }

void ppios_pt_poll(void) { ppios::pt_checkpoint(); }

void ppios_pt_speculate(ppios_seq_t seq) {
  ppios::pt_checkpoint();
  Runtime::get().hold_speculation(seq);
  ppios::pt_checkpoint();  // the runtime may have stopped while the PT waited
}

// The allocations run as runtime code: a fault inside malloc (a heap the slice broke)
// must not become an escape that leaves malloc's locks held.
void *ppios_pt_malloc(size_t size) {
  ppios::pt_checkpoint();
  void *block;
  {
    ppios::RuntimeScope scope;
    block = PtResources::get().allocate(size, Runtime::get().cache());
  }
  return or_escape(block);
}

void *ppios_pt_calloc(size_t nmemb, size_t size) {
  ppios::pt_checkpoint();
  if (size != 0 && nmemb > SIZE_MAX / size) ppios::pt_escape(PtStop::Budget);
  void *block;
  {
    ppios::RuntimeScope scope;
    block = PtResources::get().allocate(nmemb * size, Runtime::get().cache());
    if (block != nullptr) std::memset(block, 0, nmemb * size);
  }
  return or_escape(block);
}

void *ppios_pt_realloc(void *ptr, size_t size) {
  ppios::pt_checkpoint();
  void *block;
  {
    ppios::RuntimeScope scope;
    block = PtResources::get().reallocate(ptr, size, Runtime::get().cache());
  }
  return or_escape(block);
}

void *ppios_pt_vla(void **slot, size_t bytes) {
  const size_t size = bytes == 0 ? 1 : bytes;  // realloc to 0 would free it
  void *block = ppios_pt_realloc(*slot, size);  // escapes over budget; *slot stays freeable
  *slot = block;
  std::memset(block, 0, size);
  return block;
}

void ppios_pt_free(void *ptr) {
  ppios::RuntimeScope scope;
  PtResources::get().release(ptr, Runtime::get().cache());
}

}  // extern "C"
