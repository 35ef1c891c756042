#!/usr/bin/env python3
"""Mutation fuzzer of ppios-cc's contract: the generated code compiles whenever the input
compiles (otherwise ppios-cc falls back to the original, with one warning, and the
program silently loses prefetching).

It takes the C programs of tests/corpus, tests/hazards/src and the inputs of
transformer/tests/lit, applies random mutations that keep the program C (rename an
identifier, move a declaration to the top of its block or to file scope, add `static`
to a local, wrap a literal in a macro, change a storage class, split a declaration, add
an unused helper, spell a local's type as `__typeof__` of another local or as a typedef
of the function, declare a helper only in a block of main() and define it after main(),
name a local like the prefetch thread's own locals, define a lowercase object-like macro
of a short name before the code), keeps the mutants that mpicc compiles, runs `ppios-cc -c` on each and
counts its fallbacks (its "compiled without prefetching" warning, see
transformer/lib/CompilerDriver.cpp) and its failures (a nonzero exit where mpicc
succeeded). Mutants that fall back are written to --keep.

    fuzz_compiles.py --ppios-cc BUILD/bin/ppios-cc --count 500 --seed 1 [--keep DIR]

Exit status 1 if any mutant made ppios-cc fall back or fail. Python 3 standard library
only.
"""
import argparse
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

FALLBACK = "compiled without prefetching"
TYPES = r"(?:unsigned\s+|signed\s+|const\s+)*(?:int|long|char|short|double|float|size_t|ssize_t|off_t|uint64_t|uint32_t|int64_t|MPI_Offset|MPI_File|MPI_Status|FILE\s*\*|unsigned)(?:\s+long)?(?:\s*\*+)?"
DECL = re.compile(r"^(?P<ind>[ \t]+)(?P<type>" + TYPES + r")\s+(?P<rest>[A-Za-z_]\w*(?:\s*\[[^\]]*\])?(?:\s*=\s*[^;{}]*)?(?:\s*,\s*\**\s*[A-Za-z_]\w*(?:\s*\[[^\]]*\])?(?:\s*=\s*[^;,{}]*)?)*)\s*;\s*$")
SIMPLE_INIT = re.compile(r"^(?P<ind>[ \t]+)(?P<type>" + TYPES + r")\s+(?P<name>[A-Za-z_]\w*)\s*=\s*(?P<init>[^;{}]+);\s*$")
NUMBER = re.compile(r"(?<![\w.])(\d+)(?![\w.])")
KEYWORDS = set("""auto break case char const continue default do double else enum extern float
for goto if inline int long register restrict return short signed sizeof static struct switch
typedef union unsigned void volatile while main argc argv""".split())


def sources(root):
    """(name, {file: text}, main file) for every program: one C file with the headers of
    its directory, or a lit test's split-file sections."""
    progs = []
    for sub in ("tests/corpus", "tests/hazards/src"):
        d = os.path.join(root, sub)
        headers = {f: open(os.path.join(d, f)).read() for f in sorted(os.listdir(d)) if f.endswith(".h")}
        for f in sorted(os.listdir(d)):
            if f.endswith(".c"):
                files = dict(headers)
                files[f] = open(os.path.join(d, f)).read()
                progs.append((sub + "/" + f, files, f))
    lit = os.path.join(root, "transformer/tests/lit")
    for t in sorted(os.listdir(lit)):
        if not t.endswith(".test"):
            continue
        files, cur = {}, None
        for line in open(os.path.join(lit, t)).read().splitlines(keepends=True):
            m = re.match(r"^#--- (\S+)\s*$", line)
            if m:
                cur = m.group(1)
                files[cur] = ""
            elif cur:
                files[cur] += line
        for f in files:
            if f.endswith(".c") and "main(" in files[f] and "/" not in f:
                progs.append(("lit/" + t + ":" + f, files, f))
    return progs


def function_spans(lines):
    """(first line, last line) of every function definition at column 0."""
    spans, i = [], 0
    while i < len(lines):
        if re.match(r"^[A-Za-z_].*\)\s*\{\s*$", lines[i]) and not lines[i].startswith(("typedef", "struct", "#")):
            depth, j = 0, i
            while j < len(lines):
                depth += lines[j].count("{") - lines[j].count("}")
                if depth == 0:
                    break
                j += 1
            spans.append((i, j))
            i = j
        i += 1
    return spans


