#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The packaging tests (packaging/tests/CMakeLists.txt): an installed prefix as a user and
a site administrator meet it. Each subcommand is one ctest test:

  install   cmake --install to a fresh prefix; the layout (tools in bin, the emulator
            in libexec/ppios, packages, man pages, module file, LICENSE)
  version   every installed tool answers --version with the build's version and git id
  mpich     the installed ppios-cc with MPICH's wrapper links the installed MPICH runtime,
            and MPICH's -show, -compile_info and -link_info are its wrapper's
  driver    the installed ppios-cc as build systems call mpicc: questions without an input
            file, -x and standard input, response files, options with a separate value;
            a missing wrapper, and a copy of ppios-cc out of its prefix, say so
  pkgconfig ppios.pc requires the MPI's own pkg-config module, Open MPI's or MPICH's
  cmake     a scratch CMake project finds ppios (find_package), builds a program on
            ppios::runtime and a prefetching build through ppios-cc, and runs both
  make      the same from a scratch Makefile through pkg-config
  man       man -l renders every page; each lists every flag of its tool's --help, and
            ppios(7) every PPIOS_* variable the sources read
  module    environment-modules: `module load ppios` puts the prefix's tools, man pages
            and packages in reach, also from a moved copy of the prefix; a second
            version is refused while one is loaded
  slurm     a one-node Slurm started here runs the Slurm example with PPIOS_THRESHOLD
            given at submit, against a Redis server standing for the site's coordinator
  spack     the Spack recipe's variants and CMake defines against the project's options
  help      the help texts name no internal references; docs/configuration.md lists the
            same flags as the --help texts and every variable the sources read

