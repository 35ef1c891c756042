#!/usr/bin/python3
"""Generates a random, correct, deterministic MPI C99 program for the cache-coherence fuzzer.

Given a seed, the program (2 or 3 ranks) runs a sequence of EPOCHS. In each epoch some
ranks CHANGE files (write, pwrite, pwritev, writev, ftruncate, truncate, MPI_File_write_at,
MPI_File_set_size, creat, open(O_TRUNC), fopen "r+"/"w" + fputs/fprintf, rename of a new
file over the old path, fcntl F_SETLKW record locks around a read-modify-write) and some
ranks READ them in loops over blocks (read, pread, lseek+read, fread, fgets, fscanf,
getline, MPI_File_read_at, MPI_File_seek + MPI_File_read). An epoch ends with a
synchronization (MPI_Barrier, MPI_Send/MPI_Recv, MPI_Bcast, MPI_Allreduce, or MPI-IO's
MPI_File_sync; MPI_Barrier; MPI_File_sync).

The program is deterministic under any timing: every access (an instance of an op on one
rank) is checked against every earlier access of another rank with vector clocks that
follow the synchronizations, and an op is only placed when each conflicting earlier access
(same file, overlapping bytes, at least one a change) happens before it. Concurrent locked
read-modify-writes of one counter commute (each rank adds its own bit), so they do not
conflict with each other; the value each rank read under the lock is checked after the
next synchronization. Every op's bytes and return values go into an FNV-1a digest per op
and into a running checksum per rank; rank 0 gathers and prints them in rank order.

Usage: gen_coherence.py --seed N [--out DIR] [--inputs DIR]
  --out DIR     write DIR/prog.c and DIR/meta.json (without it: prog.c to stdout)
  --inputs DIR  write the input files the driver creates into DIR

Python 3 standard library only. See README.md for the grammar.
"""
import argparse
import json
import os
import random
import sys

M64 = (1 << 64) - 1
FNV0 = 14695981039346656037
INF = None

CHANGE_KINDS = ["write", "pwrite", "pwritev", "writev", "ftruncate", "truncate",
                "mpi_write_at", "mpi_set_size", "creat", "open_trunc", "fopen_rplus",
                "fopen_w", "rename", "lock_rmw"]
READ_APIS = ["read", "pread", "lseek_read", "fread", "fgets", "fscanf", "getline",
             "mpi_read_at", "mpi_read", "getc"]
STREAM_BLOCK = 4096  # glibc's stream buffer on the fuzzer's file systems (st_blksize)
WHOLE_FILE = {"ftruncate", "truncate", "mpi_set_size", "creat", "open_trunc", "fopen_w",
              "rename"}
BLOCK_SIZES = [512, 1000, 1024, 2048, 3000, 4096, 8192, 12345, 16384, 32768, 65536]
MAX_CHANGE = 65536  # bytes of one region change (the size of the program's write buffer)


def xs(s):
    """The generated program's PRNG (xorshift64*), mirrored: returns (state, value)."""
    s ^= s >> 12
    s ^= (s << 25) & M64
    s ^= s >> 27
    return s, (s * 2685821657736338717) & M64


def text_rewrite_size(seed, nlines, m1, m2):
    """Bytes the program's text rewrite writes: nlines of "%llu %llu\\n" (see emit)."""
    s, total = seed | 1, 0
    for _ in range(nlines):
        s, a = xs(s)
        s, b = xs(s)
        total += len(f"{a % m1} {b % m2}\n")
    return total


# ----------------------------------------------------------------- model
class Version:
    """One inode a path has named (a rename over the path makes a new one)."""

    def __init__(self, size):
        self.size = size    # size after every change placed so far
        self.floor = size   # a size every later access is guaranteed to see at least


class File:
    def __init__(self, idx, kind, size, mutable, creator, rng):
        self.idx = idx
        self.kind = kind  # "bin" or "txt"
        self.name = f"d{idx}.bin" if kind == "bin" else f"t{idx}.txt"
        self.mutable = mutable
        self.creator = creator  # "driver" or "program"
        self.versions = [Version(size)]
        self.init_size = size
        self.cur = 0            # the version the path names now
        self.longlived = 0      # the version the handles opened at the start name
        self.history = []       # (epoch, opid, rank, kind, lo, hi)
        # A long-lived FILE*: its buffer (one 4 KiB block, glibc's) keeps bytes across
        # changes and synchronizations, which the prefetching build must keep too.
        self.stream = rng.random() < (0.4 if mutable else 0.6)
        self.seed = rng.getrandbits(62) | 1

    def version(self, via_path):
        return self.versions[self.cur if via_path else self.longlived]


class Access:
    __slots__ = ("rank", "file", "lo", "hi", "change", "group", "clock", "opid")

    def __init__(self, rank, file, lo, hi, change, group=None):
        self.rank, self.file, self.lo, self.hi = rank, file, lo, hi
        self.change, self.group = change, group
        self.clock, self.opid = None, None


def overlap(a_lo, a_hi, b_lo, b_hi):
    return (a_hi is None or b_lo < a_hi) and (b_hi is None or a_lo < b_hi)


class Op:
    def __init__(self, kind, ranks, file, comment, body, accesses, tags=None, digest=True):
        self.kind = kind
        self.ranks = ranks          # list of ranks that run the body
        self.file = file
        self.comment = comment
        self.body = body            # C lines; may use RANK-independent code
        self.accesses = accesses
        self.tags = tags or []
        self.digest = digest
        self.id = None
        self.epoch = None


