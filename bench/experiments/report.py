"""Medians, ratios and the issue's targets, from runs.jsonl.

A row is one (experiment, kernel, P); each mode's value is the median over the
repetitions. The targets (issue #5) are judged on those medians:

T1 PPIOS never slower than normal or PP at any P, beyond noise. Noise band of
   a row = max(5%, the largest relative spread (max-min)/median of any mode's
   repetitions in that row).
T2 at least 40% less time than normal where compute and I/O are comparable:
   rows with 0.5 <= compute/I-O <= 2, compute = the optimal run's time (free
   I/O; normal time minus its read time when optimal did not run), I/O = the
   normal run's mean time in reads.
T3 at least 20% less time than PP once PP's prefetching exceeds the device's
   optimal concurrency: rows where the device spent >= 25% of its busy time in
   PP runs with more requests in flight than the optimum (ppios-simfs stats).
T4 at least 85% less I/O latency than normal: seed 003 quotes its 83.3% as an
   "up to" number, so the best row decides; every row is listed.
T5 within 10% of the optimal reference where computation exceeds I/O
   (compute/I-O > 1)."""
import json
import statistics
from collections import defaultdict

MODE_ORDER = ["normal", "pp", "intra", "ppios", "optimal"]


def load_runs(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def _key(run):
    return (run["experiment"], run["kernel"], int(run["nprocs"]))


def aggregate(runs):
    """{(exp, kernel, P): {mode: {"wall": median, "io": median, "spread": rel, ...}}}"""
    groups = defaultdict(lambda: defaultdict(list))
    for r in runs:
        groups[_key(r)][r["mode"]].append(r)
    table = {}
    for key in sorted(groups, key=lambda k: (k[0], k[1], k[2])):
        row = {}
        for mode, rs in groups[key].items():
            walls = [r["wall_s"] for r in rs]
            med = statistics.median(walls)
            row[mode] = {
                "wall": med,
                "io": statistics.median(r["io_latency_s"] for r in rs),
                "write": statistics.median(r.get("write_mean_s") or 0 for r in rs),
                "spread": (max(walls) - min(walls)) / med if med > 0 else 0.0,
                "reps": len(rs),
                "above_opt": statistics.median(r.get("frac_above_opt", 0) for r in rs),
                "hit": _median_or_none([r.get("hit_ratio") for r in rs]),
            }
        table[key] = row
    return table


def _median_or_none(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _ratio(row, a, b, metric="wall"):
    if a in row and b in row and row[b][metric] > 0:
        return row[a][metric] / row[b][metric]
    return None


def compute_vs_io(row):
    if "normal" not in row or row["normal"]["io"] <= 0:
        return None
    if "optimal" in row:
        compute = row["optimal"]["wall"]
    else:
        compute = row["normal"]["wall"] - row["normal"]["io"] - row["normal"]["write"]
    return compute / row["normal"]["io"]


def _fmt(x, spec=".2f"):
    return "-" if x is None else format(x, spec)


def _pct_less(ratio):
    return f"{(1 - ratio) * 100:.1f}%"


def evaluate_targets(table):
    """[(name, statement, verdict, details)] with verdict met / not met / not measured."""
    out = []
    has_ppios = any("ppios" in row for row in table.values())
    if not has_ppios:
        reason = "PPIOS did not run (no ppios-cc prefetching build)"
        for name, statement in TARGETS:
            out.append((name, statement, "not measured", reason))
        return out

    # T1
    fails, checked = [], 0
    for key, row in table.items():
        if "ppios" not in row:
            continue
        band = max(0.05, max(m["spread"] for m in row.values()))
        for other in ("normal", "pp"):
            r = _ratio(row, "ppios", other)
            if r is None:
                continue
            checked += 1
            if r > 1 + band:
                fails.append(f"{_label(key)}: ppios/{other} = {r:.3f} (noise band "
                             f"{band:.0%})")
    out.append(_verdict("T1", checked, fails,
                        f"{checked} comparisons (ppios vs normal and pp per row)"))

    # T2
    rows = [(k, row) for k, row in table.items() if "ppios" in row and "normal" in row
            and compute_vs_io(row) is not None and 0.5 <= compute_vs_io(row) <= 2.0]
    fails = [f"{_label(k)}: ppios/normal = {_ratio(r, 'ppios', 'normal'):.3f} "
             f"(compute/IO {compute_vs_io(r):.2f})"
             for k, r in rows if _ratio(r, "ppios", "normal") > 0.60]
    best = _best(table, "ppios", "normal")
    out.append(_verdict("T2", len(rows), fails,
                        f"{len(rows)} rows with compute/IO in [0.5, 2]; best reduction over "
                        f"all rows: {best}"))

    # T3
    rows = [(k, row) for k, row in table.items()
            if "ppios" in row and "pp" in row and row["pp"]["above_opt"] >= 0.25]
    fails = [f"{_label(k)}: ppios/pp = {_ratio(r, 'ppios', 'pp'):.3f} "
             f"(PP above opt {r['pp']['above_opt']:.0%} of busy time)"
             for k, r in rows if _ratio(r, "ppios", "pp") > 0.80]
    best = _best(table, "ppios", "pp")
    out.append(_verdict("T3", len(rows), fails,
                        f"{len(rows)} rows where PP kept the device above its optimal "
                        f"concurrency >= 25% of the time; best reduction vs PP: {best}"))

    # T4
    ratios = [(k, _ratio(r, "ppios", "normal", "io")) for k, r in table.items()]
    ratios = [(k, x) for k, x in ratios if x is not None]
    if ratios:
        k_best, x_best = min(ratios, key=lambda kx: kx[1])
        meeting = sum(1 for _, x in ratios if x <= 0.15)
        verdict = "met" if x_best <= 0.15 else "not met"
        out.append(("T4", TARGETS_D["T4"], verdict,
                    f"best {_pct_less(x_best)} less I/O latency ({_label(k_best)}); "
                    f"{meeting} of {len(ratios)} rows reach 85%"))
    else:
        out.append(("T4", TARGETS_D["T4"], "not measured", "no ppios and normal in one row"))

    # T5
    rows = [(k, row) for k, row in table.items() if "ppios" in row and "optimal" in row
            and compute_vs_io(row) is not None and compute_vs_io(row) > 1.0]
    fails = [f"{_label(k)}: ppios/optimal = {_ratio(r, 'ppios', 'optimal'):.3f}"
             for k, r in rows if _ratio(r, "ppios", "optimal") > 1.10]
    out.append(_verdict("T5", len(rows), fails,
                        f"{len(rows)} rows where compute exceeds I/O"))
    return out


TARGETS = [
    ("T1", "PPIOS never slower than normal or PP at any P (beyond noise)"),
    ("T2", "at least 40% less time than normal where compute and I/O are comparable"),
    ("T3", "at least 20% less time than PP once PP's prefetching exceeds the device's "
           "optimal concurrency"),
    ("T4", "at least 85% less I/O latency than normal"),
    ("T5", "within 10% of the optimal reference where computation exceeds I/O"),
]
TARGETS_D = dict(TARGETS)


def _verdict(name, checked, fails, details):
    if checked == 0:
        return (name, TARGETS_D[name], "not measured", details + " (no such row in this run)")
    verdict = "met" if not fails else "not met"
    if fails:
        details += "; misses: " + "; ".join(fails)
    return (name, TARGETS_D[name], verdict, details)


def _best(table, a, b):
    ratios = [(k, _ratio(r, a, b)) for k, r in table.items()]
    ratios = [(k, x) for k, x in ratios if x is not None]
    if not ratios:
        return "-"
    k, x = min(ratios, key=lambda kx: kx[1])
    return f"{_pct_less(x)} ({_label(k)})"


def _label(key):
    return f"{key[0]} {key[1]} P={key[2]}"


def comparison_table(table, modes):
    """Markdown: one line per (experiment, kernel, P), medians and ratios."""
    shown = [m for m in MODE_ORDER if m in modes]
    head = (["exp", "kernel", "P"] + [f"{m} s" for m in shown]
            + ["ppios/normal", "ppios/pp", "ppios/optimal"]
            + [f"io {m} s" for m in shown if m != "optimal"]
            + ["io ppios/normal", "compute/IO", "PP >opt", "ppios hits"])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key, row in table.items():
        cells = [key[0], key[1], str(key[2])]
        cells += [_fmt(row[m]["wall"]) if m in row else "-" for m in shown]
        cells += [_fmt(_ratio(row, "ppios", b), ".3f") for b in ("normal", "pp", "optimal")]
        cells += [_fmt(row[m]["io"], ".3f") if m in row else "-"
                  for m in shown if m != "optimal"]
        cells.append(_fmt(_ratio(row, "ppios", "normal", "io"), ".3f"))
        cells.append(_fmt(compute_vs_io(row)))
        cells.append(f"{row['pp']['above_opt']:.0%}" if "pp" in row else "-")
        hit = row.get("ppios", {}).get("hit")
        cells.append("-" if hit is None else f"{hit:.0%}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def text_table(table, modes):
    """The same numbers for a terminal (make demo)."""
    shown = [m for m in MODE_ORDER if m in modes]
    cols = ["kernel", "P"] + [f"{m} s" for m in shown] + ["ppios/normal", "ppios/pp",
                                                           "io ppios/normal"]
    widths = [max(8, len(c)) for c in cols]
    lines = ["  ".join(c.rjust(w) for c, w in zip(cols, widths))]
    for key, row in table.items():
        cells = [key[1], str(key[2])]
        cells += [_fmt(row[m]["wall"]) if m in row else "-" for m in shown]
        cells += [_fmt(_ratio(row, "ppios", "normal"), ".3f"),
                  _fmt(_ratio(row, "ppios", "pp"), ".3f"),
                  _fmt(_ratio(row, "ppios", "normal", "io"), ".3f")]
        lines.append("  ".join(c.rjust(w) for c, w in zip(cells, widths)))
    return "\n".join(lines)


def write_summary(path, meta, table, targets, calibration, plots):
    m = meta
    parts = [f"# ppios benchmark: seed 003 section 5 on the emulator ({m['profile']})", ""]
    parts += ["## Machine and command", "",
              f"- date: {m['date']}", f"- machine: `nproc` = {m['nproc']}, kernel "
              f"{m['kernel']}, {m['cpu']}", f"- command: `{m['command']}`",
              f"- build: `{m['build']}`; git {m['git']}",
              f"- wall time of the whole run: {m['elapsed_min']:.1f} min", ""]
    parts += ["## Device model", "", f"- modeled device (`device` column): `{m['device']}`",
              f"- optimal reference: `{m['optimal_device']}`",
              f"- PPIOS_THRESHOLD = {m['threshold']} (the device's optimal streams); "
              f"coordinator: shm for E1, a private redis-server (unix socket) for E2",
              f"- chunk {m['chunk']}, compute factors {m['factors']}, inputs: E1 "
              f"{m['e1_input_mib']} MiB, E2 {m['e2_input_mib']} MiB per kernel, "
              f"{m['reps']} repetition(s), medians", "",
              "Why these parameters: " + m["rationale"], ""]
    if m.get("skipped"):
        parts += ["## Modes that could not run", ""]
        parts += [f"- {e} {k.upper()} {mode}: {why}" for e, k, mode, why in m["skipped"]]
        parts.append("")
    parts += ["## Targets (issue #5)", ""]
    for name, statement, verdict, details in targets:
        parts.append(f"- **{name} {verdict.upper()}**: {statement}. {details}.")
    parts += ["", "How each target is judged: see `bench/experiments/report.py` (noise band "
              "max(5%, spread of the repetitions); 'comparable' = compute/IO in [0.5, 2]; "
              "'PP exceeds the optimum' = the device spent >= 25% of its busy time above "
              "the optimal number of streams in the PP runs).", ""]
    parts += ["## Results (medians)", "",
              "Execution time = the kernel's `wall_s` (slowest rank, barrier to close); "
              "I/O latency = mean over ranks of the time inside read calls (`read_mean_s`). "
              "E2's P is the total over the four concurrent jobs. compute/IO = optimal "
              "time / normal I/O latency. PP >opt = share of the device's busy time with "
              "more requests in flight than the optimum during PP runs.", "",
              comparison_table(table, m["modes"]), ""]
    if plots:
        parts += ["## Plots", ""] + [f"![{p}]({p})" for p in plots] + [""]
    if calibration:
        parts += ["## Calibration (`ppios-simfs-calibrate` on the modeled mount)", "",
                  f"exit code {calibration[0]} (0 = every point within 10%)", "", "```",
                  calibration[1].strip(), "```", ""]
    with open(path, "w") as f:
        f.write("\n".join(parts))
