# simfs.model_live_change: writing .simfs-model.json while mounted changes the device.
# The new parameters are read back, and the calibrator (which compares what it measures
# with the curve the mount reports) finds the new curve within 10%: peak at k = 3 instead
# of k = 1, at the new peak bandwidth.
SIMFS=$1 CALIBRATE=$2
source "$(dirname "$0")/lib.sh"
require_fuse
mount_simfs --peak-mibps 60 --optimal-streams 1 --loss-per-stream 0.3

printf '{"optimal_streams": 3, "peak_mibps": 90}' >"$MNT/.simfs-model.json"
model() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(*[$1])" "$MNT/.simfs-model.json"; }
[[ $(model "d['optimal_streams'], float(d['peak_mibps']), d['loss_per_stream']") == "3 90.0 0.3" ]] ||
    fail "model not changed: $(cat "$MNT/.simfs-model.json")"
grep -q "model changed" "$TEST_DIR/server.log" || fail "server did not report the change"

rc=0
"$CALIBRATE" "$MNT" --max-streams 4 --seconds 0.4 --mode distinct --request-kib 256 \
    --csv "$TEST_DIR/calib.csv" || rc=$?
[[ $rc == 0 ]] || fail "the device does not follow the new model (calibrator exit $rc)"
python3 - "$TEST_DIR/calib.csv" <<'PY' || fail "measured curve does not peak at k = 3"
import csv, sys
m = {int(r["k"]): float(r["measured_mibps"]) for r in csv.DictReader(open(sys.argv[1]))}
sys.exit(0 if m[1] < m[2] < m[3] > m[4] and m[3] > 75 else 1)
PY
# Out-of-range values are refused at close and change nothing.
model_write_refused '{"optimal_streams": 0}' || fail "an invalid model was accepted"
[[ $(model "d['optimal_streams']") == 3 ]] || fail "a refused write changed the model"
unmount_simfs
pass "live model change: read back, measured, invalid values refused"
