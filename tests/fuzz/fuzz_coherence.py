#!/usr/bin/python3
"""Differential cache-coherence fuzzer: mpicc build against ppios-cc build, every PPIOS_MODE.

For every seed: gen_coherence.py writes a random, deterministic MPI program that reads
files while other ranks (and itself) change them; it is built with mpicc and with ppios-cc
(same flags). The mpicc build runs --ref-runs times (2: the second must give the same
result, or the generator made a nondeterministic program: a generator bug, reported as
such). The ppios-cc build runs once in each of --modes, each run in a fresh work
directory (inputs written anew) under --timeout, with PPIOS_STATS written outside the
work directory and a PPIOS_TARGET of its own (reset with ppios-coord afterwards). Exit
code, stdout, stderr (mpirun's noise normalized as in tests/hazards/run_hazards.py) and
every file of the work directory must be the reference's byte for byte.

A difference is saved under --out/seed-N/ (program, meta.json, the outputs, a summary, a
repro.sh) and the fuzzer goes on. The summary counts programs, runs, differences by mode,
by change kind (the last change of the bytes whose digest differs) and by read API,
ppios-cc fallbacks (the transformation failed and it compiled the original), reads
ppios-cc left alone, programs whose prefetch threads prefetched nothing, and the fraction
of prefetching runs with hit_bytes > 0.

Exit status: 0 if nothing differed, 1 if some run differed from the reference (or a
ppios-cc build failed), 2 if only the harness or generator failed (a nondeterministic
reference, an mpicc build error).

usage: fuzz_coherence.py --ppios-cc PATH [--seeds A:B] [--jobs N] [--modes off,pp,...]
Python 3 standard library only.
"""
import argparse
import collections
import concurrent.futures
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree (tests/hazards included)
sys.path.insert(0, os.path.join(HERE, "..", "hazards"))
sys.path.insert(0, HERE)
import run_hazards as hz  # noqa: E402  (normalize_stderr, run_program, files_in, ...)
import gen_coherence as gen  # noqa: E402

MODES = ["off", "pp", "intra", "ppios", "ppios-strict"]
FALLBACK_RE = re.compile(r"ppios-cc: warning: .*compiled without prefetching")
MISSED_RE = re.compile(r"remark: read not prefetched: (.*?)(?: \[-R[a-z-]+\])?$", re.M)
OP_RE = re.compile(r"^rank (\d+) op (\d+): ([0-9a-f]+)$", re.M)
SUM_RE = re.compile(r"^rank (\d+): sum ([0-9a-f]+)$", re.M)

print_lock = threading.Lock()


def say(*args):
    with print_lock:
        print(*args, flush=True)


def parse_seeds(text):
    if ":" in text:
        a, b = text.split(":", 1)
        return list(range(int(a), int(b)))
    return [int(x) for x in text.split(",")]


def find_coord(a):
    if a.ppios_coord:
        return a.ppios_coord
    here = os.path.dirname(a.ppios_cc)
    for guess in (os.path.join(here, "ppios-coord"),
                  os.path.join(here, "..", "coordinator", "tools", "ppios-coord", "ppios-coord")):
        if os.access(guess, os.X_OK):
            return os.path.abspath(guess)
    return shutil.which("ppios-coord")


def base_env(top):
    """The hazards suite's conventions: Open MPI as root, oversubscribed, shared memory
    only, no backtraces, C locale, none of the caller's PPIOS_* variables."""
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1", OMPI_MCA_mpi_warn_on_fork="0",
               LC_ALL="C", OMPI_MCA_opal_signal="", OMPI_MCA_odls_base_sigkill_timeout="0")
    for k in [k for k in env if k.startswith("PPIOS_")]:
        del env[k]
    env.setdefault("OMPI_MCA_pml", "ob1")
    env.setdefault("OMPI_MCA_btl", "self,vader")
    env.setdefault("OMPI_MCA_osc", "^ucx")
    os.makedirs(os.path.join(top, "ompi"), exist_ok=True)
    env["OMPI_MCA_orte_tmpdir_base"] = os.path.join(top, "ompi")
    return env


