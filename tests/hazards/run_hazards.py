#!/usr/bin/python3
"""Hazards regression test: one correct MPI C program, built with mpicc and with ppios-cc.

The mpicc build is the reference (run --ref-runs times: it must be deterministic, or the
test itself is wrong). The ppios-cc build is run in every PPIOS_MODE, --runs times each,
interleaved (off, pp, intra, ppios, off, pp, ...), each run in a fresh work directory with
freshly generated inputs and a timeout. Every run must give the reference's exit code,
stdout, stderr (after normalize_stderr: mpirun's job ids, PIDs and host name) and every
file of the work directory byte for byte, and must not take more than --slack seconds
longer than the slowest reference run. A ppios-cc build failure is a test failure.

Kinds (--kind):
  single  compile --source files with `<cc> <cflags> -o <name> <sources>` (sources keep
          their relative path, e.g. src/prog.c, so __FILE__ is "src/prog.c")
  make    `make CC=<cc>` in a copy of --project; touch its --touch header; make again;
          make a third time, which must have nothing to do (`make -q`); every .d file must
          name only real files of the project (no temporary files)
  cmake   `cmake -G Ninja -DCMAKE_C_COMPILER=<cc>` on a copy of --project, build, touch the
          header, build (the units that include it must be rebuilt), build again (no work);
          `ninja -t deps` must name the real sources and headers

Run setup options: --np, --singleton (run the program without mpirun, as an MPI
singleton: needed for --pass-fd, since mpirun does not pass descriptors above 2 and turns
stdin into a pipe), --input NAME=GEN[:ARG...] (see GENERATORS), --output NAME (must exist
after the run), --env K=V (all runs), --ppios-env K=V (ppios-cc runs only), --stdin FILE,
--stdin-pipe FILE (the file's bytes through a pipe), --fifo PATH=FILE (a FIFO fed by a
writer thread), --pass-fd N=FILE (FILE open read-only on descriptor N), --ulimit-v KB
(every rank runs under prlimit --as), --check-dwarf (DW_AT_name of the -g build).

Python 3 standard library only.
usage: run_hazards.py --ppios-cc PATH --name NAME --source src/x.c [options] [-- args]
"""
import argparse
import difflib
import glob
import os
import random
import re
import shlex
import shutil
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MODES = ["off", "pp", "intra", "ppios"]


# ---------------------------------------------------------------- inputs
def gen_random(path, size, seed):
    with open(path, "wb") as f:
        f.write(random.Random(int(seed)).randbytes(int(size)))