def block_start(lines, k):
    """The line of the `{` that opens the block holding line k."""
    depth = 0
    for j in range(k - 1, -1, -1):
        depth += lines[j].count("}") - lines[j].count("{")
        if depth < 0:
            return j
    return None


def in_function(lines, k):
    return any(a < k <= b for a, b in function_spans(lines))


def declared_names(text):
    names = set()
    for line in text.splitlines():
        m = DECL.match(line)
        if m:
            for part in m.group("rest").split(","):
                n = re.match(r"\s*\**\s*([A-Za-z_]\w*)", part)
                if n and n.group(1) not in KEYWORDS:
                    names.add(n.group(1))
    return sorted(names)


def m_rename(text, rng):
    names = declared_names(text)
    if not names:
        return None
    old = rng.choice(names)
    new = old + "_fz%d" % rng.randrange(100)
    return re.sub(r"(?<![\w\"'])\b%s\b" % re.escape(old), new, text)


def m_split(text, rng):
    lines = text.splitlines(keepends=True)
    cands = [k for k, l in enumerate(lines) if DECL.match(l) and "," in DECL.match(l).group("rest")
             and "(" not in l and "{" not in l and in_function(lines, k)]
    if not cands:
        return None
    k = rng.choice(cands)
    m = DECL.match(lines[k])
    base = m.group("type").rstrip("* \t")
    parts = [p.strip() for p in m.group("rest").split(",")]
    first_stars = m.group("type")[len(base):].strip()
    out = [m.group("ind") + base + " " + first_stars + parts[0] + ";\n"]
    out += [m.group("ind") + base + " " + p + ";\n" for p in parts[1:]]
    lines[k:k + 1] = out
    return "".join(lines)


def m_hoist(text, rng):
    """`T x = e;` -> `T x;` at the top of its block and `x = e;` where it was."""
    lines = text.splitlines(keepends=True)
    cands = [k for k, l in enumerate(lines) if SIMPLE_INIT.match(l) and "const" not in l
             and "[" not in l and in_function(lines, k)]
    if not cands:
        return None
    k = rng.choice(cands)
    m = SIMPLE_INIT.match(lines[k])
    b = block_start(lines, k)
    if b is None:
        return None
    lines[k] = "%s%s = %s;\n" % (m.group("ind"), m.group("name"), m.group("init").strip())
    lines.insert(b + 1, "%s%s %s;\n" % (m.group("ind"), m.group("type"), m.group("name")))
    return "".join(lines)


def m_file_scope(text, rng):
    """A declaration without initializer moves to file scope, before its function."""
    lines = text.splitlines(keepends=True)
    spans = function_spans(lines)
    cands = []
    for a, b in spans:
        for k in range(a + 1, b):
            m = DECL.match(lines[k])
            if m and "=" not in lines[k] and block_start(lines, k) == a:
                cands.append((a, k))
    if not cands:
        return None
    a, k = rng.choice(cands)
    decl = lines[k].strip()
    del lines[k]
    lines.insert(a, ("static " if rng.random() < 0.7 else "") + decl + "\n")
    return "".join(lines)


def m_static(text, rng):
    lines = text.splitlines(keepends=True)
    cands = [k for k, l in enumerate(lines) if DECL.match(l) and in_function(lines, k)]
    if not cands:
        return None
    k = rng.choice(cands)
    m = DECL.match(lines[k])
    lines[k] = m.group("ind") + "static " + lines[k][len(m.group("ind")):]
    return "".join(lines)


def m_storage(text, rng):
    """A storage class changes: a static function or global loses it, a local gets
    `register` (dropped again by the compile check where its address is taken)."""
    lines = text.splitlines(keepends=True)
    cands = [k for k, l in enumerate(lines) if l.startswith("static ") and "inline" not in l]
    if cands and rng.random() < 0.5:
        k = rng.choice(cands)
        lines[k] = lines[k][len("static "):]
        return "".join(lines)
    cands = [k for k, l in enumerate(lines) if DECL.match(l) and in_function(lines, k)
             and "[" not in l]
    if not cands:
        return None
    k = rng.choice(cands)
    m = DECL.match(lines[k])
    lines[k] = m.group("ind") + "register " + lines[k][len(m.group("ind")):]
    return "".join(lines)


