#!/usr/bin/env python3
"""End-to-end test of one corpus program.

Generates the inputs (gen_inputs.py), builds the program with plain mpicc and, unless
--plain-only, with ppios-cc (single file, separate compilation of several units, or
`make CC=...` on a Makefile project), runs the builds under mpirun and checks:

  plain-only: for every --np, stdout and every file the run writes equal what the Python
              reference (reference.py) computes;
  full:       the plain build also matches the reference; the ppios-cc build, run in every
              PPIOS_MODE with PPIOS_STATS, has the plain build's exit code, stdout and
              files byte for byte; the statistics have one line per rank, the right mode,
              no prefetching in mode off, a bounded cache and (--min-hit-ratio) enough
              MT read bytes served by the PT; ppios-cc's remarks are checked on request
              (--expect-remark); with --runtime-include/--runtime-lib the
              `ppios-cc --emit-source` output is compiled with plain mpicc and run too.

Each run uses a coordinator target of its own (PPIOS_TARGET=corpus-<pid>), reset at the
end with ppios-coord. Python 3 standard library only.

usage: run_corpus.py --program NAME [--plain-only] [--np N ...] [--ppios-cc PATH]
                     [--ppios-coord PATH] [--min-hit-ratio R] [--expect-remark] ...
"""
import argparse
import glob
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, HERE)
import gen_inputs  # noqa: E402
import reference  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "bench"))
from experiments import resources  # noqa: E402
from experiments import simfs as simfs_mount  # noqa: E402

EXIT_SKIP = 77  # ctest's SKIP_RETURN_CODE: FUSE is not available for --device simfs

MODES = ["off", "pp", "intra", "ppios"]
REMARK = "remark: read not prefetched"

# Every program: how it is built, its arguments ({in} is the input directory) and the
# -D it is compiled with (CORPUS_WORK_ROUNDS: computation per block read).
#   build "single": one .c file;  "units": cc -c each unit, then link the objects;
#   "make": `make CC=<cc>` in a copy of the project directory.
SHAPE_ARGS, SHAPE_ROUNDS = ["{in}/shapes.bin", "65536"], 4
PROGRAMS = {
    "loop_main": dict(build="single", args=["{in}/data.bin", "16384"]),
    "nested_helpers": dict(build="single", args=["{in}/grid.bin"]),
    "bcast_params": dict(build="single", args=["{in}/params.txt", "{in}/data.bin", "2"]),
    "multi_interface": dict(build="single",
                            args=["{in}/data.bin", "{in}/second.bin", "16384", "24"]),
    "stream_idiom": dict(build="single", args=["{in}/part", "{in}/data.bin", "30"]),
    "sentinel_scan": dict(build="single", args=["{in}/sentinel.bin"], rounds=64),
    "text_lines": dict(build="single", args=["{in}/lines.txt"], rounds=16),
    "scan_matrix": dict(build="single", args=["{in}/scan.txt"], rounds=16, libs=["-lm"]),
    "indexed_records": dict(build="single", args=["{in}/index.bin", "{in}/records.bin"]),
    "write_then_read": dict(build="single", args=["{in}/data.bin", "8192", "48"]),
    "raw_same_loop": dict(build="single", args=["{in}/data.bin", "4096", "96"]),
    "no_reads": dict(build="single", args=["100000"]),
    "unpredictable": dict(build="single", args=["{in}/data.bin", "{in}/second.bin", "24", "retry"]),
    "multi_tu": dict(build="units", units=["a.c", "b.c"], extra=["b.h"],
                     args=["{in}/second.bin", "16384"]),
    "make_project": dict(build="make", binary="histo",
                         args=["{in}/data.bin", "{in}/second.bin", "16384"]),
    # The issue-9 shapes: 64 KiB blocks of shapes.bin, with computation per block about as
    # long as reading it on the emulated device (--device simfs).
    "c89_locals": dict(build="single", args=SHAPE_ARGS, rounds=SHAPE_ROUNDS),
    "created_file": dict(build="single", args=SHAPE_ARGS, rounds=SHAPE_ROUNDS),
    "read_until_short": dict(build="single", args=SHAPE_ARGS, rounds=SHAPE_ROUNDS),
    "derived_types": dict(build="single", args=SHAPE_ARGS, rounds=SHAPE_ROUNDS),
    "global_handles": dict(build="single", args=SHAPE_ARGS, rounds=SHAPE_ROUNDS),
    "macro_calls": dict(build="single", args=SHAPE_ARGS, rounds=SHAPE_ROUNDS),
    "struct_plan": dict(build="single", args=SHAPE_ARGS, rounds=SHAPE_ROUNDS),
    "helper_seeks": dict(build="single", args=SHAPE_ARGS, rounds=SHAPE_ROUNDS),
    "stop_flag": dict(build="single", args=SHAPE_ARGS, rounds=SHAPE_ROUNDS),
    "c99_offsets": dict(build="single", args=SHAPE_ARGS, rounds=SHAPE_ROUNDS,
                        cflags=["-std=c99"]),
    "collective_reads": dict(build="single", args=SHAPE_ARGS, rounds=SHAPE_ROUNDS),
}


