"""Medians, ratios and the performance targets, from runs.jsonl.

A row is one (experiment, kernel, P); each mode's value is the median over the
repetitions. T1-T5, the targets drawn from the claims of the PPIOS paper (Zhao,
Yoshigoe and Xie, 2013), are judged on those medians:

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
T4 at least 85% less I/O latency than normal: the PPIOS paper quotes its 83.3%
   as an "up to" number, so the best row decides; every row is listed.
T5 within 10% of the optimal reference where computation exceeds I/O
   (compute/I-O > 1).
T1-T5 are judged on E1 and E2 rows.

Every row is also judged against its physical bound (targets R1-R5):
   bound = max(compute, bytes / peak), compute = the optimal run's wall time
   (when optimal did not run: the normal run's time minus its time in reads and
   writes, marked "est."), bytes = what any correct run must move (the input,
   and DSCAL's output), peak = the modeled device's peak bandwidth;
   efficiency = bound / wall, for every mode (the optimal reference runs on a
   free device, so its bound is its row's compute alone). In E2 and E3 a job shares the
   device, so its own bytes / peak is a loose bound; the summary also gives
   each point's makespan against max(slowest optimal job, all bytes / peak).
R1 ppios <= 1.03 x min(normal, pp) in every E1 and E2 row.
R2 ppios efficiency >= 0.85 in E1 rows and >= 0.80 in E2 rows.
R3 ppios I/O latency >= 85% below normal in every row where compute >= I/O.
R4 E3: ppios gains (the prefetching job takes less time than its normal build)
   while its neighbour takes at most 5% longer than beside the normal build.
R5 PPIOS_THRESHOLD=auto within 5% of the best fixed threshold in every E1 and E2
   row that ran both (--thresholds with auto and at least one integer).
A missed target lists, per row, what the runs' statistics say: PPIOS's hit
ratio, late prefetches, why the PT stopped, slot waits, the device's time
above its optimal concurrency."""
import csv
import json
import statistics
from collections import defaultdict

MODE_ORDER = ["normal", "pp", "intra", "ppios", "optimal"]
PAPER_EXPERIMENTS = ("E1", "E2")
EFFICIENCY_TARGET = {"E1": 0.85, "E2": 0.80}


def ordered(modes):
    """Display order: the modes, each ppios@T variant right after ppios."""
    def rank(m):
        base, _, variant = m.partition("@")
        return (MODE_ORDER.index(base) if base in MODE_ORDER else len(MODE_ORDER),
                variant != "", variant)
    return sorted(set(modes), key=rank)


def mode_of(run):
    return run.get("variant") or run["mode"]