Debian's python3 only. Exit 0 passes, 1 fails.
"""
import ast
import glob
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_odls_base_sigkill_timeout": "0"}


def fail(msg):
    print(f"FAIL: {msg}", flush=True)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def run(args, env=None, cwd=None, ok=True, timeout=300, input=None):
    full_env = dict(os.environ)
    full_env.update(env or {})
    r = subprocess.run(args, capture_output=True, text=True, env=full_env, cwd=cwd,
                       timeout=timeout, input=input)
    if ok and r.returncode != 0:
        fail(f"{' '.join(map(str, args))} exited {r.returncode}\n--- stdout\n{r.stdout}"
             f"\n--- stderr\n{r.stderr}")
    return r


class Ctx:
    def __init__(self, argv):
        self.what = argv[0]
        self.opts = {}
        for a in argv[1:]:
            k, _, v = a.partition("=")
            self.opts[k] = v
        self.source = self.opts["source"]
        self.build = self.opts["build"]
        self.prefix = self.opts.get("prefix", "")
        self.version = self.opts.get("version", "")
        self.mpirun = [self.opts.get("mpirun", "mpirun")] + \
            [f for f in self.opts.get("mpirun_flags", "").split(";") if f]
        self.work = tempfile.mkdtemp(prefix=f"ppios-package-{self.what}-")

    def tool(self, name):
        return os.path.join(self.prefix, "bin", name)

    def git_id(self):
        with open(os.path.join(self.build, "generated", "ppios_version.h")) as f:
            return re.search(r'PPIOS_GIT_ID "([^"]*)"', f.read()).group(1)

    def input_file(self):
        path = os.path.join(self.work, "input.bin")
        if not os.path.exists(path):
            # 6 MiB and a bit: not a multiple of the chunk or of a rank's share.
            data = bytes((i * 131 + (i >> 9)) & 0xFF for i in range(1 << 16))
            with open(path, "wb") as f:
                for _ in range(96):
                    f.write(data)
                f.write(data[:12345])
        return path


# ---------------------------------------------------------------- install

def test_install(c):
    if os.path.exists(c.prefix):
        shutil.rmtree(c.prefix)
    run(["cmake", "--install", c.build, "--prefix", c.prefix])
    p = lambda *parts: os.path.join(c.prefix, *parts)
    bins = sorted(os.listdir(p("bin")))
    check(bins == ["ppios-cc", "ppios-coord", "ppios-report"],
          f"bin/ holds {bins}, expected the three tools only (the emulator belongs in libexec/ppios)")
    for name in ("ppios-simfs", "ppios-simfs-calibrate"):
        check(os.access(p("libexec", "ppios", name), os.X_OK), f"libexec/ppios/{name} missing")
    for rel in ("lib/libppios.so", "include/ppios/ppios.h", "include/ppios/interpose.def",
                "lib/pkgconfig/ppios.pc", "lib/cmake/ppios/ppiosConfig.cmake",
                "lib/cmake/ppios/ppiosConfigVersion.cmake", "lib/cmake/ppios/ppiosTargets.cmake",
                "share/man/man1/ppios-cc.1", "share/man/man1/ppios-coord.1",
                "share/man/man1/ppios-report.1", "share/man/man7/ppios.7",
                f"share/modulefiles/ppios/{c.version}", "share/doc/ppios/LICENSE",
                "share/doc/ppios/examples/ppios-job.sbatch"):
        check(os.path.exists(p(rel)), f"{rel} not installed")
    with open(p("share/doc/ppios/LICENSE")) as f:
        text = f.read()
    check("Apache License" in text and "LLVM Exceptions" in text, "LICENSE is not Apache-2.0 WITH LLVM-exception")
    # The installed README's links lead to installed files.
    doc = p("share", "doc", "ppios")
    with open(os.path.join(doc, "README.md")) as f:
        links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", f.read())
    relative = [l for l in links if not re.match(r"[a-z]+:", l)]
    broken = sorted({l for l in relative if not os.path.exists(os.path.join(doc, l))})
    check(len(relative) >= 10 and not broken,
          f"share/doc/ppios/README.md links to {broken}, which are not installed")
    # Nothing installed names the build tree: the prefix stands alone.
    for rel in ("lib/pkgconfig/ppios.pc", "lib/cmake/ppios/ppiosConfig.cmake",
                f"share/modulefiles/ppios/{c.version}"):
        with open(p(rel)) as f:
            check(c.build not in f.read(), f"{rel} names the build tree {c.build}")
    # A staged install (DESTDIR, as distribution packages and Spack's binary caches make
    # them), moved to its prefix: nothing names the stage, and ppios-cc links the runtime
    # of the final prefix.
    stage, final = os.path.join(c.work, "stage"), os.path.join(c.work, "final")
    run(["cmake", "--install", c.build, "--prefix", final], env={"DESTDIR": stage})
    shutil.move(stage + final, final)
    for top, _, files in os.walk(final):
        for name in files:
            with open(os.path.join(top, name), "rb") as f:
                check(stage.encode() not in f.read(), f"{os.path.join(top, name)} names the stage {stage}")
    prog = os.path.join(c.work, "staged_prog")
    run([os.path.join(final, "bin", "ppios-cc"), "-o", prog,
         os.path.join(c.source, "packaging", "tests", "scratch", "chunks.c")])
    check(re.search(r"RUNPATH.*\[" + re.escape(os.path.join(os.path.realpath(final), "lib")) + r"\]",
                    run(["readelf", "-d", prog]).stdout), "ppios-cc of a staged install links another runtime")
    print(f"installed to {c.prefix}: bin {bins}, emulator in libexec/ppios; a DESTDIR install works moved")


# ---------------------------------------------------------------- --version, --help

def test_version(c):
    git_id = c.git_id()
    check(re.fullmatch(r"[0-9a-f]{7,40}(-dirty)?|unknown", git_id), f"odd git id '{git_id}'")
    for name in ("ppios-cc", "ppios-coord", "ppios-report"):
        out = run([c.tool(name), "--version"]).stdout
        first = out.splitlines()[0] if out else ""
        want = f"{name} (ppios) {c.version}, git {git_id}"
        check(first == want, f"{name} --version printed '{first}', expected '{want}'")
        print(first)
    # ppios-cc: then the MPI wrapper's own version (build systems recognize the compiler by it).
    out = run([c.tool("ppios-cc"), "--version"]).stdout
    wrapper = run(["mpicc", "--version"]).stdout
    check(out.splitlines()[1:] == wrapper.splitlines(),
          "ppios-cc --version does not go on with mpicc --version's text")
    # ppios-cc --help: its own options first, then how to reach the wrapper's help.
    for flag in ("--help", "--ppios-help"):
        out = run([c.tool("ppios-cc"), flag]).stdout
        check(out.startswith("usage: ppios-cc "), f"ppios-cc {flag} does not start with its own usage")
        check("-Rppios" in out and "--emit-source" in out, f"ppios-cc {flag} lacks the ppios options")
        check("`mpicc --help`" in out, f"ppios-cc {flag} does not say how to reach mpicc's help")
    out = run([c.tool("ppios-cc"), "--help"], env={"PPIOS_CC": "mpicc.openmpi"}).stdout
    check("`mpicc.openmpi --help`" in out, "ppios-cc --help does not name the wrapper PPIOS_CC names")
    check(not re.search(r"^Usage: (gcc|cc|clang) ", out, re.M), "ppios-cc --help printed the C compiler's help")


# ---------------------------------------------------------------- scratch projects

def run_programs(c, bindir):
    data = c.input_file()
    env = dict(MPI_ENV)
    plain = run(c.mpirun + ["-np", "2", os.path.join(bindir, "chunks_plain"), data], env=env).stdout
    size = os.path.getsize(data)
    check(re.search(rf"^chunks: bytes={size} hash=[0-9a-f]{{16}}$", plain, re.M),
          f"chunks_plain printed {plain!r}")
    stats = os.path.join(c.work, f"stats-{os.path.basename(bindir)}.jsonl")
    pf = run(c.mpirun + ["-np", "2", os.path.join(bindir, "chunks_ppios"), data],
             env=dict(env, PPIOS_STATS=stats, PPIOS_COORDINATOR="shm",
                      PPIOS_TARGET=f"pkgtest{os.getpid()}")).stdout
    check(pf == plain, f"the prefetching build printed {pf!r}, the plain one {plain!r}")
    with open(stats) as f:
        lines = [json.loads(l) for l in f if l.strip()]
    check(len(lines) == 2, f"{len(lines)} statistics lines, expected one per rank")
    hits = sum(l.get("hit_bytes", 0) for l in lines)
    check(hits > 0, f"the prefetching build served nothing from its prefetch cache: {lines}")
    direct = run(c.mpirun + ["-np", "1", os.path.join(bindir, "direct"), data], env=env).stdout
    check(direct.strip() == f"direct: bytes={size} last=0", f"direct printed {direct!r}")
    print(f"{bindir}: same output plain and prefetching ({plain.strip()}), {hits} bytes from "
          f"the prefetch cache; direct: {direct.strip()}")


def scratch_copy(c, name):
    dst = os.path.join(c.work, name)
    shutil.copytree(os.path.join(c.source, "packaging", "tests", "scratch"), dst)
    return dst


def test_mpich(c):
    """The installed ppios-cc driving MPICH's wrapper links the installed MPICH runtime
    (<libdir>/ppios-mpich), and the program runs under MPICH's mpiexec."""
    mpich_cc, mpich_exec = c.opts["mpich_cc"], c.opts["mpich_exec"]
    runtime = os.path.join(c.prefix, "lib", "ppios-mpich", "libppios.so")
    check(os.path.exists(runtime), "lib/ppios-mpich/libppios.so not installed")
    src = os.path.join(c.source, "packaging", "tests", "scratch", "chunks.c")
    plain, pf = os.path.join(c.work, "chunks_plain"), os.path.join(c.work, "chunks_ppios")
    run([mpich_cc, "-O2", "-o", plain, src])
    # MPICH's own questions go to its wrapper, as Open MPI's --showme does.
    for question in (["-show", "-O2", "-o", pf, src], ["-compile_info"], ["-link_info"]):
        want = run([mpich_cc] + question).stdout
        got = run([c.tool("ppios-cc")] + question, env={"PPIOS_CC": mpich_cc}, ok=False)
        check(got.returncode == 0 and got.stdout == want,
              f"ppios-cc {question[0]} with PPIOS_CC={mpich_cc} exited {got.returncode} with "
              f"{got.stdout!r} {got.stderr!r}; {mpich_cc} says {want!r}")
    check(not os.path.exists(pf), f"ppios-cc -show built {pf}")
    run([c.tool("ppios-cc"), "-O2", "-o", pf, src], env={"PPIOS_CC": mpich_cc})
    dyn = run(["readelf", "-d", pf]).stdout
    check(re.search(r"RUNPATH.*\[" + re.escape(os.path.dirname(runtime)) + r"\]", dyn),
          f"the MPICH build is not linked with the installed MPICH runtime:\n{dyn}")
    check("libmpich" in dyn and "libmpi.so" not in dyn, f"the MPICH build's libraries:\n{dyn}")
    data = c.input_file()
    want = run([mpich_exec, "-n", "2", plain, data]).stdout
    stats = os.path.join(c.work, "stats.jsonl")
    got = run([mpich_exec, "-n", "2", pf, data],
              env={"PPIOS_STATS": stats, "PPIOS_TARGET": f"pkgmpich{os.getpid()}"}).stdout
    check(got == want, f"MPICH: the prefetching build printed {got!r}, the plain one {want!r}")
    with open(stats) as f:
        lines = [json.loads(l) for l in f if l.strip()]
    check(len(lines) == 2 and sum(l["hit_bytes"] for l in lines) > 0, f"statistics: {lines}")
    print(f"installed ppios-cc + {mpich_cc}: {got.strip()}, "
          f"{sum(l['hit_bytes'] for l in lines)} bytes from the prefetch cache")


