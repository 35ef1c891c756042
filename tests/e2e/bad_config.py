#!/usr/bin/env python3
"""Runs a prefetching program under mpirun with bad PPIOS_* values, one for every variable
of docs/configuration.md: each run must stop at start, exit non-zero, and say which
variable is wrong and what it accepts, without hanging. So must a wrong password or
database of a real redis-server, without showing the password. Values that let the run go on (an unreachable coordinator, a PPIOS_THRESHOLD
that differs from the stored one) leave the program's stderr alone: they are in
PPIOS_STATS, and on stderr only with PPIOS_VERBOSE=1."""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

CASES = [
    ({"PPIOS_THRESHOLD": "abc"}, ["PPIOS_THRESHOLD='abc'", "whole number"]),
    ({"PPIOS_CACHE_MB": "0"}, ["PPIOS_CACHE_MB='0'", "from 1"]),
    ({"PPIOS_MODE": "turbo"}, ["PPIOS_MODE='turbo'", "ppios, ppios-strict, intra, pp or off"]),
    ({"PPIOS_SUBREAD_KB": "1.5"}, ["PPIOS_SUBREAD_KB='1.5'"]),
    ({"PPIOS_PT_READERS": "0"}, ["PPIOS_PT_READERS='0'", "from 1 to 16"]),
    ({"PPIOS_VERBOSE": "2"}, ["PPIOS_VERBOSE='2'", "from 0 to 1"]),
    ({"PPIOS_COORDINATOR": "tcp://x"}, ["PPIOS_COORDINATOR", "redis://"]),
    ({"PPIOS_COORDINATOR": "redis://127.0.0.1:1/x"}, ["PPIOS_COORDINATOR"]),
    # The rest of the variables of docs/configuration.md, one bad value each.
    ({"PPIOS_THRESHOLD": "0"}, ["PPIOS_THRESHOLD='0'", "from 1 to 1048576 or auto"]),
    ({"PPIOS_TARGET": "a/b"}, ["PPIOS_TARGET='a/b'", "1 to 64 characters"]),
    ({"PPIOS_LEASE_MS": "99"}, ["PPIOS_LEASE_MS='99'", "from 100 to 3600000"]),
    ({"PPIOS_MT_THROTTLE": "2"}, ["PPIOS_MT_THROTTLE='2'", "from 0 to 1"]),
    ({"PPIOS_SHM_GROUP": "no-such-group-ppios"}, ["PPIOS_SHM_GROUP='no-such-group-ppios'", "group name or number"]),
    ({"PPIOS_SIM_NODE": "a b"}, ["PPIOS_SIM_NODE='a b'", "1 to 64 characters"]),
    ({"PPIOS_MAX_WT": "65"}, ["PPIOS_MAX_WT='65'", "from 0 to 64"]),
    ({"PPIOS_BACKOFF": "00"}, ["PPIOS_BACKOFF='00'", "from 0 to 1"]),
    ({"PPIOS_STATS": ""}, ["PPIOS_STATS is set but empty"]),
    ({"PPIOS_TRACE": ""}, ["PPIOS_TRACE is set but empty"]),
    # The one combination checked when the coordinator is made.
    ({"PPIOS_THRESHOLD": "auto", "PPIOS_COORDINATOR": "node+redis://127.0.0.1:1"},
     ["PPIOS_THRESHOLD=auto cannot be used with PPIOS_COORDINATOR=node+"]),
]
# A real redis-server that wants a password: a wrong password, or a database it does not
# have, stops the run at start, and no message shows the password. "{sock}" is its socket.
REDIS_CASES = [
    ({"PPIOS_COORDINATOR": "unix://{sock}?password=wr0ng"}, ["authentication failed"], "wr0ng"),
    ({"PPIOS_COORDINATOR": "unix://{sock}?db=999&password=s3cret"}, ["cannot select the database"], "s3cret"),
]
# Not configuration errors: the program runs on. (environment, a cap to store for the
# target first or None, what every rank's statistics must show, the words of the
# PPIOS_VERBOSE=1 line).
RUNS_ON = [
    # node-local scheduling until the server is back
    ({"PPIOS_COORDINATOR": "redis://127.0.0.1:1"}, None,
     lambda s: any("unreachable" in n and "node-local" in n for n in s["coordinator_notices"])
     and s["threshold_conflict"] is None,
     ["ppios: warning: coordinator", "unreachable", "node-local"]),
    # another job of the user stored 3: the stored cap is obeyed
    ({"PPIOS_THRESHOLD": "2"}, 3,
     lambda s: s["threshold_conflict"] == {"requested": 2, "stored": 3}
     and any("differs from the threshold 3" in n for n in s["coordinator_notices"]),
     ["ppios: warning: PPIOS_THRESHOLD=2 differs from the threshold 3 stored for target"]),
]


