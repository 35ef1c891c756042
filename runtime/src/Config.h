// Every PPIOS_* environment variable, parsed and validated in one place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "ppios/Coordinator.h"

namespace ppios {

// PPIOS: intra + inter-process scheduling, work-conserving inside a process (a prefetch
// may read while its MT's own access runs, whenever the coordinator grants it a slot).
// PPIOSStrict: the paper's rule, one storage access at a time per process.
enum class Mode { Off, PP, Intra, PPIOS, PPIOSStrict };

const char *mode_name(Mode mode);

struct Config {
  Mode mode = Mode::PPIOS;
  size_t cache_bytes = 256u << 20;     // PPIOS_CACHE_MB
  size_t subread_bytes = 256u << 10;   // PPIOS_SUBREAD_KB
  int max_waiting_threads = 4;         // PPIOS_MAX_WT
  int pt_readers = 2;                  // PPIOS_PT_READERS (used in Mode::PPIOS only)
  bool backoff = true;                 // PPIOS_BACKOFF: stop prefetching what does not pay off
  std::string stats_path;              // PPIOS_STATS (empty: off)
  std::string trace_prefix;            // PPIOS_TRACE (empty: off)
  // PPIOS_VERBOSE: what does not stop the run (a PT fault, a coordinator notice, an output
  // that cannot be written) is also printed on stderr, "ppios: "-prefixed. Off, the
  // program's stderr carries nothing but a configuration error that stops the run.
  bool verbose = false;
  // Every process of the job runs on this node (from the launcher's variables, see
  // launcher_says_one_node): the node's change generations see all of their changes.
  bool job_on_one_node = true;
  CoordinatorOptions coordinator;      // PPIOS_COORDINATOR, PPIOS_TARGET, PPIOS_THRESHOLD,
                                       // PPIOS_LEASE_MS, PPIOS_MT_THROTTLE

  // Reads the configuration through `getenv_fn` (getenv in production, a map in tests).
  // Returns false and sets *error to a message naming the variable and the accepted
  // values if any variable is invalid.
  static bool parse(const std::function<const char *(const char *)> &getenv_fn, Config *out,
                    std::string *error);
};

bool launcher_says_one_node(const std::function<const char *(const char *)> &getenv_fn);

}  // namespace ppios
