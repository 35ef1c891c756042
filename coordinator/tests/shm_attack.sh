#!/usr/bin/env bash
# An unprivileged local user (uid nobody) attacks another user's node-local segment; the
# victim's jobs (ppios-coord bench processes) must neither stall beyond the lease, crash,
# exit with an error, nor write through a planted symlink.
#   private segment (default): the attacker cannot open it at all;
#   squatting the name first (a file, or a symlink): the victim's job runs on (warning);
#   shared with a group (PPIOS_SHM_GROUP) the attacker belongs to: holding the lock and
#   forging counters cost the victim at most the lease and a wrong cap.
# Needs root to switch to nobody; exits 77 (SKIP) where no second uid can be used.
# usage: shm_attack.sh PPIOS_COORD ATTACK_TOOL
set -uo pipefail
coord=$1 tool_src=$2
target="attack-$$"
dir=$(mktemp -d /tmp/ppios-attack.XXXXXX)
chmod 755 "$dir"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -f /dev/shm/ppios-coord-v7.*"$target"*
  rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }

[ "$(id -u)" = 0 ] || skip "not root: cannot run an attacker as another uid"
command -v setpriv >/dev/null || skip "setpriv not found"
# The attacker's copy of the tool, where nobody can run it.
cp "$tool_src" "$dir/attack" && chmod 755 "$dir/attack"
cp "$coord" "$dir/coord" && chmod 755 "$dir/coord"
as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
as_nobody_in_group() { setpriv --reuid=nobody --regid=nogroup --groups=100 "$@"; }
as_nobody "$dir/attack" x -1 fuzz 0 >/dev/null 2>&1
[ $? -eq 1 ] || skip "cannot run a program as uid nobody here"

export PPIOS_COORDINATOR=shm PPIOS_LEASE_MS=500
run_job() {  # run_job NAME: a 1 s job of the victim; must end by itself with 0 (or 3: cap exceeded)
  local rc=0
  timeout 60 "$coord" bench --clients 3 --seconds 1 --class mix --json >"$dir/$1.out" 2>"$dir/$1.err" || rc=$?
  case $rc in
    0|3) ;;
    124) fail "$1: the victim's job hung; stderr: $(cat "$dir/$1.err")" ;;
    *) fail "$1: the victim's job exited $rc; stderr: $(cat "$dir/$1.err")" ;;
  esac
}

# 1. Private by default: owned by the victim, mode 0600, and the attacker cannot open it.
export PPIOS_TARGET=$target-private
timeout 10 "$coord" set-threshold 2 || fail "set-threshold"
seg=/dev/shm/ppios-coord-v7.0.$PPIOS_TARGET
[ "$(stat -c %a:%u "$seg")" = 600:0 ] || fail "segment $seg is $(stat -c %a:%u "$seg"), not 600 owned by root"
as_nobody "$dir/attack" "$PPIOS_TARGET" -1 hold 10000 2>"$dir/open.err"
rc=$?
[ $rc -eq 1 ] && grep -q "Permission denied\|does not exist" "$dir/open.err" ||
  fail "the attacker opened the private segment (exit $rc): $(cat "$dir/open.err")"
VICTIM_UID=0 as_nobody "$dir/attack" "$PPIOS_TARGET" -1 squat - >/dev/null 2>&1 && fail "the attacker replaced an existing segment"
run_job private
echo "private: mode 600, the attacker cannot open it"

# 2. Squatting the name before any job: a file of the attacker's, then a symlink.
export PPIOS_TARGET=$target-squat
squatted=$(VICTIM_UID=0 as_nobody "$dir/attack" "$PPIOS_TARGET" -1 squat -) || fail "could not squat as nobody"
run_job squat
grep -q "belongs to uid 65534" "$dir/squat.err" || fail "no warning about the squatted segment: $(cat "$dir/squat.err")"
[ "$(stat -c %s:%U "$squatted")" = 4096:nobody ] || fail "the victim changed the squatter's file"
rc=0; timeout 10 "$coord" status >"$dir/st.out" 2>&1 || rc=$?
[ $rc -eq 1 ] && grep -q "belongs to uid 65534" "$dir/st.out" || fail "status on a squatted name: exit $rc: $(cat "$dir/st.out")"
rm -f "$squatted"
export PPIOS_TARGET=$target-link
echo precious >"$dir/victim-file"
ln -s "$dir/victim-file" "/dev/shm/ppios-coord-v7.0.$PPIOS_TARGET"
run_job symlink
[ "$(cat "$dir/victim-file")" = precious ] || fail "the victim's job wrote through a planted symlink"
rm -f "/dev/shm/ppios-coord-v7.0.$PPIOS_TARGET"
echo "squatting: a file or a symlink under the victim's name costs the victim a warning, no exit"