def build(cc, cflags, srcdir, out, env):
    cmd = [cc] + shlex.split(cflags) + ["-o", out, "prog.c"]
    code, o, e = hz.run_cmd(cmd, srcdir, env, timeout=300)
    return code, o + e


def write_inputs(workdir, inputs):
    for name, data in inputs.items():
        with open(os.path.join(workdir, name), "wb") as f:
            f.write(data)


def read_stats(path):
    rows = []
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    try:
                        rows.append(json.loads(line))
                    except ValueError:
                        rows.append({"unparsed": line[:200]})
    except OSError:
        pass
    return rows


class Ctx:
    def __init__(self, a, top, env, coord):
        self.a, self.top, self.env, self.coord = a, top, env, coord
        self.lock = threading.Lock()
        self.counter = 0

    def next_id(self):
        with self.lock:
            self.counter += 1
            return self.counter


def one_run(ctx, sdir, label, binary, env, inputs, np):
    """A run in a fresh work directory; mpirun dying or hanging by itself is retried."""
    a = ctx.a
    ra = types.SimpleNamespace(args=[], ulimit_v=None, singleton=False, mpirun=a.mpirun,
                               np=np, mpirun_flags=a.mpirun_flags, fifo=[], stdin=None,
                               stdin_pipe=None, pass_fd=[], timeout=a.timeout)
    for attempt in range(3):
        workdir = os.path.join(sdir, f"run-{label}-{attempt}")
        if os.path.exists(workdir):
            shutil.rmtree(workdir)
        os.makedirs(workdir)
        write_inputs(workdir, inputs)
        # A session directory of Open MPI's own for each run: two mpiruns starting at once
        # in one tmpdir base race on creating it ("orte_session_dir failed").
        tmpdir = os.path.join(sdir, f"ompi-{label}-{attempt}")
        os.makedirs(tmpdir, exist_ok=True)
        renv = dict(env, OMPI_MCA_orte_tmpdir_base=tmpdir)
        code, out, err, secs = hz.run_program(ra, binary, workdir, renv, label)
        shutil.rmtree(tmpdir, ignore_errors=True)
        launcher_died = isinstance(code, int) and code < 0 and not out and not err.strip()
        launcher_failed = "orte_init failed" in err and not out
        if (not launcher_died and not launcher_failed and code != hz.LAUNCHER_HUNG) \
                or attempt == 2:
            break
        say(f"  ({label}: mpirun failed, died or hung by itself: run again)")
        shutil.rmtree(workdir, ignore_errors=True)
    return dict(code=code, out=out, err=hz.normalize_stderr(err), files=hz.files_in(workdir),
                secs=secs, workdir=workdir)


def op_digests(out):
    return {(int(r), int(o)): d for r, o, d in OP_RE.findall(out)}


def analyse(meta, got, ref):
    """The ops whose digests differ, with the read API and the last change kind."""
    g, r = op_digests(got["out"]), op_digests(ref["out"])
    ops = meta["ops"]
    bad = []
    # Only digests both outputs have: a run that died prints none, which says nothing
    # about which change it got wrong (the exit code and stderr differ then).
    for key in sorted(set(g) & set(r), key=lambda k: (k[1], k[0])):
        if g[key] != r[key]:
            rank, opid = key
            op = ops[opid] if opid < len(ops) else {}
            after = op.get("after") or []
            bad.append(dict(rank=rank, op=opid, kind=op.get("kind", "?"),
                            epoch=op.get("epoch"), what=op.get("what", ""),
                            change=after[0]["kind"] if after else "none",
                            change_epoch=after[0]["epoch"] if after else None,
                            change_rank=after[0]["rank"] if after else None))
    return bad


def stats_summary(rows):
    hit = sum(int(x.get("hit_bytes", 0) or 0) for x in rows)
    pt = sum(int(x.get("pt_read_bytes", 0) or 0) for x in rows)
    stops = sorted({str(x.get("pt_stop")) for x in rows if "pt_stop" in x})
    faults = sum(int(x.get("pt_faults", 0) or 0) for x in rows)
    return dict(hit_bytes=hit, pt_read_bytes=pt, pt_stop=stops, pt_faults=faults,
                processes=len(rows))