class Failures(list):
    def add(self, message):
        print("FAIL:", message, flush=True)
        self.append(message)


def run(cmd, cwd, env=None, timeout=120):
    started = time.monotonic()
    try:
        p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=timeout)
        code, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        code, out, err = "timeout", e.stdout or b"", (e.stderr or b"") + b"\n[timed out]"
    except OSError as e:
        code, out, err = "not run", b"", str(e).encode()
    return code, out.decode(errors="replace"), err.decode(errors="replace"), \
        time.monotonic() - started


def build(program, spec, cc, builddir, log):
    """Builds `program` with compiler `cc` in builddir (a copy of its sources). Returns the
    path of the executable and the compiler's stderr, or raises RuntimeError."""
    os.makedirs(builddir)
    shutil.copy(os.path.join(HERE, "corpus.h"), builddir)
    rounds = f"-DCORPUS_WORK_ROUNDS={spec.get('rounds', 32)}"
    if spec["build"] == "single":
        shutil.copy(os.path.join(HERE, program + ".c"), builddir)
        steps = [[cc, "-O2", *spec.get("cflags", []), "-I.", rounds, "-o", program,
                  program + ".c", *spec.get("libs", [])]]
        binary = program
    elif spec["build"] == "units":
        for name in spec["units"] + spec["extra"]:
            shutil.copy(os.path.join(HERE, program, name), builddir)
        steps = [[cc, "-O2", "-I.", rounds, "-c", unit] for unit in spec["units"]]
        steps.append([cc] + [u[:-2] + ".o" for u in spec["units"]] + ["-o", program])
        binary = program
    else:
        shutil.rmtree(builddir)
        shutil.copytree(os.path.join(HERE, program), builddir)
        steps = [["make", f"CC={cc}"]]
        binary = spec["binary"]
    stderr = ""
    for step in steps:
        code, out, err, _ = run(step, builddir, timeout=300)
        log.append("$ " + " ".join(shlex.quote(s) for s in step))
        stderr += err
        if code != 0:
            raise RuntimeError(f"build step failed ({code}): {' '.join(step)}\n{out}{err}")
    return os.path.join(builddir, binary), stderr


def files_in(workdir):
    found = {}
    for path in sorted(glob.glob(os.path.join(workdir, "**"), recursive=True)):
        if os.path.isfile(path):
            with open(path, "rb") as f:
                found[os.path.relpath(path, workdir)] = f.read()
    return found


