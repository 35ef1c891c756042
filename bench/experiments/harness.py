"""E1 and E2 of section 5 of the PPIOS paper (Zhao, Yoshigoe and Xie, 2013), and
E3, run on the emulator.

E1 (Figs. 10-11): one kernel at a time, P ranks, every mode in turn.
E2 (Figs. 13-14): SUM, AVG, DSCAL and GREP as four concurrent mpirun jobs on
separate inputs, total P ranks (P/4 each), one emulated device, one Redis
coordinator, one PPIOS cap.
E3 (interference, as in the I/O stream throttling study (Seelam, Kerstens and
Teller) and the InterferenceRemoval paper (Zhang and Jiang)): a prefetching job
(SUM, P ranks, in each mode) beside an I/O-heavy neighbour that never
prefetches (the mpicc build of AVG at compute factor 1, one rank, an input of
its own) on one emulated device. The neighbour goes through no ppios runtime,
so no coordinator sees its reads: what E3 measures is what the prefetching
job's extra streams cost a job that is not part of the scheme.

Modes: normal = the mpicc build on the modeled device; pp / intra / ppios =
the ppios-cc build with PPIOS_MODE set; optimal = the mpicc build on a
--no-model mount of the same files (the PPIOS paper's "theoretically
optimal": the same work with free I/O; in E3 both jobs run there). ppios runs
once per threshold of --thresholds: the first is the mode "ppios", the others
are the variants "ppios@T" (the CSV keeps mode=ppios and the threshold column).
Within a repetition the modes take turns, normal first, so slow phases of a
shared machine hit every mode alike.

Every run's result line must equal the normal build's for the same input:
a mismatch aborts the whole harness (a fast wrong answer is not a result)."""
import contextlib
import csv
import json
import os
import shutil
import subprocess
import threading
import time

from . import inputs, jobs, profiles, simfs
from .builds import KERNELS, PREFETCH_MODES
from .profiles import E3_NEIGHBOUR, E3_NEIGHBOUR_FACTOR, E3_NEIGHBOUR_NPROCS

CSV_COLUMNS = ["experiment", "kernel", "mode", "nprocs", "rep", "wall_s", "io_latency_s",
               "threshold", "device", "bytes_mib", "bound_s", "efficiency"]
# bound_s and efficiency need every mode of a row (the optimal run gives the compute
# time), so they are empty while the harness runs and filled in by report.add_efficiency
# when it is done (bench/run rewrites results.csv and runs.jsonl then).


def best_cap(curve):
    """The settled optimum of a learned curve {k: MiB/s}, by the controller's own rule
    (ThroughputClimber::best_cap): k ascending, a larger cap must beat the best so far
    by the climber's margin, min(gain 0.06, 0.5 / k), so a noisy probe above the knee is
    not taken for it. 0 for an empty curve."""
    best, best_mibps = 0, 0.0
    for k in sorted(curve):
        mibps = curve[k]
        if mibps > 0 and (best == 0 or mibps > best_mibps * (1 + min(0.06, 0.5 / best))):
            best, best_mibps = k, mibps
    return best


class ResultMismatch(Exception):
    pass


class AutoTimeline:
    """Polls `ppios-coord status --json` of an `auto` run's target every `period_s`
    while its jobs run and writes what the controller did, one JSON line per poll, to
    `path` (auto-timeline.jsonl in the run's raw directory): seconds since the start,
    the cap, whether MTs wait at it, MTs and PTs in flight and queued, the curve's best
    cap. The evidence behind an `auto` row that misses a target: when the cap moved,
    and whether MTs waited at it."""

    FIELDS = ("threshold", "mt_hold", "mt_inflight", "pt_inflight", "queued_mt", "queued_pt")

    def __init__(self, argv, path, period_s=0.2):
        self.argv, self.path, self.period_s = argv, path, period_s
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()

    def _run(self):
        start = time.monotonic()
        with open(self.path, "w") as out:
            while not self.stop.wait(self.period_s):
                try:
                    r = subprocess.run(self.argv, stdout=subprocess.PIPE,
                                       stderr=subprocess.DEVNULL, timeout=5)
                    status = json.loads(r.stdout) if r.returncode == 0 else None
                except (subprocess.TimeoutExpired, ValueError):
                    status = None
                if not isinstance(status, dict):
                    continue
                line = {"t": round(time.monotonic() - start, 2)}
                line.update({f: status.get(f) for f in self.FIELDS})
                curve = {p["k"]: p["mibps"] for p in status.get("curve") or []
                         if isinstance(p, dict) and "k" in p and "mibps" in p}
                line["best_cap"] = best_cap(curve) if curve else None
                line["curve"] = {k: round(v, 1) for k, v in sorted(curve.items())}
                out.write(json.dumps(line) + "\n")
                out.flush()


