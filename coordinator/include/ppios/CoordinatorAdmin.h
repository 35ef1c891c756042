// Inspection and administration of a coordinator's stored state, for `ppios-coord` and
// tests. Programs under ppios never need this: they only use ppios/Coordinator.h.
#pragma once

#include "ppios/Coordinator.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace ppios {

// One granted slot as the coordinator records it.
struct HolderInfo {
  std::string host;
  int pid = 0;
  IoClass cls = IoClass::MT;
  uint64_t lead = 0;            // PT only: how far ahead of its MT the access is
  bool yield_requested = false; // an MT asked this PT holder to give its slot back
};

// One node's share of the cap (two-level backend, PPIOS_COORDINATOR=node+...), as the
// server recorded it at the node's last sync.
struct NodeShareInfo {
  std::string node;          // "<host or sim-NAME>/u<uid>" (or /g<gid>)
  int64_t share = 0;         // slots of the cap the node holds
  int64_t need = 0;          // in flight + queued on the node
  int64_t mt_need = 0;       // MTs in flight + queued
  int64_t pt_inflight = 0;
  int64_t lease_left_ms = 0; // the share returns when this reaches 0
};

// A consistent snapshot of one target, read in one critical section (shm) or one
// script call (redis).
struct CoordinatorStatus {
  std::string backend;          // "shm" or "redis"
  std::string target;
  std::string scope;            // which jobs the cap covers: "user", "group" or "site" (ppios::cap_scope)
  int64_t threshold = -1;       // -1: no cap stored
  uint32_t mt_inflight = 0;
  uint32_t pt_inflight = 0;
  uint32_t queued_mt = 0;
  uint32_t queued_pt = 0;
  uint32_t processes = 0;       // registered processes with a live lease
  uint64_t max_inflight_seen = 0; // since the state was created or reset
  std::vector<HolderInfo> holders;
  // PPIOS_THRESHOLD=auto: whether the cap is learned, who learns it, and the curve
  // B(k) in MiB/s it learned (or `ppios-coord calibrate --store` measured).
  bool auto_threshold = false;
  bool mt_hold = false;         // the controller holds MTs at the cap (MtAtCap::Learned)
  std::string controller_host;  // empty: no controller holds the lease
  int controller_pid = 0;
  std::vector<std::pair<int, double>> curve;  // (k, MiB/s), k ascending
  std::vector<NodeShareInfo> nodes;  // redis only: the nodes holding shares (node+ addresses)
  int64_t node_max_shares = 0;       // the highest sum of the nodes' shares the server recorded
  // What this status found wrong in the stored state and repaired first (redis: keys of
  // the wrong type, entries no ppios process wrote, counters that disagree with the
  // tables), one line each; empty when nothing.
  std::vector<std::string> repairs;
};

class CoordinatorAdmin {
 public:
  virtual ~CoordinatorAdmin() = default;
  // Each returns false and sets *error when the backend cannot be reached.
  virtual bool status(CoordinatorStatus *out, std::string *error) = 0;
  // n >= 1 sets the cap live (waiters are re-examined at once); n < 0 removes it. Either
  // turns the learning of PPIOS_THRESHOLD=auto off.
  virtual bool set_threshold(int64_t n, std::string *error) = 0;
  // Turns learning on: the controller of a process started with PPIOS_THRESHOLD=auto
  // climbs from the stored cap (1 if none).
  virtual bool set_auto(std::string *error) = 0;
  // Replaces the stored curve (k, MiB/s) shown by status, e.g. after a calibration.
  virtual bool store_curve(const std::vector<std::pair<int, double>> &curve, std::string *error) = 0;
  // Forgets everything stored for the target (threshold, holders, queues, processes).
  // Refuses while processes are registered on it (they and later jobs would then enforce
  // separate caps) unless `force`. *notes gets what else it found and did (a planted or
  // malformed segment removed), one line each.
  virtual bool reset(std::string *error, bool force = false, std::vector<std::string> *notes = nullptr) = 0;
};

// `ppios-coord share-group`: an administrator (root) makes the segment of `target` shared
// with group `gid` (owner root, mode 0660) and keeps it (pinned), storing `threshold` if it
// is >= 1, so that the cap covers the jobs of every member that sets PPIOS_SHM_GROUP. A
// file at the name that is not such a segment (another group, access for others, not a
// regular file, planted) is refused with why; *report says what was made or found.
bool share_segment_with_group(const std::string &target, int64_t gid, int64_t threshold, int lease_ms,
                              std::string *report, std::string *error);

// `ppios-coord gc`: removes this node's segments (any ppios version) that no process maps
// and the caller may remove; one holding a threshold set with ppios-coord only with
// include_pinned. Fills the paths removed and kept (with why).
void collect_unused_segments(bool include_pinned, std::vector<std::string> *removed, std::vector<std::string> *kept);

// The requests clients sent the backend's redis-server so far (INFO commandstats: script
// calls, BLPOP and connection set-up), and in *all_commands every command it ran,
// including those its scripts ran; for `ppios-coord bench`. -1 for shm or when unreachable.
int64_t server_requests_processed(const CoordinatorOptions &options, int64_t *all_commands, std::string *error);

// Talks to the backend named by options.address directly: no fallback, no registration.
std::unique_ptr<CoordinatorAdmin> make_coordinator_admin(const CoordinatorOptions &options,
                                                         std::string *error);

}  // namespace ppios
