// How long an access waits for a slot before it proceeds without one (fail-open): the same
// rule for every backend, so that a holder that never finishes (a hung process, a forged
// entry) costs a job the same bounded wait whichever coordinator it uses.
//   - stalled: nothing was granted on the target for max(2 x lease, 2 s) while it waited
//     (a stopped holder's slots come back within the lease, so only holders that never
//     finish stall a queue that long);
//   - too long: max(20 x lease, 60 s) whatever moved (a grant count that keeps moving,
//     forged or not, must not make a wait endless).
// After one such access the backend is "failing open": later accesses give up after two
// polls without a grant, so stuck holders cost one bound, not one per access, until the
// next grant.
#pragma once

#include <algorithm>

namespace ppios {

struct WaitBounds {
  int lease_ms;
  int stall_ms(bool failing_open, int poll_ms) const {
    return failing_open ? 2 * poll_ms : std::max(2 * lease_ms, 2000);
  }
  int max_wait_ms() const { return std::max(20 * lease_ms, 60000); }
};

}  // namespace ppios
