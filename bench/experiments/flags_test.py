#!/usr/bin/env python3
"""ctest bench.flags: every documented flag of bench/run that changes which
experiments or modes run, at the smoke profile's sizes, end to end on the
emulator. For each combination it checks that bench/run exits 0 and writes a
report, that runs.jsonl has exactly the expected (experiment, kernel, mode, P)
rows (written out by hand below, not derived from bench/run's own logic), that
every run printed the normal build's result, that results.csv has the
documented columns with the efficiency filled in, and that summary.md has its
sections. Bad values must exit 2 with a message. Numbers are not judged.

Exit 77 (SKIP) when FUSE is unavailable, as bench/run reports it.

usage: flags_test.py BUILD_DIR"""
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RUN = os.path.join(os.path.dirname(HERE), "run")
COLUMNS = ("experiment,kernel,mode,nprocs,rep,wall_s,io_latency_s,threshold,device,"
           "bytes_mib,bound_s,efficiency").split(",")
PREFETCH = {"pp", "intra", "ppios"}
E2 = ["SUM", "AVG", "DSCAL", "GREP"]
E3 = ["SUM", "AVG-neighbour"]


def rows(exp, kernels, modes, nprocs):
    return {(exp, k, m, p) for k in kernels for m in modes for p in nprocs}


# (flags, expected rows {(exp, kernel, mode or ppios@T, P)}, checks)
# The smoke profile: E1 = SUM at P 1,2; E2 P = 4 (one rank per job); E3 P = 2.
COMBOS = [
    # E2 without the optimal mode: no optimal mount, and the run must not need one
    (["--experiments", "e2", "--modes", "normal,ppios"],
     rows("E2", E2, ["normal", "ppios"], [4]), {}),
    # modes given out of order still run normal first; --kernels picks E1's kernels
    (["--experiments", "e1", "--modes", "ppios,normal", "--kernels", "sum,grep",
      "--nprocs", "1"],
     rows("E1", ["SUM", "GREP"], ["normal", "ppios"], [1]), {}),
    # E3 alone, every default mode, the neighbour's rows carry the job's mode
    (["--experiments", "e3", "--e3-nprocs", "1"],
     rows("E3", E3, ["normal", "pp", "ppios", "optimal"], [1]), {"sections": ["## E3"]}),
    # every experiment, no prefetching mode (no ppios-cc build at all)
    (["--experiments", "e1,e2,e3", "--modes", "normal,optimal", "--nprocs", "1",
      "--e3-nprocs", "1"],
     rows("E1", ["SUM"], ["normal", "optimal"], [1]) | rows("E2", E2, ["normal", "optimal"], [4])
     | rows("E3", E3, ["normal", "optimal"], [1]), {"sections": ["## E3"]}),
    # normal alone: the targets are not measured, the report still works
    (["--modes", "normal", "--nprocs", "1"], rows("E1", ["SUM"], ["normal"], [1]),
     {"summary_has": ["NOT MEASURED"]}),
    # intra is optional
    (["--modes", "normal,pp,intra", "--nprocs", "1"],
     rows("E1", ["SUM"], ["normal", "pp", "intra"], [1]), {}),
    # the plain file system: no emulator, so no optimal mode
    (["--no-fuse", "--nprocs", "1", "--experiments", "e1,e3", "--e3-nprocs", "1"],
     rows("E1", ["SUM"], ["normal", "pp", "ppios"], [1])
     | rows("E3", E3, ["normal", "pp", "ppios"], [1]),
     {"device": "plainfs", "efficiency_optional": True, "sections": ["## E3"]}),
    # several thresholds: the first is ppios, the others ppios@T
    (["--thresholds", "1,2", "--modes", "normal,ppios", "--nprocs", "1",
      "--experiments", "e1,e3", "--e3-nprocs", "1"],
     rows("E1", ["SUM"], ["normal", "ppios", "ppios@2"], [1])
     | rows("E3", E3, ["normal", "ppios", "ppios@2"], [1]), {"thresholds": ["1", "2"]}),
    # a fixed cap that MTs pass (PPIOS_MT_THROTTLE=0) is a variant of its own
    (["--thresholds", "2,opt-passing", "--modes", "normal,ppios", "--nprocs", "1"],
     rows("E1", ["SUM"], ["normal", "ppios", "ppios@opt-passing"], [1]),
     {"thresholds": ["2", "opt-passing"]}),
    # --threshold N is --thresholds N
    (["--threshold", "3", "--modes", "normal,ppios", "--nprocs", "1"],
     rows("E1", ["SUM"], ["normal", "ppios"], [1]), {"thresholds": ["3"]}),
    # E2 on a device of its own (the default of full and quick): its ppios runs take that
    # device's optimum as PPIOS_THRESHOLD, E1's keep E1's
    (["--experiments", "e1,e2", "--e2-optimal-streams", "4", "--modes", "normal,ppios",
      "--nprocs", "1"],
     rows("E1", ["SUM"], ["normal", "ppios"], [1]) | rows("E2", E2, ["normal", "ppios"], [4]),
     {"thresholds_by_exp": {"E1": ["2"], "E2": ["4"]},
      "device_by_exp": {"E1": "/opt=2/", "E2": "/opt=4/"},
      "summary_has": ["E2's modeled device"]}),
    # a ppios-cc that fails: pp/ppios cannot run, said so, the rest runs
    (["--ppios-cc", "/bin/false", "--modes", "normal,ppios", "--nprocs", "1"],
     rows("E1", ["SUM"], ["normal"], [1]), {"summary_has": ["## Modes that could not run"],
                                            "no_prefetch_build": True}),
]

