// Chooses the backend named by PPIOS_COORDINATOR (already parsed into CoordinatorOptions).
#include "ShmCoordinator.h"
#include "RedisCoordinator.h"
#include "RedisAddress.h"
#include "ppios/Coordinator.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace ppios {

bool parse_threshold_setting(const char *text, CoordinatorOptions *options, std::string *error) {
  if (text != nullptr && std::strcmp(text, "auto") == 0) {
    options->threshold = -1;
    options->auto_threshold = true;
    return true;
  }
  bool digits = text != nullptr && *text != '\0';
  for (const char *p = text; digits && *p; ++p) digits = *p >= '0' && *p <= '9';
  if (digits) {
    errno = 0;
    long long v = std::strtoll(text, nullptr, 10);
    if (errno == 0 && v >= 1 && v <= kMaxThreshold) {
      options->threshold = v;
      options->auto_threshold = false;
      return true;
    }
  }
  if (error)
    *error = std::string("PPIOS_THRESHOLD='") + (text ? text : "") +
             "' is not valid; use a whole number from 1 to " + std::to_string(kMaxThreshold) +
             " or auto (the cap is learned from the measured throughput)";
  return false;
}

std::string validate_coordinator_address(const std::string &address) {
  if (address == "shm") return "";
  RedisAddress parsed;
  std::string problem;
  if (RedisAddress::parse(address, &parsed, &problem)) return "";
  return "PPIOS_COORDINATOR='" + address + "' is not valid (" + problem +
         "); use shm, redis://[:password@]host:port[/db] or unix:///path.sock";
}

std::unique_ptr<Coordinator> make_coordinator(const CoordinatorOptions &options, std::string *error) {
  std::string problem = validate_coordinator_address(options.address);
  if (problem.empty() && options.lease_ms < 10) problem = "PPIOS_LEASE_MS must be at least 10";
  if (problem.empty() && options.target.empty()) problem = "PPIOS_TARGET must not be empty";
  if (!problem.empty()) {
    if (error) *error = problem;
    return nullptr;
  }
  if (options.address == "shm") return ShmCoordinator::create(options, error);
  return RedisCoordinator::create(options, error);
}

}  // namespace ppios
