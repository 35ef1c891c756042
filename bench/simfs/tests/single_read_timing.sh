# simfs.single_read_timing: one 8 MiB read on an otherwise idle device takes
# size / B(1). Asserted tightly from the model's own accounting (time spent at k = 1)
# and loosely from the wall clock, which includes FUSE and scheduling overhead.
SIMFS=$1 CALIBRATE=$2
source "$(dirname "$0")/lib.sh"
require_fuse

# B(1) = 64 / 4 = 16 MiB/s, so 8 MiB take 0.5 s.
head -c $((8 << 20)) /dev/zero >"$BACKING/eight"
mount_simfs --peak-mibps 64 --optimal-streams 4
: >"$MNT/.simfs-stats.json"
start=$(date +%s.%N)
dd if="$MNT/eight" of=/dev/null bs=8M count=1 status=none
end=$(date +%s.%N)
wall=$(python3 -c "print(round($end - $start, 4))")
at_k1=$(stat_field "d['device']['seconds_at_k'][0]")
max_k=$(stat_field "d['device']['max_concurrency']")
bytes=$(stat_field "d['device']['bytes']")
echo "8 MiB read: wall ${wall}s, model time at k=1 ${at_k1}s, max concurrency $max_k," \
     "request sizes $(stat_field "d['fuse']['read_sizes']")"
[[ $bytes == $((8 << 20)) ]] || fail "model charged $bytes bytes"
[[ $max_k == 1 ]] || fail "a single sequential read reached concurrency $max_k"
python3 -c "import sys; sys.exit(0 if abs($at_k1 / 0.5 - 1) < 0.001 else 1)" ||
    fail "model accounted ${at_k1}s at k=1, expected 0.5s"
python3 -c "import sys; sys.exit(0 if 0.49 <= $wall <= 0.8 else 1)" ||
    fail "wall time ${wall}s is not about 0.5s"
pass "8 MiB at B(1) = 16 MiB/s: model 0.5 s, wall ${wall}s"

# The same read without the model is at least 10x faster: the delay is the model's.
unmount_simfs
mount_simfs --no-model
start=$(date +%s.%N)
dd if="$MNT/eight" of=/dev/null bs=8M count=1 status=none
end=$(date +%s.%N)
fast=$(python3 -c "print(round($end - $start, 4))")
python3 -c "import sys; sys.exit(0 if $fast < 0.05 else 1)" || fail "--no-model read took ${fast}s"
pass "--no-model: same read in ${fast}s"
unmount_simfs
