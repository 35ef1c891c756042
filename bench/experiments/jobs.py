"""Running kernels under mpirun and reading what they print.

Several jobs can run at once (E2): each gets its own session (so it can be
killed with its ranks), its own stdout/stderr files (no pipes to drain while
waiting for the others) and a cleanup entry while it runs."""
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field

from . import resources as res

MPIRUN_FLAGS = ["--oversubscribe", "--bind-to", "none"]


def base_env():
    """The caller's environment without any PPIOS_* setting (a stray
    PPIOS_THRESHOLD would change what a mode means), plus mpirun-as-root."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PPIOS_")}
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               # a failing rank should not cost mpirun's grace period
               OMPI_MCA_odls_base_sigkill_timeout="0")
    return env


@dataclass
class JobSpec:
    label: str
    kernel_label: str       # SUM, AVG, ...
    argv: list
    env: dict
    stdout_path: str
    stderr_path: str
    cwd: str = None
    extra: dict = field(default_factory=dict)


@dataclass
class JobResult:
    spec: JobSpec
    returncode: int
    elapsed_s: float
    stdout: str
    result_line: str = None
    timing: dict = None


class JobFailed(Exception):
    pass


_TIME = re.compile(r"^TIME (.*)$", re.M)


def parse(kernel_label, stdout):
    """(result line, TIME fields) of a kernel's stdout (examples/README.md)."""
    result = None
    for line in stdout.splitlines():
        if line.startswith(f"{kernel_label} result="):
            result = line.strip()
    m = _TIME.search(stdout)
    timing = None
    if m:
        timing = {}
        for item in m.group(1).split():
            key, _, value = item.partition("=")
            try:
                timing[key] = float(value)
            except ValueError:
                timing[key] = value
    return result, timing


def run_concurrently(specs, resources, timeout_s):
    """Starts every job at once, waits for all. Any failure kills the rest
    and raises JobFailed with the failing job's stderr."""
    running = []
    try:
        start = time.monotonic()
        for spec in specs:
            # mpiruns started at the same moment race to create one session directory
            # (/tmp/ompi.<host>.<uid>) and one of them fails: give each its own.
            session = tempfile.mkdtemp(prefix="ppios-ompi-")
            resources.add(f"session dir of {spec.label}",
                          lambda d=session: shutil.rmtree(d, ignore_errors=True))
            env = dict(spec.env, OMPI_MCA_orte_tmpdir_base=session)
            with open(spec.stdout_path, "wb") as out, open(spec.stderr_path, "wb") as err:
                proc = subprocess.Popen(spec.argv, env=env, cwd=spec.cwd,
                                        stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                        start_new_session=True)
            token = resources.add(f"job {spec.label}", lambda p=proc: res.kill_group(p))
            running.append((spec, proc, token))
        results = []
        deadline = start + timeout_s
        for spec, proc, token in running:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise JobFailed(f"{spec.label}: no result after {timeout_s} s "
                                f"(killed); command: {' '.join(spec.argv)}")
            elapsed = time.monotonic() - start
            with open(spec.stdout_path, errors="replace") as f:
                stdout = f.read()
            r = JobResult(spec, proc.returncode, elapsed, stdout)
            if proc.returncode != 0:
                with open(spec.stderr_path, errors="replace") as f:
                    err = f.read()[-3000:]
                raise JobFailed(f"{spec.label}: exit {proc.returncode}; command: "
                                f"{' '.join(spec.argv)}\n{err}")
            r.result_line, r.timing = parse(spec.kernel_label, stdout)
            if r.result_line is None or r.timing is None or "wall_s" not in r.timing:
                raise JobFailed(f"{spec.label}: no result/TIME line in its output:\n{stdout}")
            results.append(r)
        return results
    finally:
        # finished jobs are reaped already; this kills whatever is left (failure paths)
        for _spec, _proc, token in running:
            resources.release(token)
