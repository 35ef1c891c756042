#!/usr/bin/env python3
"""Runs a program built with mpicc and the same program built with ppios-cc under real
mpirun, the latter in every PPIOS_MODE, and checks that the ppios-cc build behaves like the
plain one: same exit code, same result lines on stdout (lines matching --ignore, such as the
kernels' TIME line, are left out), byte-identical output files; and, from PPIOS_STATS, that
the prefetch thread served at least --min-hit-ratio of the MT's read bytes.

Arguments after `--` are the program's; {work} is replaced with the run's own directory
(each build writes its outputs there) and {NAME} with an input made by --input."""
import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

MODES = ["off", "pp", "intra", "ppios"]


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--mpirun", required=True)
    ap.add_argument("--mpirun-flags", default="")
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--plain", required=True)
    ap.add_argument("--ppios", required=True)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--gen-input", help="gen-input executable, for --input NAME:MIB")
    ap.add_argument("--input", action="append", default=[], help="NAME:MIB, made with gen-input")
    ap.add_argument("--outputs", action="append", default=[], help="file names the program writes")
    ap.add_argument("--ignore", default=r"^TIME ", help="regex of stdout lines not compared")
    ap.add_argument("--min-hit-ratio", type=float, default=None)
    ap.add_argument("--env", action="append", default=[], help="K=V for the ppios-cc runs")
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("args", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    args = a.args[1:] if a.args[:1] == ["--"] else a.args

    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    for k in [k for k in env if k.startswith("PPIOS_")]:
        del env[k]
    env["PPIOS_TARGET"] = f"ppios-cc-e2e-{os.getpid()}"
    ignore = re.compile(a.ignore)
    failures = []
    with tempfile.TemporaryDirectory(prefix="ppios-cc-e2e-") as top:
        inputs = {}
        for spec in a.input:
            name, mib = spec.split(":")
            inputs[name] = os.path.join(top, name)
            subprocess.run([a.gen_input, "--bytes", str(int(float(mib) * (1 << 20)) + 4093),
                            "--seed", "7", "-o", inputs[name]], check=True,
                           stdout=subprocess.DEVNULL)

        def one(label, binary, extra_env):
            work = os.path.join(top, label)
            os.mkdir(work)
            argv = []
            for arg in args:
                arg = arg.replace("{work}", work)
                for name, path in inputs.items():
                    arg = arg.replace("{" + name + "}", path)
                argv.append(arg)
            cmd = [a.mpirun, "-np", str(a.np)] + shlex.split(a.mpirun_flags) + [binary] + argv
            p = subprocess.run(cmd, cwd=work, env=dict(env, **extra_env), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, timeout=a.timeout)
            out = [l for l in p.stdout.decode(errors="replace").splitlines() if not ignore.search(l)]
            files = {}
            for name in a.outputs:
                path = os.path.join(work, name)
                files[name] = open(path, "rb").read() if os.path.exists(path) else None
            return p.returncode, out, files, p.stderr.decode(errors="replace")

        code, out, files, err = one("plain", a.plain, {})
        print(f"plain: exit {code}: {' | '.join(out)}")
        if code != 0:
            failures.append(f"plain build exits {code}:\n{err}")
        for mode in a.modes.split(","):
            stats = os.path.join(top, f"stats-{mode}.jsonl")
            extra = {"PPIOS_MODE": mode, "PPIOS_STATS": stats}
            extra.update(kv.split("=", 1) for kv in a.env)
            code_m, out_m, files_m, err_m = one(mode, a.ppios, extra)
            label = f"mode {mode}"
            if code_m != code:
                failures.append(f"{label}: exit {code_m}, plain {code}\n{err_m}")
            if out_m != out:
                failures.append(f"{label}: stdout differs: {out_m} vs {out}")
            for name in files:
                if files_m[name] != files[name]:
                    failures.append(f"{label}: {name} differs from the plain build's")
            try:
                lines = [json.loads(l) for l in open(stats)]
            except OSError as e:
                failures.append(f"{label}: no PPIOS_STATS ({e})")
                continue
            read = sum(s["mt_read_bytes"] for s in lines)
            hit = sum(s["hit_bytes"] for s in lines)
            ratio = hit / read if read else 0.0
            print(f"  {label}: hit ratio {ratio:.3f} ({hit}/{read} bytes), "
                  f"pt_read {sum(s['pt_read_bytes'] for s in lines)}, "
                  f"wt {sum(s['wt_started'] for s in lines)}")
            if mode != "off" and a.min_hit_ratio is not None and ratio < a.min_hit_ratio:
                failures.append(f"{label}: hit ratio {ratio:.3f} below {a.min_hit_ratio}")
    for f in failures:
        print("FAIL:", f)
    print("FAILED" if failures else "OK")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
