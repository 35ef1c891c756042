#!/usr/bin/python3
"""Tests of ppios-report (tools/ppios-report).

  golden REPORT FIXTURE GOLDEN   the text summary of a recorded run equals GOLDEN; the HTML
                                 page and the merged Perfetto trace hold every rank, on one clock
  live REPORT MPIRUN FLAGS PROGRAM
                                 (PROGRAM: tests/e2e/chunks' prefetching build, wrapped: its own
                                 calls routed to the runtime at link time, as ppios-cc links)
                                 a real run with PPIOS_TRACE and PPIOS_STATS: the trace's layers
                                 are there, and the trace and the statistics tell the same bytes
  chromium REPORT FIXTURE        the HTML page opens in headless chromium with no console
                                 message (exit 77, a SKIP, when chromium is not installed)

Set PPIOS_REPORT_UPDATE=1 to rewrite GOLDEN from the current output (then review the diff)."""
import difflib
import importlib.machinery
import importlib.util
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77


def run_report(report, args):
    p = subprocess.run([sys.executable, report, *args], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=300)
    if p.returncode != 0:
        sys.exit(f"ppios-report {' '.join(args)} exited {p.returncode}\n{p.stderr}")
    return p.stdout


def load_tool(report):
    loader = importlib.machinery.SourceFileLoader("ppios_report", report)
    spec = importlib.util.spec_from_loader("ppios_report", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def golden(report, fixture, golden_path):
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        html_path, pf_path = os.path.join(tmp, "r.html"), os.path.join(tmp, "r.json")
        # Relative paths: the summary names the job as given, so the golden file does not
        # depend on where the tree is checked out.
        out = subprocess.run([sys.executable, os.path.abspath(report), "--html", html_path,
                              "--perfetto", pf_path, "--binary-dir", os.path.join(os.path.basename(fixture), "bin"),
                              "--remarks", os.path.join(os.path.basename(fixture), "ppios-cc-remarks.log"),
                              os.path.basename(fixture)],
                             cwd=os.path.dirname(os.path.abspath(fixture)), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, timeout=300)
        if out.returncode != 0:
            sys.exit(f"ppios-report exited {out.returncode}\n{out.stderr}")
        text = out.stdout
        if os.environ.get("PPIOS_REPORT_UPDATE") == "1":
            with open(golden_path, "w") as f:
                f.write(text)
        with open(golden_path) as f:
            want = f.read()
        if text != want:
            failures.append("text summary differs from " + golden_path + ":\n" + "".join(
                difflib.unified_diff(want.splitlines(True), text.splitlines(True), "golden", "now")))

        traces = sorted(glob.glob(os.path.join(fixture, "*.json")))
        ranks = {json.load(open(t))["otherData"]["rank"] for t in traces}
        with open(html_path) as f:
            page = f.read()
        if "read at sum_ppios sum.c:" not in text:
            failures.append("the summary does not name SUM's read line (call sites and -g)")
        if "MiB read by the PT" not in text:
            failures.append("the summary does not name the PT's lines by ppios-cc's call-site id (src)")
        if "ppios-cc: read prefetched by the prefetch thread" not in text:
            failures.append("the summary does not join ppios-cc's remark to its read line")
        for heading in ("Findings", "Timelines", "Device concurrency", "Throughput",
                        "latency breakdown", "Hit ratio per file", "lead"):
            if heading not in page:
                failures.append(f"HTML page has no section '{heading}'")
        for r in ranks:
            if f" r{r} MT" not in page:
                failures.append(f"HTML timelines have no MT lane of rank {r}")
        if "<script" in page and "src=" in page.split("<script", 1)[1].split(">", 1)[0]:
            failures.append("HTML page loads a script from elsewhere: it must be self-contained")

        # Input it cannot read stops it with a message and exit 2, not a traceback.
        not_ours = os.path.join(tmp, "other.json")
        with open(not_ours, "w") as f:
            f.write('{"hello": 1}\n')
        for bad in (os.path.join(tmp, "missing"), not_ours):
            p = subprocess.run([sys.executable, report, bad], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, timeout=60)
            if p.returncode != 2 or not p.stderr.startswith("ppios-report: ") or "Traceback" in p.stderr:
                failures.append(f"ppios-report {bad}: exit {p.returncode}, stderr {p.stderr!r}")

        # A file the runtime could not name appears as "dev:ino" beside paths (E2's DSCAL
        # output): both are listed, the paths still shortened.
        unnamed_dir = os.path.join(tmp, "unnamed")
        shutil.copytree(fixture, unnamed_dir, ignore=shutil.ignore_patterns("bin"))
        trace_path = sorted(glob.glob(os.path.join(unnamed_dir, "sum.ppios-trace.*.json")))[0]
        with open(trace_path) as f:
            trace = json.load(f)
        first = next(e["args"]["file"] for e in trace["traceEvents"] if "file" in e.get("args", {}))
        for e in trace["traceEvents"]:
            if e.get("args", {}).get("file") == first:
                e["args"]["file"] = "40:11100177"
        with open(trace_path, "w") as f:
            json.dump(trace, f)
        p = subprocess.run([sys.executable, report, unnamed_dir], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=300)
        if p.returncode != 0 or "\n40:11100177 " not in p.stdout or "\na.txt " not in p.stdout:
            failures.append(f"a trace naming a file dev:ino: exit {p.returncode}, stderr {p.stderr[-400:]!r}")

        merged = json.load(open(pf_path))
        names = [e["args"]["name"] for e in merged["traceEvents"]
                 if e.get("name") == "process_name" and e["pid"] != 0]
        if len(names) != len(traces):
            failures.append(f"merged trace has {len(names)} processes, the fixture {len(traces)} traces")
        failures += check_alignment(traces, merged)
    return failures


def check_alignment(traces, merged):
    """Each rank's events move by (its origin - the earliest origin) on CLOCK_MONOTONIC: a
    rank that started later must not appear to have started at 0."""
    docs = [(os.path.basename(t).rsplit(".", 2)[0], json.load(open(t))) for t in traces]
    zero = min(d["otherData"]["origin_mono_ns"] for _, d in docs)
    failures = []
    by_label = {}
    for e in merged["traceEvents"]:
        if e.get("name") == "process_name":
            by_label[e["pid"]] = e["args"]["name"]
    for job, d in docs:
        rank = d["otherData"]["rank"]
        pid = next(p for p, n in by_label.items() if n.startswith(f"{job} rank {rank} "))
        own = min(e["ts"] for e in d["traceEvents"] if e.get("ph") == "X")
        got = min(e["ts"] for e in merged["traceEvents"] if e.get("ph") == "X" and e["pid"] == pid)
        want = own + (d["otherData"]["origin_mono_ns"] - zero) / 1000.0
        if abs(got - want) > 0.01:
            failures.append(f"rank {rank}: first event at {got} us in the merged trace, expected {want}")
    return failures


def live(report, mpirun, flags, program):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               PPIOS_TARGET=f"report-live-{os.getpid()}", PPIOS_THRESHOLD="2")
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "in.bin")
        with open(data, "wb") as f:
            f.write(os.urandom(8 << 20))
        env.update(PPIOS_STATS=os.path.join(tmp, "stats.jsonl"), PPIOS_TRACE=os.path.join(tmp, "trace"))
        p = subprocess.run([mpirun, *flags.split(), "-np", "2", program, data, "262144", "8"], env=env, cwd=tmp,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
        if p.returncode != 0:
            return [f"program exited {p.returncode}\n{p.stdout}\n{p.stderr}"]
        stats = {json.loads(l)["rank"]: json.loads(l) for l in open(env["PPIOS_STATS"])}
        for rank, st in sorted(stats.items()):
            doc = json.load(open(f"{env['PPIOS_TRACE']}.{rank}.json"))
            other = doc["otherData"]
            for key in ("origin_mono_ns", "origin_unix_ns", "pid", "host", "mode", "threshold"):
                if key not in other:
                    failures.append(f"rank {rank}: trace otherData has no {key}")
            if other.get("pid") != st["pid"] or other.get("threshold") != 2:
                failures.append(f"rank {rank}: trace says pid {other.get('pid')} threshold "
                                f"{other.get('threshold')}, stats pid {st['pid']}, threshold 2")
            ev = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
            reads = [e for e in ev if e["tid"] == 1 and e["name"].startswith("read")]
            got = sum(e["args"]["bytes"] for e in reads)
            cached = sum(min(e["args"]["cached"], e["args"]["bytes"]) for e in reads)
            if (len(reads), got, cached) != (st["mt_read_calls"], st["mt_read_bytes"], st["hit_bytes"]):
                failures.append(f"rank {rank}: trace has {len(reads)} reads, {got} bytes, {cached} cached; "
                                f"stats {st['mt_read_calls']}, {st['mt_read_bytes']}, {st['hit_bytes']}")
            slots = [e for e in ev if e["name"] == "slot"]
            if not any(e["tid"] == 1 for e in slots):
                failures.append(f"rank {rank}: no MT slot event (coordinator layer)")
            for e in slots:
                if not 0 <= e["args"]["slot_wait_ns"] / 1000.0 <= e["dur"] + 0.002:
                    failures.append(f"rank {rank}: slot granted outside its interval: {e}")
                    break
            slot_wait = sum(e["args"]["slot_wait_ns"] for e in slots) / 1e9
            want = st["mt_slot_wait_s"] + st["pt_slot_wait_s"]
            if abs(slot_wait - want) > 0.001 + 0.01 * want:
                failures.append(f"rank {rank}: trace slot waits {slot_wait:.6f} s, stats {want:.6f} s")
            sites = st.get("sites", [])
            if sum(x["bytes"] for x in sites) != st["mt_read_bytes"] or not all(x["site"] for x in sites):
                failures.append(f"rank {rank}: stats sites {sites} do not add up to {st['mt_read_bytes']} bytes")
            if st["pt_subreads"] and not any(e["name"] == "subread" for e in ev):
                failures.append(f"rank {rank}: {st['pt_subreads']} PT sub-reads, none in the trace")
        text = run_report(report, ["--html", os.path.join(tmp, "r.html"), tmp])
        total = sum(st["mt_read_bytes"] for st in stats.values())
        if f"{total / (1 << 20):.1f} MiB" not in text or "findings" not in text:
            failures.append(f"report does not state the {total} bytes read:\n{text}")
        # Every MT read is named by its source line (the test programs are built with -g).
        a = load_tool(report).Analysis(load_tool(report).load([tmp]))
        named = sum(f["bytes"] for f in a.per_line.values())
        if named != total or not all("chunks_ppios.c:" in k for k in a.per_line):
            failures.append(f"{named} of {total} bytes read are named by a source line: {a.per_line} "
                            f"({a.site_note})")
        # A stats file alone is enough for a summary (no trace: no timelines, said so), and
        # its "sites" name the same lines with the same bytes.
        only = run_report(report, [env["PPIOS_STATS"]])
        if "no PPIOS_TRACE files" not in only:
            failures.append(f"a stats-only report does not say the trace is missing:\n{only}")
        tool = load_tool(report)
        b = tool.Analysis(tool.load([env["PPIOS_STATS"]]))
        by_trace = {k: (f["calls"], f["bytes"], f["cached"]) for k, f in a.per_line.items()}
        by_stats = {k: (f["calls"], f["bytes"], f["cached"]) for k, f in b.per_line.items()}
        if by_trace != by_stats:
            failures.append(f"source lines from the trace {by_trace} and from the stats {by_stats} differ")
    return failures


def chromium(report, fixture):
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe and os.environ.get("CI") == "true":
        # CI installs it (scripts/install-deps): there the check must run, never skip.
        return ["CI=true but chromium is not installed (scripts/install-deps installs it under CI)"]
    if not exe:
        print("chromium is not installed (apt-get install -y chromium): SKIP")
        return None
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        page = os.path.join(tmp, "r.html")
        run_report(report, ["--html", page, fixture])
        # The check itself must be able to fail: a page with a script error is caught.
        bad = os.path.join(tmp, "bad.html")
        with open(bad, "w") as f:
            f.write("<!DOCTYPE html><html><body><script>noSuchFunction();</script></body></html>")
        for path, want_errors in ((bad, True), (page, False)):
            # Headless; --no-sandbox: CI runs as root, where chromium's sandbox refuses;
            # --disable-dev-shm-usage: a container's /dev/shm may be tiny.
            try:
                p = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu",
                                    "--disable-dev-shm-usage", f"--user-data-dir={tmp}/profile",
                                    "--enable-logging=stderr", "--v=0", "--dump-dom", "file://" + path],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
            except subprocess.TimeoutExpired:
                failures.append(f"chromium did not finish with {path} within 120 s")
                continue
            console = [l for l in p.stderr.splitlines() if ":CONSOLE" in l]
            if p.returncode != 0:
                failures.append(f"chromium exited {p.returncode} on {path}:\n{p.stderr[-2000:]}")
            elif want_errors and not console:
                failures.append("chromium reported no console error for a page with one: the check is blind")
            elif not want_errors and console:
                failures.append("console messages on the report page:\n" + "\n".join(console))
            elif not want_errors and "Timelines" not in p.stdout:
                failures.append("chromium's DOM of the report page has no timelines")
    return failures


def main():
    what, report = sys.argv[1], sys.argv[2]
    if what == "golden":
        failures = golden(report, sys.argv[3], sys.argv[4])
    elif what == "live":
        failures = live(report, *sys.argv[3:6])
    elif what == "chromium":
        failures = chromium(report, sys.argv[3])
        if failures is None:
            return SKIP
    else:
        sys.exit(f"unknown test {what}")
    for f in failures:
        print("FAIL:", f)
    if not failures:
        print("ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