class PlainDir:
    """Stands in for a mount when FUSE is unavailable (demo only): the backing
    directory itself, no model, no stats."""

    def __init__(self, path):
        self.path = path

    def reset_stats(self):
        pass

    def stats(self):
        return None


class Harness:
    def __init__(self, profile, bins, out_dir, work_dir, cache_dir, resources, model,
                 thresholds, use_fuse, log):
        self.p, self.bins, self.out = profile, bins, out_dir
        self.work, self.cache, self.resources = work_dir, cache_dir, resources
        # PPIOS_THRESHOLD values of the ppios runs, as strings ("2", "auto"); the first
        # is the mode "ppios" that the targets judge
        self.model, self.thresholds, self.use_fuse = model, thresholds, use_fuse
        self.log = log
        self.raw = os.path.join(out_dir, "raw")
        self.references = {}        # (kernel, input file) -> normal build's result line
        self.skipped = []           # (experiment, kernel, mode, why)
        self.done = 0
        self.total = 0
        self.started = time.monotonic()
        self.redis = None
        self.target_seq = 0
        # experiment -> (the cap, the curve) the last `auto` run of it learned: the next
        # one starts there, as a real target keeps what it learned between jobs
        # (docs/design/auto-threshold.md); `auto-cold` runs start from 1 every time
        self.learned_caps = {}
        self.calibration = None     # (exit code, text)
        # Set by mount_devices; None until then and when no optimal mount is needed
        # (the report reads them whatever ran).
        self.device = None
        self.model_dev = None
        self.e2_dev = None          # E2's own modeled device (profiles.e2_model), if any
        self.e2_device = None
        self.optimal_dev = None
        self.optimal_device = None
        os.makedirs(self.raw, exist_ok=True)
        self.csv_file = open(os.path.join(out_dir, "results.csv"), "w", newline="")
        self.csv = csv.writer(self.csv_file)
        self.csv.writerow(CSV_COLUMNS)
        self.runs_file = open(os.path.join(out_dir, "runs.jsonl"), "w")
        resources.add("result files", self._close_files)

    def _close_files(self):
        self.csv_file.close()
        self.runs_file.close()

    # ------------------------------------------------------------------ setup
    def mount_devices(self):
        """The modeled device and the no-model reference, both mirroring the
        input cache. One model instance serves every job of the experiment."""
        os.makedirs(self.cache, exist_ok=True)
        # DSCAL's outputs go to the device too (the PPIOS paper writes them to Lustre),
        # in a scratch folder of the backing directory that is removed at the end.
        self.scratch = f"scratch-{os.getpid()}"
        os.makedirs(os.path.join(self.cache, self.scratch), exist_ok=True)
        self.resources.add("scratch outputs", lambda: shutil.rmtree(
            os.path.join(self.cache, self.scratch), ignore_errors=True))
        if not self.use_fuse:
            self.model_dev = self.optimal_dev = self.e2_dev = PlainDir(self.cache)
            self.device = self.e2_device = "plainfs"
            self.optimal_device = None
            return
        self.model_dev = simfs.Mount(self.bins.simfs, self.cache,
                                     os.path.join(self.work, "mnt-model"), self.model,
                                     os.path.join(self.work, "simfs-model.log"),
                                     self.resources).start()
        self.device = simfs.describe(self.model)
        shutil.copyfile(os.path.join(self.model_dev.path, ".simfs-model.json"),
                    os.path.join(self.out, ".simfs-model.json"))
        self.e2_dev, self.e2_device = self.model_dev, self.device
        e2 = self.model_for("E2")
        if "e2" in self.p.experiments and e2 != self.model:
            self.e2_dev = simfs.Mount(self.bins.simfs, self.cache,
                                      os.path.join(self.work, "mnt-model-e2"), e2,
                                      os.path.join(self.work, "simfs-model-e2.log"),
                                      self.resources).start()
            self.e2_device = simfs.describe(e2)
            shutil.copyfile(os.path.join(self.e2_dev.path, ".simfs-model.json"),
                            os.path.join(self.out, ".simfs-model-e2.json"))
        if "optimal" in self.p.modes:
            self.optimal_dev = simfs.Mount(self.bins.simfs, self.cache,
                                           os.path.join(self.work, "mnt-optimal"), None,
                                           os.path.join(self.work, "simfs-optimal.log"),
                                           self.resources).start()
            self.optimal_device = simfs.describe(None)
            shutil.copyfile(os.path.join(self.optimal_dev.path, ".simfs-model.json"),
                        os.path.join(self.out, ".simfs-model-optimal.json"))

    def model_for(self, experiment):
        """The device model an experiment's modeled runs use (None: no model)."""
        if experiment == "E2":
            return profiles.e2_model(self.model, self.p)
        return self.model

    def threshold_for(self, threshold, experiment):
        """PPIOS_THRESHOLD of a ppios run: "opt" (the default) is the optimal streams of
        the experiment's device; integers and auto apply as given."""
        if threshold == "opt":
            model = self.model_for(experiment)
            return str(model["optimal_streams"]) if model else "1"
        return threshold

    def run_calibration(self):
        if not (self.use_fuse and self.p.calibrate):
            return
        self.log("calibrating the device model (ppios-simfs-calibrate, about 15 s)")
        self.calibration = simfs.calibrate(self.bins.calibrate, self.model_dev,
                                           os.path.join(self.out, "calibration.csv"),
                                           self.resources)
        with open(os.path.join(self.out, "calibration.txt"), "w") as f:
            f.write(self.calibration[1])
        table = [l for l in self.calibration[1].splitlines()
                 if l and not l.startswith(("calib,", "#"))]
        for line in table:
            self.log("  " + line)
        if self.calibration[0] != 0:
            self.log("WARNING: the calibration is outside the 10% tolerance at some point "
                     "(a loaded machine?); see calibration.txt")

    def make_inputs(self):
        """E1: one input per kernel size; E2: a separate input per kernel."""
        self.e1_input = self.e2_inputs = self.e3_inputs = None
        if "e1" in self.p.experiments:
            name, made = inputs.ensure(self.bins.gen_input, self.cache, self.p.e1_input_mib, 1)
            self.log(f"input {name}: {'generated' if made else 'cached'}")
            self.e1_input = name
        if "e2" in self.p.experiments:
            self.e2_inputs = {}
            for i, k in enumerate(self.p.e2_kernels):
                name, made = inputs.ensure(self.bins.gen_input, self.cache,
                                           self.p.e2_input_mib, 101 + i)
                self.log(f"input {name} ({k.upper()} in E2): "
                         f"{'generated' if made else 'cached'}")
                self.e2_inputs[k] = name
        if "e3" in self.p.experiments:
            self.e3_inputs = {}
            for role, kernel, seed in (("job", self.p.e3_kernel, 201),
                                       ("neighbour", E3_NEIGHBOUR, 202)):
                name, made = inputs.ensure(self.bins.gen_input, self.cache,
                                           self.p.e3_input_mib, seed)
                self.log(f"input {name} (E3 {role}, {kernel.upper()}): "
                         f"{'generated' if made else 'cached'}")
                self.e3_inputs[role] = name

    def plan(self):
        """Counts the runs and records which (kernel, mode) cannot run."""
        total = 0
        if "e1" in self.p.experiments:
            for k in self.p.e1_kernels:
                for m in self.p.modes:
                    if self.runnable("E1", k, m):
                        total += (len(self.variants([m])) * len(self.p.e1_nprocs)
                                  * self.p.reps)
        if "e2" in self.p.experiments:
            # a list, not a generator: every kernel that cannot run gets noted
            ok = [m for m in self.p.modes
                  if all([self.runnable("E2", k, m) for k in self.p.e2_kernels])]
            total += len(self.variants(ok)) * len(self.p.e2_nprocs) * self.p.reps
        if "e3" in self.p.experiments:
            ok = [m for m in self.p.modes if self.runnable("E3", self.p.e3_kernel, m)]
            total += len(self.variants(ok)) * len(self.p.e3_nprocs) * self.p.reps
        self.total = total

    def variants(self, modes):
        """[(mode, threshold, label)]: ppios once per threshold, other modes once."""
        out = []
        for mode in modes:
            if mode != "ppios":
                out.append((mode, None, mode))
                continue
            for i, t in enumerate(self.thresholds):
                out.append((mode, t, "ppios" if i == 0 else f"ppios@{t}"))
        return out

    def runnable(self, experiment, kernel, mode, note=True):
        why = None
        if mode in PREFETCH_MODES and kernel not in self.bins.prefetching:
            why = self.bins.unavailable.get(kernel, "no prefetching build")
        if mode == "optimal" and not self.use_fuse:
            why = "no FUSE: the optimal reference needs a --no-model mount"
        if why and note and (experiment, kernel, mode, why) not in self.skipped:
            self.skipped.append((experiment, kernel, mode, why))
        return why is None

    # --------------------------------------------------------------- one run
    def _target(self):
        self.target_seq += 1
        return f"bench-{os.getpid()}-{self.target_seq}"

    def _spec(self, experiment, kernel, mode, nprocs, dev, input_name, run_dir, target,
              coordinator, threshold=None, label=None, row_kernel=None, factor=None):
        """One mpirun job. label: the mode's name in the report (ppios@T); row_kernel:
        the kernel column (E3's neighbour); factor: a compute factor of its own."""
        k = KERNELS[kernel]
        label = label or mode
        row_kernel = row_kernel or k.label
        binary = self.bins.for_mode(kernel, mode)
        factor = factor if factor is not None else self.p.factors[kernel]
        argv = ["mpirun", "-np", str(nprocs), *jobs.MPIRUN_FLAGS, binary,
                "--chunk", self.p.chunk, "--compute-factor", str(factor)]
        if k.writes:
            argv += ["-o", os.path.join(dev.path, self.scratch_dir(),
                                        f"{os.path.basename(run_dir)}-{kernel}.out")]
        argv.append(os.path.join(dev.path, input_name))
        env = jobs.base_env()
        stats = None
        if mode in PREFETCH_MODES:
            stats = os.path.join(run_dir, f"{kernel}.ppios-stats.jsonl")
            env.update(PPIOS_MODE=mode, PPIOS_STATS=stats, PPIOS_TARGET=target,
                       PPIOS_COORDINATOR=coordinator,
                       PPIOS_TRACE=os.path.join(run_dir, f"{kernel}.ppios-trace"))  # ppios-report
            if mode == "ppios":
                threshold = self.threshold_for(threshold, experiment)
                env["PPIOS_THRESHOLD"] = threshold
                if threshold == "auto-throttled":
                    # auto as it had to run before the controller learned from MTs
                    # past the cap: MTs wait at the cap too (docs/design/auto-threshold.md)
                    env.update(PPIOS_THRESHOLD="auto", PPIOS_MT_THROTTLE="1")
                elif threshold == "auto-cold":
                    env["PPIOS_THRESHOLD"] = "auto"  # a fresh target: from cap 1
                elif threshold.endswith("-passing"):
                    # a fixed cap that MTs pass when they alone fill it, to compare with
                    # the default that holds them at a fixed cap (docs/benchmarks.md)
                    env.update(PPIOS_THRESHOLD=self.threshold_for(
                        threshold.removesuffix("-passing"), experiment), PPIOS_MT_THROTTLE="0")
        name = kernel if row_kernel == k.label else f"{kernel}-{row_kernel.lower()}"
        return jobs.JobSpec(label=f"{experiment} {row_kernel} {label} P={nprocs}",
                            kernel_label=k.label, argv=argv, env=env,
                            stdout_path=os.path.join(run_dir, f"{name}.stdout"),
                            stderr_path=os.path.join(run_dir, f"{name}.stderr"),
                            cwd=run_dir, extra={"kernel": kernel, "stats": stats,
                                                "input": input_name, "mode": mode,
                                                "build_mode": mode,
                                                "label": label, "threshold": threshold,
                                                "row_kernel": row_kernel,
                                                "nprocs": nprocs})

    def scratch_dir(self):
        return self.scratch

    def _coordinator_done(self, coordinator, target):
        """(the highest number of accesses the coordinator saw in flight at once, a
        check that the cap held; what the target learned: its curve's best cap, see
        best_cap, else the cap in force), then forget the target. Not the cap in
        force at the end: that follows the run's tail (in E2, DSCAL alone for its last
        15 s takes it to 2-3)."""
        base = [self.bins.coord, "--coordinator", coordinator, "--target", target]
        seen = cap = None
        self.last_curve = None
        try:
            r = subprocess.run(base + ["status", "--json"], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, timeout=30)
            if r.returncode == 0:
                status = json.loads(r.stdout)
                seen, cap = status.get("max_inflight_seen"), status.get("threshold")
                curve = status.get("curve") or []
                self.last_curve = {point["k"]: round(point["mibps"], 1) for point in curve}
                if curve:
                    cap = best_cap(self.last_curve) or cap
        except (subprocess.TimeoutExpired, ValueError, KeyError, TypeError):
            pass
        subprocess.run(base + ["reset"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=30)
        return seen, cap

    def _warm_start(self, experiment, coordinator, target):
        """An `auto` run's fresh target gets the cap and the curve the experiment's last
        auto run learned (`ppios-coord set-threshold N --curve ...`; the runtime's
        PPIOS_THRESHOLD=auto turns learning on from the curve's best cap). The curve is the
        device's, whatever the demand: a run at P = 4 whose demand never reached the knee
        leaves the point a P = 16 run measured there, so the P = 8 run after it does not
        start from P = 4's smaller cap. Returns the cap, None for a cold start."""
        cap, curve = self.learned_caps.get(experiment, (None, None))
        if cap is None:
            return None
        argv = [self.bins.coord, "--coordinator", coordinator, "--target", target,
                "set-threshold", str(cap)]
        if curve:
            argv += ["--curve", ",".join(f"{k}:{v}" for k, v in sorted(curve.items()) if v > 0)]
        r = subprocess.run(argv, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True, timeout=30)
        if r.returncode != 0:
            self.log(f"could not store the learned cap {cap} on {target}: {r.stderr.strip()}"
                     " (this run starts cold)")
            return None
        return cap

    def _execute(self, experiment, nprocs, rep, specs, dev, device, coordinator, target,
                 run_dir):
        """Runs the specs at once; writes one results.csv row and one runs.jsonl line
        per job. nprocs is the row's P (E2: the total of the four jobs)."""
        dev.reset_stats()
        token = None
        if any(spec.extra["mode"] in PREFETCH_MODES for spec in specs):
            # a crash mid-run must not leave the target's shm segment or keys behind
            token = self.resources.add(f"coordinator target {target}",
                                       lambda: self._coordinator_done(coordinator, target))
        auto = any(spec.extra["mode"] == "ppios" and spec.extra["threshold"] == "auto"
                   for spec in specs)
        start_cap = self._warm_start(experiment, coordinator, target) if auto else None
        timeline = AutoTimeline([self.bins.coord, "--coordinator", coordinator, "--target", target,
                                 "status", "--json"],
                                os.path.join(run_dir, "auto-timeline.jsonl")) if auto else None
        try:
            with timeline or contextlib.nullcontext():
                results = jobs.run_concurrently(specs, self.resources, self.p.timeout_s)
        finally:
            max_inflight = end_cap = None
            if token is not None:
                self.resources.forget(token)
                max_inflight, end_cap = self._coordinator_done(coordinator, target)
        if auto and isinstance(end_cap, int) and end_cap >= 1:
            self.learned_caps[experiment] = (end_cap, self.last_curve)
        device_stats = dev.stats()
        dev_summary = {}
        if device_stats is not None:
            with open(os.path.join(run_dir, "simfs-stats.json"), "w") as f:
                json.dump(device_stats, f)
            model = self.model_for(experiment)
            dev_summary = simfs.stats_summary(device_stats,
                                              model["optimal_streams"] if model else 0)
        for r in results:
            extra = r.spec.extra
            kernel, mode, label = extra["kernel"], extra["mode"], extra["label"]
            self._check(experiment, kernel, extra["build_mode"], label, nprocs, r)
            # The bytes any correct run must move: its input, and its output (DSCAL).
            moved = os.path.getsize(os.path.join(self.cache, extra["input"]))
            written = 0
            if KERNELS[kernel].writes:
                out = r.spec.argv[r.spec.argv.index("-o") + 1]
                if os.path.exists(out):
                    written = os.path.getsize(out)
                    moved += written
                    os.unlink(out)
            # The kernel runs the writes to one file of a FUSE mount with direct_io one at
            # a time (the inode lock; libfuse 3.14 cannot ask for parallel direct writes):
            # however they are scheduled, they take at least written / B(1) (the device
            # at one stream: E2's DSCAL in every mode, 19-27 s against 5.6 s of bytes/peak).
            dev_model = getattr(dev, "model", None)  # None: the no-model mount, or no FUSE
            one_file_write_s = (written / 2**20 / simfs.one_stream_mibps(dev_model)
                                if written and dev_model else None)
            threshold = extra["threshold"] if mode == "ppios" else ""
            row = [experiment, extra["row_kernel"], mode, nprocs, rep,
                   f"{r.timing['wall_s']:.6f}", f"{r.timing['read_mean_s']:.6f}",
                   threshold, device, f"{moved / 2**20:.3f}", "", ""]
            self.csv.writerow(row)
            details = dict(zip(CSV_COLUMNS, row), variant=label, wall_s=r.timing["wall_s"],
                           io_latency_s=r.timing["read_mean_s"], bytes_mib=moved / 2**20,
                           written_mib=written / 2**20, one_file_write_s=one_file_write_s,
                           read_max_s=r.timing.get("read_max_s"),
                           write_mean_s=r.timing.get("write_mean_s"),
                           ranks=int(r.timing.get("nprocs", extra["nprocs"])),
                           mpirun_s=round(r.elapsed_s, 3), result=r.result_line,
                           max_inflight_seen=max_inflight, run_dir=run_dir,
                           **({"auto_start_cap": start_cap or 1, "auto_end_cap": end_cap,
                               "auto_curve": self.last_curve}
                              if mode == "ppios" and threshold.startswith("auto") else {}),
                           **dev_summary,
                           **self._ppios_stats(extra["stats"]))
            for unknown in ("bound_s", "efficiency"):
                details.pop(unknown)
            self.runs_file.write(json.dumps(details) + "\n")
        self.csv_file.flush()
        self.runs_file.flush()
        return results, dev_summary

    @staticmethod
    def _ppios_stats(path):
        """The prefetching build's own account (PPIOS_STATS): what the report needs
        to say why a target was missed."""
        if not path or not os.path.exists(path):
            return {}
        with open(path) as f:
            ranks = [json.loads(line) for line in f if line.strip()]
        if not ranks:
            return {}

        def total(name):
            return sum(x.get(name, 0) for x in ranks)

        read = total("mt_read_bytes")
        stops = sorted({x.get("pt_stop", "none") for x in ranks})
        return {"hit_ratio": round(total("hit_bytes") / read, 4) if read else None,
                "pt_yields": total("pt_yields"),
                "pt_late": total("pt_late"),
                "pt_skipped": total("pt_skipped"),
                "pt_read_mib": round(total("pt_read_bytes") / 2**20, 1),
                "pt_unused_mib": round(total("pt_unused_bytes") / 2**20, 1),
                "pt_stop": ",".join(stops),
                "mt_read_wait_s": round(total("mt_read_wait_s") / len(ranks), 4),
                "mt_slot_wait_s": round(total("mt_slot_wait_s") / len(ranks), 4),
                "mt_token_wait_s": round(total("mt_token_wait_s") / len(ranks), 4),
                "pt_room_wait_s": round(total("pt_room_wait_s") / len(ranks), 4),
                "pt_slot_wait_s": round(total("pt_slot_wait_s") / len(ranks), 4)}

    def _check(self, experiment, kernel, mode, label, nprocs, r):
        """mode is the build that ran (normal for E3's neighbour whatever runs beside
        it); the first run of an input must be the normal build's."""
        key = (kernel, r.spec.extra["input"])
        ref = self.references.get(key)
        if ref is None:
            if mode != "normal":
                raise ResultMismatch(f"{r.spec.label}: no normal-build result to compare "
                                     f"with (normal must run first)")
            self.references[key] = r.result_line
        elif r.result_line != ref:
            raise ResultMismatch(
                f"{experiment} {r.spec.extra['row_kernel']} mode={label} P={nprocs} printed\n"
                f"    {r.result_line}\nbut the normal build printed\n    {ref}\n"
                f"command: {' '.join(r.spec.argv)}\noutput kept in {r.spec.stdout_path}")

    def _progress(self, text):
        self.done += 1
        elapsed = time.monotonic() - self.started
        eta = elapsed / self.done * (self.total - self.done)
        self.log(f"[{self.done:3}/{self.total}] {text}   "
                 f"({elapsed / 60:.1f} min, ~{eta / 60:.1f} min left)")

    def _device_for(self, mode, experiment="E1"):
        if mode == "optimal":
            return self.optimal_dev, self.optimal_device
        if experiment == "E2":
            return self.e2_dev, self.e2_device
        return self.model_dev, self.device

    def _start_redis(self, modes):
        if self.redis is None and any(m in PREFETCH_MODES for m in modes):
            from .redis import RedisServer
            self.redis = RedisServer(os.path.join(self.work, "redis"), self.resources).start()
            self.log(f"redis-server for the shared coordinator: {self.redis.url}")

    # ------------------------------------------------------------ experiments
    def run_e1(self):
        p = self.p
        for rep in range(1, p.reps + 1):
            for nprocs in p.e1_nprocs:
                for kernel in p.e1_kernels:
                    modes = [m for m in p.modes if self.runnable("E1", kernel, m, note=False)]
                    for mode, threshold, label in self.variants(modes):
                        self._e1_one(kernel, mode, threshold, label, nprocs, rep)

    def _e1_one(self, kernel, mode, threshold, label, nprocs, rep):
        dev, device = self._device_for(mode)
        run_dir = os.path.join(self.raw, f"e1-{kernel}-{label.replace('@', '-t')}"
                                         f"-p{nprocs}-r{rep}")
        os.makedirs(run_dir, exist_ok=True)
        target, coordinator = self._target(), "shm"
        spec = self._spec("E1", kernel, mode, nprocs, dev, self.e1_input, run_dir, target,
                          coordinator, threshold, label)
        results, dev_summary = self._execute("E1", nprocs, rep, [spec], dev, device,
                                             coordinator, target, run_dir)
        t = results[0].timing
        extra = ""
        if dev_summary and mode != "optimal":
            extra = (f"  device >{self.model_for('E1')['optimal_streams']} streams "
                     f"{dev_summary['frac_above_opt']:4.0%} of busy time")
        self._progress(f"E1 {KERNELS[kernel].label:5} P={nprocs:<2} {label:7} rep {rep}/"
                       f"{self.p.reps}: wall {t['wall_s']:7.2f} s  io {t['read_mean_s']:6.2f} s"
                       + extra)

    def run_e2(self):
        p = self.p
        modes = [m for m in p.modes
                 if all(self.runnable("E2", k, m) for k in p.e2_kernels)]
        self._start_redis(modes)
        for rep in range(1, p.reps + 1):
            for nprocs in p.e2_nprocs:
                for mode, threshold, label in self.variants(modes):
                    self._e2_point(mode, threshold, label, nprocs, rep)

    def _e2_point(self, mode, threshold, label, nprocs, rep):
        dev, device = self._device_for(mode, "E2")
        run_dir = os.path.join(self.raw, f"e2-{label.replace('@', '-t')}-p{nprocs}-r{rep}")
        os.makedirs(run_dir, exist_ok=True)
        target = self._target()
        coordinator = self.redis.url if self.redis else "shm"
        per_job = max(1, nprocs // len(self.p.e2_kernels))
        specs = [self._spec("E2", k, mode, per_job, dev, self.e2_inputs[k], run_dir, target,
                            coordinator, threshold, label) for k in self.p.e2_kernels]
        t0 = time.monotonic()
        results, dev_summary = self._execute("E2", nprocs, rep, specs, dev, device,
                                             coordinator, target, run_dir)
        walls = "  ".join(f"{r.spec.kernel_label} {r.timing['wall_s']:.2f}" for r in results)
        self._progress(f"E2 P={nprocs:<2} ({per_job}/job) {label:7} rep {rep}/{self.p.reps}: "
                       f"wall s {walls}  (all done in {time.monotonic() - t0:.1f} s)")

    def run_e3(self):
        p = self.p
        modes = [m for m in p.modes if self.runnable("E3", p.e3_kernel, m, note=False)]
        for rep in range(1, p.reps + 1):
            for nprocs in p.e3_nprocs:
                for mode, threshold, label in self.variants(modes):
                    self._e3_point(mode, threshold, label, nprocs, rep)

    def _e3_point(self, mode, threshold, label, nprocs, rep):
        """The prefetching job in `mode` and the neighbour (always the mpicc build) start
        together on the same device; in optimal mode both run on the no-model mount."""
        dev, device = self._device_for(mode)
        run_dir = os.path.join(self.raw, f"e3-{label.replace('@', '-t')}-p{nprocs}-r{rep}")
        os.makedirs(run_dir, exist_ok=True)
        target, coordinator = self._target(), "shm"
        job = self._spec("E3", self.p.e3_kernel, mode, nprocs, dev, self.e3_inputs["job"],
                         run_dir, target, coordinator, threshold, label)
        neighbour = self._spec("E3", E3_NEIGHBOUR, "normal", E3_NEIGHBOUR_NPROCS, dev,
                               self.e3_inputs["neighbour"], run_dir, target, coordinator,
                               label=label,
                               row_kernel=f"{KERNELS[E3_NEIGHBOUR].label}-neighbour",
                               factor=E3_NEIGHBOUR_FACTOR)
        # The neighbour is the mpicc build in every point, but its row carries the
        # prefetching job's mode, so that "beside normal" and "beside ppios" are one row.
        neighbour.extra.update(mode=mode, threshold=job.extra["threshold"])
        results, dev_summary = self._execute("E3", nprocs, rep, [job, neighbour], dev, device,
                                             coordinator, target, run_dir)
        job_t, nb_t = results[0].timing, results[1].timing
        self._progress(f"E3 {KERNELS[self.p.e3_kernel].label} P={nprocs:<2} {label:7} rep "
                       f"{rep}/{self.p.reps}: wall {job_t['wall_s']:6.2f} s, neighbour "
                       f"{nb_t['wall_s']:6.2f} s")
