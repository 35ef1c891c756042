"""Independent Python recomputation of what every corpus program prints and writes, from
the inputs gen_inputs.py makes. Each function takes (input dir, number of ranks, the
program's arguments as given to it) and returns (expected stdout, {file name: bytes}).
Written from each program's description, not from its code paths: it shares only the
CRC-32 (zlib's) with the C side."""
import math
import os
import struct
import zlib


def _read(d, name):
    with open(os.path.join(d, name), "rb") as f:
        return f.read()


def _le32(b, at):
    return struct.unpack_from("<I", b, at)[0]


def _round_robin(data, np, block, whole_blocks_only=False):
    """Each rank reads every np-th block of data, from block `rank` on, and prints how many
    blocks and bytes it read and their CRC; then the total."""
    nblocks = len(data) // block if whole_blocks_only else -(-len(data) // block)
    out, total = "", 0
    for r in range(np):
        crc, nbytes, count = 0, 0, 0
        for i in range(r, nblocks, np):
            piece = data[i * block:(i + 1) * block]
            crc = zlib.crc32(piece, crc)
            nbytes += len(piece)
            count += 1
        out += f"rank {r}: blocks {count} bytes {nbytes} crc {crc:08x}\n"
        total += nbytes
    out += f"total bytes {total} of {len(data)}\n"
    return out, {}


def loop_main(d, np, args):
    return _round_robin(_read(d, "data.bin"), np, int(args[1]))


# The issue-9 shapes: the same round-robin reads of shapes.bin, written the ways real
# programs write them (C89 locals, handles in globals, calls in macros, a struct plan,
# seeks in a helper).
def c89_locals(d, np, args):
    return _round_robin(_read(d, "shapes.bin"), np, int(args[1]))


global_handles = macro_calls = struct_plan = helper_seeks = c89_locals


def c99_offsets(d, np, args):
    return _round_robin(_read(d, "shapes.bin")[4096:], np, int(args[1]), whole_blocks_only=True)


collective_reads = c99_offsets