def prefetch_hits(c, prog):
    """Runs prog on two ranks; returns the bytes its ranks served from the prefetch cache."""
    stats = os.path.join(c.work, f"stats-{os.path.basename(prog)}.jsonl")
    target = f"pkgdriver{os.getpid()}"
    try:
        run(c.mpirun + ["-np", "2", prog, c.input_file()],
            env=dict(MPI_ENV, PPIOS_STATS=stats, PPIOS_COORDINATOR="shm", PPIOS_TARGET=target))
    finally:
        # The node-local segment of this test's own target: not left in /dev/shm.
        for segment in glob.glob(f"/dev/shm/ppios-coord-*.{target}.*"):
            os.remove(segment)
    with open(stats) as f:
        return sum(json.loads(l).get("hit_bytes", 0) for l in f if l.strip())


def test_driver(c):
    """The installed ppios-cc invoked as build systems invoke the mpicc it stands in for."""
    cc = c.tool("ppios-cc")
    src = os.path.join(c.source, "packaging", "tests", "scratch", "chunks.c")
    w = c.work
    # Questions without an input file (CMake, Meson, libtool and configure ask them): the
    # wrapper's answers.
    for question in (["-dumpversion"], ["-dumpmachine"], ["-print-prog-name=ld"],
                     ["-print-file-name=libc.so"]):
        want = run(["mpicc"] + question).stdout
        got = run([cc] + question, ok=False)
        check(got.returncode == 0 and got.stdout == want,
              f"ppios-cc {' '.join(question)} exited {got.returncode} with {got.stdout!r} "
              f"{got.stderr!r}, mpicc says {want!r}")
    # Nothing at all: the wrapper's own complaint, and a failure.
    r = run([cc], ok=False)
    check(r.returncode != 0 and "no input files" in r.stderr, f"ppios-cc alone: {r.returncode} {r.stderr!r}")
    # Meson's probe: -x c, preprocessing standard input.
    want = run(["mpicc", "-x", "c", "-E", "-dM", "-"], input="").stdout
    got = run([cc, "-x", "c", "-E", "-dM", "-"], input="", ok=False)
    check(got.returncode == 0 and got.stdout == want and "__STDC__" in want,
          f"ppios-cc -x c -E -dM - exited {got.returncode}: {got.stderr!r}")
    # A program on standard input compiles as mpicc compiles it, with one warning.
    prog = os.path.join(w, "from_stdin")
    r = run([cc, "-x", "c", "-", "-o", prog], input="int main(void) { return 3; }\n", ok=False)
    check(r.returncode == 0 and os.path.exists(prog), f"ppios-cc -x c - exited {r.returncode}: {r.stderr}")
    check(r.stderr.count("compiled without prefetching") == 1, f"ppios-cc -x c - warned: {r.stderr!r}")
    check(run([prog], ok=False).returncode == 3, "the program from standard input does not run")
    # A response file (@file), with a quoted name holding a space: a prefetching build.
    spaced = os.path.join(w, "dir with space")
    os.makedirs(spaced)
    shutil.copy(src, os.path.join(spaced, "chunks.c"))
    prog = os.path.join(w, "chunks_rsp")
    rsp = os.path.join(w, "args.rsp")
    with open(rsp, "w") as f:
        f.write(f'-O2\n-o {prog}\n"{spaced}/chunks.c"\n')
    r = run([cc, "@" + rsp], ok=False)
    check(r.returncode == 0 and "without prefetching" not in r.stderr,
          f"ppios-cc @file exited {r.returncode}: {r.stderr}")
    check(prefetch_hits(c, prog) > 0, "the build from a response file serves nothing from its prefetch cache")
    # Options whose value is the next argument, however it looks: -z now, -u sym, --param.
    prog = os.path.join(w, "chunks_z")
    r = run([cc, "-O2", "-z", "now", "-u", "main", "--param", "max-inline-insns-single=100",
             "-o", prog, src], ok=False)
    check(r.returncode == 0 and "without prefetching" not in r.stderr,
          f"ppios-cc -z now -u main --param ... exited {r.returncode}: {r.stderr}")
    check(re.search(r"\bBIND_NOW\b|FLAGS.*\bNOW\b", run(["readelf", "-d", prog]).stdout),
          "-z now did not reach the linker")
    # Commands that write nothing (-fsyntax-only checks the user's file, -### prints the
    # commands) run on the wrapper as they are: no object, no word of ppios-cc's.
    obj = os.path.join(w, "nothing.o")
    for flag in ("-fsyntax-only", "-###"):
        r = run([cc, flag, "-c", src, "-o", obj], ok=False)
        check(r.returncode == 0 and "ppios-cc:" not in r.stderr and not os.path.exists(obj),
              f"ppios-cc {flag} -c exited {r.returncode}: {r.stderr[-600:]!r}")
    # A wrapper that does not exist: named as such.
    r = run([cc, "-o", os.path.join(w, "nowrapper"), src], env={"PPIOS_CC": "/nonexistent/mpicc"}, ok=False)
    check(r.returncode != 0 and "cannot find the MPI compiler wrapper '/nonexistent/mpicc'" in r.stderr,
          f"PPIOS_CC=/nonexistent/mpicc: {r.returncode} {r.stderr!r}")
    # ppios-cc copied out of its prefix finds no runtime: it says so, and links nothing
    # against the build tree it was built in.
    alone = os.path.join(w, "alone", "bin")
    os.makedirs(alone)
    shutil.copy(cc, alone)
    prog = os.path.join(w, "alone_prog")
    r = run([os.path.join(alone, "ppios-cc"), "-o", prog, src], ok=False)
    check(r.returncode != 0 and "cannot find the ppios runtime" in r.stderr and not os.path.exists(prog),
          f"ppios-cc without its prefix exited {r.returncode}: {r.stderr!r}"
          + (f"\n{run(['readelf', '-d', prog]).stdout}" if os.path.exists(prog) else ""))
    # A symbolic link to it is the program in its prefix.
    linked = os.path.join(w, "linked", "bin")
    os.makedirs(linked)
    os.symlink(cc, os.path.join(linked, "ppios-cc"))
    prog = os.path.join(w, "linked_prog")
    run([os.path.join(linked, "ppios-cc"), "-o", prog, src])
    check(re.search(r"RUNPATH.*\[" + re.escape(os.path.realpath(os.path.join(c.prefix, "lib"))) + r"\]",
                    run(["readelf", "-d", prog]).stdout), "a build through a link to ppios-cc")
    print("ppios-cc: questions without input, -x c and standard input, @file, -z/-u/--param, "
          "-fsyntax-only and -###, a missing wrapper, a copy without its prefix, a link to it")


