#!/usr/bin/env python3
"""Every PPIOS_INTERPOSE(sym) of interpose.def has its __wrap_sym in libppios: a wrapped
link (-Wl,--wrap=sym) of a program calling sym would fail, or worse, resolve elsewhere.
And libppios exports no C name of its own but ppios_* and __wrap_*: a program's global of
the same name (a function `predicted`, a variable `pt_fd`) would take the library's place
in every call the library makes to it (ELF interposition), and crash a correct program."""
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
    # And the other way round: a wrapper without its line is never linked in (ppios-cc
    # adds -Wl,--wrap only for the listed calls), so the call it sees is silently missed.
    unlisted = sorted(s for s in defined if s.startswith("__wrap_") and s[len("__wrap_"):] not in wanted)
    for s in unlisted:
        print(f"FAIL: libppios defines {s}, but interpose.def has no PPIOS_INTERPOSE({s[len('__wrap_'):]})")
    # C++ names are mangled (_Z...) into namespace ppios or std templates; the linker's own
    # markers are no program's names.
    linker = {"_init", "_fini", "_edata", "_end", "__bss_start"}
    stray = sorted(s for s in defined if not s.startswith(("_Z", "ppios_", "__wrap_")) and s not in linker)
    for s in stray:
        print(f"FAIL: libppios exports the C name {s!r}: make it static (or ppios_-prefixed)")
    return 1 if missing or unlisted or stray or not wanted else 0

if __name__ == "__main__":
    sys.exit(main())