def save_case(ctx, seed, src, meta, ref, results, problems, notes, build_log):
    a = ctx.a
    d = os.path.join(a.out, f"seed-{seed}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "prog.c"), "w") as f:
        f.write(src)
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    with open(os.path.join(d, "build.log"), "w") as f:
        f.write(build_log)
    for label, res in [("reference", ref)] + list(results.items()):
        if res is None:
            continue
        with open(os.path.join(d, f"{label}.stdout"), "w") as f:
            f.write(res["out"])
        with open(os.path.join(d, f"{label}.stderr"), "w") as f:
            f.write(res["err"])
        if label != "reference" and "stats" in res:
            with open(os.path.join(d, f"{label}.stats.json"), "w") as f:
                for row in res["stats"]:
                    f.write(json.dumps(row) + "\n")
        # files that differ from the reference's
        if label != "reference" and ref is not None:
            for name, data in res["files"].items():
                if ref["files"].get(name) != data:
                    fd = os.path.join(d, f"{label}.files")
                    os.makedirs(fd, exist_ok=True)
                    with open(os.path.join(fd, name), "wb") as f:
                        f.write(data)
    with open(os.path.join(d, "summary.txt"), "w") as f:
        f.write(f"seed {seed}: {meta['np']} ranks, {len(meta['ops'])} ops\n")
        for p in problems:
            f.write(p + "\n")
        for n in notes:
            f.write(n + "\n")
    here = os.path.abspath(__file__)
    with open(os.path.join(d, "repro.sh"), "w") as f:
        f.write("#!/bin/bash\n# Runs this seed again (all modes, work directory kept).\n")
        f.write(" ".join(shlex.quote(x) for x in [
            sys.executable, here, "--seeds", f"{seed}:{seed + 1}", "--ppios-cc", a.ppios_cc,
            "--mpicc", a.mpicc, "--mpirun", a.mpirun, f"--mpirun-flags={a.mpirun_flags}",
            "--modes", a.modes, "--timeout", str(a.timeout), f"--cflags={a.cflags}",
            "--keep-dir", "--out", os.path.join(d, "again")]) + ' "$@"\n')
    os.chmod(os.path.join(d, "repro.sh"), 0o755)
    return d


def fuzz_one(ctx, seed):
    """Returns a dict with the seed's results."""
    a = ctx.a
    res = dict(seed=seed, runs=0, diffs={}, kinds=collections.Counter(),
               apis=collections.Counter(), fallback=False, missed=collections.Counter(),
               genbug=None, build_error=None, hit_runs=0, pf_runs=0, pt_bytes=0,
               hit_bytes=0, timeouts=0, secs=0.0, saved=None, first=[], faults=0)
    started = time.monotonic()
    src, meta, inputs = gen.generate(seed)
    np = meta["np"]
    sdir = os.path.join(ctx.top, f"seed-{seed}")
    os.makedirs(sdir, exist_ok=True)
    with open(os.path.join(sdir, "prog.c"), "w") as f:
        f.write(src)
    with open(os.path.join(sdir, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    env = ctx.env
    log = []
    code, text = build(a.mpicc, a.cflags, sdir, os.path.join(sdir, "prog-mpicc"), env)
    log.append(f"$ {a.mpicc} {a.cflags} -o prog-mpicc prog.c -> {code}\n{text}")
    if code != 0:
        res["build_error"] = f"mpicc build failed ({code}): {text[:2000]}"
        res["genbug"] = "mpicc build failed"
        res["saved"] = save_case(ctx, seed, src, meta, None, {}, [res["build_error"]], [],
                                 "\n".join(log))
        return finish(ctx, res, sdir, started)
    if a.mode_list:
        code, text = build(a.ppios_cc, a.cflags, sdir, os.path.join(sdir, "prog-ppios"), env)
    else:
        code, text = 0, "(no modes: the ppios-cc build is skipped)"
    log.append(f"$ {a.ppios_cc} {a.cflags} -o prog-ppios prog.c -> {code}\n{text}")
    res["fallback"] = bool(FALLBACK_RE.search(text))
    for reason in MISSED_RE.findall(text):
        res["missed"][re.sub(r"\d+", "N", reason)] += 1
    build_log = "\n".join(log)
    if code != 0:
        res["build_error"] = f"ppios-cc build failed ({code}): {text[:2000]}"
        res["diffs"]["build"] = 1
        res["saved"] = save_case(ctx, seed, src, meta, None, {}, [res["build_error"]], [],
                                 build_log)
        return finish(ctx, res, sdir, started)

    refs = []
    for i in range(a.ref_runs):
        r = one_run(ctx, sdir, f"mpicc{i}", os.path.join(sdir, "prog-mpicc"), env, inputs, np)
        res["runs"] += 1
        if r["code"] == "timeout":
            res["genbug"] = f"the mpicc build timed out after {a.timeout} s"
        elif r["code"] != 0:
            res["genbug"] = f"the mpicc build exited {r['code']}: {r['err'][-500:]}"
        if refs and not res["genbug"]:
            probs = hz.differences(r, refs[0])
            if probs:
                res["genbug"] = "the mpicc build is not deterministic: " + "; ".join(probs)
        refs.append(r)
        if res["genbug"]:
            break
    ref = refs[0]
    if not res["genbug"] and a.jitter_runs:
        # The generator's own check: random sleeps before every op and synchronization
        # (-DFUZZ_JITTER, mpicc) must not change anything either.
        code, text = build(a.mpicc, a.cflags + " -DFUZZ_JITTER", sdir,
                           os.path.join(sdir, "prog-jitter"), env)
        if code != 0:
            res["genbug"] = f"the -DFUZZ_JITTER mpicc build failed: {text[:1000]}"
        for i in range(a.jitter_runs if code == 0 else 0):
            r = one_run(ctx, sdir, f"jitter{i}", os.path.join(sdir, "prog-jitter"), env,
                        inputs, np)
            res["runs"] += 1
            probs = hz.differences(r, ref)
            if probs:
                res["genbug"] = ("the mpicc build is not deterministic under random delays "
                                 "(-DFUZZ_JITTER): " + "; ".join(probs))
                refs.append(r)
                break
    if res["genbug"]:
        say(f"seed {seed}: GENERATOR BUG: {res['genbug'][:300]}")
        res["saved"] = save_case(ctx, seed, src, meta, ref, {f"mpicc{i}": r for i, r in
                                                             enumerate(refs[1:], 1)},
                                 ["GENERATOR BUG: " + res["genbug"]], [], build_log)
        return finish(ctx, res, sdir, started)

    results, problems, notes = {}, [], []
    for mode in a.mode_list:
        run_id = ctx.next_id()
        target = f"fz{os.getpid()}-{seed}-{run_id}"[:64]
        stats_path = os.path.join(sdir, f"stats-{mode}.json")
        renv = dict(env, PPIOS_MODE=mode, PPIOS_TARGET=target, PPIOS_STATS=stats_path)
        r = one_run(ctx, sdir, mode, os.path.join(sdir, "prog-ppios"), renv, inputs, np)
        if ctx.coord:
            hz.run_cmd([ctx.coord, "--target", target, "reset", "--force"], None, renv, 60)
        res["runs"] += 1
        r["stats"] = read_stats(stats_path)
        st = stats_summary(r["stats"])
        r["stat_summary"] = st
        results[mode] = r
        if mode != "off":
            res["pf_runs"] += 1
            res["pt_bytes"] += st["pt_read_bytes"]
            res["hit_bytes"] += st["hit_bytes"]
            if st["hit_bytes"] > 0:
                res["hit_runs"] += 1
        res["faults"] += st["pt_faults"]
        probs = hz.differences(r, ref)
        if r["code"] == "timeout":
            res["timeouts"] += 1
            probs.insert(0, f"HANG: killed after {a.timeout} s")
        if probs:
            res["diffs"][mode] = 1
            bad = analyse(meta, r, ref)
            for b in bad:
                res["kinds"][b["change"]] += 1
                res["apis"][b["kind"]] += 1
            if bad:
                b = bad[0]
                res["first"].append(f"{mode}: op {b['op']} rank {b['rank']} ({b['what']}; "
                                    f"last change {b['change']}@e{b['change_epoch']})")
            problems.append(f"mode {mode}: " + "\n  ".join(probs))
            problems.append(f"  ops whose digests differ ({len(bad)}):")
            for b in bad[:30]:
                problems.append(f"    rank {b['rank']} op {b['op']} [epoch {b['epoch']}] "
                                f"{b['kind']}: {b['what']} (last change of these bytes: "
                                f"{b['change']}@e{b['change_epoch']} by rank {b['change_rank']})")
            problems.append(f"  stats: {st}")
        notes.append(f"mode {mode}: exit {r['code']}, {r['secs']:.2f} s, hit_bytes "
                     f"{st['hit_bytes']}, pt_read_bytes {st['pt_read_bytes']}, pt_stop "
                     f"{','.join(st['pt_stop'])}" + (" DIFFERS" if probs else ""))
    if problems:
        res["saved"] = save_case(ctx, seed, src, meta, ref, results, problems, notes, build_log)
    return finish(ctx, res, sdir, started)


def finish(ctx, res, sdir, started):
    res["secs"] = time.monotonic() - started
    if not ctx.a.keep_dir:
        shutil.rmtree(sdir, ignore_errors=True)
    flags = []
    if res["fallback"]:
        flags.append("FALLBACK")
    if res["genbug"]:
        flags.append("GENBUG")
    if res["build_error"] and not res["genbug"]:
        flags.append("BUILD FAILED")
    if res["diffs"]:
        flags.append("DIFFERS in " + ",".join(sorted(res["diffs"])))
    if res["pf_runs"] and not res["pt_bytes"] and not res["genbug"]:
        flags.append("no prefetch")
    say(f"seed {res['seed']}: {res['runs']} runs, {res['secs']:.1f} s, "
        f"hits in {res['hit_runs']}/{res['pf_runs']} prefetching runs"
        + (", " + "; ".join(flags) if flags else ", ok")
        + (f" -> {res['saved']}" if res["saved"] else ""))
    for line in res["first"]:
        say(f"    first differing digest, {line}")
    return res


def minimize(ctx, seed):
    """Leaves out as many ops as it can (ddmin over the ops; the synchronizations stay, so
    every variant is as deterministic as the program) while some run of --modes still
    differs from the variant's own mpicc reference within --minimize-tries tries."""
    a = ctx.a
    _, meta, inputs = gen.generate(seed)
    ops = [o["id"] for o in meta["ops"]]
    mdir = os.path.join(ctx.top, f"min-{seed}")
    os.makedirs(mdir, exist_ok=True)
    env = ctx.env
    tests = [0]
    last = {}

    def fails(drop):
        tests[0] += 1
        d = os.path.join(mdir, f"t{tests[0]}")
        os.makedirs(d)
        src = gen.generate(seed, drop)[0]
        with open(os.path.join(d, "prog.c"), "w") as f:
            f.write(src)
        for cc, out in ((a.mpicc, "prog-mpicc"), (a.ppios_cc, "prog-ppios")):
            code, text = build(cc, a.cflags, d, os.path.join(d, out), env)
            if code != 0:
                say(f"  minimize: build with {cc} failed: {text[:500]}")
                shutil.rmtree(d, ignore_errors=True)
                return False
        ref = one_run(ctx, d, "mpicc", os.path.join(d, "prog-mpicc"), env, inputs, meta["np"])
        found = False
        for attempt in range(a.minimize_tries):
            for mode in a.mode_list:
                target = f"fzmin{os.getpid()}-{tests[0]}-{attempt}"[:64]
                renv = dict(env, PPIOS_MODE=mode, PPIOS_TARGET=target)
                r = one_run(ctx, d, f"{mode}-{attempt}", os.path.join(d, "prog-ppios"), renv,
                            inputs, meta["np"])
                if ctx.coord:
                    hz.run_cmd([ctx.coord, "--target", target, "reset", "--force"], None,
                               renv, 60)
                probs = hz.differences(r, ref)
                if probs:
                    last.update(src=src, drop=sorted(drop), mode=mode, probs=probs,
                                bad=analyse(meta, r, ref), ref=ref, got=r)
                    found = True
                    break
            if found:
                break
        if not a.keep_dir:
            shutil.rmtree(d, ignore_errors=True)
        return found

    say(f"seed {seed}: minimizing over {len(ops)} ops, modes {a.modes}, "
        f"{a.minimize_tries} tries per variant")
    if not fails(set()):
        say(f"seed {seed}: no difference in {a.minimize_tries} tries: nothing to minimize")
        return None
    keep = list(ops)
    n = 2
    while len(keep) > 1:
        chunk = -(-len(keep) // n)
        removed = False
        for i in range(0, len(keep), chunk):
            cand = keep[:i] + keep[i + chunk:]
            if fails(set(ops) - set(cand)):
                keep = cand
                n = max(n - 1, 2)
                removed = True
                say(f"  {len(keep)} ops left: {keep}")
                break
        if not removed:
            if chunk == 1:
                break
            n = min(len(keep), n * 2)
    # the result, once more, so that `last` is the minimal program's
    drop = set(ops) - set(keep)
    if not fails(drop):
        say(f"seed {seed}: the minimal program did not differ again (timing): "
            f"it is saved anyway")
    d = os.path.join(a.out, f"min-seed-{seed}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "prog.c"), "w") as f:
        f.write(gen.generate(seed, drop)[0])
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    with open(os.path.join(d, "summary.txt"), "w") as f:
        f.write(f"seed {seed}: minimal program keeps ops {keep} "
                f"(gen_coherence.py --seed {seed} --drop {','.join(map(str, sorted(drop)))})\n")
        if last:
            f.write(f"mode {last['mode']}:\n  " + "\n  ".join(last["probs"]) + "\n")
            for b in last["bad"]:
                f.write(f"  rank {b['rank']} op {b['op']} [epoch {b['epoch']}] {b['kind']}: "
                        f"{b['what']} (last change {b['change']}@e{b['change_epoch']})\n")
            for label in ("ref", "got"):
                with open(os.path.join(d, f"{label}.stdout"), "w") as g:
                    g.write(last[label]["out"])
    say(f"seed {seed}: minimal program: {len(keep)} of {len(ops)} ops ({tests[0]} variants "
        f"tried) -> {d}")
    return keep


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ppios-cc", required=True)
    ap.add_argument("--ppios-coord", help="default: next to ppios-cc, in its build tree, or PATH")
    ap.add_argument("--mpicc", default="mpicc")
    ap.add_argument("--mpirun", default="mpirun")
    ap.add_argument("--mpirun-flags", default="--oversubscribe --bind-to none")
    ap.add_argument("--cflags", default="-O2", help="flags of both builds")
    ap.add_argument("--seeds", default="1:11", help="A:B (A <= seed < B) or N,M,...")
    ap.add_argument("--jobs", type=int, default=1, help="seeds fuzzed at once")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per run")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--ref-runs", type=int, default=2, help="runs of the mpicc build")
    ap.add_argument("--jitter-runs", type=int, default=1,
                    help="runs of an mpicc build with random sleeps before every op and "
                    "synchronization (-DFUZZ_JITTER), which must match the reference too")
    ap.add_argument("--out", default="fuzz-coherence-out",
                    help="where differing programs are saved")
    ap.add_argument("--keep-dir", action="store_true",
                    help="keep every seed's build and run directories (printed at the end)")
    ap.add_argument("--minimize", action="store_true",
                    help="for each seed: leave out ops while a run of --modes still differs "
                    "and save the smallest program as OUT/min-seed-N/")
    ap.add_argument("--minimize-tries", type=int, default=3,
                    help="runs of each mode per variant before it counts as not differing")
    ap.add_argument("--max-diff-programs", type=int, default=0,
                    help="stop after this many programs differed (0: never)")
    a = ap.parse_args()
    a.ppios_cc = os.path.abspath(a.ppios_cc)
    if os.path.sep in a.mpicc or a.mpicc != "mpicc":
        a.mpicc = shutil.which(a.mpicc) or a.mpicc
    a.out = os.path.abspath(a.out)
    a.mode_list = [m for m in a.modes.split(",") if m]
    for m in a.mode_list:
        if m not in MODES:
            ap.error(f"unknown mode {m!r} (modes: {','.join(MODES)})")
    seeds = parse_seeds(a.seeds)
    coord = find_coord(a)
    top = tempfile.mkdtemp(prefix="ppios-fuzz-")
    env = base_env(top)
    ctx = Ctx(a, top, env, coord)
    started = time.monotonic()
    say(f"fuzz.coherence: {len(seeds)} seeds ({a.seeds}), modes {a.modes}, jobs {a.jobs}, "
        f"ppios-cc {a.ppios_cc}, ppios-coord {coord or '(none)'}, work dir {top}")
    if a.minimize:
        try:
            for seed in seeds:
                minimize(ctx, seed)
        finally:
            if not a.keep_dir:
                shutil.rmtree(top, ignore_errors=True)
        return 0
    results = []
    stop = threading.Event()

    def task(seed):
        if stop.is_set():
            return None
        r = fuzz_one(ctx, seed)
        if a.max_diff_programs and sum(1 for x in results if x and x["diffs"]) + \
                (1 if r["diffs"] else 0) >= a.max_diff_programs:
            stop.set()
        return r

    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as ex:
            for r in ex.map(task, seeds):
                if r is not None:
                    results.append(r)
    except KeyboardInterrupt:
        say("interrupted")
    elapsed = time.monotonic() - started

    # ------------------------------------------------------------------ summary
    tried = len(results)
    runs = sum(r["runs"] for r in results)
    by_mode = collections.Counter()
    kinds, apis, missed = collections.Counter(), collections.Counter(), collections.Counter()
    for r in results:
        for m in r["diffs"]:
            by_mode[m] += 1
        kinds.update(r["kinds"])
        apis.update(r["apis"])
        missed.update(r["missed"])
    differing = [r for r in results if r["diffs"]]
    genbugs = [r for r in results if r["genbug"]]
    fallbacks = [r for r in results if r["fallback"]]
    pf_runs = sum(r["pf_runs"] for r in results)
    hit_runs = sum(r["hit_runs"] for r in results)
    noprefetch = [r for r in results if r["pf_runs"] and not r["pt_bytes"] and not r["genbug"]]
    say("")
    say(f"summary: {tried} programs tried, {runs} runs, {elapsed:.0f} s")
    say(f"  programs differing from the mpicc build: {len(differing)}"
        + (" (seeds " + ",".join(str(r["seed"]) for r in differing[:40]) + ")" if differing else ""))
    say("  differences by mode (programs): " +
        (", ".join(f"{m} {by_mode[m]}" for m in a.mode_list + ["build"] if by_mode[m])
         or "none"))
    say("  differing op digests by last change kind: " +
        (", ".join(f"{k} {n}" for k, n in kinds.most_common()) or "none"))
    say("  differing op digests by read API: " +
        (", ".join(f"{k} {n}" for k, n in apis.most_common()) or "none"))
    say(f"  generator bugs (mpicc build not deterministic or failing): {len(genbugs)}"
        + (" (seeds " + ",".join(str(r["seed"]) for r in genbugs) + ")" if genbugs else ""))
    say(f"  ppios-cc fallbacks (compiled without prefetching): {len(fallbacks)}"
        + (" (seeds " + ",".join(str(r["seed"]) for r in fallbacks) + ")" if fallbacks else ""))
    say(f"  reads ppios-cc left alone: {sum(missed.values())}")
    for reason, n in missed.most_common(8):
        say(f"    {n} x {reason}")
    say(f"  programs whose prefetch threads prefetched nothing: {len(noprefetch)}"
        + (" (seeds " + ",".join(str(r["seed"]) for r in noprefetch[:40]) + ")" if noprefetch else ""))
    frac = hit_runs / pf_runs if pf_runs else 0.0
    say(f"  prefetching runs with hit_bytes > 0: {hit_runs}/{pf_runs} ({100 * frac:.0f}%)")
    say(f"  hangs: {sum(r['timeouts'] for r in results)}, PT faults: "
        f"{sum(r['faults'] for r in results)}")
    if differing or genbugs:
        say(f"  saved under {a.out}")
    if a.keep_dir:
        say(f"  work directories kept under {top}")
    else:
        shutil.rmtree(top, ignore_errors=True)
    ok = not differing and not genbugs
    # the plain closing line that test runners read
    say(f"fuzz.coherence: {tried - len(differing) - len(genbugs)} passed, "
        f"{len(differing) + len(genbugs)} failed")
    if differing:
        return 1
    return 0 if ok else 2


if __name__ == "__main__":
    sys.exit(main())
