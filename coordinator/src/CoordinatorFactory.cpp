// Chooses the backend named by PPIOS_COORDINATOR (already parsed into CoordinatorOptions).
#include "ShmCoordinator.h"
#include "RedisCoordinator.h"
#include "RedisAddress.h"
#include "ppios/Coordinator.h"

namespace ppios {

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