def test_pkgconfig(c):
    """ppios.pc requires the pkg-config module of the MPI libppios is built for, also on a
    machine that has Open MPI's and MPICH's both: this build's, and a configure for MPICH."""
    env = {"PKG_CONFIG_PATH": os.path.join(c.prefix, "lib", "pkgconfig")}
    for module in ("ompi-c", "mpich"):
        check(run(["pkg-config", "--exists", module], ok=False).returncode == 0,
              f"pkg-config has no {module} here (Debian: libopenmpi-dev, libmpich-dev)")

    def requires(pc):
        with open(pc) as f:
            return re.findall(r"^Requires:\s*(.*)$", f.read(), re.M)
    installed = requires(os.path.join(c.prefix, "lib", "pkgconfig", "ppios.pc"))
    check(installed == ["ompi-c"], f"the installed (Open MPI) ppios.pc requires {installed}")
    cflags = run(["pkg-config", "--cflags", "ppios"], env=env).stdout
    want = run(["pkg-config", "--cflags", "ompi-c"]).stdout.split()
    check(all(f in cflags.split() for f in want), f"pkg-config --cflags ppios: {cflags!r} lacks {want}")
    bld = os.path.join(c.work, "mpich-configure")
    run(["cmake", "-S", c.source, "-B", bld, "-G", "Ninja", f"-DMPI_C_COMPILER={c.opts['mpich_cc']}",
         "-DPPIOS_RUNTIME_ONLY=ON", "-DPPIOS_WITH_TRANSFORMER=OFF", "-DBUILD_TESTING=OFF"], timeout=240)
    mpich = requires(os.path.join(bld, "packaging", "ppios.pc"))
    check(mpich == ["mpich"], f"configured for MPICH, ppios.pc requires {mpich}")
    print(f"ppios.pc requires {installed[0]} (this build), {mpich[0]} (configured for MPICH)")