# 2b. The same from an unprivileged victim's side (nobody), with a file planted under its
# name by another user (root here): what is wrong and what to do is said by the job,
# status, reset (which cannot remove it) and gc (which keeps it, saying why); root's gc
# removes it and says it was planted.
export PPIOS_TARGET=$target-planted
planted=/dev/shm/ppios-coord-v7.$(id -u nobody).$PPIOS_TARGET
head -c 4096 /dev/zero >"$planted" && chmod 644 "$planted"
as_nobody timeout 30 "$dir/coord" bench --clients 2 --seconds 0.3 >"$dir/pl-job.out" 2>"$dir/pl-job.err" ||
  fail "planted: the victim's job failed: $(cat "$dir/pl-job.err")"
grep -q "belongs to uid 0.*ppios-coord gc.*no node-local cap" "$dir/pl-job.err" ||
  fail "planted: the job did not say what is wrong and what to do: $(cat "$dir/pl-job.err")"
rc=0; as_nobody timeout 10 "$dir/coord" status >"$dir/pl-st.out" 2>&1 || rc=$?
[ $rc -eq 1 ] && grep -q "belongs to uid 0.*no node-local cap" "$dir/pl-st.out" || fail "planted: status exit $rc: $(cat "$dir/pl-st.out")"
rc=0; as_nobody timeout 10 "$dir/coord" reset >"$dir/pl-rs.out" 2>&1 || rc=$?
[ $rc -eq 1 ] && grep -q "belongs to uid 0.*ppios-coord gc" "$dir/pl-rs.out" || fail "planted: reset exit $rc: $(cat "$dir/pl-rs.out")"
as_nobody timeout 10 "$dir/coord" gc >"$dir/pl-gc.out" 2>&1
grep -q "kept *$planted (planted: it belongs to uid 0" "$dir/pl-gc.out" || fail "planted: gc said nothing: $(cat "$dir/pl-gc.out")"
[ -e "$planted" ] || fail "planted: the victim removed root's file"
timeout 10 "$coord" gc >"$dir/pl-gc-root.out" 2>&1
grep -q "removed $planted (planted: it belongs to uid 0, its name to uid $(id -u nobody)" "$dir/pl-gc-root.out" ||
  fail "planted: root's gc did not remove it or did not say why: $(cat "$dir/pl-gc-root.out")"
# A malformed segment of the victim's own: reset removes it and says what it was.
as_nobody sh -c "head -c 100 /dev/zero >'$planted'; chmod 600 '$planted'"
rc=0; as_nobody timeout 10 "$dir/coord" reset >"$dir/pl-rs2.out" 2>&1 || rc=$?
[ $rc -eq 0 ] && grep -q "removed a segment that could not be used.*unexpected size" "$dir/pl-rs2.out" ||
  fail "malformed: reset exit $rc: $(cat "$dir/pl-rs2.out")"
[ ! -e "$planted" ] || fail "malformed: reset left it"
echo "planted: job, status, reset and gc say what is wrong and what to do; root's gc removes it"

# 3. Shared with group 100, which the attacker is given: lock held, counters forged.
export PPIOS_TARGET=$target-group PPIOS_SHM_GROUP=100
timeout 10 "$coord" set-threshold 2 || fail "set-threshold (group)"
seg=/dev/shm/ppios-coord-v7.g100.$PPIOS_TARGET
[ "$(stat -c %a:%g "$seg")" = 660:100 ] || fail "group segment is $(stat -c %a:%g "$seg")"
as_nobody_in_group "$dir/attack" "$PPIOS_TARGET" 100 hold 60000 >"$dir/hold.out" 2>&1 &
pids+=($!)
for _ in $(seq 100); do grep -q holding "$dir/hold.out" && break; sleep 0.05; done
grep -q holding "$dir/hold.out" || fail "the attacker (in the group) could not take the lock: $(cat "$dir/hold.out")"
t0=$(date +%s%N)
run_job group-hold
took=$(( ($(date +%s%N) - t0) / 1000000 ))
grep -q "taken over" "$dir/group-hold.err" || fail "no takeover warning: $(cat "$dir/group-hold.err")"
echo "group: a lock held by the attacker cost a 1 s job $took ms (lease 500 ms)"
for kind in counters phantoms bounds holder-index threshold; do
  as_nobody_in_group "$dir/attack" "$PPIOS_TARGET" 100 forge "$kind" || fail "forge $kind as nobody"
  run_job "group-$kind"
  timeout 30 "$coord" status --json >/dev/null 2>"$dir/st.err" || fail "status after forge $kind: $(cat "$dir/st.err")"
done
echo "group: forged counters, phantom slots, bounds, holder index, cap 0: jobs and status survived"
echo PASS
