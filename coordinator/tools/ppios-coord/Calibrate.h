// `ppios-coord calibrate PATH`: the offline B(k) sweep of Figs. 2-3 of the I/O stream
// throttling study (Seelam, Kerstens and Teller).
#pragma once

#include "ppios/Coordinator.h"

#include <string>
#include <vector>

namespace ppios {

extern const char *const kCalibrateHelp;

// Runs the command; returns the process exit code (0 ok, 1 failure, 2 usage).
int run_calibrate(const CoordinatorOptions &options, const std::vector<std::string> &args);

}  // namespace ppios
