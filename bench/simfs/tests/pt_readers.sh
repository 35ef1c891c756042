# simfs.pt_readers: a prefetching program (tests/e2e/chunks_ppios.c, one rank) on the
# emulator with PPIOS_PT_READERS=2 and then 1 (PPIOS_MODE=ppios, a cap of 3: its MT and
# two readers). With two readers the trace shows two PT sub-reads in flight at once, on
# two reader threads; with one, never two. Both print what the plain program prints.
# usage: pt_readers.sh SIMFS COORD PLAIN PROGRAM MPIRUN [MPIRUN_FLAGS...]
SIMFS=$1 COORD=$2 PLAIN=$3 PROGRAM=$4 MPIRUN=$5
shift 5
source "$(dirname "$0")/lib.sh"
require_fuse
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
target="pt-readers-$$"
EXTRA_CLEANUP='"$COORD" --coordinator shm --target "$target" reset --force >/dev/null 2>&1'
mount_simfs --peak-mibps 80 --optimal-streams 2 --loss-per-stream 0.15
head -c 16M /dev/urandom >"$BACKING/in.bin"
timeout 60 "$MPIRUN" "$@" -np 1 "$PLAIN" "$MNT/in.bin" 1048576 2 >"$TEST_DIR/plain.txt" ||
    fail "the plain program failed: $(cat "$TEST_DIR/plain.txt")"
for readers in 2 1; do
    PPIOS_MODE=ppios PPIOS_TARGET=$target PPIOS_THRESHOLD=3 PPIOS_PT_READERS=$readers \
    PPIOS_STATS=$TEST_DIR/stats-$readers.jsonl PPIOS_TRACE=$TEST_DIR/trace-$readers \
        timeout 60 "$MPIRUN" "$@" -np 1 "$PROGRAM" "$MNT/in.bin" 1048576 2 >"$TEST_DIR/out-$readers.txt" ||
        fail "the program failed with $readers reader(s): $(cat "$TEST_DIR/out-$readers.txt")"
    diff -u "$TEST_DIR/plain.txt" "$TEST_DIR/out-$readers.txt" ||
        fail "with $readers reader(s) the output differs from the plain program's"
    python3 - "$readers" "$TEST_DIR/trace-$readers.0.json" "$TEST_DIR/stats-$readers.jsonl" <<'PY' ||
import json, sys
readers = int(sys.argv[1])
events = json.load(open(sys.argv[2]))["traceEvents"]
stats = json.loads(open(sys.argv[3]).readline())
# The PT's storage accesses: sub-reads of the PT (tid 2) and of its readers (tid >= 100).
subs = [(e["ts"], e["ts"] + e["dur"], e["tid"]) for e in events
        if e.get("name") == "storage" and e.get("ph") == "X" and e["tid"] != 1]
edges = sorted([(b, 1) for b, _, _ in subs] + [(end, -1) for _, end, _ in subs])
most = now = 0
for _, d in edges:
    now += d
    most = max(most, now)
threads = sorted({t for _, _, t in subs})
print(f"readers {readers}: {len(subs)} PT storage accesses on threads {threads}, at most {most} at once, "
      f"pt_read_bytes {stats['pt_read_bytes']}, hit_bytes {stats['hit_bytes']}")
ok = stats["pt_read_bytes"] > 0 and len(subs) >= 8
ok = ok and (most == 2 and len(threads) == 2 if readers == 2 else most == 1)
sys.exit(0 if ok else 1)
PY
        fail "with $readers reader(s) the PT's storage accesses were not what they should be"
done
unmount_simfs
pass "two readers keep two PT sub-reads in flight, one reader one"
