# lit configuration of ppios-cc's tests: detection, slicing and emission. Every test that
# emits code also compiles it with the real mpicc against the runtime header.
import os

import lit.formats

config.name = "ppios-cc"
config.test_format = lit.formats.ShTest(True)
config.suffixes = [".test"]
config.excludes = ["Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.ppios_obj_root, "lit")

config.substitutions.append(("%ppios-cc", config.ppios_cc))
config.substitutions.append(("%mpicc-ppios",
                             "mpicc -Wall -Werror -c -I" + config.ppios_include_dir))
config.environment["PATH"] = os.pathsep.join([config.llvm_tools_dir, os.environ.get("PATH", "")])
for name in ("HOME", "TMPDIR"):
    if name in os.environ:
        config.environment[name] = os.environ[name]
# mpirun as root on 2 cores (see TOOLCHAIN.md).
config.environment["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
config.environment["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
