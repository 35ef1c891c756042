// The coordinator used when inter-process scheduling is off: every request is granted
// at once and nobody is ever asked to yield.
#include "ppios/Coordinator.h"

#include <atomic>

namespace ppios {
namespace {

class UnlimitedCoordinator final : public Coordinator {
 public:
  SlotTicket acquire(IoClass cls, uint64_t) override {
    SlotTicket t;
    t.id = next_id_.fetch_add(1, std::memory_order_relaxed);
    t.cls = cls;
    return t;
  }
  void release(SlotTicket &ticket) override { ticket.id = 0; }
  bool yield_requested(const SlotTicket &) override { return false; }
  const char *name() const override { return "none"; }

 private:
  std::atomic<uint64_t> next_id_{1};
};

}  // namespace

std::unique_ptr<Coordinator> make_unlimited_coordinator() {
  return std::make_unique<UnlimitedCoordinator>();
}

}  // namespace ppios
