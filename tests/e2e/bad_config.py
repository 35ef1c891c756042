#!/usr/bin/env python3
"""Runs a prefetching program under mpirun with bad PPIOS_* values: each run must stop
at start, exit non-zero, and say which variable is wrong and what it accepts, without
hanging."""
import argparse
import os
import subprocess
import sys
import tempfile

CASES = [
    ({"PPIOS_THRESHOLD": "abc"}, ["PPIOS_THRESHOLD='abc'", "whole number"]),
    ({"PPIOS_CACHE_MB": "0"}, ["PPIOS_CACHE_MB='0'", "from 1"]),
    ({"PPIOS_MODE": "turbo"}, ["PPIOS_MODE='turbo'", "ppios, ppios-strict, intra, pp or off"]),
    ({"PPIOS_SUBREAD_KB": "1.5"}, ["PPIOS_SUBREAD_KB='1.5'"]),
    ({"PPIOS_PT_READERS": "0"}, ["PPIOS_PT_READERS='0'", "from 1 to 16"]),
    ({"PPIOS_COORDINATOR": "tcp://x"}, ["PPIOS_COORDINATOR", "redis://"]),
    ({"PPIOS_COORDINATOR": "redis://127.0.0.1:1/x"}, ["PPIOS_COORDINATOR"]),
]
# An unreachable coordinator is not a configuration error: the program runs on with
# node-local scheduling and says so.
RUNS_ON = [({"PPIOS_COORDINATOR": "redis://127.0.0.1:1"}, ["unreachable", "node-local"])]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpirun", required=True)
    ap.add_argument("--program", required=True)
    ap.add_argument("--ppios-coord", help="ppios-coord, to remove the test's coordinator state")
    a = ap.parse_args()
    failures = 0
    target = f"bad-config-{os.getpid()}"
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "in.bin")
        with open(path, "wb") as f:
            f.write(os.urandom(1000))
        for (extra, needles), must_fail in [(c, True) for c in CASES] + [(c, False) for c in RUNS_ON]:
            env = {k: v for k, v in os.environ.items() if not k.startswith("PPIOS_")}
            env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                       PPIOS_TARGET=target, **extra)
            p = subprocess.run([a.mpirun, "-np", "2", "--oversubscribe", a.program, path], cwd=d,
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
            err = p.stderr.decode(errors="replace")
            missing = [n for n in needles if n not in err]
            if must_fail:
                ok = p.returncode != 0 and not missing and b"read bad fd" not in p.stdout
            else:
                ok = p.returncode == 0 and not missing and b"MPI read_at past EOF" in p.stdout
            print(f"{'ok  ' if ok else 'FAIL'} {extra}: exit {p.returncode}"
                  + (f", message lacks {missing}" if missing else ""))
            if not ok:
                print(err)
                failures += 1
    if a.ppios_coord:
        subprocess.run([a.ppios_coord, "--target", target, "reset"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=60)
    print(f"{len(CASES) + len(RUNS_ON) - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
