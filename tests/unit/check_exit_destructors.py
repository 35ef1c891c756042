#!/usr/bin/env python3
"""libppios destroys nothing at exit: no function of the library but atexit() itself
registers an exit-time destructor (__cxa_atexit). The prefetch thread may still be
inside a runtime call when the program exits (exit does not wait for it), so an object
it reads must outlive exit's destructors: a namespace-scope std::map destroyed under it
is a use after free. Namespace-scope objects with destructors are Immortal<T>
(runtime/src/Immortal.h), function-local statics point to heap objects never freed."""
import re
import subprocess
import sys


def main():
    lib = sys.argv[1]
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-C", lib], check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    function, registering = None, set()
    for line in out.splitlines():
        m = re.match(r"^[0-9a-f]+ <(.*)>:$", line)
        if m:
            function = m.group(1)
        elif re.search(r"\b(call|jmp)\s+[0-9a-f]+ <__cxa_atexit@plt>", line):
            registering.add(function)
    allowed = {"atexit"}  # the program's and the runtime's own atexit() handlers
    bad = sorted(registering - allowed)
    print(f"functions registering an exit-time destructor: {len(bad)}")
    for f in bad:
        print(f"FAIL: {f} registers an exit-time destructor (make the object an Immortal<T>)")
    if not any(f in allowed for f in registering) and not bad:
        # The pattern must see at least atexit()'s own call, or it matches nothing at all.
        print("FAIL: no call of __cxa_atexit found at all: the check no longer reads objdump's output")
        return 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