def m_macro(text, rng):
    """A number (or a sizeof) in a function is wrapped in a macro."""
    lines = text.splitlines(keepends=True)
    cands = [k for k, l in enumerate(lines) if in_function(lines, k) and not l.lstrip().startswith("#")
             and (NUMBER.search(l) or "sizeof" in l) and '"' not in l and "case " not in l]
    if not cands:
        return None
    k = rng.choice(cands)
    line = lines[k]
    if "sizeof" in line and rng.random() < 0.5:
        line = re.sub(r"sizeof\s+(\w+)", r"FZ_ID(sizeof \1)", line, count=1)
    else:
        nums = list(NUMBER.finditer(line))
        if not nums:
            return None
        n = rng.choice(nums)
        line = line[:n.start()] + "FZ_ID(" + n.group(1) + ")" + line[n.end():]
    lines[k] = line
    return "#define FZ_ID(x) (x)\n" + "".join(lines)


HELPERS = [
    "static int fz_unused_sum(int n) {\n  int i, s = 0;\n  for (i = 0; i < n; i++)\n    s += i;\n  return s;\n}\n",
    "static long fz_unused_read(const char *p) {\n  FILE *f = fopen(p, \"r\");\n  char b[16];\n"
    "  long n = f ? (long)fread(b, 1, sizeof b, f) : 0;\n  if (f)\n    fclose(f);\n  return n;\n}\n",
]


def m_helper(text, rng):
    lines = text.splitlines(keepends=True)
    spans = function_spans(lines)
    if not spans:
        return None
    a, _ = rng.choice(spans)
    helper = rng.choice(HELPERS)
    if "fopen" in helper and "<stdio.h>" not in text and "hz.h" not in text and "corpus.h" not in text:
        helper = "#include <stdio.h>\n" + helper
    lines.insert(a, helper)
    return "".join(lines)


def m_typeof(text, rng):
    """A local's type is spelled through the function's scope: `__typeof__` of another
    local declared just before it, or a typedef of the function."""
    lines = text.splitlines(keepends=True)
    cands = []
    for k, l in enumerate(lines):
        m = DECL.match(l)
        if m and in_function(lines, k) and not (("*" in m.group("type") or "*" in m.group("rest"))
                                                and "," in m.group("rest")):
            cands.append(k)
    if not cands:
        return None
    k = rng.choice(cands)
    m = DECL.match(lines[k])
    ty = m.group("type").strip()
    tag = "fz_t%d" % rng.randrange(1000)
    if rng.random() < 0.6:
        first = "%s%s %s;\n" % (m.group("ind"), ty.replace("const", "").strip(), tag)
        spelled = "__typeof__(%s)" % tag
        if ty.startswith("const"):
            spelled = "const " + spelled
    else:
        first = "%stypedef %s %s;\n" % (m.group("ind"), ty, tag)
        spelled = tag
    lines[k] = m.group("ind") + spelled + " " + m.group("rest") + ";\n"
    lines.insert(k, first)
    return "".join(lines)


SIGNATURE = re.compile(r"^(?:static\s+)?(?P<sig>[A-Za-z_][\w\s\*]*?\b(?P<name>[A-Za-z_]\w*)\s*\([^()]*\))\s*\{\s*$")


def m_block_fdecl(text, rng):
    """A helper defined before main() moves after it, and main() declares it in one of its
    blocks only (the top of its body, or the top of an inner block)."""
    lines = text.splitlines(keepends=True)
    spans = function_spans(lines)
    main = [(a, b) for a, b in spans if re.match(r"^int\s+main\s*\(", lines[a])]
    if not main:
        return None
    ma, mb = main[0]
    helpers = [(a, b) for a, b in spans if b < ma and SIGNATURE.match(lines[a])
               and SIGNATURE.match(lines[a]).group("name") != "main"]
    if not helpers:
        return None
    a, b = rng.choice(helpers)
    sig = SIGNATURE.match(lines[a])
    name = sig.group("name")
    named = re.compile(r"\b%s\b" % re.escape(name))
    calls = [k for k in range(ma + 1, mb) if named.search(lines[k])]
    # Only main() names it: elsewhere its use would precede every declaration (an implicit
    # one, which clang rejects where gcc only warns).
    if not calls or any(named.search(l) for k, l in enumerate(lines)
                        if not (a <= k <= b or ma <= k <= mb)):
        return None
    body = lines[a:b + 1]
    body[0] = body[0][len("static "):] if body[0].startswith("static ") else body[0]

    def block_end(k):
        depth = 0
        for j in range(k, mb + 1):
            depth += lines[j].count("{") - lines[j].count("}")
            if depth <= 0:
                return j
        return mb

    # A block that holds every call (the declaration is visible to each of them).
    blocks = [k for k in range(ma, calls[0]) if lines[k].rstrip().endswith("{")
              and block_end(k) >= calls[-1]]
    if not blocks:
        return None
    at = rng.choice(blocks)
    ind = re.match(r"^\s*", lines[at + 1]).group(0) or "  "
    out = lines[:a] + lines[b + 1:at + 1] + [ind + sig.group("sig") + ";\n"] + lines[at + 1:mb + 1]
    out += ["\n"] + body + lines[mb + 1:]
    return "".join(out)


