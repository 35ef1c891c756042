// The files a run writes (PPIOS_STATS, PPIOS_TRACE) are opened by the one helper every
// ppios writer uses (ppios-coord's too): see ppios/OutputFile.h for what it refuses.
#pragma once

#include "ppios/OutputFile.h"
