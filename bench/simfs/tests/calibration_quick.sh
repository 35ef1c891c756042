# simfs.calibration_quick: the calibrator starts its own server (and stops it after),
# measures k = 1..4 readers on distinct and on the same region, and every point is
# within 10% of the configured B(k) (rising to opt = 2, then falling by 20%/stream).
SIMFS=$1 CALIBRATE=$2
source "$(dirname "$0")/lib.sh"
require_fuse

rc=0
"$CALIBRATE" --simfs "$SIMFS" --backing "$BACKING" "$MNT" --max-streams 4 --seconds 0.4 \
    --csv "$TEST_DIR/calib.csv" -- --peak-mibps 100 --optimal-streams 2 \
    --loss-per-stream 0.2 || rc=$?
[[ $rc == 3 ]] && skip "calibrator says FUSE is unavailable"
[[ $rc == 0 ]] || fail "calibration exited with $rc"
[[ $(grep -c ',pass$' "$TEST_DIR/calib.csv") == 8 ]] || fail "expected 8 passing points"
# The curve must actually rise and fall, not just match within noise.
python3 - "$TEST_DIR/calib.csv" <<'EOF' || fail "measured curve does not peak at k = 2"
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["mode"] == "distinct"]
m = {int(r["k"]): float(r["measured_mibps"]) for r in rows}
sys.exit(0 if m[1] < m[2] > m[3] > m[4] else 1)
EOF
[[ -z $(ls -A "$BACKING") ]] || fail "calibration left files in the backing dir"
! mountpoint -q "$MNT" || fail "calibration left its mount behind"
pass "calibration within 10%, curve peaks at k = 2"