def test_cmake(c):
    src = scratch_copy(c, "cmake-project")
    bld = os.path.join(c.work, "cmake-build")
    # Only the prefix: the user's environment names no ppios path.
    r = run(["cmake", "-S", src, "-B", bld, "-G", "Ninja", f"-DCMAKE_PREFIX_PATH={c.prefix}"])
    check(f"ppios {c.version}: {c.tool('ppios-cc')}" in r.stdout,
          f"find_package(ppios) did not report the installed ppios-cc:\n{r.stdout}")
    run(["cmake", "--build", bld])
    run_programs(c, bld)
    # A version it cannot satisfy is refused.
    bad = os.path.join(c.work, "cmake-bad")
    os.makedirs(bad)
    with open(os.path.join(bad, "CMakeLists.txt"), "w") as f:
        f.write("cmake_minimum_required(VERSION 3.20)\nproject(x C)\nfind_package(ppios 99 REQUIRED)\n")
    r = run(["cmake", "-S", bad, "-B", bad + "/b", f"-DCMAKE_PREFIX_PATH={c.prefix}"], ok=False)
    check(r.returncode != 0, "find_package(ppios 99) succeeded")


def test_make(c):
    src = scratch_copy(c, "make-project")
    env = {"PKG_CONFIG_PATH": os.path.join(c.prefix, "lib", "pkgconfig")}
    cc = run(["pkg-config", "--variable=ppios_cc", "ppios"], env=env).stdout.strip()
    check(os.path.realpath(cc) == os.path.realpath(c.tool("ppios-cc")), f"ppios_cc is {cc}")
    ver = run(["pkg-config", "--modversion", "ppios"], env=env).stdout.strip()
    check(ver == c.version, f"pkg-config --modversion ppios says {ver}")
    run(["make", "-C", src], env=env)
    run_programs(c, src)


# ---------------------------------------------------------------- man pages

def help_flags(text):
    """The options a --help text names: --long ones and ppios-cc's -R/-W flags."""
    return set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*|-[RW](?:no-|error=)?ppios[a-z-]*)", text))


def source_variables(source):
    """Every PPIOS_* variable the runtime, the coordinator and ppios-cc read: the runtime's
    and the coordinator's string literals (the names their parsers look up), and
    ppios-cc's getenv calls."""
    names = set()
    for path in glob.glob(os.path.join(source, "runtime", "src", "*.cpp")) + \
            glob.glob(os.path.join(source, "coordinator", "src", "*.cpp")):
        with open(path) as f:
            names |= set(re.findall(r'"(PPIOS_[A-Z0-9_]+)"', f.read()))
    for path in glob.glob(os.path.join(source, "transformer", "lib", "*.cpp")):
        with open(path) as f:
            names |= set(re.findall(r'getenv\("(PPIOS_[A-Z0-9_]+)"\)', f.read()))
    if len(names) < 10:
        fail(f"found only {sorted(names)} in the sources: has the configuration moved?")
    return names


def render(page):
    r = run(["man", "-l", page], env={"MANWIDTH": "100", "MAN_KEEP_FORMATTING": "",
                                      "LC_ALL": "C.UTF-8"})
    check(not r.stderr.strip(), f"man -l {page} warned:\n{r.stderr}")
    return r.stdout


def test_man(c):
    man = os.path.join(c.prefix, "share", "man")
    helps = {
        "ppios-cc": run([c.tool("ppios-cc"), "--help"], env={"PPIOS_CC": ""}).stdout,
        "ppios-report": run([c.tool("ppios-report"), "--help"]).stdout,
    }
    coord = run([c.tool("ppios-coord"), "--help"]).stdout
    commands = re.search(r"^commands:\n((?:  .*\n)+)", coord, re.M).group(1)
    for command in [l.split()[0] for l in commands.splitlines()]:
        coord += run([c.tool("ppios-coord"), command, "--help"]).stdout
    helps["ppios-coord"] = coord
    for name, text in helps.items():
        page = render(os.path.join(man, "man1", f"{name}.1"))
        check(page.lstrip().startswith(name.upper() + "(1)"), f"{name}(1) has no title line")
        flags = help_flags(text)
        check(len(flags) >= 3, f"{name} --help names only {flags}")
        missing = sorted(f for f in flags if not re.search(r"(?<![\w-])" + re.escape(f) + r"(?![\w-])", page))
        check(not missing, f"{name}(1) lacks {missing} of its --help")
        print(f"{name}(1): {len(flags)} flags, all there")
    page = render(os.path.join(man, "man7", "ppios.7"))
    variables = source_variables(c.source)
    missing = sorted(v for v in variables if not re.search(r"\b" + v + r"\b", page))
    check(not missing, f"ppios(7) lacks {missing}")
    check("SEE ALSO" in page and "ppios-cc(1)" in page, "ppios(7) has no SEE ALSO")
    print(f"ppios(7): all {len(variables)} variables: {' '.join(sorted(variables))}")
    # man finds the pages by name under the prefix.
    r = run(["man", "-w", "-M", man, "7", "ppios"])
    check(r.stdout.strip() == os.path.join(man, "man7", "ppios.7"), f"man -w found {r.stdout}")


