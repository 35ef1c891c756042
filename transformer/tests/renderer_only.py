#!/usr/bin/env python3
"""The emitter renders the finished plan and never asks the planner (see
docs/design/plan-contract.md): PrefetchThreadEmitter.{h,cpp} and every project header they
include, transitively, must not include the planner's headers nor name PrefetchPlanner,
the verifier or the planner's internal queries. Exit status 1 with the offending file
otherwise.

    renderer_only.py LIBDIR
"""
import os
import re
import sys

PLANNER_HEADERS = {"PrefetchPlanner.h", "PlannerSupport.h", "PlanVerifier.h"}
PLANNER_NAMES = re.compile(r"\b(PrefetchPlanner|PlanVerifier|slicing::)")


def code(text):
    """The text without comments and string literals (names in them are prose)."""
    text = re.sub(r"//[^\n]*|/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r'"(?:\\.|[^"\\\n])*"', '""', text)


def main():
    lib = sys.argv[1]
    seen, work = set(), ["PrefetchThreadEmitter.cpp", "PrefetchThreadEmitter.h"]
    while work:
        name = work.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in PLANNER_HEADERS:
            print(f"renderer_only: the emitter reaches the planner's {name}")
            return 1
        text = open(os.path.join(lib, name)).read()
        for inc in re.findall(r'^#include "([^"]+)"', text, flags=re.M):
            if os.path.exists(os.path.join(lib, inc)):
                work.append(inc)
        if name.startswith("PrefetchThreadEmitter"):
            m = PLANNER_NAMES.search(code(text))
            if m:
                print(f"renderer_only: {name} names {m.group(1)}")
                return 1
    print("renderer_only: the emitter reaches " + ", ".join(sorted(seen)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
