# simfs.auto_threshold.runtime: a prefetching MPI program (tests/e2e/chunks_ppios.c, 6
# ranks) on the emulator with PPIOS_THRESHOLD=auto: the runtime reports the bytes of its
# MT reads and PT sub-reads at release, so the controller (in one of the ranks) learns a
# curve and moves the cap off 1 toward the device's optimum (3).
# MTs follow the default rule (MtAtCap::Learned): they pass the cold start's doubling caps, so
# its first window measures their concurrency, then wait at every cap the controller
# measured. Before (MTs passing every cap, tried 2026-11-24) the 6 ranks' MTs alone passed
# the optimum, the cap rightly stayed at their level (5-7; a cap there only kept PTs out)
# and said nothing about the knee, so this test needed PPIOS_MT_THROTTLE=1; held MTs make
# the cap bind and the probes down measure below them.
# usage: auto_threshold_runtime.sh SIMFS COORD PROGRAM MPIRUN [MPIRUN_FLAGS...]
SIMFS=$1 COORD=$2 PROGRAM=$3 MPIRUN=$4
shift 4
source "$(dirname "$0")/lib.sh"
require_fuse
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
target="auto-rt-$$"
EXTRA_CLEANUP='"$COORD" --coordinator shm --target "$target" reset --force >/dev/null 2>&1'
mount_simfs --peak-mibps 160 --optimal-streams 3 --loss-per-stream 0.15
truncate -s 480M "$BACKING/in.bin"
PPIOS_TARGET=$target PPIOS_THRESHOLD=auto PPIOS_LEASE_MS=1000 \
    timeout 90 "$MPIRUN" "$@" -np 6 "$PROGRAM" "$MNT/in.bin" 1048576 0 >"$TEST_DIR/out.txt" ||
    fail "the program failed: $(cat "$TEST_DIR/out.txt")"
status=$("$COORD" --coordinator shm --target "$target" status --json)
echo "$status"
python3 - "$status" <<'PY' || fail "nothing learned from the runtime's releases: $status"
import json, sys
d = json.loads(sys.argv[1])
curve = {c["k"]: c["mibps"] for c in d["curve"]}
print("cap", d["threshold"], "mt_hold", d["mt_hold"], "curve", curve)
sys.exit(0 if d["auto"] and d["mt_hold"] and len(curve) >= 2 and 2 <= d["threshold"] <= 5 else 1)
PY
unmount_simfs
pass "the runtime's reported bytes drive the learned cap"