# ---------------------------------------------------------------- environment-modules

MODULES_INIT = "/usr/share/modules/init/bash"


def module_shell(c, modulefiles, script):
    # A login shell of a user who has nothing of ppios in the environment yet.
    return run(["bash", "-c", "unset MANPATH PKG_CONFIG_PATH CMAKE_PREFIX_PATH; set -e; "
                f"source {MODULES_INIT}; module use {modulefiles}; {script}"])


def test_module(c):
    check(os.path.exists(MODULES_INIT), f"{MODULES_INIT} missing: Debian's environment-modules "
                                        "is not installed (scripts/install-deps installs it)")
    for prefix in (c.prefix, os.path.join(c.work, "moved", "ppios")):
        if prefix != c.prefix:
            # The same tree somewhere else: the module file finds its prefix from its own place.
            shutil.copytree(c.prefix, prefix, symlinks=True)
        mf = os.path.join(prefix, "share", "modulefiles")
        before = module_shell(c, mf, "command -v ppios-cc || echo none").stdout.strip()
        check(before == "none" or not before.startswith(prefix), f"ppios-cc on PATH before load: {before}")
        system_page = run(["bash", "-c", "unset MANPATH; man -w ls"], ok=False).stdout.strip()
        out = module_shell(c, mf, "module load ppios; command -v ppios-cc; ppios-cc --version | head -1; "
                                  "man -w ppios-coord; pkg-config --variable=ppios_cc ppios; "
                                  "echo \"$CMAKE_PREFIX_PATH\"; man -w ls || echo no-ls; "
                                  "module list 2>&1; "
                                  "module unload ppios; command -v ppios-cc || echo gone").stdout
        lines = out.splitlines()
        if system_page:
            check(lines[5] == system_page, f"after load, man -w ls finds {lines[5]}, not {system_page}: "
                                           "the module hides the system's man pages")
        check(lines[0] == os.path.join(prefix, "bin", "ppios-cc"), f"after load, ppios-cc is {lines[0]}")
        check(lines[1].startswith(f"ppios-cc (ppios) {c.version}"), f"ppios-cc --version: {lines[1]}")
        check(lines[2] == os.path.join(prefix, "share", "man", "man1", "ppios-coord.1"),
              f"man -w ppios-coord: {lines[2]}")
        check(os.path.realpath(lines[3]) == os.path.join(prefix, "bin", "ppios-cc"),
              f"pkg-config after load: {lines[3]}")
        check(lines[4].split(":")[0] == prefix, f"CMAKE_PREFIX_PATH after load: {lines[4]}")
        check(f"ppios/{c.version}" in out, f"module list does not show ppios/{c.version}:\n{out}")
        check(lines[-1] == "gone", f"after unload, ppios-cc is {lines[-1]}")
        print(f"module load ppios from {mf}: ppios-cc, man pages, pkg-config and CMake all found")
    # Another version beside it (the module file of the moved copy, as 9.9.9): loading it
    # while one is loaded is refused, and the loaded one stays alone on PATH.
    mf = os.path.join(c.work, "moved", "ppios", "share", "modulefiles")
    shutil.copy(os.path.join(mf, "ppios", c.version), os.path.join(mf, "ppios", "9.9.9"))
    r = run(["bash", "-c", "unset MANPATH PKG_CONFIG_PATH CMAKE_PREFIX_PATH; "
             f"source {MODULES_INIT}; module use {mf}; module load ppios/{c.version}; "
             "module load ppios/9.9.9; echo status=$?; module list -t 2>&1"], ok=False)
    loaded = [l for l in r.stdout.splitlines() if l.startswith("ppios/")]
    check("status=0" not in r.stdout and loaded == [f"ppios/{c.version}"],
          f"two ppios versions loaded together:\n{r.stdout}{r.stderr}")
    print(f"a second version is refused while ppios/{c.version} is loaded")


# ---------------------------------------------------------------- Slurm

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what, predicate, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    fail(f"{what} within {seconds} s")


def stop_pidfile(path):
    try:
        with open(path) as f:
            pid = int(f.read().strip())
        os.kill(pid, signal.SIGTERM)
        for _ in range(50):
            os.kill(pid, 0)
            time.sleep(0.1)
    except (OSError, ValueError):
        pass


