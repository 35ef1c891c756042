// How the backends tell a notice (see CoordinatorNotice in ppios/Coordinator.h): to the
// sink the embedding program installed, else on stderr.
#pragma once

#include <cstdint>
#include <string>

#include "ppios/Coordinator.h"

namespace ppios {

void tell_notice(const CoordinatorNotice &notice);

inline void tell_notice(const std::string &text) { tell_notice(CoordinatorNotice{text}); }

// A PPIOS_THRESHOLD that differs from the cap stored for the target: the stored one is obeyed.
inline void tell_threshold_conflict(int64_t requested, int64_t stored, const std::string &target) {
  tell_notice(CoordinatorNotice{"PPIOS_THRESHOLD=" + std::to_string(requested) + " differs from the threshold " +
                                    std::to_string(stored) + " stored for target '" + target +
                                    "'; obeying the stored one (change it with `ppios-coord set-threshold`)",
                                requested, stored});
}

}  // namespace ppios
