#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Writes the man pages of ppios from the sources they document, so they cannot drift:

  ppios-cc(1), ppios-coord(1), ppios-report(1)  from each tool's own --help (ppios-coord:
                                                also every command's --help)
  ppios(7)                                      from docs/configuration.md ("Environment
                                                variables" and "Output files") and the
                                                environment part of ppios-cc --help

The build runs it (packaging/CMakeLists.txt) with the tools it built; the tests render the
pages with `man -l` (packaging/tests/man_test.py). Debian's python3 only.
"""
import argparse
import datetime
import os
import re
import subprocess
import sys

SEE_ALSO = ["ppios-cc(1)", "ppios-coord(1)", "ppios-report(1)", "ppios(7)", "mpicc(1)"]


# ---------------------------------------------------------------- roff helpers

def esc(text):
    """Plain text to roff: backslashes, dashes, and a leading control character."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return text


def inline(text):
    """Plain text with `code` spans (help texts and markdown alike) to roff."""
    out = []
    for i, part in enumerate(re.split(r"`([^`]*)`", text)):
        out.append(("\\fB" + esc(part) + "\\fR") if i % 2 else esc(part))
    return "".join(out)


def line(text):
    """One roff text line: never starts with a control character."""
    return ("\\&" + text) if text[:1] in (".", "'") else text


def header(name, section, version, title):
    # The date of the page: SOURCE_DATE_EPOCH when the builder sets it (reproducible builds).
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    date = (datetime.datetime.fromtimestamp(int(epoch), datetime.timezone.utc) if epoch
            else datetime.datetime.now(datetime.timezone.utc))
    return [f'.TH "{name.upper()}" "{section}" "{date:%Y-%m-%d}" "ppios {version}" "{title}"',
            ".nh", ".ad l"]


# ---------------------------------------------------------------- --help texts

ITEM = re.compile(r"^  (\S(?:.*?\S)?)(?: {2,}(\S.*))?$")


def help_body(lines):
    """The body of a --help text (after its usage lines) as roff.

    Lines indented two spaces are items (term, two or more spaces, description), deeper
    lines continue the item above, a line ending in ':' at column 0 is a heading, a blank
    line ends a paragraph, anything else is running text."""
    out = []
    in_item = False
    for raw in lines:
        if not raw.strip():
            out.append(".PP")
            in_item = False
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        if indent == 0 and raw.rstrip().endswith(":") and len(raw) < 60:
            title = raw.strip()[:-1]
            if not title.startswith("ppios"):  # a name keeps its case
                title = title[:1].upper() + title[1:]
            out.append(".SS " + esc(title))
            in_item = False
            continue
        m = ITEM.match(raw)
        if indent == 2 and m:
            term, desc = m.group(1), m.group(2)
            out += [".TP", line("\\fB" + esc(term) + "\\fR")]
            if desc:
                out.append(line(inline(desc)))
            in_item = True
            continue
        if indent > 2 and in_item:
            out.append(line(inline(raw.strip())))
            continue
        if in_item:
            out.append(".PP")
            in_item = False
        out.append(line(inline(raw.strip())))
    while out and out[-1] == ".PP":
        out.pop()
    return out


def split_usage(text):
    """(usage lines without 'usage: ', the remaining lines) of a --help text."""
    lines = text.rstrip("\n").split("\n")
    if not lines or not lines[0].startswith("usage: "):
        raise SystemExit(f"make-man: a --help text that does not start with 'usage: ': {lines[:1]}")
    usage = [lines[0][len("usage: "):]]
    i = 1
    while i < len(lines) and lines[i].startswith(" ") and lines[i].strip():
        usage.append(lines[i].strip())
        i += 1
    return usage, lines[i:]


def synopsis(usage):
    return [".SH SYNOPSIS", ".nf"] + [line(esc(u)) for u in usage] + [".fi"]


def run(args, **kw):
    # The texts as a user without PPIOS_CC sees them, 80 columns wide (argparse wraps).
    env = dict(os.environ, COLUMNS="80")
    env.pop("PPIOS_CC", None)
    r = subprocess.run(args, capture_output=True, text=True, env=env, **kw)
    if r.returncode != 0:
        raise SystemExit(f"make-man: {' '.join(args)} exited {r.returncode}: {r.stderr.strip()}")
    return r.stdout


def see_also(name):
    refs = [r for r in SEE_ALSO if not r.startswith(name + "(")]
    return [".SH SEE ALSO", ", ".join("\\fB" + esc(r.split("(")[0]) + "\\fR(" + r.split("(")[1]
                                       for r in refs),
            ".PP", "The guides in the ppios sources: README.md, docs/user-guide.md, "
                   "docs/configuration.md, docs/install.md."]


def tool_page(name, summary, help_text, version, extra=()):
    usage, rest = split_usage(help_text)
    out = header(name, 1, version, "ppios manual")
    out += [".SH NAME", f"{esc(name)} \\- {esc(summary)}"]
    out += synopsis(usage)
    out += [".SH DESCRIPTION"] + help_body(rest)
    out += list(extra)
    out += [".SH VERSION", f"{esc(name)} \\-\\-version prints the version of ppios and the git id of "
                           "its source."]
    out += see_also(name)
    return "\n".join(out) + "\n"


def coord_page(coord, version):
    top = run([coord, "--help"])
    m = re.search(r"^commands:\n((?:  .*\n)+)", top, re.M)
    if not m:
        raise SystemExit("make-man: ppios-coord --help lists no commands")
    commands = [l.split()[0] for l in m.group(1).splitlines()]
    extra = [".SH COMMANDS"]
    for command in commands:
        usage, rest = split_usage(run([coord, command, "--help"]))
        extra += [".SS " + esc(command), ".nf"] + [line("\\fB" + esc(u) + "\\fR") for u in usage]
        extra += [".fi", ".PP"] + help_body(rest)
    return tool_page("ppios-coord", "inspect, administer and measure the ppios I/O coordinator",
                     top, version, extra)


# ---------------------------------------------------------------- docs/configuration.md

LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")


def md_inline(text):
    text = LINK.sub(r"\1", text)
    text = re.sub(r"\*\*([^*]+)\*\*", r"`\1`", text)
    return inline(text)


def md_section(md, title):
    """The lines of the '## title' section of a markdown document."""
    m = re.search(r"^## " + re.escape(title) + r".*?\n(.*?)(?=^## |\Z)", md, re.M | re.S)
    if not m:
        raise SystemExit(f"make-man: docs/configuration.md has no section '## {title}'")
    return m.group(1).split("\n")


def md_to_roff(lines):
    """The markdown of docs/configuration.md's sections: paragraphs, bullets (two levels),
    ### headings, and the variable table (one tagged paragraph per row)."""
    out = []
    para = []
    plain = False  # the paragraph being gathered is running text, not a bullet
    level = 0

    def flush():
        if para:
            out.append(line(md_inline(" ".join(para))))
            para.clear()

    for raw in lines:
        s = raw.strip()
        if not s:
            flush()
            continue
        if s.startswith("### "):
            flush()
            if level:
                out.append(".RE")
                level = 0
            out.append(".SS " + md_inline(s[4:].replace("`", "")))
            continue
        if s.startswith("|"):
            flush()
            cells = [c.strip() for c in s.strip("|").split("|")]
            if set(s) <= set("|- ") or cells[0] in ("variable", "option", "flag", "command"):
                continue
            out += [".TP", line("\\fB" + md_inline(cells[0].replace("`", "")) + "\\fR"),
                    line(md_inline(cells[1]))]
            if len(cells) > 2 and cells[2]:
                out += [".br", line("Default: " + md_inline(cells[2]))]
            continue
        bullet = re.match(r"^( *)- (.*)$", raw)
        if bullet:
            flush()
            depth = 2 if len(bullet.group(1)) >= 2 else 1
            if depth == 2 and level < 2:
                out.append(".RS 2")
                level = 2
            elif depth == 1 and level == 2:
                out.append(".RE")
                level = 1
            level = max(level, depth)
            out.append(".IP \\(bu 2" if depth == 1 else ".IP \\(en 2")
            para.append(bullet.group(2))
            plain = False
            continue
        if para and (raw.startswith(" ") or plain):
            para.append(s)
            continue
        flush()
        if level:
            if level == 2:
                out.append(".RE")
            level = 0
        out.append(".PP")
        para.append(s)
        plain = True
    flush()
    if level == 2:
        out.append(".RE")
    return out


def ppios_page(config_md, cc_help, version):
    with open(config_md, encoding="utf-8") as f:
        md = f.read()
    out = header("ppios", 7, version, "ppios manual")
    out += [".SH NAME", "ppios \\- pre\\-execution prefetching with I/O scheduling for MPI programs"]
    out += [".SH DESCRIPTION",
            "A program built with \\fBppios\\-cc\\fR(1) instead of \\fBmpicc\\fR gets a prefetch "
            "thread per MPI process that pre\\-executes its reads and fetches what the main thread "
            "is about to read. The ppios runtime schedules those prefetches: inside a process the "
            "main thread always goes first, and across the jobs on a storage target a prefetch "
            "reads only while fewer than \\fBPPIOS_THRESHOLD\\fR accesses run. "
            "\\fBppios\\-coord\\fR(1) shows and changes that cap; \\fBppios\\-report\\fR(1) explains "
            "a run.",
            ".PP", "This page lists every environment variable of ppios."]
    out += [".SH ENVIRONMENT"] + md_to_roff(md_section(md, "Environment variables"))
    if cc_help:
        m = re.search(r"^environment:\n((?:  .*\n)+)", cc_help, re.M)
        if not m:
            raise SystemExit("make-man: ppios-cc --help has no 'environment:' part")
        out += [".SS When building (ppios\\-cc)"] + help_body(m.group(1).rstrip("\n").split("\n"))
    out += [".SH OUTPUT FILES"] + md_to_roff(md_section(md, "Output files"))
    out += [".SH FILES",
            ".TP", "\\fB$HOME/.ppios/node\\-secret\\fR",
            "keys the names of a user's private node\\-local segments (see Node secret above)",
            ".TP", "\\fB/dev/shm/ppios\\-coord*\\fR",
            "node\\-local coordinator segments; \\fBppios\\-coord gc\\fR removes unused ones"]
    out += see_also("ppios")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="directory: man1/ and man7/ are written in it")
    ap.add_argument("--version", required=True)
    ap.add_argument("--config", required=True, help="docs/configuration.md")
    ap.add_argument("--cc", help="ppios-cc (absent in a build without the transformer)")
    ap.add_argument("--coord", required=True, help="ppios-coord")
    ap.add_argument("--report", required=True, help="ppios-report")
    a = ap.parse_args()

    pages = {}
    cc_help = None
    if a.cc:
        cc_help = run([a.cc, "--help"])
        pages["man1/ppios-cc.1"] = tool_page(
            "ppios-cc", "compile MPI C programs into prefetching builds (a drop-in for mpicc)",
            cc_help, a.version)
    pages["man1/ppios-coord.1"] = coord_page(a.coord, a.version)
    pages["man1/ppios-report.1"] = tool_page(
        "ppios-report", "explain a ppios run from its statistics and traces",
        run([a.report, "--help"]), a.version)
    pages["man7/ppios.7"] = ppios_page(a.config, cc_help, a.version)
    for rel, text in pages.items():
        path = os.path.join(a.out, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(path + ".tmp", path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
