// ppios-cc as a compiler driver: accepts what mpicc accepts, transforms each C input with
// the Transformer into a temporary file, and runs the real mpicc (PPIOS_CC) on the result,
// adding the runtime's include path and, when linking, libppios with an rpath. Objects it
// compiles (-c) carry a .ppios.unit record of their C file and flags, so that its link step
// can transform the program's units together, like LTO (see docs/ppios-cc.md).
#ifndef PPIOS_TRANSFORMER_COMPILERDRIVER_H
#define PPIOS_TRANSFORMER_COMPILERDRIVER_H

namespace ppios {

// argv[0] and a function address locate the executable, and from it libppios and ppios.h
// (install tree: <prefix>/bin, <prefix>/lib, <prefix>/include; or the build tree).
int runCompilerDriver(int argc, const char **argv, void *MainAddress);

} // namespace ppios

#endif