BAD = [
    (["--experiments", "e4"], "--experiments"),
    (["--modes", "ppios"], "must include normal"),
    (["--thresholds", "0"], "--thresholds"),
    (["--thresholds", "two"], "--thresholds"),
    (["--thresholds", "auto-cold-passing"], "-passing follows opt or an integer"),
    (["--threshold", "2", "--thresholds", "3"], "not allowed with"),
    (["--e3-nprocs", "0"], "--e3-nprocs"),
    (["--e2-optimal-streams", "65"], "--e2-optimal-streams"),
]


class Failure(Exception):
    pass


def check(out, expected, options, prefetch_built):
    if not prefetch_built:
        expected = {r for r in expected if r[2].split("@")[0] not in PREFETCH}
    with open(os.path.join(out, "runs.jsonl")) as f:
        runs = [json.loads(line) for line in f if line.strip()]
    got = {(r["experiment"], r["kernel"], r.get("variant", r["mode"]), int(r["nprocs"]))
           for r in runs}
    if got != expected:
        raise Failure(f"rows {sorted(got)}\n      expected {sorted(expected)}")
    for r in runs:
        # ppios@T is mode ppios with threshold T; every other row's mode is its variant
        mode, _, threshold = r.get("variant", r["mode"]).partition("@")
        if r["mode"] != mode or (threshold and r["threshold"] != threshold):
            raise Failure(f"{r['experiment']} {r['kernel']}: mode {r['mode']!r} threshold "
                          f"{r['threshold']!r} for the variant {r.get('variant')!r}")
    if len(runs) != len(got):
        raise Failure(f"{len(runs)} runs for {len(got)} rows (one repetition expected)")
    for r in runs:
        # DSCAL's writes to its one output file run at one stream (harness): on a modeled
        # device their bound is written / B(1), and the row's bound is at least that
        model = re.match(r"simfs/peak=([\d.]+)MiBps/opt=(\d+)/", r["device"])
        writes = r["kernel"] == "DSCAL" and model is not None
        if writes != bool(r.get("one_file_write_s")) or \
                (r["kernel"] == "DSCAL") != (r.get("written_mib", 0) > 0):
            raise Failure(f"{r['experiment']} {r['kernel']} {r['mode']} on {r['device']}: "
                          f"written_mib {r.get('written_mib')}, one_file_write_s "
                          f"{r.get('one_file_write_s')}")
        if writes:
            want = r["written_mib"] / (float(model.group(1)) / int(model.group(2)))
            if abs(r["one_file_write_s"] - want) > 1e-6 * want:
                raise Failure(f"one_file_write_s {r['one_file_write_s']}, expected {want}")
            if r["mode"] != "optimal" and (r.get("bound_s") or 0) < want * (1 - 1e-6):
                raise Failure(f"{r['kernel']} {r['mode']}: bound_s {r.get('bound_s')} below its "
                              f"writes at one stream {want:.3f} s")
    results = {}
    for r in runs:
        # E3's neighbour is AVG on an input of its own: group by kernel and input size
        results.setdefault((r["kernel"], r["experiment"]), set()).add(r["result"])
    for (kernel, exp), lines in results.items():
        if len(lines) != 1:
            raise Failure(f"{exp} {kernel}: runs printed different results {lines}")
    with open(os.path.join(out, "results.csv"), newline="") as f:
        table = list(csv.reader(f))
    if table[0] != COLUMNS:
        raise Failure(f"results.csv header {table[0]}, expected {COLUMNS}")
    for line in table[1:]:
        row = dict(zip(COLUMNS, line))
        if not row["device"].startswith(options.get("device", "simfs/")):
            raise Failure(f"device column {row['device']!r}")
        if float(row["bytes_mib"]) <= 0:
            raise Failure(f"bytes_mib of {line}")
        if row["efficiency"] == "" and not options.get("efficiency_optional"):
            raise Failure(f"no efficiency in {line}")
        if row["efficiency"] and not 0 < float(row["efficiency"]) < 100:
            raise Failure(f"efficiency out of range in {line}")
        device_part = options.get("device_by_exp", {}).get(row["experiment"])
        if device_part and device_part not in row["device"]:
            raise Failure(f"{row['experiment']} ran on {row['device']!r}, expected "
                          f"{device_part!r} in it")
        if row["mode"] == "ppios":
            wanted = options.get("thresholds_by_exp", {}).get(
                row["experiment"], options.get("thresholds", ["2"]))
            if row["threshold"] not in wanted:
                raise Failure(f"ppios row with threshold {row['threshold']!r}, "
                              f"expected one of {wanted}")
        elif row["threshold"]:
            raise Failure(f"a {row['mode']} row with a threshold: {line}")
    with open(os.path.join(out, "summary.md")) as f:
        summary = f.read()
    for text in (["## Targets: physical bounds", "## Targets: the paper's claims", "## Efficiency"]
                 + options.get("sections", []) + options.get("summary_has", [])):
        if text not in summary:
            raise Failure(f"summary.md has no {text!r}")


