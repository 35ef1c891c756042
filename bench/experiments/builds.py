"""The binaries of each mode. normal and optimal run the mpicc builds of
examples/ (build/examples/<kernel>); pp, intra and ppios run the same sources
compiled by ppios-cc. ppios-cc needs Clang 16 and can be left out of a build
(-DPPIOS_WITH_TRANSFORMER=OFF): when it is missing, or fails on a kernel, those
modes are reported as unavailable for that kernel and the rest still runs. No
hand-transformed kernel is ever used."""
import os
import subprocess
from dataclasses import dataclass

PREFETCH_MODES = ("pp", "intra", "ppios")


@dataclass(frozen=True)
class Kernel:
    name: str        # sum
    label: str       # SUM: the prefix of its result line and TIME kernel=
    writes: bool     # DSCAL writes an output file


KERNELS = {k.name: k for k in (Kernel("sum", "SUM", False), Kernel("avg", "AVG", False),
                               Kernel("dscal", "DSCAL", True), Kernel("grep", "GREP", False))}


class Binaries:
    def __init__(self, repo, build):
        self.repo, self.build = repo, build
        self.gen_input = os.path.join(build, "examples", "gen-input")
        self.simfs = os.path.join(build, "bench", "simfs", "ppios-simfs")
        self.calibrate = os.path.join(build, "bench", "simfs", "ppios-simfs-calibrate")
        self.coord = os.path.join(build, "coordinator", "tools", "ppios-coord", "ppios-coord")
        self.default_ppios_cc = os.path.join(build, "bin", "ppios-cc")
        self.prefetching = {}   # kernel -> path
        self.unavailable = {}   # kernel -> why pp/intra/ppios cannot run

    def normal(self, kernel):
        return os.path.join(self.build, "examples", kernel)

    def missing(self, kernels, need_simfs):
        wanted = [self.gen_input, self.coord] + [self.normal(k) for k in kernels]
        if need_simfs:
            wanted += [self.simfs, self.calibrate]
        return [p for p in wanted if not os.access(p, os.X_OK)]

    def build_prefetching(self, ppios_cc, kernels, outdir, log):
        """Compiles each kernel with ppios-cc into outdir; records failures."""
        if ppios_cc is None or not os.access(ppios_cc, os.X_OK):
            why = (f"ppios-cc is not built ({self.default_ppios_cc} missing; "
                   f"configure with -DPPIOS_WITH_TRANSFORMER=ON)")
            for k in kernels:
                self.unavailable[k] = why
            return
        os.makedirs(outdir, exist_ok=True)
        examples = os.path.join(self.repo, "examples")
        for k in kernels:
            out = os.path.join(outdir, f"{k}_ppios")
            # -g: the per-run reports name source lines (addr2line); GCC emits the same
            # code with and without it.
            cmd = [ppios_cc, "-O2", "-g", "-o", out, os.path.join(examples, f"{k}.c"),
                   os.path.join(examples, "kernel_common.c"), f"-I{examples}"]
            log(f"ppios-cc {k}: {' '.join(cmd)}")
            logfile = os.path.join(outdir, f"ppios-cc-{k}.log")
            try:
                with open(logfile, "wb") as f:
                    r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=self.repo,
                                       timeout=600)
                ok = r.returncode == 0 and os.access(out, os.X_OK)
                why = f"ppios-cc failed on {k}.c (exit {r.returncode}; see {logfile})"
            except subprocess.TimeoutExpired:
                ok, why = False, f"ppios-cc timed out on {k}.c (see {logfile})"
            if ok:
                self.prefetching[k] = out
            else:
                self.unavailable[k] = why

    def threshold_rejected(self, value, env):
        """The runtime's message if it refuses PPIOS_THRESHOLD=value (say `auto` before
        the coordinator supports it), else None. The runtime checks its settings when
        the library loads, so `KERNEL --help` is enough and costs no run."""
        if not self.prefetching:
            return None
        binary = next(iter(self.prefetching.values()))
        try:
            r = subprocess.run([binary, "--help"], env=dict(env, PPIOS_MODE="ppios",
                                                            PPIOS_THRESHOLD=value),
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, timeout=60)
        except subprocess.TimeoutExpired:
            return None  # not a verdict on the value; the runs will tell
        message = r.stderr.decode(errors="replace").strip()
        if r.returncode != 0 and "PPIOS_THRESHOLD" in message:
            return message
        return None

    def for_mode(self, kernel, mode):
        if mode in PREFETCH_MODES:
            return self.prefetching.get(kernel)
        return self.normal(kernel)