def run(a, cwd, env):
    p = subprocess.run([a.mpirun, "-np", "2", "--oversubscribe", a.program, os.path.join(cwd, "in.bin")],
                       cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    return p.returncode, p.stdout, p.stderr.decode(errors="replace")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpirun", required=True)
    ap.add_argument("--program", required=True)
    ap.add_argument("--ppios-coord", help="ppios-coord, to store a cap and remove the test's coordinator state")
    a = ap.parse_args()
    failures = 0
    target = f"bad-config-{os.getpid()}"
    base = {k: v for k, v in os.environ.items() if not k.startswith("PPIOS_")}
    base.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", PPIOS_TARGET=target)
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "in.bin"), "wb") as f:
            f.write(os.urandom(1000))
        for extra, needles in CASES:
            code, out, err = run(a, d, dict(base, **extra))
            missing = [n for n in needles if n not in err]
            ok = code != 0 and not missing and b"read bad fd" not in out
            print(f"{'ok  ' if ok else 'FAIL'} {extra}: exit {code}"
                  + (f", message lacks {missing}" if missing else ""))
            if not ok:
                print(err)
                failures += 1
        if shutil.which("redis-server"):
            sock = os.path.join(d, "r.sock")
            redis = subprocess.Popen(["redis-server", "--port", "0", "--unixsocket", sock, "--requirepass", "s3cret",
                                      "--save", "", "--appendonly", "no", "--dir", d],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                for _ in range(200):
                    if os.path.exists(sock):
                        break
                    time.sleep(0.05)
                for extra, needles, password in REDIS_CASES:
                    extra = {k: v.replace("{sock}", sock) for k, v in extra.items()}
                    code, out, err = run(a, d, dict(base, **extra))
                    missing = [n for n in needles if n not in err]
                    ok = code != 0 and not missing and password not in err and "ppios: coordinator" in err
                    print(f"{'ok  ' if ok else 'FAIL'} {extra}: exit {code}"
                          + (f", message lacks {missing}" if missing else "")
                          + (", message shows the password" if password in err else ""))
                    if not ok:
                        print(err)
                        failures += 1
            finally:
                redis.kill()
                redis.wait()
        else:
            print("skip the password cases: no redis-server")
        for i, (extra, stored, stats_ok, needles) in enumerate(RUNS_ON):
            env = dict(base, PPIOS_TARGET=f"{target}-{i}", **extra)
            if stored is not None:
                if not a.ppios_coord:
                    print(f"skip {extra}: needs --ppios-coord")
                    continue
                subprocess.run([a.ppios_coord, "set-threshold", str(stored)], env=env, check=True,
                               stdout=subprocess.DEVNULL, timeout=60)
            stats_path = os.path.join(d, f"stats-{i}.jsonl")
            code, out, err = run(a, d, dict(env, PPIOS_STATS=stats_path))
            problems = []
            if code != 0 or b"MPI read_at past EOF" not in out:
                problems.append(f"exit {code}")
            problems += [f"on stderr: {l}" for l in err.splitlines() if l.startswith("ppios:")]
            try:
                with open(stats_path) as f:
                    stats = [json.loads(line) for line in f]
                if len(stats) != 2 or not all(stats_ok(s) for s in stats):
                    problems.append(f"statistics: {[(s.get('threshold_conflict'), s.get('coordinator_notices')) for s in stats]}")
            except (OSError, KeyError, ValueError) as e:
                problems.append(f"statistics: {e}")
            code, out, verbose_err = run(a, d, dict(env, PPIOS_VERBOSE="1"))
            missing = [n for n in needles if n not in verbose_err]
            if code != 0 or missing:
                problems.append(f"with PPIOS_VERBOSE=1: exit {code}, stderr lacks {missing}")
            print(f"{'FAIL' if problems else 'ok  '} {extra}" + "".join(f"\n     {p}" for p in problems))
            if problems:
                print(err + verbose_err)
                failures += 1
            if a.ppios_coord:
                subprocess.run([a.ppios_coord, "--target", env["PPIOS_TARGET"], "reset"], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
    if a.ppios_coord:
        subprocess.run([a.ppios_coord, "--target", target, "reset"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=60)
    print(f"{len(CASES) + len(REDIS_CASES) + len(RUNS_ON) - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