def check_auto(base, tmp):
    """--thresholds 2,auto,auto-cold,auto-throttled at P = 1, 2: PPIOS_THRESHOLD=auto is
    the coordinator's to accept. A runtime that accepts it gives a row per variant, and
    the P = 2 auto run starts from the cap the P = 1 auto run learned (auto-cold and
    auto-throttled start from 1); one that does not must stop
    bench/run before any run with exit 2 and the runtime's own message."""
    variants = ["2", "auto", "auto-cold", "auto-throttled"]
    flags = ["--thresholds", ",".join(variants), "--modes", "normal,ppios", "--nprocs", "1,2"]
    out = os.path.join(tmp, "auto")
    r = subprocess.run(base + ["--out", out] + flags, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=400)
    text = r.stdout.decode(errors="replace")
    if r.returncode == 77:
        return []  # no FUSE: main() has reported the SKIP already
    if r.returncode == 2 and "does not accept PPIOS_THRESHOLD=auto" in text:
        print(f"bench.flags: ok {' '.join(flags)} (this runtime rejects auto: exit 2)")
        return []
    if r.returncode != 0:
        return [f"{' '.join(flags)}: exit {r.returncode}, expected 0, or 2 with the runtime's "
                f"message:\n{text[-3000:]}"]
    try:
        check(out, rows("E1", ["SUM"], ["normal", "ppios"] + [f"ppios@{v}" for v in variants[1:]],
                        [1, 2]), {"thresholds": variants}, True)
        with open(os.path.join(out, "runs.jsonl")) as f:
            runs = {(r["variant"], int(r["nprocs"])): r for r in map(json.loads, f) if r.get("variant")}
        for key, run in runs.items():
            if key[0].startswith("ppios@auto") and not (isinstance(run.get("auto_end_cap"), int)
                                                        and run["auto_end_cap"] >= 1):
                raise Failure(f"{key}: no learned cap recorded: {run.get('auto_end_cap')!r}")
        starts = {key: runs[key].get("auto_start_cap") for key in runs if key[0].startswith("ppios@auto")}
        wanted = {("ppios@auto-cold", 1): 1, ("ppios@auto-cold", 2): 1, ("ppios@auto", 1): 1,
                  ("ppios@auto", 2): runs[("ppios@auto", 1)]["auto_end_cap"],
                  ("ppios@auto-throttled", 1): 1, ("ppios@auto-throttled", 2): 1}
        if starts != wanted:
            raise Failure(f"auto start caps {starts}, expected {wanted}")
    except Failure as e:
        return [f"{' '.join(flags)}: {e}"]
    print(f"bench.flags: ok {' '.join(flags)} (every auto variant ran; auto carried the "
          f"cap {wanted[('ppios@auto', 2)]} from P=1 to P=2)")
    return []


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    build = os.path.abspath(sys.argv[1])
    ppios_cc = os.path.join(build, "bin", "ppios-cc")
    tmp = tempfile.mkdtemp(prefix="ppios-bench-flags-")
    failures = []
    try:
        base = [RUN, "--smoke", "--build", build, "--cache", os.path.join(tmp, "inputs"),
                "--no-plots"]
        for flags, expected_message in BAD:
            r = subprocess.run(base + ["--out", os.path.join(tmp, "bad")] + flags,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
            text = r.stdout.decode(errors="replace")
            if r.returncode != 2 or expected_message not in text:
                failures.append(f"{' '.join(flags)}: exit {r.returncode}, expected 2 and "
                                f"{expected_message!r} in:\n{text}")
        for i, (flags, expected, options) in enumerate(COMBOS):
            out = os.path.join(tmp, f"out{i}")
            t0 = time.monotonic()
            r = subprocess.run(base + ["--out", out] + flags, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=240)
            text = r.stdout.decode(errors="replace")
            if r.returncode == 77:
                print("bench.flags: FUSE is unavailable here: SKIP")
                return 77
            label = " ".join(flags)
            if r.returncode != 0:
                failures.append(f"{label}: exit {r.returncode}\n{text[-3000:]}")
                continue
            built = (os.access(ppios_cc, os.X_OK) and not options.get("no_prefetch_build"))
            try:
                check(out, expected, options, built)
            except Failure as e:
                failures.append(f"{label}: {e}")
                continue
            print(f"bench.flags: ok ({time.monotonic() - t0:4.1f} s) {label}", flush=True)
        failures += check_auto(base, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for f in failures:
        print(f"bench.flags: FAIL: {f}", flush=True)
    if failures:
        return 1
    print(f"bench.flags: OK: {len(COMBOS) + 1} flag combinations, {len(BAD)} bad values")
    return 0


if __name__ == "__main__":
    sys.exit(main())
