#include "Config.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace ppios {

const char *mode_name(Mode mode) {
  switch (mode) {
    case Mode::Off: return "off";
    case Mode::PP: return "pp";
    case Mode::Intra: return "intra";
    case Mode::PPIOS: return "ppios";
    case Mode::PPIOSStrict: return "ppios-strict";
  }
  return "?";
}

namespace {

// A whole decimal number in [min, max], by the rule every ppios setting shares
// (parse_setting_number: no sign, space, suffix or leading zero, so PPIOS_BACKOFF=00 is
// refused as PPIOS_BACKOFF=yes is).
bool parse_integer(const char *text, int64_t min, int64_t max, int64_t *out) {
  return parse_setting_number(text, min, max, out);
}

std::string range_message(const char *name, const char *value, int64_t min, int64_t max) {
  return std::string(name) + "='" + value + "' is not valid; use a whole number from " +
         std::to_string(min) + " to " + std::to_string(max);
}

}  // namespace

bool Config::parse(const std::function<const char *(const char *)> &getenv_fn, Config *out,
                   std::string *error) {
  Config c;
  auto integer = [&](const char *name, int64_t min, int64_t max, int64_t *value) {
    const char *text = getenv_fn(name);
    if (text == nullptr) return true;  // keep the default
    if (parse_integer(text, min, max, value)) return true;
    *error = range_message(name, text, min, max);
    return false;
  };

  if (const char *m = getenv_fn("PPIOS_MODE")) {
    if (!std::strcmp(m, "off")) c.mode = Mode::Off;
    else if (!std::strcmp(m, "pp")) c.mode = Mode::PP;
    else if (!std::strcmp(m, "intra")) c.mode = Mode::Intra;
    else if (!std::strcmp(m, "ppios")) c.mode = Mode::PPIOS;
    else if (!std::strcmp(m, "ppios-strict")) c.mode = Mode::PPIOSStrict;
    else {
      *error = std::string("PPIOS_MODE='") + m +
               "' is not valid; use ppios, ppios-strict, intra, pp or off";
      return false;
    }
  }

  int64_t cache_mb = 256, subread_kb = 256, max_wt = 4, pt_readers = 2, backoff = 1, verbose = 0;
  if (!integer("PPIOS_CACHE_MB", 1, 1 << 20, &cache_mb)) return false;
  if (!integer("PPIOS_SUBREAD_KB", 4, 1 << 20, &subread_kb)) return false;
  if (!integer("PPIOS_MAX_WT", 0, 64, &max_wt)) return false;
  if (!integer("PPIOS_PT_READERS", 1, 16, &pt_readers)) return false;
  // The coordinator's variables have one parser, shared with ppios-coord.
  if (!parse_coordinator_env(getenv_fn, &c.coordinator, error)) return false;
  if (!integer("PPIOS_BACKOFF", 0, 1, &backoff)) return false;
  c.backoff = backoff != 0;
  if (!integer("PPIOS_VERBOSE", 0, 1, &verbose)) return false;
  c.verbose = verbose != 0;
  c.cache_bytes = static_cast<size_t>(cache_mb) << 20;
  c.subread_bytes = static_cast<size_t>(subread_kb) << 10;
  c.max_waiting_threads = static_cast<int>(max_wt);
  c.pt_readers = static_cast<int>(pt_readers);

  for (auto [name, field] : {std::pair{"PPIOS_STATS", &c.stats_path},
                             std::pair{"PPIOS_TRACE", &c.trace_prefix}}) {
    if (const char *p = getenv_fn(name)) {
      if (*p == '\0') {
        *error = std::string(name) + " is set but empty; give a file path or unset it";
        return false;
      }
      *field = p;
    }
  }
  c.job_on_one_node = launcher_says_one_node(getenv_fn);
  *out = c;
  return true;
}

// What the launcher tells its processes about the job's placement: Open MPI's mpirun
// the job's size and the ranks on this node, MPICH's Hydra the same under other names. A
// process no launcher started (a singleton) is a job of one. Anything else might span
// nodes.
bool launcher_says_one_node(const std::function<const char *(const char *)> &getenv_fn) {
  auto same = [&](const char *size, const char *local) {
    const char *a = getenv_fn(size), *b = getenv_fn(local);
    return a != nullptr && b != nullptr && *a != '\0' && std::strcmp(a, b) == 0;
  };
  if (getenv_fn("OMPI_COMM_WORLD_SIZE") != nullptr)
    return same("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE");
  if (getenv_fn("PMI_SIZE") != nullptr) return same("PMI_SIZE", "MPI_LOCALNRANKS");
  if (getenv_fn("PMIX_RANK") != nullptr) return false;
  return true;
}

}  // namespace ppios
