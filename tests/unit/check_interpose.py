#!/usr/bin/env python3
"""Every PPIOS_INTERPOSE(sym) of interpose.def has its __wrap_sym in libppios: a wrapped
link (-Wl,--wrap=sym) of a program calling sym would fail, or worse, resolve elsewhere."""
import re
import subprocess
import sys

def main():
    deffile, lib = sys.argv[1], sys.argv[2]
    with open(deffile) as f:
        wanted = re.findall(r"^PPIOS_INTERPOSE\((\w+)\)", f.read(), re.M)
    out = subprocess.run(["nm", "-D", "--defined-only", lib], check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    defined = {line.split()[-1] for line in out.splitlines() if line.strip()}
    missing = [s for s in wanted if "__wrap_" + s not in defined]
    print(f"{len(wanted)} interposed calls, {len(wanted) - len(missing)} wrapped")
    for s in missing:
        print(f"FAIL: libppios defines no __wrap_{s}")
    return 1 if missing or not wanted else 0

if __name__ == "__main__":
    sys.exit(main())
