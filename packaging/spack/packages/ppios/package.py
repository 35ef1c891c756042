# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# The Spack recipe of ppios. Use it from this repository:
#   spack repo add <ppios source>/packaging/spack
#   spack install ppios@main            (or: spack dev-build ppios@main in a source tree)
# Set `git` below to where your site keeps the ppios repository. Every CMake option of the
# project is set here, from a variant or explicitly; packaging/tests/package_test.py
# (`ctest -R package.spack`) checks that this file and the CMake files agree.

from spack.package import *


class Ppios(CMakePackage):
    """Pre-execution prefetching with I/O scheduling for MPI programs: ppios-cc, a drop-in
    for mpicc, builds a program whose reads a prefetch thread pre-executes, scheduled so
    that prefetches never get in the way of the program's own I/O, across jobs too."""

    homepage = "https://example.invalid/ppios"  # the site's page for ppios, if any
    git = "https://example.invalid/ppios.git"  # where the site keeps the repository

    license("Apache-2.0 WITH LLVM-exception")

    version("main", branch="main")

    variant(
        "transformer",
        default=True,
        description="Build ppios-cc, the compiler driver (needs Clang 16 LibTooling)",
    )

    depends_on("cmake@3.20:", type="build")
    depends_on("ninja", type="build")
    depends_on("pkgconfig", type="build")
    depends_on("googletest", type="build")
    depends_on("mpi")
    depends_on("hiredis")
    depends_on("libfuse@3.12:")  # the storage emulator of the benchmarks (libexec/ppios)
    depends_on("python@3:", type=("build", "run"))  # ppios-report, the man pages
    depends_on("llvm@16+clang", when="+transformer")

    generator("ninja")

    def cmake_args(self):
        return [
            self.define_from_variant("PPIOS_WITH_TRANSFORMER", "transformer"),
            # One build per MPI, as Spack builds for the `mpi` of the spec: no second runtime.
            self.define("PPIOS_WITH_MPICH", False),
            # For developers and CI only:
            self.define("PPIOS_RUNTIME_ONLY", False),
            self.define("PPIOS_SANITIZE", ""),
            self.define("PPIOS_WERROR", False),
        ]

    def setup_run_environment(self, env):
        env.prepend_path("MANPATH", self.prefix.share.man)