def test_slurm(c):
    for daemon in ("slurmctld", "slurmd", "sbatch", "redis-server"):
        check(shutil.which(daemon), f"{daemon} missing: scripts/install-deps installs slurmctld, "
                                    "slurmd, slurm-client and redis-server")
    w = c.work
    host = socket.gethostname().split(".")[0]
    conf = os.path.join(w, "slurm.conf")
    for d in ("state", "spool", "job"):
        os.makedirs(os.path.join(w, d))
    # One node, this machine, no munge and no cgroups: enough to run a batch job for real.
    with open(conf, "w") as f:
        f.write(f"""ClusterName=ppiostest
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/none
CredType=cred/none
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
StateSaveLocation={w}/state
SlurmdSpoolDir={w}/spool
SlurmctldPidFile={w}/slurmctld.pid
SlurmdPidFile={w}/slurmd.pid
SlurmctldLogFile={w}/slurmctld.log
SlurmdLogFile={w}/slurmd.log
ReturnToService=2
NodeName={host} NodeAddr=127.0.0.1 CPUs={os.cpu_count()} State=UNKNOWN
PartitionName=test Nodes={host} Default=YES MaxTime=10 State=UP
""")
    env = {"SLURM_CONF": conf}
    # The site's coordinator: a Redis server of this test's own.
    redis_dir = os.path.join(w, "redis")
    os.makedirs(redis_dir)
    sock = os.path.join(redis_dir, "r.sock")
    try:
        run(["redis-server", "--port", "0", "--unixsocket", sock, "--save", "", "--appendonly", "no",
             "--dir", redis_dir, "--daemonize", "yes", "--pidfile", os.path.join(redis_dir, "r.pid")])
        run(["slurmctld", "-f", conf], env=env)
        run(["slurmd", "-f", conf], env=env)
        wait_for("the node idle", lambda: run(["sinfo", "-h", "-o", "%T"], env=env, ok=False)
                 .stdout.strip() == "idle", 30)
        # The user's program: a prefetching build by the installed ppios-cc.
        prog = os.path.join(w, "job", "chunks_ppios")
        run([c.tool("ppios-cc"), "-O2", "-o", prog,
             os.path.join(c.source, "packaging", "tests", "scratch", "chunks.c")])
        plain = os.path.join(w, "job", "chunks_plain")
        run(["mpicc", "-O2", "-o", plain, os.path.join(c.source, "packaging", "tests", "scratch", "chunks.c")])
        data = c.input_file()
        want = run(c.mpirun + ["-np", "2", plain, data], env=MPI_ENV).stdout
        coordinator = f"unix://{sock}"
        target = f"slurmtest{os.getpid()}"
        # The site's copy of the example: its administrator names the site's coordinator
        # on the one line for it, as docs/install.md says.
        with open(os.path.join(c.prefix, "share", "doc", "ppios", "examples", "ppios-job.sbatch")) as f:
            text = f.read()
        text, n = re.subn(r"^site_coordinator=.*$", f"site_coordinator={coordinator}", text, flags=re.M)
        check(n == 1, "the Slurm example has no one line `site_coordinator=...`")
        example = os.path.join(w, "ppios-job.sbatch")
        with open(example, "w") as f:
            f.write(text)
        # The user: the threshold at submit (and a target of this test's own).
        submit_env = dict(MPI_ENV, SLURM_CONF=conf, PATH=f"{c.prefix}/bin:{os.environ['PATH']}",
                          PPIOS_TARGET=target)
        for name in ("PPIOS_COORDINATOR", "PPIOS_THRESHOLD", "PPIOS_STATS"):
            submit_env.pop(name, None)
            os.environ.pop(name, None)
        r = run(["sbatch", "--wait", "--ntasks=2", "--export=ALL,PPIOS_THRESHOLD=3",
                 "-o", os.path.join(w, "job", "out.txt"), "-D", os.path.join(w, "job"),
                 example, prog, data], env=submit_env, timeout=240, ok=False)
        with open(os.path.join(w, "job", "out.txt")) as f:
            out = f.read()
        check(r.returncode == 0, f"sbatch --wait exited {r.returncode}: {r.stderr}\n--- job output\n{out}")
        check(want.strip() in out, f"the job printed\n{out}\nnot the plain program's {want!r}")
        check(f"coordinator: {coordinator}" in out, f"the job did not use the site's coordinator:\n{out}")
        # The job stored its submit-time threshold in the site's coordinator.
        status = json.loads(run([c.tool("ppios-coord"), "--coordinator", coordinator,
                                 "--target", target, "status", "--json"]).stdout)
        check(status.get("threshold") == 3, f"the coordinator holds threshold {status.get('threshold')}, not 3")
        stats = glob.glob(os.path.join(w, "job", "ppios-stats.*.jsonl"))
        check(len(stats) == 1, f"statistics files: {stats}")
        with open(stats[0]) as f:
            lines = [json.loads(l) for l in f if l.strip()]
        check(len(lines) == 2 and sum(l.get("hit_bytes", 0) for l in lines) > 0,
              f"statistics of the job: {lines}")
        print(f"Slurm job: {want.strip()}; threshold 3 in the site's coordinator; "
              f"{sum(l.get('hit_bytes', 0) for l in lines)} bytes from the prefetch cache")
    finally:
        stop_pidfile(os.path.join(w, "slurmd.pid"))
        stop_pidfile(os.path.join(w, "slurmctld.pid"))
        stop_pidfile(os.path.join(redis_dir, "r.pid"))


# ---------------------------------------------------------------- Spack

def cmake_options(source):
    """Every cache option the project's CMake files declare: option(...) and set(... CACHE)."""
    names = set()
    for top, dirs, files in os.walk(source):
        # Not build trees, not .git.
        dirs[:] = [d for d in dirs if not d.startswith(".") and
                   not (top == source and d.startswith("build"))]
        for name in files:
            if name == "CMakeLists.txt" or name.endswith(".cmake"):
                with open(os.path.join(top, name)) as f:
                    text = f.read()
                names |= set(re.findall(r"\boption\((PPIOS_\w+)", text))
                names |= set(re.findall(r"\bset\((PPIOS_\w+)\s[^)]*\bCACHE\b", text))
    return names


