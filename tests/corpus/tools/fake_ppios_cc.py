#!/usr/bin/env python3
"""A stand-in for ppios-cc, to test run_corpus.py before the real one exists: mpicc with
the program's I/O calls redirected to libppios's main-thread calls (tools/fake_redirect.h),
linked with libppios. There is no prefetch thread, so every hit ratio is 0; stdout, files
and PPIOS_STATS must still be right in every mode. `--emit-source -o out.c in.c` copies
the input. Needs CORPUS_FAKE_INCLUDE (runtime/include) and CORPUS_FAKE_LIB (libppios.so).
"""
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main(argv):
    if "--emit-source" in argv:
        out = argv[argv.index("-o") + 1]
        shutil.copy([a for a in argv if a.endswith(".c") and a != out][0], out)
        return 0
    include, lib = os.environ["CORPUS_FAKE_INCLUDE"], os.environ["CORPUS_FAKE_LIB"]
    cmd = [os.environ.get("PPIOS_CC", "mpicc"), "-include", os.path.join(HERE, "fake_redirect.h"),
           "-I" + include] + argv
    if "-c" not in argv:
        cmd += [lib, "-Wl,-rpath," + os.path.dirname(os.path.abspath(lib))]
    return subprocess.call(cmd)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