OWN_NAMES = ["ppios_seq", "ppios_ctx", "ppios_arg", "ppios_seq0", "ppios_path0"]


def m_own_name(text, rng):
    """A local is named like one of the prefetch thread's own locals or context fields."""
    names = [n for n in declared_names(text) if not n.startswith("ppios_")]
    free = [n for n in OWN_NAMES if not re.search(r"\b%s\b" % n, text)]
    if not names or not free:
        return None
    old, new = rng.choice(names), rng.choice(free)
    return re.sub(r"(?<![\w\"'])\b%s\b" % re.escape(old), new, text)


SHORT_MACROS = ["n", "size", "f", "o", "w", "s", "b", "q", "fl", "at", "d", "to", "from", "p",
                "unused", "count", "len", "buf", "mode", "path", "offset", "fd", "stream", "ptr",
                "site", "seq", "flags", "status", "slot", "nmemb", "whence", "delim", "format",
                "c", "k", "x", "lineptr", "info", "comm", "rank", "bytes", "entry", "ctx"]


def m_short_macro(text, rng):
    """A lowercase object-like macro of a short name (a constant, or an attribute for
    `unused`), defined after the includes or before the last one."""
    name = rng.choice(SHORT_MACROS)
    if re.search(r"\b%s\b" % name, text) and rng.random() < 0.7:
        return None  # (mostly) a name the program does not use, so that it still compiles
    value = "__attribute__((unused))" if name == "unused" else str(rng.choice([4, 16, 4096]))
    lines = text.splitlines(keepends=True)
    incs = [k for k, l in enumerate(lines) if l.startswith("#include")]
    if not incs:
        return None
    at = incs[-1] + 1 if rng.random() < 0.6 else incs[-1]
    lines.insert(at, "#define %s %s\n" % (name, value))
    return "".join(lines)


MUTATIONS = [m_rename, m_hoist, m_file_scope, m_static, m_macro, m_storage, m_split, m_helper,
             m_typeof, m_block_fdecl, m_own_name, m_short_macro]


def run(cmd, cwd, timeout=120):
    try:
        p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=timeout)
        return p.returncode, p.stderr
    except subprocess.TimeoutExpired:
        return -1, "timeout"


def write_program(d, files, main_file, text):
    os.makedirs(d)
    for f, t in files.items():
        if "/" not in f:
            open(os.path.join(d, f), "w").write(t)
    open(os.path.join(d, main_file), "w").write(text)


def original_ok(args, files, main_file, work):
    """The unmutated program compiles with mpicc and ppios-cc transforms it: programs that
    fall back on purpose (lit tests of the fallback, GCC extensions) are not mutated."""
    d = tempfile.mkdtemp(dir=work)
    shutil.rmtree(d)
    write_program(d, files, main_file, files[main_file])
    ok = run([args.mpicc, "-c", main_file, "-o", "plain.o"], d)[0] == 0
    if ok:
        rc, err = run([args.ppios_cc, "-Rno-ppios-missed", "-c", main_file, "-o", "pf.o"], d)
        ok = rc == 0 and FALLBACK not in err
    shutil.rmtree(d, ignore_errors=True)
    return ok


