#!/usr/bin/env python3
"""Writes the corpus's inputs into a directory, deterministically (same bytes on every
run and machine): random binary data, a grid with a header, variable-length records and
their index, per-rank part files, a record file with sentinel records, and a text file of
parameters. About 14 MiB in all. Usage: gen_inputs.py DIR"""
import os
import random
import struct
import sys

DATA_BYTES = 1_572_864 + 333
SECOND_BYTES = 786_432 + 77
GRID = dict(rows=192, cols=4096, tile_rows=8, header=64)
N_RECORDS = 640
RECORDS_HEADER = 16
PART_RANKS = 4
SENTINEL = dict(records=1200, record_bytes=512, first=777, count=4, tag=0xDEADBEEF)
PARAMS = dict(header_bytes=1024, record_bytes=3000, records=480)
# shapes.bin: the input of the issue-9 shape programs, large enough that its reads take
# about as long as the computation on it on the emulated device; stop_flag's marker.
SHAPES_BYTES = 8 * 2**20 + 4099
STOP_MARKER, STOP_MARKER_AT = b"STOPSTOP", 6 * 2**20 + 1000
# lines.txt: text_lines' "<id> <value> <label>" lines, 20 to 200 bytes, every 97th one
# longer than text_lines' 256-byte line buffer.
TEXT_LINES = 24_000
# scan.txt: scan_matrix's "rows cols nnz" header, its triplets and then plain values.
SCAN = dict(rows=3000, cols=2000, nnz=50_000, values=30_000)


def rand_bytes(seed, n):
    return random.Random(seed).randbytes(n)


def part_bytes(r):
    return 262_144 + r * 4099 + 13


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def generate(d):
    os.makedirs(d, exist_ok=True)
    write(os.path.join(d, "data.bin"), rand_bytes(1, DATA_BYTES))
    write(os.path.join(d, "second.bin"), rand_bytes(2, SECOND_BYTES))

    params = ("# bcast_params: the record layout of data.bin\n"
              f"header_bytes = {PARAMS['header_bytes']}\n"
              f"record_bytes = {PARAMS['record_bytes']}\n"
              "\n"
              f"records = {PARAMS['records']}   # how many records to visit\n")
    write(os.path.join(d, "params.txt"), params.encode())

    g = GRID
    header = b"GRID" + struct.pack("<III", g["rows"], g["cols"], g["tile_rows"])
    header += bytes(g["header"] - len(header))
    write(os.path.join(d, "grid.bin"), header + rand_bytes(4, g["rows"] * g["cols"]))

    rng = random.Random(5)
    lengths = [rng.randint(200, 3000) for _ in range(N_RECORDS)]
    body = rng.randbytes(sum(lengths))
    offsets, pos = [], RECORDS_HEADER
    for n in lengths:
        offsets.append(pos)
        pos += n
    write(os.path.join(d, "records.bin"), b"RECS" + bytes(RECORDS_HEADER - 4) + body)
    order = list(range(N_RECORDS))
    rng.shuffle(order)
    index = b"INDX" + struct.pack("<I", N_RECORDS)
    for i in order:
        index += struct.pack("<QII", offsets[i], lengths[i], rng.getrandbits(32))
    write(os.path.join(d, "index.bin"), index)

    for r in range(PART_RANKS):
        write(os.path.join(d, f"part.{r}.bin"), rand_bytes(10 + r, part_bytes(r)))

    s = SENTINEL
    rng = random.Random(6)
    out = bytearray()
    for i in range(s["records"]):
        sentinel = s["first"] <= i < s["first"] + s["count"]
        tag = s["tag"] if sentinel else rng.getrandbits(31)
        out += struct.pack("<I", tag) + rng.randbytes(s["record_bytes"] - 4)
    write(os.path.join(d, "sentinel.bin"), bytes(out))

    rng = random.Random(8)
    text = bytearray()
    for i in range(TEXT_LINES):
        label = "".join(rng.choice("abcdefghij") for _ in range(rng.randint(4, 180)))
        if i % 97 == 96:
            label *= 4
        text += f"{i} {rng.randint(-10**6, 10**6)} {label}\n".encode()
    write(os.path.join(d, "lines.txt"), bytes(text))

    rng = random.Random(9)
    sc = SCAN
    scan = [f"{sc['rows']} {sc['cols']} {sc['nnz']}\n"]
    for _ in range(sc["nnz"]):
        scan.append(f"{rng.randrange(sc['rows'])} {rng.randrange(sc['cols'])} "
                    f"{rng.randint(-10**6, 10**6) / 1000:.3f}\n")
    for n in range(sc["values"]):
        scan.append(f"{rng.randint(-10**7, 10**7) / 1000:.3f}" + ("\n" if n % 7 == 6 else " "))
    write(os.path.join(d, "scan.txt"), "".join(scan).encode())

    shapes = bytearray(rand_bytes(7, SHAPES_BYTES))
    shapes[STOP_MARKER_AT:STOP_MARKER_AT + len(STOP_MARKER)] = STOP_MARKER
    write(os.path.join(d, "shapes.bin"), bytes(shapes))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    generate(sys.argv[1])
