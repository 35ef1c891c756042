// System-wide I/O slot arbitration (the inter-process scheduling of the PPIOS paper,
// Zhao, Yoshigoe and Xie, 2013, sec. 4.1).
//
// The runtime asks a Coordinator for a slot before every storage access and gives it
// back afterwards. At most `threshold` accesses hold a slot system-wide; with m MT
// accesses holding slots, PT accesses only get the n - m that are left. An MT that
// arrives at the cap never waits behind PTs: a PT holder is asked to yield at its next
// sub-read boundary (this process's PT first, otherwise the PT with the largest lead).
//
// Thread safety: one Coordinator per process, shared by its MT, PT and WTs; every
// method may be called concurrently from those threads.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace ppios {

enum class IoClass : uint8_t { MT = 0, PT = 1 };

// What an MT does at a full cap once no PT holds a slot (PPIOS_MT_THROTTLE). The paper caps
// every access; past the knee more streams lose bandwidth, so MTs that alone exceed the cap
// slow each other down (bench/run: 0.6-0.9x the time when they wait).
enum class MtAtCap : uint8_t {
  Pass = 0,     // PPIOS_MT_THROTTLE=0: runs past a cap that MTs alone fill
  Wait = 1,     // PPIOS_MT_THROTTLE=1, and the default with a numeric PPIOS_THRESHOLD: queues
  Learned = 2,  // the default otherwise: waits while the target's PPIOS_THRESHOLD=auto
                // controller holds MTs (once the climb from below is over, not while a
                // cold start doubles: ThroughputClimber::holds_mts), else passes
};

// A granted slot. `id` is backend-defined and unique within the process.
struct SlotTicket {
  uint64_t id = 0;
  IoClass cls = IoClass::MT;
  // Bytes the holder moved under this slot. The holder adds them before release(), which
  // reports them: PPIOS_THRESHOLD=auto learns the cap from completed bytes per window.
  uint64_t bytes = 0;
  bool valid() const { return id != 0; }
};

// Everything a backend needs; filled in from the environment by the runtime's
// Config (the one place that parses PPIOS_*) or by ppios-coord's flags.
struct CoordinatorOptions {
  std::string address = "shm";   // "shm", "[node+]redis://[:password@]host:port[/db]", "[node+]unix:///path.sock"
  std::string target = "default";
  int64_t threshold = -1;        // -1: not given by this process (use the stored cap, or none)
  int lease_ms = 3000;
  MtAtCap mt_at_cap = MtAtCap::Learned;  // PPIOS_MT_THROTTLE (see MtAtCap)
  bool auto_threshold = false;   // PPIOS_THRESHOLD=auto: the cap is learned (see AutoThreshold.h)
  int64_t shm_group = -1;        // PPIOS_SHM_GROUP: gid the node-local segment is shared with; -1: private
  // PPIOS_SIM_NODE (tests and benchmarks only): the node name the two-level backend (node+)
  // uses instead of the host name, so several simulated nodes run on one machine, each
  // with its own node-local segment. "": the real node.
  std::string sim_node;
};

constexpr int kMinLeaseMs = 100;
constexpr int kMaxLeaseMs = 3600 * 1000;

// The one parser of the coordinator's variables (PPIOS_COORDINATOR, PPIOS_TARGET,
// PPIOS_THRESHOLD, PPIOS_LEASE_MS, PPIOS_MT_THROTTLE, PPIOS_SHM_GROUP, PPIOS_SIM_NODE), shared by the
// runtime's Config and ppios-coord. Unset variables keep the defaults. Returns false with
// a message naming the variable and the accepted values.
bool parse_coordinator_env(const std::function<const char *(const char *)> &getenv_fn, CoordinatorOptions *options,
                           std::string *error);
