# simfs.signals: the server unmounts cleanly on SIGTERM (daemon mode, and with a read in
# flight), on SIGINT, and exits when fusermount3 -u unmounts it; bad paths give a clear
# message and exit code 2.
SIMFS=$1 CALIBRATE=$2
source "$(dirname "$0")/lib.sh"
require_fuse

wait_gone() {  # wait_gone PID: process ended and mount point released, within 5 s
    for _ in $(seq 100); do
        if ! kill -0 "$1" 2>/dev/null && ! mountpoint -q "$MNT"; then return 0; fi
        sleep 0.05
    done
    fail "server $1 still running or still mounted 5 s after being stopped"
}

# Daemon mode: returns once mounted; --pid-file names the server.
"$SIMFS" --pid-file "$TEST_DIR/pid" "$BACKING" "$MNT" 2>"$TEST_DIR/server.log" ||
    { rc=$?; [[ $rc == 3 ]] && skip "FUSE unavailable"; fail "daemon start exited $rc"; }
mountpoint -q "$MNT" || fail "not mounted after daemon start returned"
SERVER_PID=$(cat "$TEST_DIR/pid")
kill -TERM "$SERVER_PID"
wait_gone "$SERVER_PID"
[[ ! -e $TEST_DIR/pid ]] || fail "pid file left behind"
SERVER_PID=
pass "daemon mode, SIGTERM"

mount_simfs
pid=$SERVER_PID
kill -INT "$pid"
wait "$pid" || fail "SIGINT: exit status $?"
wait_gone "$pid"
SERVER_PID=
pass "SIGINT"

mount_simfs
pid=$SERVER_PID
fusermount3 -u "$MNT"
wait "$pid" || fail "fusermount3 -u: exit status $?"
SERVER_PID=
pass "fusermount3 -u"

# SIGTERM during a 0.5 s read: the server still stops and the mount goes away.
head -c $((8 << 20)) /dev/zero >"$BACKING/eight"
mount_simfs --peak-mibps 64 --optimal-streams 4
pid=$SERVER_PID
dd if="$MNT/eight" of=/dev/null bs=8M count=1 status=none 2>/dev/null &
reader=$!
sleep 0.15
kill -TERM "$pid"
wait_gone "$pid"
wait "$reader" || true  # the read may complete or fail; it must not hang
SERVER_PID=
pass "SIGTERM with a read in flight"

rc=0; "$SIMFS" "$BACKING" "$TEST_DIR/missing" 2>"$TEST_DIR/err" || rc=$?
[[ $rc == 2 ]] && grep -q "mount point" "$TEST_DIR/err" || fail "missing mount point: rc $rc"
rc=0; "$SIMFS" "$TEST_DIR/missing" "$MNT" 2>"$TEST_DIR/err" || rc=$?
[[ $rc == 2 ]] && grep -q "backing directory" "$TEST_DIR/err" || fail "missing backing: rc $rc"
touch "$TEST_DIR/file"
rc=0; "$SIMFS" "$BACKING" "$TEST_DIR/file" 2>"$TEST_DIR/err" || rc=$?
[[ $rc == 2 ]] || fail "mount point that is a file: rc $rc"
rc=0; "$SIMFS" --peak-mibps -3 "$BACKING" "$MNT" 2>"$TEST_DIR/err" || rc=$?
[[ $rc == 1 ]] && grep -q peak-mibps "$TEST_DIR/err" || fail "bad --peak-mibps: rc $rc"
! mountpoint -q "$MNT" || fail "a failed start left a mount"
pass "bad paths and options: exit 2 / 1 with a message, nothing mounted"