def load_runs(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def _key(run):
    return (run["experiment"], run["kernel"], int(run["nprocs"]))


def aggregate(runs):
    """{(exp, kernel, P): {mode: {"wall": median, "io": median, "spread": rel, ...}}}"""
    groups = defaultdict(lambda: defaultdict(list))
    for r in runs:
        groups[_key(r)][mode_of(r)].append(r)
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
                "bytes_mib": _median_or_none([r.get("bytes_mib") for r in rs]),
                "one_file_write_s": _median_or_none([r.get("one_file_write_s") for r in rs]),
                "pt_late": _median_or_none([r.get("pt_late") for r in rs]),
                "pt_stop": ",".join(sorted({r["pt_stop"] for r in rs if r.get("pt_stop")})),
                "mt_slot_wait": _median_or_none([r.get("mt_slot_wait_s") for r in rs]),
                "pt_slot_wait": _median_or_none([r.get("pt_slot_wait_s") for r in rs]),
                "mt_token_wait": _median_or_none([r.get("mt_token_wait_s") for r in rs]),
                "pt_room_wait": _median_or_none([r.get("pt_room_wait_s") for r in rs]),
                "pt_unused_mib": _median_or_none([r.get("pt_unused_mib") for r in rs]),
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


def compute_time(row):
    """(seconds, source) of the row's computation, or (None, None)."""
    if "optimal" in row:
        return row["optimal"]["wall"], "optimal"
    if "normal" in row:
        n = row["normal"]
        return max(0.0, n["wall"] - n["io"] - n["write"]), "est."
    return None, None


def bounds(table, peak_mibps):
    """{row key: {compute_s, compute_from, bytes_mib, io_s, write_s, bound_s}}; sets
    row[mode]["eff"] = bound / wall for every mode of every row. write_s: the job's writes
    to one file at one stream (harness: the kernel runs them one at a time)."""
    out = {}
    for key, row in table.items():
        compute, source = compute_time(row)
        moved = _median_or_none([m["bytes_mib"] for m in row.values()])
        io = moved / peak_mibps if moved is not None and peak_mibps else None
        write = _median_or_none([m.get("one_file_write_s") for m in row.values()])
        parts = [x for x in (compute, io, write) if x is not None]
        bound = max(parts) if parts else None
        out[key] = {"compute_s": compute, "compute_from": source, "bytes_mib": moved,
                    "io_s": io, "write_s": write, "bound_s": bound}
        for mode, m in row.items():
            b = _mode_bound(mode, bound, compute)
            m["eff"] = b / m["wall"] if b and m["wall"] > 0 else None
    return out


def _mode_bound(mode, bound, compute):
    """The optimal reference runs on a free device: only its computation bounds it."""
    return compute if mode == "optimal" else bound


def add_efficiency(runs, row_bounds):
    """Every run gets its row's bound_s and efficiency = bound_s / its wall_s."""
    for r in runs:
        rb = row_bounds.get(_key(r), {})
        b = _mode_bound(mode_of(r), rb.get("bound_s"), rb.get("compute_s"))
        r["bound_s"] = round(b, 6) if b else None
        r["efficiency"] = round(b / r["wall_s"], 4) if b and r["wall_s"] > 0 else None


def write_results_csv(path, runs, columns):
    """results.csv again, from runs.jsonl, now with bound_s and efficiency."""
    def cell(r, c):
        v = r.get(c)
        if v is None:
            return ""
        if c in ("wall_s", "io_latency_s", "bound_s"):
            return f"{v:.6f}"
        if c == "bytes_mib":
            return f"{v:.3f}"
        if c == "efficiency":
            return f"{v:.4f}"
        return str(v)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(columns)
        for r in runs:
            w.writerow([cell(r, c) for c in columns])


def write_runs_jsonl(path, runs):
    with open(path, "w") as f:
        for r in runs:
            f.write(json.dumps(r) + "\n")


def shared_points(runs, peak_mibps):
    """E2 and E3 points as a whole: {(exp, P): {mode: {makespan, bytes_mib}}} (medians
    over repetitions), with each point's bound max(slowest optimal job, all bytes / peak,
    the largest job's writes to one file at one stream)."""
    groups = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for r in runs:
        if r["experiment"] in ("E2", "E3"):
            groups[(r["experiment"], int(r["nprocs"]))][mode_of(r)][r["rep"]].append(r)
    out = {}
    for key, modes in sorted(groups.items()):
        point = {}
        for mode, reps in modes.items():
            point[mode] = {
                "makespan": statistics.median(max(x["wall_s"] for x in rs)
                                              for rs in reps.values()),
                "bytes_mib": statistics.median(sum(x.get("bytes_mib") or 0 for x in rs)
                                               for rs in reps.values())}
        compute = point["optimal"]["makespan"] if "optimal" in point else None
        moved = max(m["bytes_mib"] for m in point.values())
        io = moved / peak_mibps if peak_mibps else None
        # The slowest job's writes to one file (the same bytes in every mode and repetition).
        write = max((x["one_file_write_s"] for reps in modes.values() for rs in reps.values()
                     for x in rs if x.get("one_file_write_s")), default=None)
        parts = [x for x in (compute, io, write) if x is not None]
        bound = max(parts) if parts else None
        for mode, m in point.items():
            b = _mode_bound(mode, bound, compute)
            m["eff"] = b / m["makespan"] if b and m["makespan"] > 0 else None
        out[key] = {"modes": point, "compute_s": compute, "io_s": io, "write_s": write,
                    "bytes_mib": moved, "bound_s": bound}
    return out


NOTABLE_WAIT_S = 0.01  # shorter waits are not worth a line in a miss's explanation


def why(row, key=None, row_bound=None, points=None):
    """What the statistics say about a ppios row: facts, no guesses."""
    facts = []
    ps = row.get("ppios", {})
    if ps.get("hit") is not None:
        facts.append(f"ppios hit ratio {ps['hit']:.0%}"
                     + (f" (pp {row['pp']['hit']:.0%})"
                        if row.get("pp", {}).get("hit") is not None else ""))
    if ps.get("pt_late"):
        facts.append(f"{ps['pt_late']:g} late prefetches (the MT was already reading)")
    if ps.get("pt_stop") and ps["pt_stop"] != "done":
        facts.append(f"PT ended: {ps['pt_stop']}")
    if ps.get("pt_unused_mib"):
        facts.append(f"{ps['pt_unused_mib']:g} MiB prefetched and never used")
    waits = [(n, ps.get(f)) for n, f in (("MT", "mt_slot_wait"), ("PT", "pt_slot_wait"))]
    waits = [f"{n} {w:.2f} s" for n, w in waits if w and w >= NOTABLE_WAIT_S]
    if waits:
        facts.append("slot waits per rank " + ", ".join(waits))
    if (ps.get("mt_token_wait") or 0) >= NOTABLE_WAIT_S:
        facts.append(f"the MT waited {ps['mt_token_wait']:.2f} s per rank for its process's "
                     f"storage token (a PT sub-read in progress)")
    if (ps.get("pt_room_wait") or 0) >= NOTABLE_WAIT_S:
        facts.append(f"the PT waited {ps['pt_room_wait']:.2f} s per rank for cache room")
    if "io" in ps and "normal" in row:
        others = ", ".join(f"{m} {row[m]['io']:.2f} s" for m in ("normal", "pp") if m in row)
        facts.append(f"ppios still spent {ps['io']:.2f} s in reads ({others})")
    if ps.get("above_opt"):
        facts.append(f"device above its optimal concurrency {ps['above_opt']:.0%} of busy "
                     f"time")
    if row_bound and row_bound.get("bound_s"):
        b = row_bound
        limit = max((b["compute_s"] or 0, "compute"), (b["io_s"] or 0, "bytes/peak"),
                    (b.get("write_s") or 0, "writes to one file at one stream"))[1]
        facts.append(f"bound {b['bound_s']:.2f} s set by {limit}")
    if points and key and key[0] in ("E2", "E3") and (key[0], key[2]) in points:
        pt = points[(key[0], key[2])]
        if pt.get("io_s"):
            facts.append(f"the device is shared: all jobs' bytes / peak = {pt['io_s']:.2f} s")
    return "; ".join(facts) or "no statistics recorded"


def evaluate_issue10(table, row_bounds, points, auto_label=None):
    """R1-R5 as [(name, statement, verdict, details)]. auto_label: the mode label of the
    PPIOS_THRESHOLD=auto runs (ppios or ppios@auto), None when auto did not run."""
    out = []
    paper = {k: r for k, r in table.items() if k[0] in PAPER_EXPERIMENTS and "ppios" in r}

    # R1
    fails, checked = [], 0
    for key, row in paper.items():
        others = [row[m]["wall"] for m in ("normal", "pp") if m in row]
        if not others:
            continue
        checked += 1
        best = min(others)
        if row["ppios"]["wall"] > 1.03 * best:
            fails.append(f"{_label(key)}: ppios {row['ppios']['wall']:.2f} s vs "
                         f"min(normal, pp) {best:.2f} s = x{row['ppios']['wall'] / best:.3f} "
                         f"({why(row, key, row_bounds.get(key), points)})")
    out.append(_verdict("R1", checked, fails, f"{checked} rows"))

    # R2
    fails, checked, lows = [], 0, []
    for key, row in paper.items():
        eff = row["ppios"].get("eff")
        if eff is None:
            continue
        checked += 1
        lows.append(eff)
        if eff < EFFICIENCY_TARGET[key[0]]:
            fails.append(f"{_label(key)}: efficiency {eff:.2f} < "
                         f"{EFFICIENCY_TARGET[key[0]]:.2f} "
                         f"({why(row, key, row_bounds.get(key), points)})")
    details = f"{checked} rows" + (f", lowest {min(lows):.2f}" if lows else "")
    out.append(_verdict("R2", checked, fails, details))

    # R3
    fails, checked = [], 0
    for key, row in paper.items():
        c = compute_vs_io(row)
        ratio = _ratio(row, "ppios", "normal", "io")
        if c is None or c < 1.0 or ratio is None:
            continue
        checked += 1
        if ratio > 0.15:
            fails.append(f"{_label(key)}: {_pct_less(ratio)} less (compute/IO {c:.2f}; "
                         f"{why(row, key, row_bounds.get(key), points)})")
    out.append(_verdict("R3", checked, fails, f"{checked} rows with compute >= I/O"))

    # R4
    fails, checked, seen = [], 0, []
    for key, row in table.items():
        if key[0] != "E3" or key[1].endswith("-neighbour"):
            continue
        nb = table.get((key[0], _neighbour_label(table, key), key[2]), {})
        if not ("ppios" in row and "normal" in row and "ppios" in nb and "normal" in nb):
            continue
        checked += 1
        gain = row["ppios"]["wall"] / row["normal"]["wall"]
        slow = nb["ppios"]["wall"] / nb["normal"]["wall"]
        seen.append(f"P={key[2]}: ppios/normal {gain:.3f}, neighbour x{slow:.3f}")
        if gain >= 1.0 or slow > 1.05:
            fails.append(f"E3 P={key[2]}: ppios/normal {gain:.3f}, neighbour x{slow:.3f} "
                         f"({why(row)}; neighbour's time in reads "
                         f"{nb['ppios']['io']:.2f} s vs {nb['normal']['io']:.2f} s beside "
                         f"normal)")
    out.append(_verdict("R4", checked, fails,
                          f"{checked} E3 points" + (f" ({'; '.join(seen)})" if seen else "")))

    # R5: every other ppios variant of the row but auto ones is a fixed threshold (MTs wait
    # at a fixed cap, the runtime's default; a -passing variant is one too)
    fails, checked, worst = [], 0, []
    for key, row in table.items():
        if key[0] not in PAPER_EXPERIMENTS or not auto_label or auto_label not in row:
            continue
        fixed = {m: v["wall"] for m, v in row.items()
                 if m.split("@")[0] == "ppios" and m != auto_label
                 and not m.startswith("ppios@auto")}
        if not fixed:
            continue
        checked += 1
        best = min(fixed, key=fixed.get)
        ratio = row[auto_label]["wall"] / fixed[best]
        worst.append(ratio)
        if ratio > 1.05:
            fails.append(f"{_label(key)}: auto {row[auto_label]['wall']:.2f} s vs {best} "
                         f"{fixed[best]:.2f} s = x{ratio:.3f}")
    out.append(_verdict("R5", checked, fails, f"{checked} rows"
                        + (f", worst auto/best fixed x{max(worst):.3f}" if worst else "")))
    return out


def _neighbour_label(table, key):
    for k in table:
        if k[0] == key[0] and k[2] == key[2] and k[1].endswith("-neighbour"):
            return k[1]
    return None


TARGETS10 = [
    ("R1", "ppios <= 1.03 x min(normal, pp) in every E1 and E2 row"),
    ("R2", "ppios efficiency (bound / wall) >= 0.85 in E1 rows, >= 0.80 in E2 rows"),
    ("R3", "ppios I/O latency at least 85% below normal where compute >= I/O"),
    ("R4", "E3: ppios gains while slowing its neighbour by no more than 5%"),
    ("R5", "PPIOS_THRESHOLD=auto within 5% of the best fixed threshold in every row"),
]
TARGETS10_D = dict(TARGETS10)


def efficiency_table(table, row_bounds, points):
    shown = ordered(m for row in table.values() for m in row)
    head = (["exp", "kernel", "P", "compute s", "MiB", "MiB/peak s", "one-file writes s", "bound s"]
            + [f"eff {m}" for m in shown])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key, row in table.items():
        b = row_bounds[key]
        compute = "-" if b["compute_s"] is None else (
            f"{b['compute_s']:.2f}" + (" (est.)" if b["compute_from"] == "est." else ""))
        cells = [key[0], key[1], str(key[2]), compute, _fmt(b["bytes_mib"], ".1f"),
                 _fmt(b["io_s"]), _fmt(b["write_s"]), _fmt(b["bound_s"])]
        cells += [_fmt(row[m].get("eff")) if m in row else "-" for m in shown]
        lines.append("| " + " | ".join(cells) + " |")
    for (exp, nprocs), pt in points.items():
        cells = [exp, "all jobs (makespan)", str(nprocs), _fmt(pt["compute_s"]),
                 _fmt(pt["bytes_mib"], ".1f"), _fmt(pt["io_s"]), _fmt(pt["write_s"]), _fmt(pt["bound_s"])]
        cells += [_fmt(pt["modes"][m]["eff"]) if m in pt["modes"] else "-" for m in shown]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def e3_table(table):
    """E3: per P and mode, the prefetching job's time and its neighbour's time
    relative to the neighbour beside the normal build."""
    lines = ["| P | mode | job | job s | job / normal | neighbour s | neighbour / beside normal "
             "| neighbour io s | job hits |", "|---|---|---|---|---|---|---|---|---|"]
    for key, row in table.items():
        if key[0] != "E3" or key[1].endswith("-neighbour"):
            continue
        nb = table.get((key[0], _neighbour_label(table, key), key[2]), {})
        for m in ordered(row):
            n = nb.get(m)
            cells = [str(key[2]), m, key[1], _fmt(row[m]["wall"]),
                     _fmt(_ratio(row, m, "normal"), ".3f"),
                     _fmt(n["wall"]) if n else "-",
                     _fmt(_ratio(nb, m, "normal"), ".3f") if n else "-",
                     _fmt(n["io"]) if n else "-",
                     "-" if row[m].get("hit") is None else f"{row[m]['hit']:.0%}"]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _fmt(x, spec=".2f"):
    return "-" if x is None else format(x, spec)


def _pct_less(ratio):
    return f"{(1 - ratio) * 100:.1f}%"


def evaluate_targets(table):
    """[(name, statement, verdict, details)] with verdict met / not met / not measured."""
    out = []
    table = {k: row for k, row in table.items() if k[0] in PAPER_EXPERIMENTS}
    has_ppios = any("ppios" in row for row in table.values())
    if not has_ppios:
        reason = ("PPIOS did not run (not among the modes, or no ppios-cc prefetching build)"
                  if table else "no E1 or E2 row in this run")
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
ALL_TARGETS = {**TARGETS_D, **TARGETS10_D}


def _verdict(name, checked, fails, details):
    """A target's row: not measured (no row of its kind), met, or not met with its misses."""
    if checked == 0:
        return (name, ALL_TARGETS[name], "not measured", details + " (no such row in this run)")
    if fails:
        return (name, ALL_TARGETS[name], "not met", details + "; misses: " + "; ".join(fails))
    return (name, ALL_TARGETS[name], "met", details)


def _best(table, a, b):
    ratios = [(k, _ratio(r, a, b)) for k, r in table.items()]
    ratios = [(k, x) for k, x in ratios if x is not None]
    if not ratios:
        return "-"
    k, x = min(ratios, key=lambda kx: kx[1])
    return f"{_pct_less(x)} ({_label(k)})"


def _label(key):
    return f"{key[0]} {key[1]} P={key[2]}"


def comparison_table(table):
    """Markdown: one line per (experiment, kernel, P), medians and ratios."""
    shown = ordered(m for row in table.values() for m in row)
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


def text_table(table):
    """The same numbers for a terminal (make demo)."""
    shown = ordered(m for row in table.values() for m in row)
    cols = ["exp", "kernel", "P"] + [f"{m} s" for m in shown] + [
        "ppios/normal", "ppios/pp", "io ppios/normal", "eff ppios"]
    widths = [max(8, len(c)) for c in cols]
    lines = [cols]
    for key, row in table.items():
        cells = [key[0], key[1], str(key[2])]
        cells += [_fmt(row[m]["wall"]) if m in row else "-" for m in shown]
        cells += [_fmt(_ratio(row, "ppios", "normal"), ".3f"),
                  _fmt(_ratio(row, "ppios", "pp"), ".3f"),
                  _fmt(_ratio(row, "ppios", "normal", "io"), ".3f"),
                  _fmt(row.get("ppios", {}).get("eff"))]
        widths = [max(w, len(c)) for w, c in zip(widths, cells)]
        lines.append(cells)
    lines = [lines[0]] + ["  ".join(c.rjust(w) for c, w in zip(cells, widths))
                          for cells in lines[1:]]
    lines[0] = "  ".join(c.rjust(w) for c, w in zip(cols, widths))
    return "\n".join(lines)


def write_summary(path, meta, table, targets, calibration, plots, targets10, row_bounds,
                  points):
    m = meta
    parts = [f"# ppios benchmark: section 5 of the PPIOS paper (Zhao, Yoshigoe and Xie, 2013) "
             f"on the emulator ({m['profile']})", ""]
    parts += ["## Machine and command", "",
              f"- date: {m['date']}", f"- machine: `nproc` = {m['nproc']}, kernel "
              f"{m['kernel']}, {m['cpu']}", f"- command: `{m['command']}`",
              f"- build: `{m['build']}`; git {m['git']}",
              f"- wall time of the whole run: {m['elapsed_min']:.1f} min"]
    if m.get("load"):
        (a1, a5, _), (b1, b5, _) = m["load"]
        parts.append(f"- load average (1 min, 5 min) at the start {a1:.1f}, {a5:.1f}, at the "
                     f"end {b1:.1f}, {b5:.1f}, on {m['nproc']} cores. Above {m['nproc']} the "
                     f"machine was shared (other builds and tests): a wall time then carries "
                     f"that load, so judge modes by the ratios of the interleaved runs of "
                     f"one row (every repetition runs every mode back to back)")
    parts.append("")
    parts += ["## Device model", "", f"- modeled device (`device` column): `{m['device']}`",
              f"- optimal reference: `{m['optimal_device']}`"]
    if m.get("e2_device"):
        parts.append(f"- E2's modeled device: `{m['e2_device']}`")
    parts += [
              f"- PPIOS_THRESHOLD = {m['threshold']} for the mode ppios"
              + (f"; variants ppios@T for {', '.join(m['thresholds'][1:])}"
                 if len(m['thresholds']) > 1 else "")
              + "; coordinator: shm for E1 and E3, a private redis-server (unix socket) "
                "for E2",
              f"- E3: {m['e3']}",
              f"- chunk {m['chunk']}, compute factors {m['factors']}, inputs: E1 "
              f"{m['e1_input_mib']} MiB, E2 {m['e2_input_mib']} MiB per kernel, "
              f"{m['reps']} repetition(s), medians", "",
              "Why these parameters: " + m["rationale"], ""]
    if m.get("skipped"):
        parts += ["## Modes that could not run", ""]
        parts += [f"- {e} {k.upper()} {mode}: {why}" for e, k, mode, why in m["skipped"]]
        parts.append("")
    parts += ["## Targets: physical bounds", ""]
    for name, statement, verdict, details in targets10:
        parts.append(f"- **{name} {verdict.upper()}**: {statement}. {details}.")
    parts += ["", "Efficiency = bound / wall, bound = max(compute, MiB moved / device peak, a job's writes to one file at one stream), "
              "compute = the optimal run's wall time (est. = normal minus its time in reads "
              "and writes, when optimal did not run). A miss lists what the run's "
              "statistics say (PPIOS_STATS, ppios-simfs).", ""]
    parts += ["## Targets: the paper's claims", ""]
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
              comparison_table(table), ""]
    above = [f"{_label(k)} {m}" for k, row in table.items() for m, v in row.items()
             if (v.get("eff") or 0) > 1.0]
    parts += ["## Efficiency (bound / wall)", "",
              (f"Device peak {m['peak_mibps']:g} MiB/s. " if m["peak_mibps"] else
               "No device peak (the plain file system): the bound is the compute time. ")
              + f"'all jobs' lines: an E2/E3 point as "
              "a whole, its makespan against max(the slowest optimal job, all jobs' MiB / "
              "peak, the largest job's writes to one file at one stream).", "", efficiency_table(table, row_bounds, points), ""]
    if above:
        parts += ["Efficiency above 1 means this mode beat the optimal run of its row: the "
                  "compute time is one measurement (the median of the repetitions) on a "
                  "shared machine, so it carries that noise. Here: " + ", ".join(above)
                  + ".", ""]
    if any(k[0] == "E3" for k in table):
        parts += ["## E3: a prefetching job beside a neighbour that does not prefetch", "",
                  "The neighbour is the same mpicc build in every line; 'neighbour / beside "
                  "normal' is its time beside this mode over its time beside the normal "
                  "build (target R4: at most 1.05 while ppios gains).", "",
                  e3_table(table), ""]
    if plots:
        parts += ["## Plots", ""] + [f"![{p}]({p})" for p in plots] + [""]
    if calibration:
        parts += ["## Calibration (`ppios-simfs-calibrate` on the modeled mount)", "",
                  f"exit code {calibration[0]} (0 = every point within 10%)", "", "```",
                  calibration[1].strip(), "```", ""]
    with open(path, "w") as f:
        f.write("\n".join(parts))
