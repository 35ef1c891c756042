#!/usr/bin/env bash
# ppios-coord as scripts use it: --help, status --json, set-threshold, reset, bench --json,
# and clear non-zero exits on bad input. Runs against shm and a throwaway redis-server.
# usage: cli_test.sh PPIOS_COORD ATTACK_TOOL   (ATTACK_TOOL: coordinator_shm_attack)
set -euo pipefail
coord=$1 attack=$2
# `gc` below removes every segment no process maps that the caller may remove: as root,
# other tests' too. Where it can, the test runs with a /dev/shm of its own.
. "$(dirname "$0")/../../tests/private_shm.sh"
private_shm 64m optional "$0" "$@"
dir=$(mktemp -d /tmp/ppios-cli.XXXXXX)
target="cli-$$"
redis_pid=
cleanup() {
  if [ -n "$redis_pid" ]; then kill -9 "$redis_pid" 2>/dev/null || true; wait "$redis_pid" 2>/dev/null || true; fi
  # The segments are removed by ppios-coord, which alone knows their names (a layout
  # version, the node secret under $HOME): before $dir, which holds that secret, goes.
  for t in "$target" "$target-pin" "$target-cap"; do
    timeout 10 "$coord" --coordinator shm --target "$t" reset --force >/dev/null 2>&1 || true
  done
  rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
# The node secret that keys segment names lives under a throwaway home, not the real one.
export HOME=$dir/home
mkdir "$HOME"
json_get() { python3 -c "import json,sys; d=json.load(sys.stdin); print(d$1)"; }

redis-server --port 0 --unixsocket "$dir/r.sock" --save "" --appendonly no --dir "$dir" --daemonize no \
  --logfile "$dir/r.log" &
redis_pid=$!
for _ in $(seq 100); do redis-cli -s "$dir/r.sock" ping 2>/dev/null | grep -q PONG && break; sleep 0.05; done

for cmd in "" status watch set-threshold reset gc bench calibrate; do
  h=$(timeout 10 "$coord" $cmd --help)
  grep -q "usage: ppios-coord" <<<"$h" || fail "--help of '$cmd'"
done
expect_error() {  # expect_error MESSAGE-PART ARGS...
  local want=$1; shift
  set +e; out=$(timeout 10 "$coord" "$@" 2>&1); rc=$?; set -e
  [ $rc -ne 0 ] || fail "'$*' exited 0"
  grep -q -- "$want" <<<"$out" || fail "'$*' said: $out"
}
expect_error "unknown command" frobnicate
expect_error "not valid" --coordinator http://x status
expect_error "not a number" set-threshold abc
expect_error "not a number" set-threshold 0
# Digits only, as for PPIOS_THRESHOLD: a sign, a space on either side or a leading zero is refused.
for n in " 5" "5 " "+3" "05" "-1"; do expect_error "not a number" set-threshold "$n"; done
expect_error "--count needs" watch --count " 2"
expect_error "needs N" set-threshold
expect_error "--curve needs K:MIBPS" set-threshold 4 --curve
expect_error "--curve needs K:MIBPS" set-threshold 4 --curve 0:40
expect_error "--curve needs K:MIBPS" set-threshold 4 --curve 257:40
expect_error "--curve needs K:MIBPS" set-threshold 4 --curve 2:-1
expect_error "--curve needs K:MIBPS" set-threshold 4 --curve 2:80,
expect_error "--curve needs K:MIBPS" set-threshold 4 --curve 2=80
expect_error "unexpected argument" status --bogus
expect_error "--clients" bench --clients 0
expect_error "needs a PATH" calibrate
expect_error "--max-streams" calibrate "$dir" --max-streams 0
expect_error "No such file" calibrate "$dir/none"
# calibrate writes its CSV and its plot (by default into the current directory) through
# the safe opener: a symlink or a FIFO planted at either name is refused, never followed,
# never waited on.
head -c 1048576 /dev/zero >"$dir/cal.bin"
echo precious >"$dir/victim"
mkdir "$dir/cwd"
ln -s "$dir/victim" "$dir/cwd/ppios-calibrate-$target.png"
ln -s "$dir/victim" "$dir/planted.csv"
mkfifo "$dir/fifo.csv"
calibrate() { (cd "$dir/cwd" && timeout 30 "$coord" --target "$target" calibrate "$dir/cal.bin" --max-streams 1 \
  --seconds 0.05 --mode distinct --request-kib 4 --region-mib 1 "$@" 2>&1); }
set +e; out=$(calibrate); rc=$?; set -e
[ $rc -eq 0 ] && grep -q "no plot (cannot write.*symbolic link" <<<"$out" || fail "calibrate, planted PNG: rc $rc: $out"
set +e; out=$(calibrate --png none --csv "$dir/planted.csv"); rc=$?; set -e
[ $rc -eq 1 ] && grep -q "symbolic link" <<<"$out" || fail "calibrate, planted CSV: rc $rc: $out"
set +e; out=$(calibrate --png none --csv "$dir/fifo.csv"); rc=$?; set -e
[ $rc -eq 1 ] && grep -q "not a regular file" <<<"$out" || fail "calibrate, FIFO as CSV: rc $rc (124: hung): $out"
[ "$(cat "$dir/victim")" = precious ] || fail "calibrate wrote through a planted symlink"
set +e; out=$(calibrate --png none --csv "$dir/cwd/ok.csv"); rc=$?; set -e
[ $rc -eq 0 ] && grep -q "^distinct,1," "$dir/cwd/ok.csv" || fail "calibrate --csv: rc $rc: $out"
# PATH a directory: the readers' file is written there, and removed.
mkdir "$dir/caldir"
set +e; out=$(timeout 30 "$coord" --target "$target" calibrate "$dir/caldir" --max-streams 2 --seconds 0.05 \
  --mode distinct --request-kib 4 --region-mib 1 --png none 2>&1); rc=$?; set -e
[ $rc -eq 0 ] && grep -q "writing $dir/caldir/.* (2 MiB)" <<<"$out" && grep -q "^distinct *2 " <<<"$out" ||
  fail "calibrate a directory: rc $rc: $out"
[ -z "$(ls -A "$dir/caldir")" ] || fail "calibrate left its file in the directory: $(ls -A "$dir/caldir")"
PPIOS_THRESHOLD=bogus expect_error "PPIOS_THRESHOLD='bogus' is not valid" status
expect_error "--coordinator needs a value" --coordinator
expect_error "unreachable\|Connection refused\|No such file" --coordinator "unix://$dir/none.sock" status
# An unreachable redis is an error for bench too, never a measurement of the fallback.
set +e; out=$(timeout 30 "$coord" --coordinator "unix://$dir/none.sock" bench --json --seconds 0.2 2>&1); rc=$?; set -e
[ $rc -eq 1 ] && ! grep -q pairs_per_s <<<"$out" && grep -q "none.sock" <<<"$out" || fail "bench against nothing: rc $rc: $out"
# The same checks as a ppios program's (one parser), and no password in any message.
PPIOS_LEASE_MS=50 expect_error "PPIOS_LEASE_MS='50' is not valid" status
PPIOS_MT_THROTTLE=yes expect_error "PPIOS_MT_THROTTLE='yes' is not valid" status
PPIOS_SHM_GROUP=no-such-group-ppios expect_error "PPIOS_SHM_GROUP='no-such-group-ppios' is not a group name or number" status
expect_error "PPIOS_TARGET=" --target "a b" status
for addr in 'redis://:s3cret@host:notaport' 'rediss://:s3cret@host:6379' 'tcp://:s3cret@host' 'Redis://:s3cret@host' \
            'redis//:s3cret@host' 'redis://s3cret@host:x'; do
  set +e; out=$(timeout 10 "$coord" --coordinator "$addr" status 2>&1); set -e
  ! grep -q s3cret <<<"$out" && ! grep -q "ppios: ppios:" <<<"$out" || fail "password or doubled prefix: $out"
  set +e; out=$(PPIOS_COORDINATOR=$addr timeout 10 "$coord" status 2>&1); set -e
  ! grep -q s3cret <<<"$out" && grep -q "not valid" <<<"$out" || fail "PPIOS_COORDINATOR=$addr: $out"
done
# reset refuses while a process is registered, unless --force; gc keeps what is in use.
# Long enough for the checks below on a loaded machine, where each ppios-coord call can
# take over a second.
PPIOS_TARGET=$target timeout 60 "$coord" bench --seconds 15 >/dev/null 2>&1 &
bench_pid=$!
for _ in $(seq 100); do
  [ "$(PPIOS_TARGET=$target timeout 10 "$coord" status --json | json_get "['processes']")" = 1 ] && break; sleep 0.05
done
PPIOS_TARGET=$target expect_error "registered on target" reset
"$coord" gc | grep -q "kept.*ppios-coord-v7.$(id -u).$target\.[0-9a-f]\{16\} (in use)" || fail "gc did not keep a segment in use"
PPIOS_TARGET=$target timeout 10 "$coord" reset --force || fail "reset --force"
wait $bench_pid || fail "the bench whose segment was reset --force failed"
! ls "/dev/shm/ppios-coord-v7.$(id -u).$target".* >/dev/null 2>&1 || fail "the last process left its (unpinned) segment behind"
# gc keeps a segment holding a threshold set with ppios-coord; gc --pinned removes it.
PPIOS_TARGET=$target-pin timeout 10 "$coord" set-threshold 2
out=$("$coord" gc)
grep -q "kept.*ppios-coord-v7.$(id -u).$target-pin\.[0-9a-f]\{16\} (holds a threshold set with ppios-coord" <<<"$out" ||
  fail "gc did not keep a pinned segment: $out"
out=$("$coord" gc --pinned)
grep -q "removed.*ppios-coord-v7.$(id -u).$target-pin\.[0-9a-f]\{16\}" <<<"$out" || fail "gc --pinned did not remove it: $out"
! ls "/dev/shm/ppios-coord-v7.$(id -u).$target-pin".* >/dev/null 2>&1 || fail "gc --pinned left the pinned segment"

for addr in shm "unix://$dir/r.sock"; do
  export PPIOS_COORDINATOR=$addr PPIOS_TARGET=$target
  s=$(timeout 10 "$coord" status --json)
  [ "$(json_get "['threshold']" <<<"$s")" = None ] || fail "$addr: fresh target has a threshold: $s"
  # over_cap is the MT accesses in flight beyond the cap. Four clients hold each slot
  # 300 ms under a cap of 1: MTs pass a full cap (they do not wait at it with
  # PPIOS_MT_THROTTLE=0), so status must see them over it; PTs are held at it, so never.
  timeout 10 "$coord" set-threshold 1
  for cls in mt pt; do
    PPIOS_MT_THROTTLE=0 timeout 60 "$coord" bench --clients 4 --class $cls --hold-us 300000 --seconds 3 \
      >"$dir/oc-$cls.out" 2>&1 &
    oc_bench=$!
    : >"$dir/oc-$cls.samples"
    : >"$dir/oc-$cls.text"
    for _ in $(seq 10); do
      kill -0 $oc_bench 2>/dev/null || break
      timeout 10 "$coord" status --json | json_get "['mt_inflight'] + d['pt_inflight'], d['over_cap']" >>"$dir/oc-$cls.samples"
      timeout 10 "$coord" status | grep "^in flight" >>"$dir/oc-$cls.text" || true
      sleep 0.1
    done
    wait $oc_bench || fail "$addr: bench --class $cls at cap 1: $(cat "$dir/oc-$cls.out")"
    # Every sample: over_cap is what is in flight beyond the cap of 1.
    bad=$(awk '$2 != ($1 > 1 ? $1 - 1 : 0)' "$dir/oc-$cls.samples")
    [ -z "$bad" ] || fail "$addr: over_cap is not what is in flight beyond the cap ('in flight, over_cap'): $bad"
    if [ $cls = mt ]; then
      awk '$2 >= 1 {found=1} END {exit !found}' "$dir/oc-$cls.samples" ||
        fail "$addr: four MTs passing a cap of 1, and over_cap never above 0: $(cat "$dir/oc-$cls.samples")"
      grep -q "over the cap: MTs" "$dir/oc-$cls.text" ||
        fail "$addr: status text never said MTs are over the cap: $(cat "$dir/oc-$cls.text")"
    else
      awk '$1 == 1 {full=1} $2 != 0 {over=1} END {exit !(full && !over)}' "$dir/oc-$cls.samples" ||
        fail "$addr: PTs at a full cap of 1 must show over_cap 0: $(cat "$dir/oc-$cls.samples")"
    fi
  done
  timeout 10 "$coord" reset
  timeout 10 "$coord" set-threshold 3
  s=$(timeout 10 "$coord" status --json)
  [ "$(json_get "['threshold']" <<<"$s")" = 3 ] || fail "$addr: set-threshold not stored: $s"
  for k in threshold mt_inflight pt_inflight queued holders guarantee over_cap; do
    json_get "['$k']" <<<"$s" >/dev/null || fail "$addr: status --json lacks $k"
  done
  b=$(timeout 30 "$coord" bench --clients 4 --seconds 0.5 --json)
  for k in clients p50_us p99_us pairs_per_s max_inflight_seen; do
    json_get "['$k']" <<<"$b" >/dev/null || fail "$addr: bench --json lacks $k"
  done
  [ "$(json_get "['clients']" <<<"$b")" = 4 ] || fail "$addr: clients"
  max=$(json_get "['max_inflight_seen']" <<<"$b")
  [ "$max" -ge 1 ] && [ "$max" -le 3 ] || fail "$addr: bench saw $max in flight with threshold 3"
  timeout 10 "$coord" set-threshold auto
  s=$(timeout 10 "$coord" status --json)
  [ "$(json_get "['auto'], d['threshold'], d['controller'], d['curve']" <<<"$s")" = "True 3 None []" ] ||
    fail "$addr: set-threshold auto: $s"
  timeout 10 "$coord" status | grep -q "threshold  3, learned (auto)" || fail "$addr: status text lacks auto"
  [ "$(json_get "['mt_hold']" <<<"$s")" = False ] || fail "$addr: MTs held before a controller measured: $s"
  # What a kept target holds: a cap and the curve learned (bench/run carries both).
  timeout 10 "$coord" set-threshold 3 --curve 1:40.5,2:80,4:57.8
  s=$(timeout 10 "$coord" status --json)
  [ "$(json_get "['auto'], d['threshold'], [(p['k'], p['mibps']) for p in d['curve']]" <<<"$s")" = \
    "False 3 [(1, 40.5), (2, 80.0), (4, 57.8)]" ] || fail "$addr: set-threshold --curve: $s"
  w=$(timeout 10 "$coord" watch --count 2 --interval 0.1)
  [ "$(grep -c "threshold  3" <<<"$w")" = 2 ] || fail "$addr: watch: $w"
  timeout 10 "$coord" set-threshold none
  [ "$(timeout 10 "$coord" status --json | json_get "['threshold']")" = None ] || fail "$addr: set-threshold none"
  timeout 10 "$coord" set-threshold 5
  timeout 10 "$coord" reset
  [ "$(timeout 10 "$coord" status --json | json_get "['threshold']")" = None ] || fail "$addr: reset kept the threshold"
done
[ -z "$(redis-cli -s "$dir/r.sock" --scan --pattern "ppios:{$target}:*")" ] || fail "reset left redis keys"

# bench exits 3 when its clients held more slots at once than the cap. Four PTs holding
# each slot 2 ms: a working segment keeps them to the cap of 1 (exit 0); one that cannot be
# used (its magic zeroed) leaves them unscheduled, so fail-open lets them all through.
export PPIOS_COORDINATOR=shm PPIOS_TARGET=$target-cap
timeout 10 "$coord" set-threshold 1
capped_bench() { timeout 60 "$coord" bench --clients 4 --class pt --hold-us 2000 --seconds 1 --threshold 1 "$@"; }
set +e; b=$(capped_bench --json 2>"$dir/cap.err"); rc=$?; set -e
[ $rc -eq 0 ] && [ "$(json_get "['cap_exceeded'], d['max_inflight_seen']" <<<"$b")" = "False 1" ] ||
  fail "bench within the cap: exit $rc: $b $(cat "$dir/cap.err")"
timeout 10 "$attack" "$target-cap" -1 forge magic || fail "could not zero the segment's magic"
set +e; b=$(capped_bench --json 2>"$dir/cap.err"); rc=$?; set -e
[ $rc -eq 3 ] && [ "$(json_get "['cap_exceeded'], d['threshold'], d['max_inflight_seen'] > 1" <<<"$b")" = "True 1 True" ] ||
  fail "bench over the cap: exit $rc (3 expected): $b $(cat "$dir/cap.err")"
set +e; out=$(capped_bench 2>&1); rc=$?; set -e
[ $rc -eq 3 ] && grep -q "max in flight seen by the clients: [2-4] (CAP EXCEEDED)" <<<"$out" ||
  fail "bench over the cap, text: exit $rc (3 expected): $out"
timeout 10 "$coord" reset --force >/dev/null
unset PPIOS_COORDINATOR PPIOS_TARGET

# The two-level backend: simulated nodes in one bench, their shares in status, the checks.
expect_error "--nodes needs a two-level address" bench --nodes 2
PPIOS_SIM_NODE='a b' expect_error "PPIOS_SIM_NODE='a b' is not valid" status
node_addr="node+unix://$dir/r.sock"
b=$(timeout 60 "$coord" --coordinator "$node_addr" --target "$target-n" bench --nodes 3 --clients-per-node 2 \
    --seconds 0.5 --threshold 2 --hold-us 100 --json)
[ "$(json_get "['backend'], d['nodes'], d['clients'], d['cap_exceeded']" <<<"$b")" = "node 3 6 False" ] ||
  fail "bench --nodes: $b"
[ "$(json_get "['max_inflight_seen'] <= 2 and d['pairs'] > 0 and d['server_requests_per_s'] >= 0" <<<"$b")" = True ] ||
  fail "bench --nodes figures: $b"
s=$(timeout 10 "$coord" --coordinator "$node_addr" --target "$target-n" status --json)
[ "$(json_get "['backend'], d['threshold'], d['nodes']" <<<"$s")" = "node 2 []" ] ||
  fail "status after the nodes left (their shares are given back at exit): $s"
timeout 10 "$coord" --coordinator "$node_addr" --target "$target-n" reset
echo PASS