def check_originals(args, progs, work):
    """Every program mpicc compiles transforms without a fallback: the mutants start
    from these, and a fallback here would otherwise only skip a program quietly."""
    checked = rejected = 0
    bad = []
    for name, files, main_file in progs:
        expects_fallback = False
        if name.startswith("lit/"):  # its CHECK line names the file and the warning
            lit = os.path.join(os.path.abspath(args.root), "transformer/tests", name.split(":")[0])
            expects_fallback = any(FALLBACK in l and main_file in l for l in open(lit))
        d = tempfile.mkdtemp(dir=work)
        shutil.rmtree(d)
        write_program(d, files, main_file, files[main_file])
        if run([args.mpicc, "-c", main_file, "-o", "plain.o"], d)[0] != 0:
            rejected += 1  # broken on purpose (a lit test of bad input)
        elif not expects_fallback:
            checked += 1
            rc, err = run([args.ppios_cc, "-Rno-ppios-missed", "-c", main_file, "-o", "pf.o"], d)
            if FALLBACK in err or rc != 0:
                line = next((l for l in err.splitlines() if "ppios-cc" in l), err.strip()[:300])
                bad.append(name)
                print("%s: %s: %s" % ("fallback" if FALLBACK in err else "failure (exit %d)" % rc, name, line),
                      flush=True)
        shutil.rmtree(d, ignore_errors=True)
    print("originals checked: %d (mpicc rejected %d, %d expect the fallback), fallbacks or failures: %d"
          % (checked, rejected, len(progs) - checked - rejected, len(bad)))
    return 1 if bad or checked == 0 else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ppios-cc", required=True)
    ap.add_argument("--mpicc", default=os.environ.get("PPIOS_CC", "mpicc"))
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    ap.add_argument("--count", type=int, default=40, help="mutants to try (that mpicc compiles)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-mutations", type=int, default=3)
    ap.add_argument("--only", help="comma-separated mutations to use (default: all), e.g. typeof,block_fdecl")
    ap.add_argument("--keep", help="directory for the mutants that make ppios-cc fall back")
    ap.add_argument("--originals", action="store_true",
                    help="check every unmutated program instead of mutants")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    mutations = MUTATIONS
    if args.only:
        mutations = [m for m in MUTATIONS if m.__name__[2:] in args.only.split(",")]
    progs = sources(os.path.abspath(args.root))
    work = tempfile.mkdtemp(prefix="fuzz-compiles-")
    if args.originals:
        try:
            return check_originals(args, progs, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    tried = invalid = fallbacks = failures = attempts = 0
    reasons = {}
    baseline = {}
    try:
        while tried < args.count and attempts < args.count * 20:
            attempts += 1
            name, files, main_file = rng.choice(progs)
            if name not in baseline:
                baseline[name] = original_ok(args, files, main_file, work)
                if not baseline[name] and args.verbose:
                    print("skipped: %s (its original does not compile, or falls back)" % name)
            if not baseline[name]:
                continue
            text = files[main_file]
            applied = []
            for _ in range(rng.randint(1, args.max_mutations)):
                mut = rng.choice(mutations)
                out = mut(text, rng)
                if out is not None and out != text:
                    text = out
                    applied.append(mut.__name__[2:])
            if not applied:
                continue
            d = os.path.join(work, "m%d" % attempts)
            write_program(d, files, main_file, text)
            rc, _ = run([args.mpicc, "-c", main_file, "-o", "plain.o"], d)
            if rc != 0:
                invalid += 1
                shutil.rmtree(d, ignore_errors=True)
                continue
            tried += 1
            rc, err = run([args.ppios_cc, "-Rno-ppios-missed", "-c", main_file, "-o", "pf.o"], d)
            bad = None
            if FALLBACK in err:
                fallbacks += 1
                bad = "fallback"
            elif rc != 0:
                failures += 1
                bad = "failure (exit %d)" % rc
            if bad:
                line = next((l for l in err.splitlines() if "ppios-cc" in l), err.strip()[:300])
                key = re.sub(r"/tmp/\S+?/", "", line)
                key = re.sub(r"\d+:\d+", "L:C", key)
                reasons.setdefault(key, []).append(name)
                print("%s: %s [%s]: %s" % (bad, name, ",".join(applied), line), flush=True)
                if args.keep:
                    dest = os.path.join(args.keep, "m%d-%s" % (attempts, os.path.basename(main_file)))
                    shutil.copytree(d, dest, dirs_exist_ok=True)
            elif args.verbose:
                print("ok: %s [%s]" % (name, ",".join(applied)))
            shutil.rmtree(d, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("mutants tried: %d (mpicc rejected %d more), fallbacks: %d, failures: %d"
          % (tried, invalid, fallbacks, failures))
    for key, names in sorted(reasons.items(), key=lambda kv: -len(kv[1])):
        print("  %3d x %s" % (len(names), key))
    return 1 if fallbacks or failures else 0


if __name__ == "__main__":
    sys.exit(main())