# Cache options that only a developer or the test harness sets, never a package build.
NOT_FOR_PACKAGES = {
    "PPIOS_MPIRUN_FLAGS": "flags for the tests' mpirun; the tests are not run by a package build",
    "PPIOS_GIT_ID": "git finds it at build time in a clone, which is what the recipe builds",
    "PPIOS_HAZARDS_RUNS": "how often the hazards tests repeat",
    "PPIOS_FUZZ_SHORT_SEEDS": "the seeds of the short fuzz tests",
}


def test_spack(c):
    path = os.path.join(c.source, "packaging", "spack", "packages", "ppios", "package.py")
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    variants, defines, uses = {}, {}, set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        fn = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        args = [a.value for a in node.args if isinstance(a, ast.Constant)]
        if fn == "variant" and args:
            variants[args[0]] = node.lineno
        elif fn == "define_from_variant" and len(args) == 2:
            defines[args[0]] = args[1]
            uses.add(args[1])
        elif fn == "define" and args:
            defines[args[0]] = None
        for kw in node.keywords:
            if kw.arg == "when" and isinstance(kw.value, ast.Constant):
                uses |= set(re.findall(r"[+~]([a-z_]+)", kw.value.value))
    options = cmake_options(c.source)
    check(len(options) >= 4, f"found only {options} in the CMake files")
    print(f"CMake options: {sorted(options)}; variants: {sorted(variants)}")
    bad = sorted(d for d in defines if d.startswith("PPIOS_") and d not in options)
    check(not bad, f"the recipe defines {bad}, which no CMake file declares")
    undeclared = sorted(v for v in defines.values() if v and v not in variants)
    check(not undeclared, f"define_from_variant names variants the recipe lacks: {undeclared}")
    unused = sorted(v for v in variants if v not in uses)
    check(not unused, f"variants {unused} change nothing (no define_from_variant, no when=)")
    missing = sorted(o for o in options if o not in defines and o not in NOT_FOR_PACKAGES)
    check(not missing, f"CMake options the recipe does not set: {missing}")
    stale = sorted(o for o in NOT_FOR_PACKAGES if o not in options)
    check(not stale, f"NOT_FOR_PACKAGES names options that are gone: {stale}")


# ---------------------------------------------------------------- help texts vs docs

INTERNAL = re.compile(r"\bseed\s*\d|\bissue\s*#?\d|\bsession\b|\bFigs?\.\s*\d|\bTODO\b", re.I)


def md_section(md, heading):
    m = re.search(r"^## " + re.escape(heading) + r"\n(.*?)(?=^## |\Z)", md, re.M | re.S)
    check(m, f"docs/configuration.md has no '## {heading}'")
    return m.group(1)


def test_help(c):
    with open(os.path.join(c.source, "docs", "configuration.md")) as f:
        md = f.read()
    coord = [c.tool("ppios-coord")]
    top = run(coord + ["--help"]).stdout
    commands = [l.split()[0] for l in
                re.search(r"^commands:\n((?:  .*\n)+)", top, re.M).group(1).splitlines()]
    texts = {"ppios-cc --help": run([c.tool("ppios-cc"), "--help"]).stdout,
             "ppios-report --help": run([c.tool("ppios-report"), "--help"]).stdout,
             "ppios-coord --help": top}
    for command in commands:
        texts[f"ppios-coord {command} --help"] = run(coord + [command, "--help"]).stdout
    for name, text in texts.items():
        m = INTERNAL.search(text)
        check(not m, f"{name} cites an internal reference: '{m.group(0) if m else ''}'")
    sections = {
        "ppios-cc": md_section(md, "`ppios-cc` options"),
        "ppios-coord": md_section(md, "`ppios-coord` commands and flags"),
        "ppios-report": md_section(md, "`ppios-report` flags"),
    }
    for tool, section in sections.items():
        in_help = set().union(*(help_flags(t) for n, t in texts.items() if n.startswith(tool + " ")))
        in_doc = help_flags(section)
        check(in_help - in_doc == set(), f"docs/configuration.md's {tool} section lacks "
                                         f"{sorted(in_help - in_doc)} of its --help")
        check(in_doc - in_help == set(), f"docs/configuration.md's {tool} section names "
                                         f"{sorted(in_doc - in_help)}, which its --help does not")
        print(f"{tool}: {len(in_help)} flags, the same in --help and docs/configuration.md")
    table = md_section(md, "Environment variables")
    documented = set(re.findall(r"^\| `(PPIOS_[A-Z0-9_]+)`", table, re.M))
    documented |= set(re.findall(r"(PPIOS_[A-Z0-9_]+)", sections["ppios-cc"]))
    variables = source_variables(c.source)
    check(variables <= documented, f"docs/configuration.md does not document {sorted(variables - documented)}")
    print(f"every variable the sources read is documented: {len(variables)}")


TESTS = {"install": test_install, "version": test_version, "cmake": test_cmake, "mpich": test_mpich,
         "driver": test_driver, "pkgconfig": test_pkgconfig,
         "make": test_make, "man": test_man, "module": test_module, "slurm": test_slurm,
         "spack": test_spack, "help": test_help}


def main():
    c = Ctx(sys.argv[1:])
    try:
        TESTS[c.what](c)
    finally:
        if os.environ.get("PPIOS_KEEP_TEST_DIRS") != "1":
            shutil.rmtree(c.work, ignore_errors=True)
    print(f"package.{c.what}: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
