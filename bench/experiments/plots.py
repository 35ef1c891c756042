"""The paper's figures as PNGs: per experiment, one figure for execution time
(Figs. 10, 13) and one for I/O latency (Figs. 11, 14); a panel per kernel,
number of processes on x, seconds on y, one series per mode (median, with
the min-max of the repetitions as error bars). A third figure per experiment
plots each mode's efficiency (bound / wall, report.py) with the target line."""
import os
from collections import defaultdict

from .report import EFFICIENCY_TARGET, mode_of, ordered

STYLE = {"normal": ("o-", "tab:blue"), "pp": ("s-", "tab:orange"),
         "intra": ("v-", "tab:purple"), "ppios": ("^-", "tab:green"),
         "optimal": ("x--", "tab:gray")}
VARIANT_STYLE = ("d:", "tab:olive")  # ppios@T, the other thresholds
METRICS = [("wall_s", "time", "Execution time (s)"),
           ("io_latency_s", "io_latency", "I/O latency (s)"),
           ("efficiency", "efficiency", "Efficiency (bound / wall)")]
TITLES = {"E1": "single benchmark", "E2": "four benchmarks at once, P = total ranks",
          "E3": "a prefetching job beside a neighbour that does not prefetch"}


def available():
    try:
        import matplotlib  # noqa: F401
        return True
    except ImportError:
        return False


def plot_all(runs, out_dir, device):
    """device: the title's device, one string or {experiment: string} (E2 has its own)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    by_exp = defaultdict(list)
    for r in runs:
        by_exp[r["experiment"]].append(r)
    for exp, rs in sorted(by_exp.items()):
        kernels = list(dict.fromkeys(r["kernel"] for r in rs))
        for field, slug, ylabel in METRICS:
            cols = min(len(kernels), 2)
            rows = (len(kernels) + cols - 1) // cols
            fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.8 * rows),
                                     squeeze=False)
            for i, kernel in enumerate(kernels):
                ax = axes[i // cols][i % cols]
                series = defaultdict(lambda: defaultdict(list))
                for r in rs:
                    if r["kernel"] == kernel and r.get(field) is not None:
                        series[mode_of(r)][int(r["nprocs"])].append(r[field])
                if not series:
                    ax.set_visible(False)
                    continue
                for mode in ordered(series):
                    xs = sorted(series[mode])
                    med = [_median(series[mode][x]) for x in xs]
                    lo = [m - min(series[mode][x]) for m, x in zip(med, xs)]
                    hi = [max(series[mode][x]) - m for m, x in zip(med, xs)]
                    marker, color = STYLE.get(mode, VARIANT_STYLE)
                    ax.errorbar(xs, med, yerr=[lo, hi], fmt=marker, color=color, label=mode,
                                capsize=3)
                all_x = sorted({int(r["nprocs"]) for r in rs})
                ax.set_xscale("log", base=2)
                ax.set_xticks(all_x)
                ax.set_xticklabels([str(x) for x in all_x])
                ax.set_xlabel("Processes of the prefetching job" if exp == "E3"
                              else "Number of processes")
                ax.set_ylabel(ylabel)
                ax.set_ylim(bottom=0)
                if field == "efficiency" and exp in EFFICIENCY_TARGET:
                    ax.axhline(EFFICIENCY_TARGET[exp], color="tab:red", linestyle="--",
                               linewidth=1, label=f"target {EFFICIENCY_TARGET[exp]:.2f}")
                ax.set_title(f"({chr(97 + i)}) {kernel}")
                ax.grid(True, alpha=0.3)
                ax.legend(fontsize=8)
            for j in range(len(kernels), rows * cols):
                axes[j // cols][j % cols].set_visible(False)
            title_device = device.get(exp, "") if isinstance(device, dict) else device
            fig.suptitle(f"{exp} ({TITLES.get(exp, '')}): {ylabel.split(' (')[0]}\n"
                         f"{title_device}",
                         fontsize=9)
            fig.tight_layout()
            name = f"{exp.lower()}_{slug}.png"
            fig.savefig(os.path.join(out_dir, name), dpi=110)
            plt.close(fig)
            written.append(name)
    return written


def _median(values):
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