def gen_text(path, lines, seed):
    """Lines of words and numbers, as a log or CSV file would have."""
    r = random.Random(int(seed))
    words = ["alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "zeta"]
    with open(path, "w") as f:
        for i in range(int(lines)):
            f.write(f"{i},{r.choice(words)},{r.randint(0, 1 << 30)},{r.random():.6f}\n")


def gen_int32s(path, count, lo, hi, seed):
    """count little-endian int32 values uniformly in [lo, hi]."""
    r = random.Random(int(seed))
    with open(path, "wb") as f:
        f.write(struct.pack(f"<{int(count)}i", *[r.randint(int(lo), int(hi))
                                                 for _ in range(int(count))]))


def gen_lentable(path, length, nrecords, seed):
    """A header (int32 length), `length` bytes of table, then nrecords 64-byte records."""
    r = random.Random(int(seed))
    with open(path, "wb") as f:
        f.write(struct.pack("<i", int(length)))
        f.write(r.randbytes(int(length)))
        f.write(r.randbytes(64 * int(nrecords)))


def gen_counted(path, count, recsize, stale_count, seed):
    """An int32 record count, then `stale_count` records of recsize bytes (a file whose
    header names more records than it holds, as a stale header would)."""
    r = random.Random(int(seed))
    with open(path, "wb") as f:
        f.write(struct.pack("<i", int(count)))
        f.write(r.randbytes(int(stale_count) * int(recsize)))


GENERATORS = {
    "random": gen_random,      # random:SIZE:SEED
    "text": gen_text,          # text:LINES:SEED
    "int32s": gen_int32s,      # int32s:COUNT:LO:HI:SEED
    "lentable": gen_lentable,  # lentable:LENGTH:NRECORDS:SEED
    "counted": gen_counted,    # counted:COUNT:RECSIZE:RECORDS_PRESENT:SEED
}


def generate_inputs(specs, workdir):
    for spec in specs:
        name, _, gen = spec.partition("=")
        kind, *args = gen.split(":")
        path = os.path.join(workdir, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        GENERATORS[kind](path, *args)


# ---------------------------------------------------------------- running
def normalize_stderr(text):
    """mpirun's messages name the job id, PIDs and the host: not the program's output.
    When a rank aborts, mpirun's event library sometimes warns about the dead process's
    descriptors ("[warn] Epoll MOD(1) on fd 23 failed"), with or without ppios: dropped."""
    text = re.sub(r"(?m)^\[warn\] Epoll .*\n?", "", text)
    text = re.sub(r"\[\[\d+,(\d+)\],(\d+)\]", r"[[JOB,\1],\2]", text)
    text = re.sub(r"\bPID \d+", "PID N", text)
    host = socket.gethostname()
    if host:
        text = text.replace(host, "HOST")
    return text


class Feeder:
    """Writes a file's bytes into a pipe or a FIFO from a thread."""

    def __init__(self, data, fd=None, fifo=None):
        self.data, self.fd, self.fifo = data, fd, fifo
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        fd = self.fd
        try:
            while fd is None:  # a FIFO: wait for a reader without blocking forever
                try:
                    fd = os.open(self.fifo, os.O_WRONLY | os.O_NONBLOCK)
                    os.set_blocking(fd, True)
                except OSError:
                    if self.stop.wait(0.01):
                        return
            view = memoryview(self.data)
            while view and not self.stop.is_set():
                n = os.write(fd, view[:65536])
                view = view[n:]
        except OSError:
            pass  # the reader went away (EPIPE): what a shell pipeline would do too
        finally:
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass

    def finish(self):
        self.stop.set()
        self.thread.join(5)


def run_program(a, binary, workdir, env, label):
    """One run in workdir (inputs already there). Returns (code, out, err, secs)."""
    inner = [binary] + a.args
    if a.ulimit_v:
        inner = ["prlimit", f"--as={a.ulimit_v * 1024}", "--"] + inner
    if a.singleton:
        cmd = inner
    else:
        cmd = [a.mpirun, "-np", str(a.np)] + shlex.split(a.mpirun_flags) + inner
    feeders, stdin, opened = [], subprocess.DEVNULL, []
    for spec in a.fifo:
        path, _, src = spec.partition("=")
        fpath = os.path.join(workdir, path)
        os.mkfifo(fpath)
        with open(os.path.join(workdir, src), "rb") as f:
            feeders.append(Feeder(f.read(), fifo=fpath))
    if a.stdin:
        stdin = open(os.path.join(workdir, a.stdin), "rb")
        opened.append(stdin)
    pipe_w = None
    if a.stdin_pipe:
        with open(os.path.join(workdir, a.stdin_pipe), "rb") as f:
            pipe_data = f.read()
        pipe_r, pipe_w = os.pipe()
        stdin = pipe_r
    pass_fds, fd_map = [], []
    for spec in a.pass_fd:
        num, _, path = spec.partition("=")
        fd = os.open(os.path.join(workdir, path), os.O_RDONLY)
        fd_map.append((fd, int(num)))
        pass_fds.append(int(num))

    def preexec():
        for fd, num in fd_map:
            os.dup2(fd, num)
            os.set_inheritable(num, True)

    started = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=workdir, env=env, stdin=stdin, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, pass_fds=pass_fds,
                            preexec_fn=preexec if fd_map else None, start_new_session=True)
    for fd, _ in fd_map:
        os.close(fd)
    if pipe_w is not None:
        os.close(pipe_r)
        feeders.append(Feeder(pipe_data, fd=pipe_w))
    try:
        out, err = proc.communicate(timeout=a.timeout)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        # Every rank gone and only mpirun left: the launcher hung, not the program.
        ranks_alive = bool(session_members(proc.pid))
        try:
            os.killpg(proc.pid, 9)  # the run's own session: mpirun and its ranks
        except OSError:
            pass
        out, err = proc.communicate()
        code = "timeout" if ranks_alive or a.singleton else LAUNCHER_HUNG
        err += f"\n[hazards: killed after {a.timeout} s]".encode()
    secs = time.monotonic() - started
    for feeder in feeders:
        feeder.finish()
    for f in opened:
        f.close()
    return code, out.decode(errors="replace"), err.decode(errors="replace"), secs


LAUNCHER_HUNG = "launcher hung"


def session_members(sid):
    """Live processes of session `sid` other than its leader (mpirun): the ranks."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == sid:
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[3]) == sid:
            members.append(int(entry))
    return members


def files_in(workdir):
    found = {}
    for path in sorted(glob.glob(os.path.join(workdir, "**"), recursive=True)):
        if os.path.isfile(path) and stat.S_ISREG(os.lstat(path).st_mode):
            with open(path, "rb") as f:
                found[os.path.relpath(path, workdir)] = f.read()
    return found


def short_diff(expected, got, what):
    lines = list(difflib.unified_diff(expected.splitlines(), got.splitlines(),
                                      f"reference {what}", f"ppios-cc {what}", lineterm="", n=1))
    if len(lines) > 24:
        lines = lines[:24] + [f"... ({len(lines) - 24} more diff lines)"]
    return "\n".join("      " + line for line in lines)


def differences(got, ref):
    """got/ref: dict(code, out, err, files). Returns a list of problem descriptions."""
    problems = []
    if got["code"] != ref["code"]:
        problems.append(f"exit code {got['code']}, reference {ref['code']}")
    if got["out"] != ref["out"]:
        problems.append("stdout differs\n" + short_diff(ref["out"], got["out"], "stdout"))
    if got["err"] != ref["err"]:
        problems.append("stderr differs\n" + short_diff(ref["err"], got["err"], "stderr"))
    if sorted(got["files"]) != sorted(ref["files"]):
        problems.append(f"files {sorted(got['files'])}, reference {sorted(ref['files'])}")
    for name in sorted(got["files"].keys() & ref["files"].keys()):
        g, r = got["files"][name], ref["files"][name]
        if g != r:
            first = next((i for i in range(min(len(g), len(r))) if g[i] != r[i]), min(len(g), len(r)))
            problems.append(f"file {name} differs ({len(g)} bytes, reference {len(r)}; "
                            f"first difference at byte {first})")
    return problems


# ---------------------------------------------------------------- building
def run_cmd(cmd, cwd, env=None, timeout=300):
    try:
        p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=timeout)
        return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")
    except subprocess.TimeoutExpired as e:
        return "timeout", (e.stdout or b"").decode(errors="replace"), \
            (e.stderr or b"").decode(errors="replace") + "\n[timed out]"


class BuildError(Exception):
    pass


def step(cmd, cwd, env, log, what):
    code, out, err = run_cmd(cmd, cwd, env)
    log.append(f"$ {' '.join(shlex.quote(c) for c in cmd)}  -> {code}")
    if code != 0:
        raise BuildError(f"{what}: `{' '.join(cmd)}` failed ({code})\n{out}{err}")
    return out, err


def build_single(a, cc, builddir, env, log):
    os.makedirs(builddir)
    for src in a.source:
        dst = os.path.join(builddir, src)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy(os.path.join(HERE, src), dst)
        for h in glob.glob(os.path.join(HERE, os.path.dirname(src), "*.h")):
            shutil.copy(h, os.path.dirname(dst))
    cmd = [cc] + shlex.split(a.cflags) + ["-o", a.name] + a.source + shlex.split(a.ldflags)
    _, err = step(cmd, builddir, env, log, f"build with {cc}")
    if err.strip():
        print(f"  {os.path.basename(cc)} stderr:\n" + "\n".join("    " + l for l in err.splitlines()))
    return os.path.join(builddir, a.name)


def touch_later(path):
    """Makes path newer than everything built so far (whatever the file system's mtime
    resolution), without dating it in the future."""
    time.sleep(1.1)
    os.utime(path, None)


def is_temporary(name):
    return "/ppios-cc-" in name or not os.path.exists(name)


DEPFILES = {}  # .d file (relative) -> the names the mpicc build's .d file lists


def check_depfiles(builddir, failures, who):
    """Every .d file must name its real source and only files that exist (never a
    temporary file of ppios-cc), and every file the mpicc build's .d file names."""
    deps = glob.glob(os.path.join(builddir, "**", "*.d"), recursive=True)
    if not deps:
        failures.add(f"{who}: no .d files were written")
    for d in deps:
        with open(d) as f:
            text = f.read().replace("\\\n", " ")
        names = set()
        for line in text.splitlines():
            if ":" not in line:
                continue
            target, _, prereqs = line.partition(":")
            names.update(target.split())
            names.update(prereqs.split())
        rel = os.path.relpath(d, builddir)
        for name in sorted(names):
            if name.endswith(".o") and not os.path.isabs(name):
                continue  # the target
            full = name if os.path.isabs(name) else os.path.join(os.path.dirname(d), name)
            if is_temporary(full):
                failures.add(f"{who}: {rel} names {name!r}, which is not a file (a temporary "
                             f"file of the compiler?)")
        if who == "mpicc":
            DEPFILES[rel] = names
        else:
            missing = sorted(DEPFILES.get(rel, set()) - names)
            if missing:
                failures.add(f"{who}: {rel} does not name {missing}, which the mpicc "
                             f"build's {rel} names")
        source = os.path.splitext(os.path.basename(d))[0] + ".c"
        if source not in names and os.path.join(os.path.dirname(d), source) not in names:
            failures.add(f"{who}: {rel} does not name its source {source} "
                         f"(names {sorted(names)})")


def build_make(a, cc, builddir, env, log, failures, who):
    shutil.copytree(os.path.join(HERE, a.project), builddir)
    make = ["make", f"CC={cc}"]
    step(make, builddir, env, log, f"{who}: first make")
    check_depfiles(builddir, failures, who)
    touch_later(os.path.join(builddir, a.touch))
    out, _ = step(make, builddir, env, log, f"{who}: make after touching {a.touch}")
    if cc not in out and os.path.basename(cc) not in out:
        failures.add(f"{who}: make after touching {a.touch} rebuilt nothing\n{out}")
    check_depfiles(builddir, failures, who)
    out, _ = step(make, builddir, env, log, f"{who}: third make")
    code, qout, qerr = run_cmd(make + ["-q"], builddir, env)
    if code != 0:
        failures.add(f"{who}: after three makes `make -q` says there is still work "
                     f"({code})\nthird make printed:\n{out}{qout}{qerr}")
    return os.path.join(builddir, a.binary or a.name)


def build_cmake(a, cc, builddir, env, log, failures, who):
    src = os.path.join(os.path.dirname(builddir), os.path.basename(builddir) + "-src")
    shutil.copytree(os.path.join(HERE, a.project), src)
    step(["cmake", "-S", src, "-B", builddir, "-G", "Ninja", f"-DCMAKE_C_COMPILER={cc}",
          "-DCMAKE_BUILD_TYPE=Release"], builddir if os.path.isdir(builddir) else None,
         env, log, f"{who}: cmake configure")
    step(["cmake", "--build", builddir], None, env, log, f"{who}: first build")
    code, deps, _ = run_cmd(["ninja", "-C", builddir, "-t", "deps"], None, env)
    for line in deps.splitlines():
        name = line.strip()
        if not name or line[0] not in " \t":
            continue
        if is_temporary(name):
            failures.add(f"{who}: ninja's dependencies name {name!r}, which is not a file "
                         f"(a temporary file of the compiler?)")
    for name in [a.touch] + [os.path.relpath(c, src) for c in glob.glob(os.path.join(src, "*.c"))]:
        if os.path.join(src, name) not in deps.split():
            failures.add(f"{who}: ninja's dependencies do not name {name}")
    touch_later(os.path.join(src, a.touch))
    out, _ = step(["cmake", "--build", builddir], None, env, log, f"{who}: build after touch")
    if "Building C object" not in out:
        failures.add(f"{who}: build after touching {a.touch} rebuilt nothing\n{out}")
    out, _ = step(["cmake", "--build", builddir], None, env, log, f"{who}: third build")
    if "no work to do" not in out:
        failures.add(f"{who}: third build still had work to do\n{out}")
    return os.path.join(builddir, a.binary or a.name)


def dwarf_units(binary):
    code, out, err = run_cmd(["readelf", "--debug-dump=info", binary], None)
    units, current = [], None
    for line in out.splitlines():
        if "DW_TAG_compile_unit" in line:
            current = {}
            units.append(current)
        elif "DW_TAG_" in line:
            current = None
        elif current is not None:
            m = re.search(r"(DW_AT_name|DW_AT_comp_dir)\s*:\s*(?:\(indirect[^)]*\):\s*)?(.*)$", line)
            if m:
                current[m.group(1)] = m.group(2).strip()
    return units


def check_dwarf(ref_bin, pp_bin, pp_builddir, failures):
    ref = {u.get("DW_AT_name") for u in dwarf_units(ref_bin)}
    pp_units = dwarf_units(pp_bin)
    pp = {u.get("DW_AT_name") for u in pp_units}
    print(f"  DWARF compile units: mpicc {sorted(map(str, ref))}, ppios-cc {sorted(map(str, pp))}")
    for name in sorted(n for n in ref if n and n.endswith(".c")):
        if name not in pp:
            failures.add(f"DWARF: the ppios-cc build has no compile unit named {name!r} "
                         f"(it has {sorted(map(str, pp))})")
    for u in pp_units:
        name = u.get("DW_AT_name") or ""
        if name.endswith(".c") and name not in ref:
            failures.add(f"DWARF: the ppios-cc build names a compile unit {name!r} "
                         f"(comp_dir {u.get('DW_AT_comp_dir')}) that is not a source")
        if name in ref and u.get("DW_AT_comp_dir") != pp_builddir:
            failures.add(f"DWARF: compile unit {name!r} has comp_dir "
                         f"{u.get('DW_AT_comp_dir')!r}, not the build directory {pp_builddir!r}")


def find_ulimit(a, one_run, binary, env, failures):
    """Sets a.ulimit_v to the smallest address-space limit (KiB, to 2 MiB) under which the
    mpicc build still gives its unlimited output, plus a.ulimit_v_margin."""
    a.ulimit_v = None
    free_run, _ = one_run("mpicc-unlimited", binary, env)

    def works(kib):
        a.ulimit_v = kib
        res, _ = one_run(f"mpicc-as{kib}", binary, env)
        shutil.rmtree(res["workdir"], ignore_errors=True)
        return res["code"] == free_run["code"] == 0 and res["out"] == free_run["out"]

    lo, hi = 16 * 1024, 8 * 1024 * 1024  # KiB: 16 MiB fails, 8 GiB works
    if not works(hi):
        failures.add("the mpicc build does not work even under an 8 GiB limit (test bug)")
        a.ulimit_v = None
        return
    while hi - lo > 2048:
        mid = (lo + hi) // 2
        if works(mid):
            hi = mid
        else:
            lo = mid
    a.ulimit_v = hi + a.ulimit_v_margin
    print(f"  ulimit -v: the mpicc build needs {hi} KiB ({hi // 1024} MiB); every run gets "
          f"{a.ulimit_v} KiB ({a.ulimit_v // 1024} MiB)", flush=True)


# ---------------------------------------------------------------- main
class Failures(list):
    def add(self, message):
        print("  FAIL: " + message, flush=True)
        self.append(message)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ppios-cc", required=True)
    ap.add_argument("--ppios-coord", help="reset the run's coordinator target at the end "
                    "(default: ppios-coord next to ppios-cc, if any)")
    ap.add_argument("--name", required=True, help="the case (and executable) name")
    ap.add_argument("--kind", choices=["single", "make", "cmake"], default="single")
    ap.add_argument("--source", action="append", default=[],
                    help="C source relative to tests/hazards (kept relative when compiling)")
    ap.add_argument("--project", help="make/cmake: project directory relative to tests/hazards")
    ap.add_argument("--binary", help="make/cmake: the executable the project builds")
    ap.add_argument("--touch", help="make/cmake: the header to touch between builds")
    ap.add_argument("--cflags", default="-O2")
    ap.add_argument("--ldflags", default="")
    ap.add_argument("--mpicc", default="mpicc")
    ap.add_argument("--mpirun", default="mpirun")
    ap.add_argument("--mpirun-flags", default="--oversubscribe --bind-to none")
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--singleton", action="store_true", help="run without mpirun (np 1)")
    ap.add_argument("--runs", type=int, default=5, help="runs per mode")
    ap.add_argument("--ref-runs", type=int, default=2, help="runs of the mpicc build")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds per run")
    ap.add_argument("--max-hangs", type=int, default=1,
                    help="after this many hangs of a mode, its remaining runs are skipped "
                    "(and count as failed)")
    ap.add_argument("--max-failures", type=int, default=2,
                    help="after this many failed runs of a mode, its remaining runs are "
                    "skipped (and count as failed); 0: never skip")
    ap.add_argument("--slack", type=float, default=1.5,
                    help="seconds a run may take beyond the slowest reference run")
    ap.add_argument("--input", action="append", default=[], help="NAME=GEN:ARGS")
    ap.add_argument("--output", action="append", default=[], help="a file the run must write")
    ap.add_argument("--env", action="append", default=[], help="K=V for every run")
    ap.add_argument("--ppios-env", action="append", default=[], help="K=V for ppios-cc runs")
    ap.add_argument("--stdin", help="work-directory file to use as stdin")
    ap.add_argument("--stdin-pipe", help="work-directory file fed to stdin through a pipe")
    ap.add_argument("--fifo", action="append", default=[], help="PATH=FILE: FIFO fed FILE")
    ap.add_argument("--pass-fd", action="append", default=[], help="N=FILE open on fd N")
    ap.add_argument("--ulimit-v", type=int, help="address-space limit of each rank, KiB")
    ap.add_argument("--ulimit-v-margin", type=int,
                    help="KiB: limit every rank's address space to what the mpicc build "
                    "needs (found by bisection) plus this margin")
    ap.add_argument("--check-dwarf", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("args", nargs="*", help="program arguments (after --)")
    a = ap.parse_args()
    if a.kind == "single" and not a.source:
        ap.error("--source is required")
    if a.kind != "single" and not (a.project and a.touch):
        ap.error("--project and --touch are required for make/cmake")
    a.ppios_cc = os.path.abspath(a.ppios_cc)
    if a.mpicc != "mpicc" or os.path.sep in a.mpicc:
        a.mpicc = shutil.which(a.mpicc) or a.mpicc
    if a.singleton:
        a.np = 1
    if not a.ppios_coord:
        guess = os.path.join(os.path.dirname(a.ppios_cc), "ppios-coord")
        a.ppios_coord = guess if os.access(guess, os.X_OK) else None

    top = tempfile.mkdtemp(prefix=f"ppios-hz-{a.name}-")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1", OMPI_MCA_mpi_warn_on_fork="0",
               LC_ALL="C", OMPI_MCA_opal_signal="",  # no backtraces: addresses vary
               OMPI_MCA_odls_base_sigkill_timeout="0")  # a failed job ends without a 1 s wait
    for k in [k for k in env if k.startswith("PPIOS_")]:
        del env[k]
    # Shared memory between the ranks of one node only: no probing of network components
    # (a third of mpirun's start-up time here). The caller's settings win.
    env.setdefault("OMPI_MCA_pml", "ob1")
    env.setdefault("OMPI_MCA_btl", "self,vader")
    env.setdefault("OMPI_MCA_osc", "^ucx")
    os.makedirs(os.path.join(top, "ompi"))
    env["OMPI_MCA_orte_tmpdir_base"] = os.path.join(top, "ompi")
    target = f"hazards-{os.getpid()}"
    env["PPIOS_TARGET"] = target
    env.update(kv.split("=", 1) for kv in a.env)
    failures = Failures()
    started = time.monotonic()
    print(f"hazards.{a.name}: ppios-cc {a.ppios_cc}, np {a.np}"
          f"{' (singleton)' if a.singleton else ''}, {a.runs} runs per mode, work dir {top}",
          flush=True)
    try:
        check(a, top, env, failures)
    except BuildError as e:
        failures.add(str(e))
    finally:
        if a.ppios_coord:
            run_cmd([a.ppios_coord, "--target", target, "reset", "--force"], None, env, 60)
        if a.keep or failures:
            print("work directory kept:", top)
        else:
            shutil.rmtree(top, ignore_errors=True)
    print(f"{'FAILED' if failures else 'OK'}: hazards.{a.name}, {len(failures)} problems, "
          f"{time.monotonic() - started:.1f} s", flush=True)
    return 1 if failures else 0


def check(a, top, env, failures):
    log = []
    builds = {}
    for who, cc in (("mpicc", a.mpicc), ("ppios-cc", a.ppios_cc)):
        builddir = os.path.join(top, f"build-{who}")
        if a.kind == "single":
            builds[who] = build_single(a, cc, builddir, env, log)
        elif a.kind == "make":
            builds[who] = build_make(a, cc, builddir, env, log, failures, who)
        else:
            builds[who] = build_cmake(a, cc, builddir, env, log, failures, who)
        print(f"  built with {who}: {builds[who]}", flush=True)
    if a.check_dwarf:
        check_dwarf(builds["mpicc"], builds["ppios-cc"], os.path.join(top, "build-ppios-cc"),
                    failures)

    counter = [0]

    def one_run(label, binary, run_env):
        # mpirun itself killed by a signal (its stdin forwarding sometimes crashes Open MPI
        # 4.1 when stdin is a pipe): the launcher, not the program, which would make mpirun
        # exit with a code and a message. Tried again, at most twice, in a fresh directory.
        for attempt in range(3):
            counter[0] += 1
            workdir = os.path.join(top, f"run{counter[0]:03d}-{label}")
            os.makedirs(workdir)
            generate_inputs(a.input, workdir)
            code, out, err, secs = run_program(a, binary, workdir, run_env, label)
            launcher_died = (not a.singleton and isinstance(code, int) and code < 0
                             and not out and not err.strip())
            if (not launcher_died and code != LAUNCHER_HUNG) or attempt == 2:
                break
            print(f"  ({label}: " + ("mpirun hung after every rank had ended"
                                     if code == LAUNCHER_HUNG else
                                     f"mpirun itself died of signal {-code} with no output")
                  + ": run again)", flush=True)
        res = dict(code=code, out=out, err=normalize_stderr(err), files=files_in(workdir),
                   secs=secs, workdir=workdir)
        missing = [o for o in a.output if o not in res["files"]]
        return res, missing

    if a.ulimit_v_margin is not None:
        find_ulimit(a, one_run, builds["mpicc"], env, failures)

    refs = []
    for i in range(a.ref_runs):
        res, missing = one_run("mpicc", builds["mpicc"], env)
        print(f"  reference run {i + 1}: exit {res['code']}, {res['secs']:.2f} s, "
              f"{len(res['out'].splitlines())} stdout lines, {len(res['err'].splitlines())} "
              f"stderr lines", flush=True)
        if missing:
            failures.add(f"the mpicc build did not write {missing} (test bug)")
        if res["code"] == "timeout":
            failures.add("the mpicc build timed out (test bug)")
        if refs:
            probs = differences(res, refs[0])
            if probs:
                failures.add("the mpicc build is not deterministic (test bug): "
                             + "; ".join(probs))
        refs.append(res)
    ref = refs[0]
    print("  reference stdout:\n" + "\n".join("    | " + l for l in ref["out"].splitlines()[:12]))
    if ref["err"].strip():
        print("  reference stderr:\n" + "\n".join("    | " + l for l in ref["err"].splitlines()[:12]))
    limit = max(r["secs"] for r in refs) + a.slack

    ppenv = dict(env)
    ppenv.update(kv.split("=", 1) for kv in a.ppios_env)
    tally = {m: [0, 0, 0] for m in a.modes.split(",")}  # ok, failed, skipped
    hangs = {m: 0 for m in tally}
    for i in range(a.runs):
        for mode in a.modes.split(","):
            if hangs[mode] >= a.max_hangs or (a.max_failures and tally[mode][1] >= a.max_failures):
                tally[mode][2] += 1
                print(f"  run {i + 1} mode {mode:5}: skipped (failed {tally[mode][1]} times, "
                      f"{hangs[mode]} hangs)")
                continue
            res, missing = one_run(f"{mode}", builds["ppios-cc"], dict(ppenv, PPIOS_MODE=mode))
            probs = differences(res, ref)
            if missing:
                probs.append(f"did not write {missing}")
            if res["code"] != "timeout" and res["secs"] > limit:
                slow = (f"took {res['secs']:.2f} s, over the slowest reference run + "
                        f"{a.slack} s ({limit:.2f} s)")
                if probs:
                    probs.append(slow)
                else:
                    # Only late: is the machine slow right now (other jobs), or the build?
                    again, _ = one_run("mpicc-again", builds["mpicc"], env)
                    if again["secs"] + a.slack >= res["secs"]:
                        print(f"  run {i + 1} mode {mode}: {slow}, but a reference run now "
                              f"takes {again['secs']:.2f} s too: the machine is busy, not "
                              f"counted", flush=True)
                    else:
                        probs.append(f"{slow} (a reference run right after: "
                                     f"{again['secs']:.2f} s)")
            if res["code"] == "timeout":
                hangs[mode] += 1
                probs.insert(0, f"HANG: killed after {a.timeout} s")
            elif isinstance(res["code"], int) and res["code"] < 0:
                probs.insert(0, f"killed by signal {-res['code']}")
            tally[mode][0 if not probs else 1] += 1
            status = "ok" if not probs else "FAIL"
            print(f"  run {i + 1} mode {mode:5}: exit {res['code']}, {res['secs']:.2f} s, {status}",
                  flush=True)
            for p in probs:
                failures.add(f"run {i + 1} mode {mode}: {p}")
    print("  summary: " + ", ".join(f"{m} {ok} ok/{bad} failed" + (f"/{skip} skipped" if skip else "")
                                     for m, (ok, bad, skip) in tally.items()))
    if any(bad or skip for _, bad, skip in tally.values()):
        failures.add("failing modes: " + ", ".join(m for m, (_, bad, skip) in tally.items()
                                                     if bad or skip))


if __name__ == "__main__":
    sys.exit(main())