def compare(label, got, expected, failures):
    """got/expected: (code, stdout, files)."""
    if got[0] != expected[0]:
        failures.add(f"{label}: exit code {got[0]}, expected {expected[0]}")
    if got[1] != expected[1]:
        failures.add(f"{label}: stdout differs\n--- expected\n{expected[1]}--- got\n{got[1]}")
    if sorted(got[2]) != sorted(expected[2]):
        failures.add(f"{label}: wrote {sorted(got[2])}, expected {sorted(expected[2])}")
    for name in sorted(got[2].keys() & expected[2].keys()):
        if got[2][name] != expected[2][name]:
            failures.add(f"{label}: {name} differs ({len(got[2][name])} bytes, "
                         f"expected {len(expected[2][name])})")


def sanitizer_report(err):
    return any(s in err for s in ("WARNING: ThreadSanitizer", "ERROR: AddressSanitizer",
                                  "runtime error:", "ERROR: LeakSanitizer"))


class Runner:
    def __init__(self, a, top, inputs, env):
        self.a, self.top, self.inputs, self.env = a, top, inputs, env
        self.count = 0

    def __call__(self, label, binary, argv, np, env=None):
        self.count += 1
        workdir = os.path.join(self.top, f"run{self.count}-{label}")
        os.mkdir(workdir)
        cmd = [self.a.mpirun, "-np", str(np)] + shlex.split(self.a.mpirun_flags) + [binary] + argv
        code, out, err, secs = run(cmd, workdir, env or self.env, self.a.timeout)
        print(f"  {label}: np {np}, exit {code}, {len(out.splitlines())} lines, {secs:.2f} s",
              flush=True)
        if code != 0:
            print(err, file=sys.stderr)
        return (code, out, files_in(workdir)), err


def check_stats(label, path, np, mode, a, failures):
    try:
        with open(path) as f:
            stats = [json.loads(line) for line in f if line.strip()]
    except OSError:
        if a.stats_optional:
            print(f"  {label}: no PPIOS_STATS output (allowed: the program has no reads)")
            return
        failures.add(f"{label}: no PPIOS_STATS output at {path}")
        return
    except json.JSONDecodeError as e:
        failures.add(f"{label}: PPIOS_STATS is not JSON lines ({e})")
        return
    if len(stats) != np:
        failures.add(f"{label}: {len(stats)} stats lines for {np} ranks")
    if not stats:
        return
    read = sum(s["mt_read_bytes"] for s in stats)
    hit = sum(s["hit_bytes"] for s in stats)
    ratio = hit / read if read else 0.0
    print(f"  {label}: hit ratio {ratio:.3f} ({hit}/{read} bytes), "
          f"pt_read {sum(s.get('pt_read_bytes', 0) for s in stats)}, "
          f"unused {sum(s.get('pt_unused_bytes', 0) for s in stats)}, "
          f"wt {sum(s.get('wt_started', 0) for s in stats)}", flush=True)
    for s in stats:
        if s["mode"] != mode:
            failures.add(f"{label}: stats say mode {s['mode']}")
        if s.get("cache_peak_bytes", 0) > s.get("cache_limit_bytes", float("inf")):
            failures.add(f"{label}: cache peak over its limit")
        if mode == "off" and (s["hit_bytes"] or s.get("pt_read_bytes", 0)):
            failures.add(f"{label}: prefetching happened in mode off")
    pt_cpu = sum(s.get("pt_cpu_s", 0.0) for s in stats)
    other_cpu = sum(s.get("cpu_s", 0.0) for s in stats) - pt_cpu
    mismatch = sum(s.get("pt_mismatch", 0) for s in stats)
    if mode != "off":
        print(f"  {label}: pt_mismatch {mismatch}, PT CPU {pt_cpu:.3f} s = "
              f"{pt_cpu / other_cpu if other_cpu > 0 else 0:.1%} of the other threads' "
              f"{other_cpu:.3f} s, PT stops {sorted(set(s.get('pt_stop') for s in stats))}",
              flush=True)
        if a.max_mismatch is not None and mismatch > a.max_mismatch:
            failures.add(f"{label}: pt_mismatch {mismatch} above {a.max_mismatch}: the PT "
                         "prefetched blocks the program never read")
        if a.max_pt_cpu_share is not None and pt_cpu > a.max_pt_cpu_share * other_cpu:
            failures.add(f"{label}: the PT used {pt_cpu:.3f} s of CPU, more than "
                         f"{a.max_pt_cpu_share:.0%} of the program's {other_cpu:.3f} s")
        for spec in a.pt_stat:
            name, per_rank = spec.split("=")
            got = sum(s.get(name, 0) for s in stats)
            if got != int(per_rank) * np:
                failures.add(f"{label}: {name} is {got}, not {per_rank} per rank")
        calls = sum(s.get("pt_prefetch_calls", 0) for s in stats)
        mt_reads = sum(s.get("mt_read_calls", 0) for s in stats)
        if a.max_prefetches_per_read is not None and calls > a.max_prefetches_per_read * mt_reads:
            failures.add(f"{label}: {calls} prefetches for {mt_reads} MT reads, more than "
                         f"{a.max_prefetches_per_read} per read: the PT asks the device for "
                         "smaller pieces than the program's own buffered stream does")
    if a.stats_optional and read:
        failures.add(f"{label}: a program without reads has {read} MT read bytes")
    if a.min_hit_ratio is not None and mode != "off" and ratio < a.min_hit_ratio:
        failures.add(f"{label}: hit ratio {ratio:.3f} below {a.min_hit_ratio}")


