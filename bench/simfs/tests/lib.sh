# Shared helpers of the simfs shell tests. Sourced with SIMFS and CALIBRATE set.
# Every test works in its own temporary directory; the EXIT trap stops the server,
# makes sure nothing stays mounted, and removes the directory.
set -euo pipefail

SKIP=77
TEST_DIR=$(mktemp -d /tmp/simfs-test.XXXXXX)
BACKING=$TEST_DIR/backing
MNT=$TEST_DIR/mnt
SERVER_PID=
mkdir -p "$BACKING" "$MNT"

# A test with more to clean up (a redis-server, a coordinator segment) puts the commands
# in EXTRA_CLEANUP rather than replacing the trap, so the exit status is kept.
EXTRA_CLEANUP=
cleanup() {
    local rc=$?
    if [[ -n $EXTRA_CLEANUP ]]; then eval "$EXTRA_CLEANUP" || true; fi
    if [[ -n $SERVER_PID ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill -TERM "$SERVER_PID" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
    fi
    if mountpoint -q "$MNT" 2>/dev/null; then
        fusermount3 -u "$MNT" 2>/dev/null || fusermount3 -u -z "$MNT" 2>/dev/null || true
    fi
    if [[ -n $SERVER_PID ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill -KILL "$SERVER_PID" 2>/dev/null || true
    fi
    rm -rf "$TEST_DIR"
    exit "$rc"
}
trap cleanup EXIT
# A timeout's SIGTERM must still run the cleanup above.
trap 'exit 143' TERM INT HUP

skip() { echo "SKIP: $*"; exit $SKIP; }
fail() { echo "FAIL: $*"; exit 1; }
pass() { echo "ok: $*"; }

# FUSE must be usable here, or the test is skipped (never silently passed).
require_fuse() {
    [[ -c /dev/fuse ]] || skip "/dev/fuse does not exist"
    { exec 9<>/dev/fuse; } 2>/dev/null || skip "/dev/fuse cannot be opened"
    exec 9>&-
    command -v fusermount3 >/dev/null || skip "fusermount3 is not installed"
}

# mount_simfs [ppios-simfs options...]: foreground server in the background of this
# shell, ready once the virtual model file answers.
# Non-interactive bash starts background jobs with SIGINT ignored, and libfuse (rightly)
# leaves ignored signals alone; restore the default so SIGINT can be tested.
mount_simfs() {
    python3 -c 'import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.execv(sys.argv[1], sys.argv[1:])' "$SIMFS" -f "$@" "$BACKING" "$MNT" 2>"$TEST_DIR/server.log" &
    SERVER_PID=$!
    for _ in $(seq 100); do
        [[ -e $MNT/.simfs-model.json ]] && return 0
        if ! kill -0 "$SERVER_PID" 2>/dev/null; then
            local rc=0
            wait "$SERVER_PID" || rc=$?
            SERVER_PID=
            cat "$TEST_DIR/server.log"
            [[ $rc == 3 ]] && skip "ppios-simfs says FUSE is unavailable"
            fail "ppios-simfs exited with $rc before mounting"
        fi
        sleep 0.05
    done
    fail "ppios-simfs did not mount within 5 s"
}

unmount_simfs() {
    kill -TERM "$SERVER_PID"
    local rc=0
    wait "$SERVER_PID" || rc=$?
    SERVER_PID=
    [[ $rc == 0 ]] || fail "ppios-simfs exited with $rc on SIGTERM"
    ! mountpoint -q "$MNT" || fail "still mounted after SIGTERM"
}

# stat_field PYTHON_EXPR: evaluates an expression over the stats JSON (bound to d).
stat_field() {
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($1)" \
        "$MNT/.simfs-stats.json"
}

# model_write_refused DOCUMENT: writes DOCUMENT to the model file; true only if closing it
# is refused with EINVAL (a refused model changes nothing).
model_write_refused() {
    python3 - "$MNT/.simfs-model.json" "$1" <<'PY'
import errno, sys
f = open(sys.argv[1], "w")
f.write(sys.argv[2])
try:
    f.close()
except OSError as e:
    sys.exit(0 if e.errno == errno.EINVAL else 1)
sys.exit(1)
PY
}
