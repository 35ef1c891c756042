"""The ppios-simfs emulator: mount, model and stats files, unmount, calibration.

The server runs in the foreground (-f) as our child, in a session of its own,
so the harness owns its lifetime: stopping means `fusermount3 -u` (clean) and,
if a process still holds the mount, a lazy unmount and SIGTERM. A mount is
registered with Resources the moment the server is started, so an error or a
Ctrl-C between start and first use still unmounts."""
import json
import os
import shutil
import subprocess
import time

from . import resources as res

FUSE_UNAVAILABLE = 3  # ppios-simfs exit code (bench/simfs/README.md)


class FuseUnavailable(Exception):
    pass


def model_args(model):
    if model is None:
        return ["--no-model"]
    return ["--peak-mibps", f"{model['peak_mibps']:g}",
            "--optimal-streams", str(model["optimal_streams"]),
            "--loss-per-stream", f"{model['loss_per_stream']:g}",
            "--floor-fraction", f"{model['floor_fraction']:g}",
            "--latency-us", f"{model['latency_us']:g}"]


def one_stream_mibps(model):
    """B(1) of the model: what one request in flight gets (peak * 1 / optimum)."""
    return model["peak_mibps"] / max(1, model["optimal_streams"])


def describe(model):
    """The `device` column: compact, no commas, enough to rebuild the model."""
    if model is None:
        return "simfs/no-model"
    return (f"simfs/peak={model['peak_mibps']:g}MiBps/opt={model['optimal_streams']}"
            f"/loss={model['loss_per_stream']:g}/floor={model['floor_fraction']:g}"
            f"/lat={model['latency_us']:g}us")


class Mount:
    def __init__(self, simfs, backing, mountpoint, model, log_path, resources):
        self.simfs, self.backing, self.path = simfs, backing, mountpoint
        self.model, self.log_path, self.resources = model, log_path, resources
        self.proc = None
        self._token = None

    def start(self, timeout=20.0):
        if shutil.which("fusermount3") is None:
            raise FuseUnavailable("fusermount3 is not installed (Debian package fuse3)")
        if not os.access("/dev/fuse", os.R_OK | os.W_OK):
            raise FuseUnavailable("/dev/fuse is missing or not accessible")
        os.makedirs(self.path, exist_ok=True)
        log = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen(
                [self.simfs, "-f", *model_args(self.model), self.backing, self.path],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True)
        finally:
            log.close()
        self._token = self.resources.add(f"mount {self.path}", self.stop)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            rc = self.proc.poll()
            if rc is not None:
                self.resources.forget(self._token)
                message = self._log_tail()
                if rc == FUSE_UNAVAILABLE:
                    raise FuseUnavailable(message or "ppios-simfs: FUSE unavailable")
                raise RuntimeError(f"ppios-simfs exited with {rc} before mounting:\n{message}")
            if os.path.ismount(self.path) and os.path.exists(
                    os.path.join(self.path, ".simfs-model.json")):
                return self
            time.sleep(0.05)
        raise RuntimeError(f"ppios-simfs did not mount {self.path} within {timeout:g} s")

    def _log_tail(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-2000:].strip()
        except OSError:
            return ""

    def model_json(self):
        with open(os.path.join(self.path, ".simfs-model.json")) as f:
            return json.load(f)

    def reset_stats(self):
        with open(os.path.join(self.path, ".simfs-stats.json"), "w"):
            pass

    def stats(self):
        with open(os.path.join(self.path, ".simfs-stats.json")) as f:
            return json.load(f)

    def stop(self):
        """Idempotent. Jobs have been killed before this runs (LIFO order)."""
        if self.proc is None:
            return
        for attempt in range(10):
            if not os.path.ismount(self.path):
                break
            r = subprocess.run(["fusermount3", "-u", self.path],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            if r.returncode == 0:
                break
            time.sleep(0.3)
        if os.path.ismount(self.path):
            # Still busy after 3 s: detach it; the server exits when the last user goes.
            subprocess.run(["fusermount3", "-uz", self.path],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            res.kill_group(self.proc)
        self.proc = None
        try:
            os.rmdir(self.path)
        except OSError:
            pass


def stats_summary(stats, optimal_streams):
    """What the device did during one run: busy time, the share of it spent
    with more requests in flight than the optimum, the largest k."""
    device = stats.get("device", {})
    at_k = device.get("seconds_at_k", [])
    busy = sum(at_k)
    above = sum(s for k, s in enumerate(at_k, start=1) if k > optimal_streams)
    return {"busy_s": round(busy, 4),
            "frac_above_opt": round(above / busy, 4) if busy else 0.0,
            "max_k": device.get("max_concurrency", 0),
            "device_mib": round(device.get("bytes", 0) / 2**20, 1),
            "late_wakeup_us": round(device.get("mean_late_wakeup_us", 0.0), 1)}


def calibrate(calibrate_bin, mount, csv_path, resources, timeout=300):
    """Runs ppios-simfs-calibrate on a live mount; returns (exit code, output).
    Exit 1 means a point was off by more than 10%: reported, not fatal."""
    proc = subprocess.Popen([calibrate_bin, "--csv", csv_path, mount.path],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    token = resources.add("ppios-simfs-calibrate", lambda: res.kill_group(proc))
    try:
        out, _ = proc.communicate(timeout=timeout)
    finally:
        resources.release(token)
    return proc.returncode, out.decode(errors="replace")
