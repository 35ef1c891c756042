# simfs.coord_calibrate: `ppios-coord calibrate` on the emulator finds the configured
# optimum (+-1) for distinct and same regions, draws the PNG, and --store leaves the
# knee as the target's cap and the curve in `status`; bad input exits non-zero.
SIMFS=$1 COORD=$2
source "$(dirname "$0")/lib.sh"
require_fuse
mount_simfs --peak-mibps 100 --optimal-streams 4 --loss-per-stream 0.25
target="calib-$$"
EXTRA_CLEANUP='"$COORD" --coordinator shm --target "$target" reset --force >/dev/null 2>&1'
truncate -s 256M "$MNT/data.bin"

out=$("$COORD" --coordinator shm --target "$target" calibrate "$MNT/data.bin" --max-streams 7 \
      --seconds 0.3 --request-kib 256 --png "$TEST_DIR/b.png" --csv "$TEST_DIR/b.csv" --store 2>&1) ||
    fail "calibrate exited non-zero: $out"
echo "$out"
grep -q "O_DIRECT" <<<"$out" || fail "O_DIRECT was not used on the mount"
knee=$(sed -n 's/^knee \([0-9]*\) .*/\1/p' <<<"$out")
[[ -n $knee && $knee -ge 3 && $knee -le 5 ]] || fail "knee '$knee' is not 4 +- 1"
python3 - "$TEST_DIR/b.csv" <<'PY' || fail "same-region curve does not peak at 4 +- 1"
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["mode"] == "same"]
best = max(rows, key=lambda r: float(r["mibps"]))
sys.exit(0 if len(rows) == 7 and 3 <= int(best["k"]) <= 5 else 1)
PY
[[ $(head -c 8 "$TEST_DIR/b.png" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]] ||
    fail "no PNG drawn"
status=$("$COORD" --coordinator shm --target "$target" status --json)
python3 - "$knee" "$status" <<'PY' || fail "stored state wrong: $status"
import json, sys
d = json.loads(sys.argv[2])
sys.exit(0 if d["threshold"] == int(sys.argv[1]) and len(d["curve"]) == 7 and not d["auto"] else 1)
PY
# Learning starts from the stored knee.
"$COORD" --coordinator shm --target "$target" set-threshold auto
status=$("$COORD" --coordinator shm --target "$target" status --json)
python3 - "$knee" "$status" <<'PY' || fail "set-threshold auto did not keep the stored cap: $status"
import json, sys
d = json.loads(sys.argv[2])
sys.exit(0 if d["threshold"] == int(sys.argv[1]) and d["auto"] else 1)
PY
pass "calibrate: knee $knee, PNG, stored"

# Bad input: clear message, non-zero exit.
set +e
msg=$("$COORD" calibrate "$TEST_DIR/nonexistent" 2>&1); rc=$?
[[ $rc == 1 && $msg == *nonexistent* ]] || fail "missing path: rc $rc, '$msg'"
msg=$("$COORD" calibrate "$MNT/data.bin" --max-streams 0 2>&1); rc=$?
[[ $rc == 2 && $msg == *--max-streams* ]] || fail "bad --max-streams: rc $rc, '$msg'"
msg=$("$COORD" calibrate 2>&1); rc=$?
[[ $rc == 2 && $msg == *PATH* ]] || fail "no path: rc $rc, '$msg'"
set -e
unmount_simfs
pass "calibrate: bad input refused"
