#!/usr/bin/env bash
# A full /dev/shm (any local user can fill it) must cost a job its node-local scheduling,
# never its life: the segments are allocated for real before they are written, and the
# job runs on with one notice (in the statistics; on stderr only with PPIOS_VERBOSE=1).
# Before, a segment sized with ftruncate was written through mmap and the first write of
# a page tmpfs had no room for was a SIGBUS in the library constructor.
# Runs in a private mount namespace with a small tmpfs over /dev/shm: the real one is
# never filled. Needs root (unshare, mount); exits 77 (SKIP) where it cannot have them.
# usage: shm_full.sh PPIOS_COORD PROGRAM   (PROGRAM: e2e_errors_ppios, which takes a file)
set -uo pipefail
coord=$1 program=$2
fail() { echo "FAIL: $*"; exit 1; }

# From here on in a mount namespace of our own, with a 2 MiB tmpfs over /dev/shm.
. "$(dirname "$0")/../private_shm.sh"
private_shm 2m required "$0" "$@"
dir=$(mktemp -d /tmp/ppios-shm-full.XXXXXX)
trap 'rm -rf "$dir"' EXIT
head -c 4096 /dev/urandom >"$dir/in.bin"
# Leave 8 KiB free: far less than either segment (the coordinator's, the change table).
dd if=/dev/zero of=/dev/shm/filler bs=4k count=$(((2048 - 8) / 4)) status=none 2>/dev/null
free_kib=$(df -k --output=avail /dev/shm | tail -1 | tr -d ' ')
[ "$free_kib" -le 64 ] || fail "the test tmpfs still has $free_kib KiB free"
unset PPIOS_VERBOSE PPIOS_STATS PPIOS_TRACE PPIOS_SHM_GROUP
export PPIOS_COORDINATOR=shm PPIOS_TARGET=shm-full-$$ OMPI_MCA_plm=isolated

# 1. ppios-coord: set-threshold cannot store the cap (exit 1), bench runs unscheduled
# (fail-open, exit 0); both name the cause (a SIGBUS is exit 135).
for cmd in "set-threshold 2:1" "bench --clients 2 --seconds 1:0"; do
  rc=0
  timeout 30 "$coord" ${cmd%:*} >"$dir/coord.out" 2>"$dir/coord.err" || rc=$?
  [ $rc -eq "${cmd##*:}" ] || fail "ppios-coord ${cmd%:*} on a full /dev/shm exited $rc: $(cat "$dir/coord.err")"
  [ "$(grep -c "/dev/shm has less than" "$dir/coord.err")" = 1 ] ||
    fail "ppios-coord ${cmd%:*} did not say once that /dev/shm is full: $(cat "$dir/coord.err")"
  echo "ppios-coord ${cmd%:*}: $(head -1 "$dir/coord.err")"
done

# 2. A program: runs to its end with the output of PPIOS_MODE=off and nothing on stderr.
PPIOS_MODE=off timeout 60 "$program" "$dir/in.bin" >"$dir/off.out" 2>/dev/null || fail "the program fails in PPIOS_MODE=off"
rc=0
PPIOS_STATS=$dir/stats.json timeout 60 "$program" "$dir/in.bin" >"$dir/ppios.out" 2>"$dir/ppios.err" || rc=$?
[ $rc -eq 0 ] || fail "the program exited $rc on a full /dev/shm (135 = SIGBUS); stderr: $(cat "$dir/ppios.err")"
cmp -s "$dir/off.out" "$dir/ppios.out" || fail "the output differs from PPIOS_MODE=off"
grep -q "ppios" "$dir/ppios.err" && fail "ppios wrote on the program's stderr without PPIOS_VERBOSE: $(cat "$dir/ppios.err")"
python3 - "$dir/stats.json" <<'EOF' || fail "the statistics do not tell why"
import json, sys
s = json.loads(open(sys.argv[1]).readline())
notes = [n for n in s["coordinator_notices"] if "/dev/shm has less than" in n]
assert len(notes) == 1, s["coordinator_notices"]
assert "No space left on device" in s["coherence"], s["coherence"]
print("statistics:", notes[0])
print("coherence:", s["coherence"])
EOF

# 3. With PPIOS_VERBOSE=1 the same notice on stderr, once.
rc=0
PPIOS_VERBOSE=1 timeout 60 "$program" "$dir/in.bin" >/dev/null 2>"$dir/verbose.err" || rc=$?
[ $rc -eq 0 ] || fail "PPIOS_VERBOSE=1: the program exited $rc"
[ "$(grep -c "/dev/shm has less than" "$dir/verbose.err")" = 1 ] ||
  fail "PPIOS_VERBOSE=1 should print the notice once: $(cat "$dir/verbose.err")"

# 4. Room again: the same job gets its segments (nothing was left half made).
rm -f /dev/shm/filler
PPIOS_STATS=$dir/stats2.json timeout 60 "$program" "$dir/in.bin" >/dev/null 2>&1 || fail "the program fails with room in /dev/shm"
grep -q '"coordinator_notices":\[\]' "$dir/stats2.json" || fail "notices with room in /dev/shm: $(cat "$dir/stats2.json")"
echo "PASS"