def report_device_bytes(label, moved, plain):
    """What prefetching costs the device: its bytes against the mpicc build's (speculation
    past the end of a loop shows here). Printed, not bounded: the kernel caches a FUSE
    file's pages, so a byte the MT reads again after the PT is not moved twice."""
    if moved is not None and plain:
        print(f"  {label}: the device moved {moved} bytes, {moved / plain:.2f}x the mpicc "
              "build's", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--program", required=True, choices=sorted(PROGRAMS))
    ap.add_argument("--plain-only", action="store_true",
                    help="build with mpicc only and check every --np against the reference")
    ap.add_argument("--np", type=int, action="append", help="process counts (default 2)")
    ap.add_argument("--mpicc", default="mpicc")
    ap.add_argument("--mpirun", default="mpirun")
    ap.add_argument("--mpirun-flags", default="--oversubscribe --bind-to none")
    ap.add_argument("--ppios-cc", help="the ppios-cc executable (required without --plain-only)")
    ap.add_argument("--ppios-coord", help="ppios-coord, to reset the test's coordinator target")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--min-hit-ratio", type=float, default=None)
    ap.add_argument("--expect-remark", action="store_true",
                    help=f"ppios-cc must print '{REMARK}' for this program")
    ap.add_argument("--stats-optional", action="store_true",
                    help="no PPIOS_STATS output is fine, and any must show no MT reads")
    ap.add_argument("--expect-unchanged", action="store_true",
                    help="ppios-cc --emit-source must reproduce the source unchanged")
    ap.add_argument("--runtime-include", help="runtime headers, to compile --emit-source output")
    ap.add_argument("--runtime-lib", help="libppios, to link --emit-source output")
    ap.add_argument("--env", action="append", default=[], help="K=V for the prefetching runs")
    ap.add_argument("--max-mismatch", type=int, default=None,
                    help="most prefetched entries the program may never read (pt_mismatch)")
    ap.add_argument("--pt-stat", action="append", default=[], metavar="NAME=N",
                    help="in every prefetching mode, the counter NAME summed over the ranks is N "
                         "per rank (e.g. pt_unmapped=4: reads the PT cannot map)")
    ap.add_argument("--max-pt-cpu-share", type=float, default=None,
                    help="most CPU the PT may use, as a fraction of the other threads' CPU")
    ap.add_argument("--max-prefetches-per-read", type=float, default=None,
                    help="most prefetch requests (pt_prefetch_calls) per MT read call")
    ap.add_argument("--device", choices=["page-cache", "simfs"], default="page-cache",
                    help="where the inputs live: a plain directory, or a ppios-simfs mount "
                    "(the emulated contended device; needs --simfs)")
    ap.add_argument("--simfs", help="the ppios-simfs executable")
    ap.add_argument("--simfs-peak-mibps", type=float, default=64.0,
                    help="the emulated device's peak bandwidth (default: %(default)s)")
    ap.add_argument("--simfs-optimal-streams", type=int, default=2,
                    help="concurrent requests at which it reaches the peak (default: %(default)s)")
    ap.add_argument("--timeout", type=int, default=120, help="seconds per mpirun")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    a = ap.parse_args()
    a.np = a.np or [2]
    if not a.plain_only and not a.ppios_cc:
        ap.error("--ppios-cc is required unless --plain-only")
    if a.device == "simfs" and not a.simfs:
        ap.error("--device simfs needs --simfs")

    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    for k in [k for k in env if k.startswith("PPIOS_")]:
        del env[k]
    target = f"corpus-{os.getpid()}"
    env["PPIOS_TARGET"] = target
    failures = Failures()
    top = tempfile.mkdtemp(prefix=f"ppios-corpus-{a.program}-")
    started = time.monotonic()
    cleanup = resources.Resources()
    try:
        inputs = os.path.join(top, "inputs")
        gen_inputs.generate(inputs)
        programs_inputs, device = inputs, None
        if a.device == "simfs":
            # The programs read through the mount; the reference reads the backing files.
            model = dict(peak_mibps=a.simfs_peak_mibps, optimal_streams=a.simfs_optimal_streams,
                         loss_per_stream=0.10, floor_fraction=0.20, latency_us=0)
            mount = simfs_mount.Mount(a.simfs, inputs, os.path.join(top, "mnt"), model,
                                      os.path.join(top, "simfs.log"), cleanup).start()
            programs_inputs = mount.path
            print(f"  inputs on {simfs_mount.describe(model)} at {mount.path}", flush=True)
            device = mount
        check(a, top, inputs, programs_inputs, env, failures, device)
    except simfs_mount.FuseUnavailable as e:
        print(f"SKIP: {a.program}: the emulated device needs FUSE: {e}")
        cleanup.close()
        shutil.rmtree(top, ignore_errors=True)
        return EXIT_SKIP
    except RuntimeError as e:
        failures.add(str(e))
    finally:
        cleanup.close()
        if a.ppios_coord:
            code, _, err, _ = run([a.ppios_coord, "--target", target, "reset", "--force"], None, env, 60)
            if code != 0:
                failures.add(f"ppios-coord --target {target} reset failed ({code}): {err}")
        if a.keep:
            print("kept", top)
        else:
            shutil.rmtree(top, ignore_errors=True)
    print(f"{'FAILED' if failures else 'OK'}: {a.program}, {len(failures)} problems, "
          f"{time.monotonic() - started:.1f} s")
    return 1 if failures else 0


def device_bytes(device):
    """Bytes the emulated device moved since the last call (None: not on the device)."""
    if device is None:
        return None
    moved = device.stats()["device"]["bytes"]
    device.reset_stats()
    return moved


def check(a, top, inputs, programs_inputs, env, failures, device=None):
    spec = PROGRAMS[a.program]
    argv = [arg.replace("{in}", programs_inputs) for arg in spec["args"]]
    runner = Runner(a, top, inputs, env)
    log = []

    plain, _ = build(a.program, spec, a.mpicc, os.path.join(top, "build-mpicc"), log)
    ref = getattr(reference, a.program)

    def expected_for(np):
        out, files = ref(inputs, np, spec["args"])
        return (0, out, files)

    if a.plain_only:
        for np in a.np:
            got, _ = runner("mpicc", plain, argv, np)
            compare(f"mpicc np {np} vs reference", got, expected_for(np), failures)
        return

    np = a.np[0]
    ppios, cc_err = build(a.program, spec, a.ppios_cc, os.path.join(top, "build-ppios-cc"), log)
    remarks = [line for line in cc_err.splitlines() if "remark:" in line]
    for line in remarks:
        print("  ppios-cc:", line)
    other = [line for line in cc_err.splitlines()
             if ("error:" in line or "warning:" in line) and "remark:" not in line]
    for line in other:
        print("  ppios-cc diagnostic:", line)
    if a.expect_remark and not any(REMARK in line for line in remarks):
        failures.add(f"ppios-cc printed no '{REMARK}' for a read that cannot be prefetched")

    device_bytes(device)
    baseline, _ = runner("mpicc", plain, argv, np)
    compare("mpicc build vs reference", baseline, expected_for(np), failures)
    plain_bytes = device_bytes(device)

    for mode in a.modes.split(","):
        # Output, exit code and files must match in every run. The statistics' bounds (hit
        # ratio, PT CPU) depend on timing on a noisy machine: a run that misses only those
        # is run once more, and the second run decides.
        for attempt in range(2):
            menv = dict(env, PPIOS_MODE=mode)
            menv.update(kv.split("=", 1) for kv in a.env)
            stats = os.path.join(top, f"stats-{mode}-{attempt}.jsonl")
            menv["PPIOS_STATS"] = stats
            got, err = runner(f"ppios-cc-{mode}", ppios, argv, np, menv)
            if sanitizer_report(err):
                failures.add(f"mode {mode}: sanitizer report\n{err}")
            compare(f"ppios-cc build, mode {mode}", got, baseline, failures)
            timing = Failures()
            check_stats(f"mode {mode}", stats, np, mode, a, timing)
            report_device_bytes(f"mode {mode}", device_bytes(device), plain_bytes)
            if not timing or attempt == 1:
                failures.extend(timing)
                break
            print(f"  mode {mode}: statistics out of bounds once: run again", flush=True)

    if spec["build"] == "single" and (a.expect_unchanged or a.runtime_include):
        emit_source(a, spec, top, runner, argv, np, baseline, env, failures)


def emit_source(a, spec, top, runner, argv, np, baseline, env, failures):
    """ppios-cc --emit-source: the output must compile with plain mpicc plus the runtime
    header and library and behave like the plain build (or be the input unchanged)."""
    d = os.path.join(top, "emit")
    os.makedirs(d)
    src = a.program + ".c"
    shutil.copy(os.path.join(HERE, src), d)
    shutil.copy(os.path.join(HERE, "corpus.h"), d)
    code, out, err, _ = run([a.ppios_cc, "--emit-source", "-I.", "-o", "out.c", src], d, timeout=300)
    if code != 0 or not os.path.exists(os.path.join(d, "out.c")):
        failures.add(f"ppios-cc --emit-source failed ({code})\n{out}{err}")
        return
    with open(os.path.join(d, "out.c")) as f, open(os.path.join(d, src)) as g:
        emitted, original = f.read(), g.read()
    if a.expect_unchanged and emitted != original:
        failures.add("ppios-cc --emit-source changed a program that has no reads")
    if not a.runtime_include or not a.runtime_lib:
        return
    libdir = os.path.dirname(os.path.abspath(a.runtime_lib))
    cmd = [a.mpicc, "-O2", "-I.", "-I" + a.runtime_include, "-o", "emitted", "out.c",
           a.runtime_lib, "-Wl,-rpath," + libdir, *spec.get("libs", [])]
    code, out, err, _ = run(cmd, d, timeout=300)
    if code != 0:
        failures.add(f"--emit-source output does not compile with mpicc\n{out}{err}")
        return
    menv = dict(env, PPIOS_MODE="ppios")
    got, _ = runner("emitted-ppios", os.path.join(d, "emitted"), argv, np, menv)
    compare("--emit-source build, mode ppios", got, baseline, failures)


if __name__ == "__main__":
    sys.exit(main())