# ----------------------------------------------------------------- generator
class Gen:
    def __init__(self, seed):
        self.seed = seed
        self.rng = random.Random(seed)
        r = self.rng
        self.np = r.choice([2, 2, 3])
        self.files = []
        self.ops = []           # placed ops, in program order
        self.items = []         # ("op", Op) | ("sync", ...) | ("delay", ...) | ("epoch", e)
        self.accesses = []
        self.vc = [[0] * self.np for _ in range(self.np)]
        self.lock_slots = 0
        self.helpers = set()
        self.wseq = 0
        self.tmpseq = 0
        self.pending_checks = []
        self.epoch = 0

    # -- files
    def make_files(self):
        r = self.rng
        nbin = r.randint(2, 4)
        ntxt = r.randint(1, 2)
        idx = 0
        big = r.randrange(nbin)
        for i in range(nbin):
            if i == big:
                size = r.choice([1 << 20, 2 << 20, 3 << 20, 3 * 1000 * 1000 + 7])
            else:
                size = r.choice([8192, 20000, 65536, 100000, 262144, 500000, 1 << 20])
            mutable = i != big or r.random() < 0.7
            creator = "program" if r.random() < 0.3 else "driver"
            self.files.append(File(idx, "bin", size, mutable, creator, r))
            idx += 1
        if all(not f.mutable for f in self.files):
            self.files[0].mutable = True
            self.files[0].stream = False
        for i in range(ntxt):
            nlines = r.choice([300, 1000, 3000, 8000])
            creator = "program" if r.random() < 0.3 else "driver"
            f = File(idx, "txt", 0, r.random() < 0.8, creator, r)
            f.nlines = nlines
            f.m1, f.m2 = r.choice([(1000, 1000000), (100, 10), (1 << 31, 7), (99991, 1 << 40)])
            if creator == "program":
                size = text_rewrite_size(f.seed, nlines, f.m1, f.m2)
            else:
                f.text = self.driver_text(f, nlines)
                size = len(f.text)
            f.versions[0] = Version(size)
            f.init_size = size
            self.files.append(f)
            idx += 1

    def driver_text(self, f, nlines):
        rr = random.Random(f.seed)
        out = []
        for _ in range(nlines):
            n = rr.choice([1, 1, 2, 3, 4])
            vals = []
            for _ in range(n):
                if rr.random() < 0.1:
                    vals.append(f"{rr.uniform(-1000, 1000):.3f}")
                else:
                    vals.append(str(rr.randint(-99999, 9999999)))
            out.append(" ".join(vals) + "\n")
        return "".join(out).encode()

    def inputs(self):
        """The files the driver creates: name -> bytes."""
        res = {}
        for f in self.files:
            if f.creator != "driver":
                continue
            if f.kind == "bin":
                res[f.name] = random.Random(f.seed).randbytes(f.init_size)
            else:
                res[f.name] = f.text
        return res

    # -- vector clocks
    def fits(self, accesses):
        for b in accesses:
            vcb = self.vc[b.rank]
            for a in self.accesses:
                if a.rank == b.rank or a.file is not b.file:
                    continue
                if not (a.change or b.change):
                    continue
                if a.group is not None and a.group == b.group:
                    continue
                if not overlap(a.lo, a.hi, b.lo, b.hi):
                    continue
                if a.clock[a.rank] > vcb[a.rank]:
                    return False
        return True

    def place(self, op):
        op.id = len(self.ops)
        op.epoch = self.epoch
        for acc in op.accesses:
            self.vc[acc.rank][acc.rank] += 1
            acc.clock = tuple(self.vc[acc.rank])
            acc.opid = op.id
            self.accesses.append(acc)
        self.ops.append(op)
        self.items.append(("op", op))

    def sync_full(self):
        m = [max(self.vc[p][q] for p in range(self.np)) for q in range(self.np)]
        for p in range(self.np):
            self.vc[p] = list(m)
        for f in self.files:
            for v in f.versions:
                v.floor = v.size

    def sync_from(self, root):
        for p in range(self.np):
            if p != root:
                self.vc[p] = [max(a, b) for a, b in zip(self.vc[p], self.vc[root])]

    # -- helpers for ops
    def region(self, f, via_path, maxlen=MAX_CHANGE):
        r = self.rng
        size = f.version(via_path).size
        length = r.choice([1, 8, 100, 511, 512, 4096, 4097, 5000, 16384, 40000, 65536])
        length = min(length, maxlen)
        roll = r.random()
        if roll < 0.1 or size == 0:
            off = size + r.choice([0, 0, 1, 4096, 10000])      # append / past the end
        elif roll < 0.3:
            off = r.randrange(0, max(1, size)) // 4096 * 4096  # block aligned
        else:
            off = r.randrange(0, max(1, size))
        return off, length

    def read_range(self, f, via_path):
        """(off, bs, nb) of a loop over blocks, mostly inside the file."""
        r = self.rng
        size = max(1, f.version(via_path).size)
        bs = r.choice(BLOCK_SIZES)
        span = r.choice([bs * r.randint(1, 8), size // 4, size // 2, size, size + bs * 3])
        span = max(bs, min(span, 4 << 20))
        nb = max(1, min(256, span // bs))
        if r.random() < 0.3:
            off = 0
        else:
            off = r.randrange(0, max(1, size - nb * bs + 1)) if size > nb * bs else 0
            if r.random() < 0.5:
                off = off // bs * bs
        return off, bs, nb

    def read_hi(self, f, via_path, off, length):
        """The modelled end of a read: beyond the guaranteed size it depends on EOF."""
        end = off + length
        return end if end <= f.version(via_path).floor else INF

    def tags_for(self, f, lo, hi):
        """The last changes of f that overlap [lo, hi): kind@epoch/rank."""
        res = []
        for (ep, opid, rank, kind, clo, chi) in reversed(f.history):
            if overlap(lo, hi, clo, chi):
                res.append({"kind": kind, "epoch": ep, "op": opid, "rank": rank})
                if len(res) >= 3:
                    break
        return res

    def record_change(self, op, f, lo, hi):
        f.history.append((self.epoch, op.id, op.ranks[0], op.kind, lo, hi))

    # -- read ops
    def gen_read(self):
        r = self.rng
        f = r.choice(self.files)
        if f.kind == "txt":
            api = r.choice(["fgets", "fgets", "fscanf", "fscanf", "getline", "getline",
                            "fread", "pread", "mpi_read_at", "read"])
        else:
            api = r.choice(["read", "pread", "pread", "lseek_read", "lseek_read", "fread",
                            "fread", "mpi_read_at", "mpi_read_at", "mpi_read"])
        if r.random() < 0.3:
            ranks = list(range(self.np))
        else:
            ranks = [r.randrange(self.np)]
        if f.stream and r.random() < 0.15:
            api = "getc"  # characters from the long-lived stream's buffer
        via_path = api in ("read", "fread", "fgets", "fscanf", "getline")
        if api == "getc" or (f.stream and api in ("fread", "fgets", "fscanf", "getline") and r.random() < 0.7):
            via_path = False  # the long-lived stream
            handle = f"s{f.idx}"
        else:
            handle = None
        off, bs, nb = self.read_range(f, via_path)
        stride = 0
        if len(ranks) > 1 and api in ("pread", "lseek_read", "mpi_read_at", "mpi_read", "fread") \
                and r.random() < 0.6:
            stride = bs * nb
        # "read" loops either run to the end of the file or read nb blocks: decided once
        # for the op, since every rank runs the same loop
        to_eof = api == "read" and r.random() < 0.3
        accesses = []
        if api == "getc":
            nb, bs = 1, min(bs * nb, 20000)  # characters
        for rk in ranks:
            lo = off + rk * stride
            if api in ("fgets", "fscanf", "getline") or to_eof:
                hi = INF
            else:
                hi = self.read_hi(f, via_path, lo, bs * nb)
            if handle is not None and f.mutable:
                # The stream reads whole blocks: the one its seek lands in, and the one
                # after the last byte the op takes (ungetc-style peeks).
                lo -= lo % STREAM_BLOCK
                if hi is not INF:
                    hi = self.read_hi(f, via_path, hi, 2 * STREAM_BLOCK)
            accesses.append(Access(rk, f, lo, hi, False))
        return dict(kind=api, f=f, ranks=ranks, off=off, bs=bs, nb=nb, stride=stride,
                    handle=handle, via_path=via_path, accesses=accesses, to_eof=to_eof)

    def emit_read(self, d):
        f, api, off, bs, nb, stride = d["f"], d["kind"], d["off"], d["bs"], d["nb"], d["stride"]
        r = self.rng
        offexpr = f"(long){off}" + (f" + (long)rank * {stride}" if stride else "")
        fd, mf = f"fd{f.idx}", f"mf{f.idx}"
        L = []
        use_helper = r.random() < 0.3
        if api == "pread":
            if use_helper:
                self.helpers.add("rd_pread")
                L.append(f"oh = rd_pread({fd}, buf, {offexpr}, {bs}, {nb}, oh);")
            else:
                L += [f"for (i = 0; i < {nb}; i++) {{",
                      f"  n = pread({fd}, buf, {bs}, (off_t)({offexpr} + i * {bs}));",
                      "  oh = mix(oh, buf, (long)n);", "}"]
        elif api == "lseek_read":
            if use_helper:
                self.helpers.add("rd_lseek")
                L.append(f"oh = rd_lseek({fd}, buf, {offexpr}, {bs}, {nb}, oh);")
            else:
                L += [f"pos = (long)lseek({fd}, (off_t)({offexpr}), SEEK_SET);", "oh = mixv(oh, pos);",
                      f"for (i = 0; i < {nb}; i++) {{",
                      f"  n = read({fd}, buf, {bs});",
                      "  oh = mix(oh, buf, (long)n);", "}"]
        elif api == "read":
            L.append(f"int rfd = open(\"{f.name}\", O_RDONLY);")
            if off:
                L += [f"pos = (long)lseek(rfd, (off_t)({offexpr}), SEEK_SET);", "oh = mixv(oh, pos);"]
            if d["to_eof"]:
                L += [f"while ((n = read(rfd, buf, {bs})) > 0)", "  oh = mix(oh, buf, (long)n);",
                      "oh = mixv(oh, (long)n);"]
            else:
                L += [f"for (i = 0; i < {nb}; i++) {{", f"  n = read(rfd, buf, {bs});",
                      "  oh = mix(oh, buf, (long)n);", "  if (n <= 0) break;", "}"]
            L.append("close(rfd);")
        elif api == "fread":
            s = d["handle"]
            if s is None:
                L.append(f"FILE *rf = fopen(\"{f.name}\", \"rb\");")
                s = "rf"
            L += [f"sk = fseek({s}, {offexpr}, SEEK_SET);", "oh = mixv(oh, sk);"]
            if use_helper:
                self.helpers.add("rd_fread")
                L.append(f"oh = rd_fread({s}, buf, {bs}, {nb}, oh);")
            else:
                L += [f"for (i = 0; i < {nb}; i++) {{",
                      f"  n = (ssize_t)fread(buf, 1, {bs}, {s});",
                      "  oh = mix(oh, buf, (long)n);", "}"]
            if d["handle"] is None:
                L.append("fclose(rf);")
        elif api in ("fgets", "fscanf", "getline"):
            s = d["handle"]
            if s is None:
                L.append(f"FILE *rf = fopen(\"{f.name}\", \"r\");")
                s = "rf"
            if off:
                L += [f"sk = fseek({s}, {offexpr}, SEEK_SET);", "oh = mixv(oh, sk);"]
            elif d["handle"] is not None:
                L.append(f"rewind({s});")
            k = d.get("lines") or nb * self.rng.choice([1, 2, 8, 32])
            if api == "fgets":
                L += [f"for (k = 0; k < {k}; k++) {{",
                      f"  if (fgets(line, sizeof line, {s}) == NULL) {{ oh = mixv(oh, -1); break; }}",
                      "  oh = mix(oh, line, (long)strlen(line));", "}"]
            elif api == "getline":
                L += [f"for (k = 0; k < {k}; k++) {{",
                      f"  n = getline(&lp, &cap, {s});",
                      "  oh = mix(oh, lp, (long)n);", "  if (n < 0) break;", "}"]
            else:
                fmt = self.rng.choice(["%ld", "%ld %ld", "%lf"])
                if fmt == "%ld":
                    L += [f"for (k = 0; k < {k}; k++) {{",
                          f"  rc = fscanf({s}, \"%ld\", &lv);",
                          "  oh = mixv(oh, rc);", "  if (rc != 1) break;",
                          "  oh = mixv(oh, lv);", "}"]
                elif fmt == "%ld %ld":
                    L += [f"for (k = 0; k < {k}; k++) {{",
                          f"  rc = fscanf({s}, \"%ld %ld\", &lv, &lv2);",
                          "  oh = mixv(oh, rc);", "  if (rc != 2) break;",
                          "  oh = mixv(oh, lv); oh = mixv(oh, lv2);", "}"]
                else:
                    L += [f"for (k = 0; k < {k}; k++) {{",
                          f"  rc = fscanf({s}, \"%lf\", &dv);",
                          "  oh = mixv(oh, rc);", "  if (rc != 1) break;",
                          "  oh = mix(oh, &dv, (long)sizeof dv);", "}"]
            if d["handle"] is None:
                L.append("fclose(rf);")
        elif api == "getc":
            s = d["handle"]
            L += [f"sk = fseek({s}, {offexpr}, SEEK_SET);", "oh = mixv(oh, sk);",
                  f"for (i = 0; i < {bs}; i++) {{",
                  f"  rc = getc({s});", "  oh = mixv(oh, rc);", "  if (rc == EOF) break;", "}"]
        elif api == "mpi_read_at":
            if use_helper:
                self.helpers.add("rd_mpi_at")
                L.append(f"oh = rd_mpi_at({mf}, buf, {offexpr}, {bs}, {nb}, MPI_BYTE, oh);")
            else:
                L += [f"for (i = 0; i < {nb}; i++) {{",
                      f"  rc = MPI_File_read_at({mf}, (MPI_Offset)({offexpr} + i * {bs}), buf, {bs}, MPI_BYTE, &st);",
                      "  MPI_Get_count(&st, MPI_BYTE, &cnt);",
                      "  oh = mixv(oh, rc); oh = mix(oh, buf, (long)cnt);", "}"]
        elif api == "mpi_read":
            L += [f"sk = MPI_File_seek({mf}, (MPI_Offset)({offexpr}), MPI_SEEK_SET);", "oh = mixv(oh, sk);",
                  f"for (i = 0; i < {nb}; i++) {{",
                  f"  rc = MPI_File_read({mf}, buf, {bs}, MPI_BYTE, &st);",
                  "  MPI_Get_count(&st, MPI_BYTE, &cnt);",
                  "  oh = mixv(oh, rc); oh = mix(oh, buf, (long)cnt);", "}"]
        return L

    def describe_read(self, d):
        f = d["f"]
        how = {"read": "open + read", "pread": "pread", "lseek_read": "lseek + read",
               "fread": "fseek + fread", "fgets": "fgets", "fscanf": "fscanf",
               "getline": "getline", "mpi_read_at": "MPI_File_read_at",
               "mpi_read": "MPI_File_seek + MPI_File_read", "getc": "fseek + getc"}[d["kind"]]
        where = f"[{d['off']}" + (f" + rank*{d['stride']}" if d["stride"] else "") + ")"
        through = ("the long-lived " + d["handle"]) if d["handle"] else \
            ("a fresh handle" if d["via_path"] else "the long-lived handle")
        if d["kind"] in ("fgets", "fscanf", "getline"):
            what = f"lines/values from {where}"
        elif d["kind"] == "getc":
            what = f"{d['bs']} characters from {where}"
        elif d.get("to_eof"):
            what = f"blocks of {d['bs']} B from {where} to the end of the file"
        else:
            what = f"{d['nb']} x {d['bs']} B from {where}"
        return f"{how} of {f.name}: {what}, through {through}"

    def try_read(self):
        for _ in range(8):
            d = self.gen_read()
            if not self.fits(d["accesses"]):
                continue
            f = d["f"]
            tags = []
            for a in d["accesses"]:
                tags += self.tags_for(f, a.lo, a.hi)
            body = self.emit_read(d)
            op = Op(d["kind"], d["ranks"], f, self.describe_read(d), body, d["accesses"],
                    tags=tags)
            self.place(op)
            return op
        return None

    # -- change ops
    def fill_block(self, n, seed):
        return [f"fill(wbuf, {n}, 0x{seed:x}ULL);"]

    def new_seed(self):
        self.wseq += 1
        return (self.seed * 1000003 + self.wseq * 7919) & ((1 << 62) - 1) | 1

    def write_stream(self, fdvar, total, tag):
        """C lines that write `total` new bytes through fdvar with write()."""
        L = []
        bs = self.rng.choice([4096, 16384, 65536])
        nb, tail = divmod(total, bs)
        seed = self.new_seed()
        if nb:
            L += [f"for (i = 0; i < {nb}; i++) {{",
                  f"  fill(wbuf, {bs}, 0x{seed:x}ULL + (uint64_t)i);",
                  f"  oh = mixv(oh, (long)write({fdvar}, wbuf, {bs}));", "}"]
        if tail:
            L += self.fill_block(tail, seed ^ 0xfff)
            L.append(f"oh = mixv(oh, (long)write({fdvar}, wbuf, {tail}));")
        return L

    def gen_change(self, kind, rank):
        r = self.rng
        mutable = [f for f in self.files if f.mutable]
        f = r.choice(mutable)
        ranks = [rank]
        fd, mf = f"fd{f.idx}", f"mf{f.idx}"
        L = []
        group = None
        via_path = kind in ("truncate", "creat", "open_trunc", "fopen_w", "fopen_rplus", "rename")
        if kind in ("write", "pwrite") and r.random() < 0.3:
            via_path = True  # a fresh descriptor
        ver = f.version(via_path)
        size_after = None
        if kind in WHOLE_FILE:
            lo, hi = 0, INF
            if kind in ("ftruncate", "truncate", "mpi_set_size"):
                old = ver.size
                new = r.choice([0, old // 2, max(0, old - 1), old, old + 1, old + 5000,
                                old // 4096 * 4096, r.randrange(0, old + 1) if old else 100])
                size_after = new
                if kind == "ftruncate":
                    if r.random() < 0.7:
                        L.append(f"oh = mixv(oh, ftruncate({fd}, (off_t){new}));")
                    else:
                        via_path = True
                        ver = f.version(True)
                        L += [f"int wfd = open(\"{f.name}\", O_RDWR);",
                              f"oh = mixv(oh, ftruncate(wfd, (off_t){new}));", "close(wfd);"]
                elif kind == "truncate":
                    L.append(f"oh = mixv(oh, truncate(\"{f.name}\", (off_t){new}));")
                else:
                    ranks = list(range(self.np))
                    group = ("set_size", len(self.ops))
                    L.append(f"oh = mixv(oh, MPI_File_set_size({mf}, (MPI_Offset){new}));")
                what = f"{kind} to {new} bytes (was {old})"
            elif kind in ("creat", "open_trunc", "rename", "fopen_w"):
                if f.kind == "txt" or kind == "fopen_w":
                    nlines = r.choice([10, 200, 1000, 3000])
                    m1, m2 = r.choice([(1000, 1000000), (7, 100), (1 << 40, 3)])
                    seed = self.new_seed()
                    new = text_rewrite_size(seed, nlines, m1, m2)
                    gen = [f"ws = 0x{seed:x}ULL;",
                           f"for (i = 0; i < {nlines}; i++) {{",
                           "  uint64_t a = xs(&ws), b = xs(&ws);",
                           f"  wr = fprintf(wf, \"%llu %llu\\n\", (unsigned long long)(a % {m1}ULL), "
                           f"(unsigned long long)(b % {m2}ULL));",
                           "  oh = mixv(oh, wr);", "}"]
                    textual = True
                else:
                    new = r.choice([0, 100, 4096, 50000, 300000, ver.size, ver.size + 3333])
                    gen = None
                    textual = False
                size_after = new
                target = f.name
                if kind == "rename":
                    self.tmpseq += 1
                    target = f"{f.name}.new{self.tmpseq}"
                if textual:
                    if kind == "fopen_w":
                        L.append(f"FILE *wf = fopen(\"{target}\", \"w\");")
                    else:
                        opn = {"creat": f"creat(\"{target}\", 0644)",
                               "open_trunc": f"open(\"{target}\", O_WRONLY | O_TRUNC)",
                               "rename": f"open(\"{target}\", O_WRONLY | O_CREAT | O_TRUNC, 0644)"}[kind]
                        L += [f"int wfd = {opn};", "FILE *wf = fdopen(wfd, \"w\");"]
                    L += gen
                    if r.random() < 0.5:
                        L.append("oh = mixv(oh, fflush(wf));")
                    L.append("oh = mixv(oh, fclose(wf));")
                else:
                    opn = {"creat": f"creat(\"{target}\", 0644)",
                           "open_trunc": f"open(\"{target}\", O_WRONLY | O_TRUNC"
                                         + (" | O_CREAT, 0644)" if r.random() < 0.5 else ")"),
                           "rename": f"open(\"{target}\", O_WRONLY | O_CREAT | O_TRUNC, 0644)"}[kind]
                    L.append(f"int wfd = {opn};")
                    L += self.write_stream("wfd", new, kind)
                    L.append("oh = mixv(oh, close(wfd));")
                if kind == "rename":
                    L.append(f"oh = mixv(oh, rename(\"{target}\", \"{f.name}\"));")
                what = f"{kind}: {new} new bytes" + (" (text)" if textual else "") + \
                    (f" written to {target}, renamed over {f.name}" if kind == "rename" else "")
        else:
            off, length = self.region(f, via_path)
            lo, hi = off, off + length
            size_after = max(ver.size, hi)
            seed = self.new_seed()
            if kind == "write":
                if via_path:
                    L += [f"int wfd = open(\"{f.name}\", O_WRONLY);"]
                    h = "wfd"
                else:
                    h = fd
                L += self.fill_block(length, seed)
                L += [f"pos = (long)lseek({h}, (off_t){off}, SEEK_SET);", "oh = mixv(oh, pos);",
                      f"oh = mixv(oh, (long)write({h}, wbuf, {length}));"]
                if via_path:
                    L.append("close(wfd);")
            elif kind == "pwrite":
                if via_path:
                    L += [f"int wfd = open(\"{f.name}\", O_WRONLY);"]
                    h = "wfd"
                else:
                    h = fd
                L += self.fill_block(length, seed)
                L.append(f"oh = mixv(oh, (long)pwrite({h}, wbuf, {length}, (off_t){off}));")
                if via_path:
                    L.append("close(wfd);")
            elif kind in ("pwritev", "writev"):
                niov = min(length, r.randint(2, 4))
                cuts = sorted(r.sample(range(1, length), niov - 1)) if length > niov else list(range(1, niov))
                bounds = [0] + cuts + [length]
                L += self.fill_block(length, seed)
                L.append("{")
                L.append(f"  struct iovec iov[{niov}];")
                for j in range(niov):
                    L.append(f"  iov[{j}].iov_base = wbuf + {bounds[j]}; "
                             f"iov[{j}].iov_len = {bounds[j + 1] - bounds[j]};")
                if kind == "pwritev":
                    L.append(f"  oh = mixv(oh, (long)pwritev({fd}, iov, {niov}, (off_t){off}));")
                else:
                    L.append(f"  pos = (long)lseek({fd}, (off_t){off}, SEEK_SET);")
                    L.append("  oh = mixv(oh, pos);")
                    L.append(f"  oh = mixv(oh, (long)writev({fd}, iov, {niov}));")
                L.append("}")
            elif kind == "mpi_write_at":
                L += self.fill_block(length, seed)
                L += [f"wr = MPI_File_write_at({mf}, (MPI_Offset){off}, wbuf, {length}, MPI_BYTE, &st);",
                      "MPI_Get_count(&st, MPI_BYTE, &cnt);",
                      "oh = mixv(oh, wr); oh = mixv(oh, cnt);"]
            elif kind == "fopen_rplus":
                L += [f"FILE *wf = fopen(\"{f.name}\", \"r+\");",
                      f"sk = fseek(wf, {off}L, SEEK_SET);", "oh = mixv(oh, sk);",
                      f"fill_text(tbuf, {length}, 0x{seed:x}ULL);"]
                if r.random() < 0.5:
                    L.append("oh = mixv(oh, fputs(tbuf, wf) >= 0);")
                else:
                    L.append("oh = mixv(oh, fprintf(wf, \"%s\", tbuf));")
                if r.random() < 0.6:
                    L.append("oh = mixv(oh, fflush(wf));")
                L.append("oh = mixv(oh, fclose(wf));")
            what = f"{kind} of [{off}, +{length})"
        if via_path and kind not in ("rename",):
            pass
        accesses = [Access(rk, f, lo, hi, True, group) for rk in ranks]
        handle = "the path" if via_path else "the long-lived handle"
        comment = f"{what} of {f.name} through {handle}"
        return dict(kind=kind, f=f, ranks=ranks, body=L, accesses=accesses, comment=comment,
                    lo=lo, hi=hi, via_path=via_path, size_after=size_after)

    def apply_change(self, d, op):
        f = d["f"]
        if d["kind"] == "rename":
            f.versions.append(Version(d["size_after"]))
            f.cur = len(f.versions) - 1
            f.versions[f.cur].floor = 0  # ordered only at the next full sync
        else:
            v = f.version(d["via_path"])
            if d["kind"] in WHOLE_FILE:
                v.size = d["size_after"]
                v.floor = min(v.floor, d["size_after"])
            else:
                v.size = max(v.size, d["size_after"])
        self.record_change(op, f, d["lo"], d["hi"])

    def try_change(self, kinds):
        r = self.rng
        for _ in range(8):
            kind = r.choice(kinds)
            if kind == "lock_rmw":
                op = self.try_lock()
                if op:
                    return op
                continue
            rank = r.randrange(self.np)
            d = self.gen_change(kind, rank)
            if not self.fits(d["accesses"]):
                continue
            body = []
            if r.random() < 0.35:
                body.append(f"mt_delay({r.choice([200000, 1000000, 3000000])}L); "
                            "/* MT only: the other ranks' prefetch threads run ahead */")
            body += d["body"]
            op = Op(kind, d["ranks"], d["f"], d["comment"], body, d["accesses"])
            self.place(op)
            self.apply_change(d, op)
            return op
        return None

    def try_lock(self):
        r = self.rng
        files = [f for f in self.files if f.mutable and f.kind == "bin"]
        if not files:
            return None
        f = r.choice(files)
        size = f.versions[f.longlived].size
        off = (r.randrange(0, max(8, size)) // 8) * 8 if r.random() < 0.8 else size // 8 * 8
        ranks = sorted(r.sample(range(self.np), r.randint(2, self.np)))
        group = ("lock", len(self.ops))
        accesses = [Access(rk, f, off, off + 8, True, group) for rk in ranks]
        if not self.fits(accesses):
            return None
        slot = self.lock_slots
        self.lock_slots += 1
        fd = f"fd{f.idx}"
        L = ["{",
             "  struct flock lk;",
             "  unsigned char cb[8];",
             "  uint64_t v = 0;",
             "  memset(&lk, 0, sizeof lk); memset(cb, 0, sizeof cb);",
             f"  lk.l_type = F_WRLCK; lk.l_whence = SEEK_SET; lk.l_start = {off}; lk.l_len = 8;",
             f"  oh = mixv(oh, fcntl({fd}, F_SETLKW, &lk));",
             f"  n = pread({fd}, cb, 8, (off_t){off});",
             "  memcpy(&v, cb, 8);",
             f"  lockv[{slot}] = v; /* checked after the next synchronization */",
             "  v += (uint64_t)1 << (16 * rank);",
             "  memcpy(cb, &v, 8);",
             f"  oh = mixv(oh, (long)pwrite({fd}, cb, 8, (off_t){off}));",
             "  lk.l_type = F_UNLCK;",
             f"  oh = mixv(oh, fcntl({fd}, F_SETLK, &lk));",
             "}"]
        if r.random() < 0.4:
            L.insert(0, f"mt_delay({r.choice([100000, 1000000])}L); /* MT only */")
        op = Op("lock_rmw", ranks, f, f"fcntl F_SETLKW lock of {f.name} [{off}, +8), "
                f"pread the counter, add 1 << (16 * rank), pwrite it back, unlock "
                f"(through the long-lived fd{f.idx}; the value read is lockv[{slot}])",
                L, accesses, digest=True)
        # The return value of the pread is not deterministic only if the file ends inside
        # the counter and another rank extended it first: counters start inside the file or
        # at its end, and 8-byte aligned, so n is 0 or 8 for everyone.
        self.place(op)
        v = f.versions[f.longlived]
        v.size = max(v.size, off + 8)
        self.record_change(op, f, off, off + 8)
        incs = sum(1 << (16 * rk) for rk in ranks)
        self.pending_checks.append((op, f, off, slot, ranks, incs))
        return op

    def emit_checks(self):
        """The lock checks of the last epoch: each participant reads the counter again."""
        checks, self.pending_checks = self.pending_checks, []
        for (lop, f, off, slot, ranks, incs) in checks:
            accesses = [Access(rk, f, off, off + 8, False) for rk in ranks]
            if not self.fits(accesses):
                continue
            fd = f"fd{f.idx}"
            L = ["{",
                 "  unsigned char cb[8];",
                 "  uint64_t fin = 0, base, d, others;",
                 "  memset(cb, 0, sizeof cb);",
                 f"  n = pread({fd}, cb, 8, (off_t){off});",
                 "  oh = mix(oh, cb, (long)n);",
                 "  memcpy(&fin, cb, 8);",
                 f"  base = fin - 0x{incs:x}ULL;",
                 f"  d = lockv[{slot}] - base;",
                 f"  others = 0x{incs:x}ULL & ~((uint64_t)1 << (16 * rank));",
                 "  /* under the lock this rank saw the counter plus the bits of some of the"
                 " others */",
                 "  oh = mixv(oh, (d & ~others) == 0);",
                 "}"]
            op = Op("lock_check", ranks, f, f"check of op {lop.id}: the counter {f.name} "
                    f"[{off}, +8) against lockv[{slot}]", L, accesses,
                    tags=[{"kind": "lock_rmw", "epoch": lop.epoch, "op": lop.id,
                           "rank": -1}])
            self.place(op)

    # -- synchronizations
    def gen_sync(self, epoch_ops):
        r = self.rng
        mpi_written = sorted({op.file.idx for op in epoch_ops
                              if op.kind in ("mpi_write_at", "mpi_set_size")})
        locked = any(op.kind == "lock_rmw" for op in epoch_ops)
        writers = sorted({op.ranks[0] for op in epoch_ops
                          if op.kind in CHANGE_KINDS and len(op.ranks) == 1})
        if mpi_written:
            kind = "sbs"
        else:
            choices = ["barrier", "barrier", "allreduce", "sendrecv", "sbs"]
            if not locked:
                choices += ["bcast", "bcast", "send1"]
            kind = r.choice(choices)
        if kind == "sbs":
            handles = [f"mf{i}" for i in mpi_written] or [f"mf{r.choice(self.files).idx}"]
            self.sync_full()
            return ("sync", kind, handles, None)
        if kind in ("bcast", "send1"):
            root = writers[0] if len(writers) == 1 else (r.randrange(self.np) if not writers else None)
            if root is None:
                kind = "barrier"
            else:
                self.sync_from(root)
                return ("sync", kind, None, root)
        if kind == "sendrecv":
            root = r.randrange(self.np)
            self.sync_full()
            return ("sync", kind, None, root)
        self.sync_full()
        return ("sync", kind, None, None)

    # -- whole program
    def generate(self):
        r = self.rng
        self.make_files()
        nepochs = r.randint(5, 12)
        change_kinds = list(CHANGE_KINDS)
        if not any(f.kind == "bin" and f.mutable for f in self.files):
            change_kinds.remove("lock_rmw")
        # each program stresses a few change kinds more than the others
        favored = r.sample(change_kinds, 3)
        kinds = change_kinds + favored * 3
        for e in range(nepochs):
            self.epoch = e
            self.items.append(("epoch", e))
            self.emit_checks()
            epoch_ops = []
            nchange = r.choice([0, 1, 1, 2, 2, 3])
            nread = r.randint(1, 4)
            plan = ["c"] * nchange + ["r"] * nread
            r.shuffle(plan)
            for p in plan:
                op = self.try_change(kinds) if p == "c" else self.try_read()
                if op:
                    epoch_ops.append(op)
            if r.random() < 0.6:
                rk = r.randrange(self.np)
                how = r.choice(["busy", "busy", "usleep"])
                amount = r.choice([300000, 2000000, 6000000]) if how == "busy" else \
                    r.choice([500, 2000, 8000])
                self.items.append(("delay", rk, how, amount))
            self.items.append(self.gen_sync(epoch_ops))
        self.epoch = nepochs
        self.items.append(("epoch", nepochs))
        self.emit_checks()
        # a last read of every file by every rank (after the final barrier)
        self.items.append(("sync", "barrier", None, None))
        self.sync_full()
        for f in self.files:
            rk = r.randrange(self.np)
            if f.kind == "bin":
                d = dict(kind="read", bs=65536, nb=1, to_eof=True)
            else:
                d = dict(kind=r.choice(["fgets", "getline"]), bs=1, nb=1, lines=1000000)
            d.update(f=f, ranks=[rk], off=0, stride=0, handle=None, via_path=True,
                     accesses=[Access(rk, f, 0, INF, False)])
            if self.fits(d["accesses"]):
                op = Op(d["kind"], [rk], f, "final: " + self.describe_read(d),
                        self.emit_read(d), d["accesses"], tags=self.tags_for(f, 0, INF))
                self.place(op)
        return self

    # ------------------------------------------------------------- C text
    def c_source(self, drop=()):
        """The C text; the ops in `drop` (ids) are left out (the fuzzer's minimizer)."""
        nops = max(1, len(self.ops))
        out = []
        w = out.append
        w(f"/* Cache-coherence fuzz program, seed {self.seed}: {self.np} ranks, "
          f"{len(self.files)} files, {len(self.ops)} ops.")
        w(" * Generated by tests/fuzz/gen_coherence.py: deterministic under mpicc; a ppios-cc")
        w(" * build must print the same digests in every PPIOS_MODE.")
        for f in self.files:
            w(f" *   {f.name}: {f.kind}, {f.init_size} bytes, created by the {f.creator}"
              f"{', changed' if f.mutable else ', read-only'}"
              f"{', long-lived stream s%d' % f.idx if f.stream else ''}")
        w(" */")
        w("#define _GNU_SOURCE")
        for h in ["mpi.h", "fcntl.h", "stdint.h", "stdio.h", "stdlib.h", "string.h",
                  "sys/stat.h", "sys/types.h", "sys/uio.h", "time.h", "unistd.h"]:
            w(f"#include <{h}>")
        w("")
        w(f"#define NOPS {nops}")
        w("")
        w("/* FNV-1a of a read's result: its return value, then the bytes it returned */")
        w("static uint64_t mix(uint64_t h, const void *p, long n) {")
        w("  const unsigned char *c = (const unsigned char *)p;")
        w("  long i;")
        w("  for (i = 0; i < 8; i++) { h ^= (unsigned char)((unsigned long)n >> (8 * i)); "
          "h *= 1099511628211ULL; }")
        w("  for (i = 0; i < n; i++) { h ^= c[i]; h *= 1099511628211ULL; }")
        w("  return h;")
        w("}")
        w("static uint64_t mixv(uint64_t h, long v) { return mix(h, &v, (long)sizeof v); }")
        w("static uint64_t xs(uint64_t *s) {")
        w("  uint64_t x = *s;")
        w("  x ^= x >> 12; x ^= x << 25; x ^= x >> 27;")
        w("  *s = x;")
        w("  return x * 2685821657736338717ULL;")
        w("}")
        w("static void fill(unsigned char *b, long n, uint64_t seed) {")
        w("  uint64_t s = seed | 1, v = 0;")
        w("  long i;")
        w("  for (i = 0; i < n; i++) { if ((i & 7) == 0) v = xs(&s); "
          "b[i] = (unsigned char)(v >> (8 * (i & 7))); }")
        w("}")
        w("static void fill_text(char *t, long n, uint64_t seed) {")
        w("  static const char alphabet[] = \"0123456789 \\n\";")
        w("  uint64_t s = seed | 1;")
        w("  long i;")
        w("  for (i = 0; i < n; i++) t[i] = alphabet[xs(&s) % 12];")
        w("  t[n] = 0;")
        w("}")
        w("/* -DFUZZ_JITTER (the fuzzer's check of the generator, mpicc builds only): random")
        w(" * sleeps before every op and synchronization; the output must not change. */")
        w("#ifdef FUZZ_JITTER")
        w("static unsigned jit_state;")
        w("static void jitter(void) {")
        w("  jit_state = jit_state * 1103515245u + 12345u;")
        w("  if ((jit_state >> 16) % 3 == 0) usleep((jit_state >> 4) % 4000);")
        w("}")
        w("#define JITTER() jitter()")
        w("#else")
        w("#define JITTER() ((void)0)")
        w("#endif")
        w("/* MT-only delays: nothing here is on a read's path */")
        w("static void mt_delay(long n) {")
        w("  volatile unsigned long x = 0;")
        w("  long i;")
        w("  for (i = 0; i < n; i++) x += (unsigned long)i;")
        w("}")
        if "rd_pread" in self.helpers:
            w("static uint64_t rd_pread(int fd, unsigned char *buf, long off, long bs, long nb, uint64_t oh) {")
            w("  long i;")
            w("  for (i = 0; i < nb; i++) {")
            w("    ssize_t n = pread(fd, buf, (size_t)bs, (off_t)(off + i * bs));")
            w("    oh = mix(oh, buf, (long)n);")
            w("  }")
            w("  return oh;")
            w("}")
        if "rd_lseek" in self.helpers:
            w("static uint64_t rd_lseek(int fd, unsigned char *buf, long off, long bs, long nb, uint64_t oh) {")
            w("  long i;")
            w("  off_t pos = lseek(fd, (off_t)off, SEEK_SET);")
            w("  oh = mixv(oh, (long)pos);")
            w("  for (i = 0; i < nb; i++) {")
            w("    ssize_t n = read(fd, buf, (size_t)bs);")
            w("    oh = mix(oh, buf, (long)n);")
            w("  }")
            w("  return oh;")
            w("}")
        if "rd_fread" in self.helpers:
            w("static uint64_t rd_fread(FILE *f, unsigned char *buf, long bs, long nb, uint64_t oh) {")
            w("  long i;")
            w("  for (i = 0; i < nb; i++) {")
            w("    size_t n = fread(buf, 1, (size_t)bs, f);")
            w("    oh = mix(oh, buf, (long)n);")
            w("  }")
            w("  return oh;")
            w("}")
        if "rd_mpi_at" in self.helpers:
            w("static uint64_t rd_mpi_at(MPI_File fh, unsigned char *buf, long off, long bs, long nb, MPI_Datatype t, uint64_t oh) {")
            w("  long i;")
            w("  MPI_Status st;")
            w("  int cnt = 0;")
            w("  for (i = 0; i < nb; i++) {")
            w("    int rc = MPI_File_read_at(fh, (MPI_Offset)(off + i * bs), buf, (int)bs, t, &st);")
            w("    MPI_Get_count(&st, t, &cnt);")
            w("    oh = mixv(oh, rc);")
            w("    oh = mix(oh, buf, (long)cnt);")
            w("  }")
            w("  return oh;")
            w("}")
        w("")
        w("int main(int argc, char **argv) {")
        w("  int rank = 0, nranks = 0, rc = 0, cnt = 0, sk = 0, wr = 0;")
        w("  long i = 0, k = 0, lv = 0, lv2 = 0, pos = 0;")
        w("  double dv = 0;")
        w("  ssize_t n = 0;")
        w("  uint64_t h = 14695981039346656037ULL, oh = 0, ws = 0;")
        w("  static uint64_t od[NOPS];")
        w(f"  uint64_t lockv[{max(1, self.lock_slots)}];")
        w("  static unsigned char buf[65536];    /* what reads read into */")
        w("  static unsigned char wbuf[65536];   /* what writes write */")
        w(f"  static char tbuf[{MAX_CHANGE + 1}];")
        w("  char line[512];")
        w("  char *lp = NULL;")
        w("  size_t cap = 0;")
        w("  MPI_Status st;")
        w("  MPI_Init(&argc, &argv);")
        w("#ifdef FUZZ_JITTER")
        w("  jit_state = (unsigned)getpid() ^ (unsigned)time(NULL);")
        w("#endif")
        w("  MPI_Comm_rank(MPI_COMM_WORLD, &rank);")
        w("  MPI_Comm_size(MPI_COMM_WORLD, &nranks);")
        w(f"  if (nranks != {self.np}) {{")
        w(f"    if (rank == 0) fprintf(stderr, \"run with {self.np} ranks\\n\");")
        w("    MPI_Abort(MPI_COMM_WORLD, 2);")
        w("  }")
        w("  memset(lockv, 0, sizeof lockv);")
        made = [f for f in self.files if f.creator == "program"]
        if made:
            w("  /* ---- set-up: rank 0 creates the program's own inputs ---- */")
            w("  if (rank == 0) {")
            for f in made:
                if f.kind == "bin":
                    size = f.init_size
                    bs = 65536
                    nb, tail = divmod(size, bs)
                    w(f"    int cfd{f.idx} = open(\"{f.name}\", O_WRONLY | O_CREAT | O_TRUNC, 0644);")
                    w(f"    for (i = 0; i < {nb}; i++) {{")
                    w(f"      fill(wbuf, {bs}, 0x{f.seed:x}ULL + (uint64_t)i);")
                    w(f"      if (write(cfd{f.idx}, wbuf, {bs}) != {bs}) MPI_Abort(MPI_COMM_WORLD, 3);")
                    w("    }")
                    if tail:
                        w(f"    fill(wbuf, {tail}, 0x{f.seed:x}ULL ^ 0xfff);")
                        w(f"    if (write(cfd{f.idx}, wbuf, {tail}) != {tail}) MPI_Abort(MPI_COMM_WORLD, 3);")
                    w(f"    close(cfd{f.idx});")
                else:
                    w(f"    FILE *cf{f.idx} = fopen(\"{f.name}\", \"w\");")
                    w(f"    ws = 0x{f.seed:x}ULL;")
                    w(f"    for (i = 0; i < {f.nlines}; i++) {{")
                    w("      uint64_t a = xs(&ws), b = xs(&ws);")
                    w(f"      fprintf(cf{f.idx}, \"%llu %llu\\n\", (unsigned long long)(a % {f.m1}ULL), "
                      f"(unsigned long long)(b % {f.m2}ULL));")
                    w("    }")
                    w(f"    fclose(cf{f.idx});")
            w("  }")
            w("  MPI_Barrier(MPI_COMM_WORLD);")
        w("  /* ---- long-lived handles, opened by every rank ---- */")
        for f in self.files:
            mode = "O_RDWR" if f.mutable else "O_RDONLY"
            w(f"  int fd{f.idx} = open(\"{f.name}\", {mode});")
        for f in self.files:
            mode = "MPI_MODE_RDWR" if f.mutable else "MPI_MODE_RDONLY"
            w(f"  MPI_File mf{f.idx};")
            w(f"  MPI_File_open(MPI_COMM_WORLD, \"{f.name}\", {mode}, MPI_INFO_NULL, &mf{f.idx});")
        for f in self.files:
            if f.stream:
                w(f"  FILE *s{f.idx} = fopen(\"{f.name}\", \"r\");")
        # Every rank holds its handles before any rank renames or recreates a file:
        # otherwise a rank that opens late gets the new file, a race of the program's own.
        w("  MPI_Barrier(MPI_COMM_WORLD);")
        for item in self.items:
            tag = item[0]
            if tag == "epoch":
                w("")
                w(f"  /* ================= epoch {item[1]} ================= */")
            elif tag == "op":
                op = item[1]
                if op.id in drop:
                    w(f"  /* op {op.id}: left out */")
                    continue
                who = ("rank %d" % op.ranks[0]) if len(op.ranks) == 1 else \
                    ("ranks " + ",".join(map(str, op.ranks)))
                w(f"  /* op {op.id} [epoch {op.epoch}, {who}]: {op.comment} */")
                if op.tags:
                    t = ", ".join(f"{x['kind']}@e{x['epoch']}" for x in op.tags[:3])
                    w(f"  /*   last changes of these bytes: {t} */")
                if len(op.ranks) == self.np:
                    w("  {")
                elif len(op.ranks) == 1:
                    w(f"  if (rank == {op.ranks[0]}) {{")
                else:
                    w("  if (" + " || ".join(f"rank == {x}" for x in op.ranks) + ") {")
                w("    JITTER();")
                w("    oh = 14695981039346656037ULL;")
                for line in op.body:
                    w("    " + line)
                w(f"    od[{op.id}] = oh;")
                w("    h = mixv(h, (long)oh);")
                w("  }")
            elif tag == "delay":
                _, rk, how, amount = item
                if how == "busy":
                    w(f"  if (rank == {rk}) mt_delay({amount}L); /* MT-only delay: the prefetch thread gets ahead */")
                else:
                    w(f"  if (rank == {rk}) usleep({amount}); /* MT-only delay: the prefetch thread gets ahead */")
            elif tag == "sync":
                _, kind, handles, root = item
                w("  JITTER();")
                w(f"  /* ---- synchronization: {kind}"
                  + (f" (root {root})" if root is not None else "") + " ---- */")
                if kind == "barrier":
                    w("  MPI_Barrier(MPI_COMM_WORLD);")
                elif kind == "allreduce":
                    w("  {")
                    w("    long tok = rank + 1, tot = 0;")
                    w("    MPI_Allreduce(&tok, &tot, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);")
                    w("    h = mixv(h, tot);")
                    w("  }")
                elif kind == "bcast":
                    w("  {")
                    w(f"    long tok = rank == {root} ? 4242 : 0;")
                    w(f"    MPI_Bcast(&tok, 1, MPI_LONG, {root}, MPI_COMM_WORLD);")
                    w("    h = mixv(h, tok);")
                    w("  }")
                elif kind == "send1":
                    w("  {  /* one way: the root's changes before the others' next reads */")
                    w("    long tok = 77;")
                    w("    int p;")
                    w(f"    if (rank == {root}) {{")
                    w("      for (p = 0; p < nranks; p++)")
                    w(f"        if (p != {root}) MPI_Send(&tok, 1, MPI_LONG, p, 7, MPI_COMM_WORLD);")
                    w("    } else {")
                    w(f"      MPI_Recv(&tok, 1, MPI_LONG, {root}, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);")
                    w("    }")
                    w("    h = mixv(h, tok);")
                    w("  }")
                elif kind == "sendrecv":
                    w("  {  /* everyone to the root, then the root to everyone */")
                    w("    long tok = rank, sum = 0, got = 0;")
                    w("    int p;")
                    w(f"    if (rank == {root}) {{")
                    w("      sum = tok;")
                    w("      for (p = 0; p < nranks; p++)")
                    w(f"        if (p != {root}) {{ MPI_Recv(&got, 1, MPI_LONG, p, 8, MPI_COMM_WORLD, "
                      "MPI_STATUS_IGNORE); sum += got; }")
                    w("      for (p = 0; p < nranks; p++)")
                    w(f"        if (p != {root}) MPI_Send(&sum, 1, MPI_LONG, p, 9, MPI_COMM_WORLD);")
                    w("    } else {")
                    w(f"      MPI_Send(&tok, 1, MPI_LONG, {root}, 8, MPI_COMM_WORLD);")
                    w(f"      MPI_Recv(&sum, 1, MPI_LONG, {root}, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);")
                    w("    }")
                    w("    h = mixv(h, sum);")
                    w("  }")
                elif kind == "sbs":
                    for hd in handles:
                        w(f"  MPI_File_sync({hd});")
                    w("  MPI_Barrier(MPI_COMM_WORLD);")
                    for hd in handles:
                        w(f"  MPI_File_sync({hd});")
        w("")
        w("  /* ---- the end: close everything, gather the digests to rank 0 ---- */")
        for f in self.files:
            if f.stream:
                w(f"  fclose(s{f.idx});")
        for f in self.files:
            w(f"  MPI_File_close(&mf{f.idx});")
        for f in self.files:
            w(f"  close(fd{f.idx});")
        w("  free(lp);")
        w("  {")
        w(f"    static uint64_t all[NOPS * {self.np}];")
        w(f"    uint64_t sums[{self.np}];")
        w("    int r, o;")
        w("    MPI_Gather(od, NOPS, MPI_UINT64_T, all, NOPS, MPI_UINT64_T, 0, MPI_COMM_WORLD);")
        w("    MPI_Gather(&h, 1, MPI_UINT64_T, sums, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);")
        w("    if (rank == 0) {")
        w("      for (r = 0; r < nranks; r++) {")
        w("        printf(\"rank %d: sum %016llx\\n\", r, (unsigned long long)sums[r]);")
        w("        for (o = 0; o < NOPS; o++)")
        w("          if (all[r * NOPS + o]) printf(\"rank %d op %d: %016llx\\n\", r, o, "
          "(unsigned long long)all[r * NOPS + o]);")
        w("      }")
        w("    }")
        w("  }")
        w("  MPI_Finalize();")
        w("  return 0;")
        w("}")
        return "\n".join(out) + "\n"

    def meta(self):
        return {
            "seed": self.seed,
            "np": self.np,
            "files": [{"name": f.name, "kind": f.kind, "size": f.init_size,
                       "creator": f.creator, "mutable": f.mutable} for f in self.files],
            "ops": [{"id": op.id, "epoch": op.epoch, "kind": op.kind, "ranks": op.ranks,
                     "file": op.file.name, "what": op.comment, "after": op.tags}
                    for op in self.ops],
            "syncs": [it[1] for it in self.items if it[0] == "sync"],
        }


def generate(seed, drop=()):
    """Returns (c_source, meta, inputs) for a seed; the ops in `drop` are left out."""
    g = Gen(seed).generate()
    return g.c_source(drop=set(drop)), g.meta(), g.inputs()


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--out", help="write DIR/prog.c and DIR/meta.json")
    ap.add_argument("--inputs", help="write the driver-created input files into DIR")
    ap.add_argument("--drop", default="", help="op ids to leave out, e.g. 3,7,12")
    a = ap.parse_args()
    src, meta, inputs = generate(a.seed, [int(x) for x in a.drop.split(",") if x])
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "prog.c"), "w") as f:
            f.write(src)
        with open(os.path.join(a.out, "meta.json"), "w") as f:
            json.dump(meta, f, indent=1)
    else:
        sys.stdout.write(src)
    if a.inputs:
        os.makedirs(a.inputs, exist_ok=True)
        for name, data in inputs.items():
            with open(os.path.join(a.inputs, name), "wb") as f:
                f.write(data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