// The one rule for a whole number in a setting or a flag (the PPIOS_* variables, through
// the runtime's Config too, and ppios-coord's arguments): decimal digits only, with no sign,
// space or leading zero ("0" itself is one), from min to max. " 5", "5 ", "+5" and "05"
// are refused alike: a value that is not written plainly is more likely a mistake (a
// quoting slip, a stray character) than a number.
bool parse_setting_number(const char *text, int64_t min, int64_t max, int64_t *out);
// PPIOS_TARGET and --target: 1 to 64 characters from A-Z a-z 0-9 . _ -; "" if valid.
std::string validate_target(const std::string &target);
// An address with its password replaced by "***", for messages.
std::string redact_address(const std::string &address);
// PPIOS_SHM_GROUP and `ppios-coord share-group`: a group name or number the caller belongs
// to (root belongs to every group). `what` names the setting in the message.
bool parse_shm_group(const char *text, const char *what, int64_t *gid, std::string *error);

// The one parser of a PPIOS_THRESHOLD value, shared by the runtime's Config and ppios-coord:
// "auto" or a whole number from 1 to kMaxThreshold. Sets options->threshold and
// options->auto_threshold; returns false with a message naming the accepted values.
constexpr int64_t kMaxThreshold = 1 << 20;
bool parse_threshold_setting(const char *text, CoordinatorOptions *options, std::string *error);

class Coordinator {
 public:
  virtual ~Coordinator() = default;

  // Blocks until a slot is granted. `lead` is how far (in I/O sequence numbers) the
  // PT's access is ahead of its MT; 0 for MT accesses. Never fails: a backend that
  // loses its server falls back to node-local arbitration.
  virtual SlotTicket acquire(IoClass cls, uint64_t lead) = 0;

  // Gives a slot back, reporting ticket.bytes. Idempotent: releasing an invalid or already
  // released ticket is a no-op.
  virtual void release(SlotTicket &ticket) = 0;

  // PT only, called between sub-reads: true if the holder of `ticket` was asked to
  // give its slot back. Must be cheap (an atomic load, no round trip).
  virtual bool yield_requested(const SlotTicket &ticket) = 0;

  // Human-readable backend name for stats and messages ("none", "shm", "redis").
  virtual const char *name() const = 0;
};

// Something a coordinator has to tell about a run that goes on: a stored cap that differs
// from PPIOS_THRESHOLD, a server that cannot be reached, a node-local segment that cannot be
// used, a lock taken over. Errors that stop the run are not notices: make_coordinator
// returns them. Each kind is told once per process (once per coordinator for the redis
// backend's).
struct CoordinatorNotice {
  std::string text;  // one line, without a "ppios: warning: " prefix
  // A stored cap that differs from PPIOS_THRESHOLD (the stored one is obeyed): both caps.
  // -1 in every other notice.
  int64_t requested_threshold = -1;
  int64_t stored_threshold = -1;
};

// Where the notices go. Without a sink (nullptr, the default) each is printed on stderr as
// "ppios: warning: <text>", which is what a command such as ppios-coord wants; a program's
// runtime installs its own before it makes its coordinator, since the program's stderr is
// not its to write on. The sink is called from any thread, possibly with the coordinator's
// own locks held: it must return quickly and never call the coordinator.
using CoordinatorNoticeSink = void (*)(const CoordinatorNotice &notice);
void set_coordinator_notice_sink(CoordinatorNoticeSink sink);

// Which jobs one cap covers, for `ppios-coord status` and the statistics
// (coordinator_scope):
//   "user"    the user's own jobs on this node (shm, the default: the segment is private);
//   "group"   the jobs of the members of PPIOS_SHM_GROUP on this node (a group segment,
//             `ppios-coord share-group`);
//   "site"    every job on the target of the server, of every user and node (redis, node+);
//   "process" this process alone (its node-local segment could not be used; a notice says
//             why);
//   "none"    no scheduling across processes (PPIOS_MODE=pp, intra, off).
// A cap across users needs the site's coordinator: a Redis server, or a group segment.
const char *cap_scope(const Coordinator &coordinator);

// Grants every request at once; used when scheduling across processes is off
// (PPIOS_MODE=pp/intra/off).
std::unique_ptr<Coordinator> make_unlimited_coordinator();

// Checks an address string without connecting. Returns "" if valid, else a message
// that names the accepted forms.
std::string validate_coordinator_address(const std::string &address);

// Creates the backend named by `options.address`. On a fatal configuration error
// (bad URL, wrong password, wrong db) returns nullptr and sets *error.
std::unique_ptr<Coordinator> make_coordinator(const CoordinatorOptions &options, std::string *error);

}  // namespace ppios
