#!/usr/bin/env bash
# A corrupt node-local segment costs at most a wrong cap: never a crash, a hang or an exit.
#   1. random bytes written into a live segment while jobs (ppios-coord bench processes,
#      real clients of the library) and `ppios-coord status` run against it;
#   2. each of these forged segment states (scan bounds 0xFFFFFFFF, 1000 phantom PT
#      slots at threshold 1, a bad holder index, wrapped counters, a zeroed magic, cap 0)
#      under a running job;
#   3. a lock holder that never lets go (and one stopped with SIGSTOP).
# After each, the target must work normally again once reset.
# usage: shm_fuzz.sh PPIOS_COORD ATTACK_TOOL
set -uo pipefail
coord=$1 tool=$2
target="fuzz-$$"
dir=$(mktemp -d /tmp/ppios-fuzz.XXXXXX)
export PPIOS_COORDINATOR=shm PPIOS_TARGET=$target PPIOS_LEASE_MS=500
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -CONT "$p" 2>/dev/null; kill -9 "$p" 2>/dev/null; done
  wait 2>/dev/null
  # ppios-coord removes the segment: it alone knows its name (layout version, node secret).
  timeout 30 "$coord" reset --force >/dev/null 2>&1
  rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
json_get() { python3 -c "import json,sys; d=json.load(sys.stdin); print(d$1)"; }

# A job: bench for SECONDS; it must end on its own (0, or 3 when the corrupt segment let
# it exceed the cap), well within the timeout: every wait is bounded by the lease.
start_job() {  # start_job NAME SECONDS [bench options]
  local name=$1 seconds=$2; shift 2
  timeout 60 "$coord" bench --clients 3 --seconds "$seconds" --class mix --json "$@" >"$dir/$name.out" 2>"$dir/$name.err" &
  job=$!
  pids+=("$job")
}
check_job() {  # check_job NAME PID
  local rc=0
  wait "$2" || rc=$?
  case $rc in
    0|3) ;;
    124) fail "$1: hung (killed by timeout); stderr: $(cat "$dir/$1.err")" ;;
    *) fail "$1: exit $rc (a crash or an error exit); stderr: $(cat "$dir/$1.err")" ;;
  esac
}
check_status() {  # status may refuse a corrupt segment (exit 1) but must never crash or hang
  local rc=0
  timeout 30 "$coord" status --json >"$dir/status.out" 2>"$dir/status.err" || rc=$?
  [ $rc -eq 0 ] || [ $rc -eq 1 ] || fail "status: exit $rc during $1: $(cat "$dir/status.err")"
  if [ $rc -eq 0 ]; then json_get "['threshold']" <"$dir/status.out" >/dev/null || fail "status printed bad JSON during $1"; fi
}
recovered() {  # after reset --force the target enforces the cap again
  timeout 30 "$coord" reset --force || fail "reset --force after $1"
  out=$(timeout 60 "$coord" bench --clients 4 --seconds 0.5 --threshold 2 --json 2>"$dir/clean.err") ||
    fail "clean bench after $1: $(cat "$dir/clean.err")"
  max=$(json_get "['coordinator_max_inflight_seen']" <<<"$out")
  [ "$max" -le 2 ] || fail "after $1 and a reset the cap 2 was exceeded: $out"
  timeout 30 "$coord" reset --force >/dev/null 2>&1
}

# 1. Random bytes while jobs run.
timeout 10 "$coord" set-threshold 2 || fail "set-threshold"
start_job fuzz1 6; j1=$job
start_job fuzz2 6; j2=$job
sleep 0.5
timeout 60 "$tool" "$target" -1 fuzz 5 >"$dir/fuzz.out" || fail "the fuzzer could not write into the segment"
writes=$(awk '{print $1}' "$dir/fuzz.out")
[ "$writes" -gt 1000 ] || fail "only $writes random writes: the test proves little"
for _ in 1 2 3; do check_status fuzzing; done
check_job fuzz1 "$j1"; check_job fuzz2 "$j2"
echo "random bytes: $writes writes into the live segment; jobs and status survived"
recovered "random bytes"

# 2. Each forgery under a running job.
for kind in bounds phantoms holder-index counters threshold magic; do
  timeout 10 "$coord" set-threshold 2 || fail "set-threshold before $kind"
  start_job "forge-$kind" 3; j=$job
  sleep 0.5
  timeout 10 "$tool" "$target" -1 forge "$kind" || fail "forge $kind"
  check_status "forge $kind"
  check_job "forge-$kind" "$j"
  # A job started after the forgery must run too (a zeroed magic: without the segment).
  start_job "after-$kind" 1; j=$job
  check_job "after-$kind" "$j"
  echo "forgery $kind: jobs and status survived"
  recovered "forgery $kind"
done

# 3. A lock holder that never lets go, then one stopped inside the critical section.
for how in hold stop; do
  timeout 10 "$coord" set-threshold 2 || fail "set-threshold"
  rm -f "$dir/hold.out"
  "$tool" "$target" -1 hold 60000 >"$dir/hold.out" &
  holder=$!; pids+=("$holder")
  for _ in $(seq 100); do grep -q holding "$dir/hold.out" && break; sleep 0.05; done
  [ "$how" = stop ] && kill -STOP "$holder"
  t0=$(date +%s%N)
  start_job "lock-$how" 1; j=$job
  check_job "lock-$how" "$j"
  took=$(( ($(date +%s%N) - t0) / 1000000 ))
  grep -q "taken over" "$dir/lock-$how.err" || fail "lock-$how: no warning about the lock: $(cat "$dir/lock-$how.err")"
  check_status "lock $how"
  kill -CONT "$holder" 2>/dev/null; kill -9 "$holder" 2>/dev/null; wait "$holder" 2>/dev/null
  echo "lock holder ($how): a 1 s job took $took ms with a 500 ms lease"
  recovered "lock $how"
done
echo PASS
