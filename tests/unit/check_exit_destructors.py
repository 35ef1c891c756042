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
    function, registering, functions = None, set(), 0
    for line in out.splitlines():
        m = re.match(r"^[0-9a-f]+ <(.*)>:$", line)
        if m:
            function = m.group(1)
            functions += 1
        elif re.search(r"\b(call|jmp)\s+[0-9a-f]+ <__cxa_atexit@plt>", line):
            registering.add(function)
    # atexit() itself (linked into the library from libc_nonshared) registers the
    # program's and the runtime's own handlers; a sanitizer build may intercept it instead.
    allowed = {"atexit"}
    bad = sorted(registering - allowed)
    print(f"{functions} functions read, {len(bad)} registering an exit-time destructor")
    if functions < 100:  # the pattern must match objdump's output, or it checks nothing
        print("FAIL: too few functions read: the check no longer reads objdump's output")
        return 1
    for f in bad:
        print(f"FAIL: {f} registers an exit-time destructor (make the object an Immortal<T>)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
