# simfs.pt_readers: a prefetching program (tests/e2e/chunks_ppios.c, one rank) on the
# emulator (80 MiB/s at 2 streams, 40 a stream alone), PPIOS_MODE=ppios with a cap of 3:
# its MT and two readers.
#  - I/O-bound (2 work rounds per byte): the MT is always close behind the PT, so with two
#    readers the trace shows two PT sub-reads in flight at once, on two reader threads;
#    with one reader, never two.
#  - Compute-bound (40 rounds, about 50 ms a 1 MiB chunk against 25 ms to read it): the
#    PT gets ahead, and from there one fill at a time keeps it ahead, so two sub-reads are
#    in flight for less than a third of the PT's storage time (with both readers always
#    filling: 86% in bench/run's E3 at P = 1, which slowed a neighbour by x1.28).
# Every run prints what the plain program prints.
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
for rounds in 2 40; do
    timeout 60 "$MPIRUN" "$@" -np 1 "$PLAIN" "$MNT/in.bin" 1048576 $rounds >"$TEST_DIR/plain-$rounds.txt" ||
        fail "the plain program failed: $(cat "$TEST_DIR/plain-$rounds.txt")"
done
for run in 2:2 1:2 2:40; do
    readers=${run%%:*} rounds=${run##*:}
    PPIOS_MODE=ppios PPIOS_TARGET=$target PPIOS_THRESHOLD=3 PPIOS_PT_READERS=$readers \
    PPIOS_STATS=$TEST_DIR/stats-$run.jsonl PPIOS_TRACE=$TEST_DIR/trace-$run \
        timeout 60 "$MPIRUN" "$@" -np 1 "$PROGRAM" "$MNT/in.bin" 1048576 $rounds >"$TEST_DIR/out-$run.txt" ||
        fail "the program failed with $readers reader(s), $rounds rounds: $(cat "$TEST_DIR/out-$run.txt")"
    diff -u "$TEST_DIR/plain-$rounds.txt" "$TEST_DIR/out-$run.txt" ||
        fail "with $readers reader(s), $rounds rounds the output differs from the plain program's"
    python3 - "$readers" "$rounds" "$TEST_DIR/trace-$run.0.json" "$TEST_DIR/stats-$run.jsonl" <<'PY' ||
import json, sys
readers, rounds = int(sys.argv[1]), int(sys.argv[2])
events = json.load(open(sys.argv[3]))["traceEvents"]
stats = json.loads(open(sys.argv[4]).readline())
# The PT's storage accesses: sub-reads of the PT (tid 2) and of its readers (tid >= 100).
subs = [(e["ts"], e["ts"] + e["dur"], e["tid"]) for e in events
        if e.get("name") == "storage" and e.get("ph") == "X" and e["tid"] != 1]
edges = sorted([(b, 1) for b, _, _ in subs] + [(end, -1) for _, end, _ in subs])
most = now = 0
time_at = {}  # in-flight count -> microseconds of PT storage time at that count
last = None
for t, d in edges:
    if last is not None and now > 0:
        time_at[now] = time_at.get(now, 0) + t - last
    now += d
    last = t
    most = max(most, now)
busy = sum(time_at.values()) or 1
two = sum(v for k, v in time_at.items() if k >= 2) / busy
threads = sorted({t for _, _, t in subs})
print(f"readers {readers}, rounds {rounds}: {len(subs)} PT storage accesses on threads {threads}, "
      f"at most {most} at once, two or more {two:.0%} of the PT's storage time, "
      f"pt_read_bytes {stats['pt_read_bytes']}, hit_bytes {stats['hit_bytes']}")
ok = stats["pt_read_bytes"] > 0 and len(subs) >= 8
if readers == 1:
    ok = ok and most == 1
elif rounds == 2:
    ok = ok and most == 2 and len(threads) == 2
else:
    ok = ok and two < 1 / 3 and stats["hit_bytes"] > 0
sys.exit(0 if ok else 1)
PY
        fail "with $readers reader(s), $rounds rounds the PT's storage accesses were not what they should be"
done
unmount_simfs
pass "two readers keep two PT sub-reads in flight while the MT is close behind, one fill at a time once ahead; one reader one"
