// Handles the MT hands to the running PT (ppios_mt_handoff_*): the MT posts each slot
// once; the PT's take waits until it is posted, or returns false once the runtime stops.
//
// Locks: handoff_mu_ guards the posted handles; pt_running reads the PT's state under
// lifecycle_mu_. Neither is held with the other.
#include "Runtime.h"

#include <mutex>

namespace ppios {

bool Runtime::pt_running() {
  std::lock_guard<std::mutex> lock(lifecycle_mu_);
  return pt_running_ && !stopping();
}

void Runtime::handoff_post(unsigned slot, intptr_t handle) {
  std::lock_guard<std::mutex> lock(handoff_mu_);
  handoffs_[slot] = handle;
  handoff_cv_.notify_all();
}

bool Runtime::handoff_take(unsigned slot, intptr_t *handle) {
  std::unique_lock<std::mutex> lock(handoff_mu_);
  handoff_cv_.wait(lock, [&] { return stopping() || handoffs_.count(slot) > 0; });
  auto it = handoffs_.find(slot);
  if (it == handoffs_.end()) return false;
  *handle = it->second;
  handoffs_.erase(it);
  return true;
}

}  // namespace ppios
