// ppios-cc: a drop-in replacement for mpicc that builds the prefetching version of an MPI
// C program (see transformer/lib/CompilerDriver.h).
#include "CompilerDriver.h"

int main(int argc, const char **argv) {
  return ppios::runCompilerDriver(argc, argv, reinterpret_cast<void *>(&main));
}