def created_file(d, np, args):
    data, block = _read(d, "shapes.bin"), int(args[1])
    nblocks = -(-len(data) // block)
    out, files = "", {}
    for r in range(np):
        copy = b"".join(data[i * block:(i + 1) * block] for i in range(r, nblocks, np))
        files[f"copy.{r}.bin"] = copy
        back = [copy[o:o + block] for o in range(0, len(copy), block)]
        out += (f"rank {r}: copied {len(copy)} bytes crc {zlib.crc32(copy):08x}; "
                f"read back {len(back)} blocks crc {zlib.crc32(copy):08x}\n")
    return out, files


def stop_flag(d, np, args):
    data, block = _read(d, "shapes.bin"), int(args[1])
    part = -(-(len(data) // np) // block) * block
    out = ""
    for r in range(np):
        begin = r * part
        end = len(data) if r == np - 1 else min(len(data), begin + part)
        crc = nbytes = count = 0
        stopped = False
        for at in range(begin, end, block):
            piece = data[at:min(end, at + block)]
            crc = zlib.crc32(piece, crc)
            nbytes += len(piece)
            count += 1
            if b"STOPSTOP" in piece:
                stopped = True
                break
        out += (f"rank {r}: blocks {count} bytes {nbytes} crc {crc:08x}"
                f"{' stopped at the marker' if stopped else ''}\n")
    return out, {}


def nested_helpers(d, np, args):
    g = _read(d, "grid.bin")
    rows, cols, tile_rows = _le32(g, 4), _le32(g, 8), _le32(g, 12)
    row = lambda i: g[64 + i * cols:64 + (i + 1) * cols]
    ntiles = -(-rows // tile_rows)
    out = ""
    for r in range(np):
        rows_crc = halo_crc = nrows = nhalos = 0
        for t in range(r, ntiles, np):
            for i in range(t * tile_rows, min(rows, (t + 1) * tile_rows)):
                rows_crc = zlib.crc32(row(i), rows_crc)
                nrows += 1
            if (t + 1) * tile_rows < rows:
                halo_crc = zlib.crc32(row((t + 1) * tile_rows)[:256], halo_crc)
                nhalos += 1
        out += f"rank {r}: rows {nrows} crc {rows_crc:08x} halos {nhalos} crc {halo_crc:08x}\n"
    out += f"grid {rows} x {cols}, tiles of {tile_rows} rows\n"
    return out, {}


def bcast_params(d, np, args):
    params = {}
    for line in _read(d, "params.txt").decode().splitlines():
        line = line.split("#")[0]
        if "=" in line:
            key, value = line.split("=")
            params[key.strip()] = int(value)
    h, rb, n = params["header_bytes"], params["record_bytes"], params["records"]
    passes = int(args[2])
    data = _read(d, "data.bin")
    out = f"params: header {h} record {rb} records {n} passes {passes}\n"
    for r in range(np):
        line = f"rank {r}:"
        for p in range(passes):
            crc, visited = p, 0
            for i in range(r, n, np):
                rec = data[h + i * rb:h + (i + 1) * rb]
                if not rec:
                    break
                crc = zlib.crc32(rec, crc)
                visited += 1
            line += f" pass {p}: {visited} records crc {crc:08x};"
        out += line + "\n"
    return out, {}


def multi_interface(d, np, args):
    a, b = _read(d, "data.bin"), _read(d, "second.bin")
    chunk, chunks = int(args[2]), int(args[3])
    half = chunk // 2
    out = ""
    for r in range(np):
        c_pread = c_fread = c_read = c_read_at = c_mpi = 0
        for i in range(chunks):
            off_a = (r * chunks + i) * chunk
            off_b = (i * np + r) * half
            c_pread = zlib.crc32(a[off_a:off_a + chunk], c_pread)
            c_fread = zlib.crc32(b[off_b:off_b + half], c_fread)
        stdio_pos = min(len(b), off_b + half)
        for i in range(chunks):
            off = (r * chunks + (chunks - 1 - i)) * chunk + chunk // 3
            c_read = zlib.crc32(a[off:off + chunk], c_read)
        pos = r * chunks * half
        for i in range(chunks):
            off = ((chunks - 1 - i) * np + r) * chunk
            c_read_at = zlib.crc32(a[off:off + chunk], c_read_at)
            piece = b[pos:pos + half]
            c_mpi = zlib.crc32(piece, c_mpi)
            pos += len(piece)
        out += (f"rank {r}: pread {c_pread:08x} fread {c_fread:08x} read {c_read:08x} "
                f"read_at {c_read_at:08x} mpi_read {c_mpi:08x} pos stdio {stdio_pos} mpi {pos}\n")
    return out, {}


def stream_idiom(d, np, args):
    data = _read(d, "data.bin")
    base_limit = int(args[2])
    out = ""
    for r in range(np):
        part = _read(d, f"part.{r}.bin")
        reads = -(-len(part) // 8192)
        start, limit = r * 4 * 8192, base_limit + 7 * r
        piece = data[start:start + limit * 4096]
        chunks = -(-len(piece) // 4096)
        out += (f"rank {r}: streamed {len(part)} bytes in {reads} reads crc {zlib.crc32(part):08x}; "
                f"{chunks} chunks crc {zlib.crc32(piece):08x} pos {start + len(piece)}\n")
    return out, {}


def derived_types(d, np, args):
    data, block = _read(d, "shapes.bin"), int(args[1])
    rows = len(data) // block
    row = lambda at, n: data[at:at + n]
    out = ""
    for r in range(np):
        crc_a, rows_a = 0, 0
        for i in range(r, rows, np):
            crc_a = zlib.crc32(row(i * block, block), crc_a)
            rows_a += 1
        crc_b = 0
        for i in range(8):  # the view starts after a 3-byte header; offsets count rows
            crc_b = zlib.crc32(row(3 + (r + i * np) * block, block), crc_b)
        tail = data[(rows - 8) * block + 3:]  # 8 rows and a tail of whole 64-byte records
        per_read, crc_c, items, reads = block // 64, 0, 0, 0
        for at in range(0, len(tail) + 1, block):
            got = tail[at:at + block]
            crc_c = zlib.crc32(got, crc_c)
            items += len(got) // 64
            reads += 1
            if len(got) // 64 != per_read:
                break
        crc_d = 0
        for i in range(4):  # every other int of the buffer; the rest keeps its fill
            src, buf = row((r * 4 + i) * block, block // 2), bytearray(b"\x5a" * block)
            for k in range(block // 8):
                buf[8 * k:8 * k + 4] = src[4 * k:4 * k + 4]
            crc_d = zlib.crc32(bytes(buf), crc_d)
        crc_e = 0
        for i in range(8):
            crc_e = zlib.crc32(row((r * 8 + i) * (block // 2), block // 2), crc_e)
        out += (f"rank {r}: rows {rows_a} crc {crc_a:08x}; view crc {crc_b:08x}; "
                f"records {items} elements {items * 16} in {reads} reads crc {crc_c:08x}; "
                f"strided crc {crc_d:08x}; half rows crc {crc_e:08x}\n")
    return out, {}


def read_until_short(d, np, args):
    data = _read(d, "shapes.bin")
    reads = len(data) // int(args[1]) + 1  # the last read is short (or empty)
    line = f"read {len(data)} bytes in {reads} reads crc {zlib.crc32(data):08x}\n"
    return "".join(f"rank {r}: {line}" for r in range(np)), {}


def sentinel_scan(d, np, args):
    data = _read(d, "sentinel.bin")
    out = ""
    for r in range(np):
        crc, scanned, stop, i = 0, 0, -1, r
        while (i + 1) * 512 <= len(data):
            rec = data[i * 512:(i + 1) * 512]
            if _le32(rec, 0) == 0xDEADBEEF:
                stop = i
                break
            crc = zlib.crc32(rec, crc)
            scanned += 1
            i += np
        out += f"rank {r}: scanned {scanned} records crc {crc:08x}, sentinel at {stop}\n"
    return out, {}


def _strtol(b):
    """C's strtol(b, &end, 10): (value, the bytes after it), (0, b) without digits."""
    s = b.lstrip(b" \t\n\v\f\r")
    sign = 1
    if s[:1] in (b"+", b"-"):
        sign, s = (-1 if s[:1] == b"-" else 1), s[1:]
    digits = len(s) - len(s.lstrip(b"0123456789"))
    if digits == 0:
        return 0, b
    return sign * int(s[:digits]), s[digits:]


def text_lines(d, np, args):
    data = _read(d, "lines.txt")
    lines = data.splitlines(keepends=True)
    pieces = []  # what fgets into 256 bytes returns: at most 255 bytes, up to a newline
    for line in lines:
        pieces += [line[i:i + 255] for i in range(0, len(line), 255)]
    out = ""
    for r in range(np):
        mine = total = crc = 0
        for piece in pieces:
            ident, rest = _strtol(piece)
            value, _ = _strtol(rest)
            if ident % np == r:
                mine += 1
                total += value
                crc = zlib.crc32(piece, crc)
        out += (f"rank {r}: pieces {len(pieces)} mine {mine} sum {total} crc {crc:08x}; "
                f"lines {len(lines)} bytes {len(data)} longest {max(map(len, lines))}\n")
    return out, {}


def scan_matrix(d, np, args):
    tokens = _read(d, "scan.txt").split()
    rows, cols, nnz = (int(t) for t in tokens[:3])
    triplets = [(int(tokens[3 + 3 * k]), int(tokens[4 + 3 * k]), float(tokens[5 + 3 * k]))
                for k in range(nnz)]
    values = [float(t) for t in tokens[3 + 3 * nnz:]][:1 << 16]
    out = ""
    for r in range(np):
        mine = [t for k, t in enumerate(triplets) if k % np == r]
        total = sum(round(v * 1000) * (i + 2 * j) for i, j, v in mine)
        value_sum = sum(round(v * 1000) for v in values[r::np])
        out += (f"rank {r}: rows {rows} cols {cols} nnz {nnz} read {nnz} mine {len(mine)} "
                f"sum {total}; values {len(values)} sum {value_sum}\n")
    return out, {}


def indexed_records(d, np, args):
    index, recs = _read(d, "index.bin"), _read(d, "records.bin")
    count = _le32(index, 4)
    entries = [struct.unpack_from("<QII", index, 8 + 16 * e) for e in range(count)]
    out = ""
    for r in range(np):
        crc = mix = nbytes = n = 0
        for off, length, key in entries[r::np]:
            rec = recs[off:off + length]
            crc = zlib.crc32(rec, crc)
            mix ^= zlib.crc32(rec) ^ key
            nbytes += length
            n += 1
        out += f"rank {r}: records {n} bytes {nbytes} crc {crc:08x} mix {mix:08x}\n"
    return out, {}


def write_then_read(d, np, args):
    data = _read(d, "data.bin")
    block, blocks = int(args[1]), int(args[2])
    out, files = "", {}
    for r in range(np):
        pieces = [data[(i * np + r) * block:(i * np + r + 1) * block][::-1] for i in range(blocks)]
        files[f"wtr.{r}.dat"] = b"".join(pieces)
        crc = 0
        for i in range(blocks):
            crc = zlib.crc32(pieces[(i * 7 + 3) % blocks], crc)
        out += f"rank {r}: wrote {blocks} blocks, read back crc {crc:08x}\n"
    return out, files


def raw_same_loop(d, np, args):
    data = _read(d, "data.bin")
    block, blocks = int(args[1]), int(args[2])
    out, files = "", {}
    for r in range(np):
        written = [data[r * block:(r + 1) * block]]
        for i in range(1, blocks):
            cur = data[(i * np + r) * block:(i * np + r + 1) * block]
            shift = i % block
            rotated = cur[shift:] + cur[:shift]
            x = int.from_bytes(written[-1], "little") ^ int.from_bytes(rotated, "little")
            written.append(x.to_bytes(block, "little"))
        content = b"".join(written)
        files[f"raw.{r}.dat"] = content
        out += f"rank {r}: {len(content)} bytes crc {zlib.crc32(content):08x}\n"
    return out, files


def no_reads(d, np, args):
    samples = int(args[0])
    mask, scale = (1 << 64) - 1, 1 << 20
    inside = 0
    for r in range(np):
        state = (0x9E3779B97F4A7C15 * (r + 1)) & mask
        for _ in range(samples):
            state = (state * 6364136223846793005 + 1442695040888963407) & mask
            x = (state >> 33) % scale
            state = (state * 6364136223846793005 + 1442695040888963407) & mask
            y = (state >> 33) % scale
            inside += x * x + y * y < scale * scale
    total = samples * np
    text = f"inside {inside} of {total}: pi ~ {4.0 * inside / total:.6f}\n"
    return text, {"pi.txt": text.encode()}


def unpredictable(d, np, args):
    data, second = _read(d, "data.bin"), _read(d, "second.bin")
    rounds, block, mask = int(args[2]), 8192, (1 << 64) - 1
    nblocks = len(data) // block
    ring = [0] * np
    token = 12345
    for _ in range(rounds):
        for r in range(np):  # the token goes 0 -> 1 -> ... -> np-1 -> back to 0
            off = (token % nblocks) * block
            c = zlib.crc32(data[off:off + block])
            ring[r] = zlib.crc32(struct.pack("<I", c), ring[r])
            token = (token * 6364136223846793005 + c) & mask
    out = ""
    for r in range(np):
        fp = 0
        for i in range(rounds):
            piece = second[(i * np + r) * block:(i * np + r + 1) * block]
            if not piece:
                break
            fp = zlib.crc32(piece, fp)
        out += f"rank {r}: ring crc {ring[r]:08x} fn-pointer crc {fp:08x}\n"
    out += f"final token {token:016x}\n"
    return out, {}


def multi_tu(d, np, args):
    data = _read(d, "second.bin")
    chunk = int(args[1])
    part = len(data) // np
    chunks = -(-part // chunk)
    out = ""
    for r in range(np):
        get = lambda i: data[part * r + i * chunk:part * r + (i + 1) * chunk]
        fwd = bwd = 0
        for i in range(chunks):
            fwd = zlib.crc32(get(i), fwd)
        for i in range(chunks - 1, -1, -2):
            bwd = zlib.crc32(get(i), bwd)
        out += f"rank {r}: {chunks} chunks forward {fwd:08x} backward {bwd:08x}\n"
    return out, {}


def make_project(d, np, args):
    a, b = _read(d, "data.bin"), _read(d, "second.bin")
    block = int(args[2])
    bins = [0] * 256
    pieces = [a[i * block:(i + 1) * block] for i in range(len(a) // block)]
    part = len(b) // np
    for r in range(np):
        pieces += [b[r * part + k:r * part + k + block] for k in range(0, part - block + 1, block)]
    for piece in pieces:
        for v, c in enumerate(_byte_counts(piece)):
            bins[v] += c
    n = sum(bins)
    s1 = sum(v * c for v, c in enumerate(bins))
    s2 = sum(v * v * c for v, c in enumerate(bins))
    mean = s1 / n
    sd = math.sqrt(s2 / n - mean * mean)
    top = sorted(range(256), key=lambda v: (-bins[v], v))[:3]
    text = (f"histo 1.2: {n} bytes mean {mean:.6f} sd {sd:.6f} top "
            + " ".join(f"{v}:{bins[v]}" for v in top) + "\n")
    return text, {"summary.txt": text.encode()}


def _byte_counts(data):
    return [data.count(bytes([v])) for v in range(256)]
